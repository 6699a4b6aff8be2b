//! SWE-bench 5's advisory infrastructure-failure classification of ungradeable or unresolved
//! logs. It never changes a score: it only labels why a run may have failed.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

use crate::section::LogText;

/// How sure the classification is that the environment, not the patch, is to blame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureTier {
    /// The environment failed (`infra_failure: true`, `infra_failure_ids`).
    Environment,
    /// Could be the environment or the patch (`ambiguous_failure_ids`).
    Ambiguous,
}

/// A failure signature, in the order the classifier tries them (first match wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InfraFailureReason {
    /// `Failed to launch|Failed to connect to the bus`
    BrowserLaunchFailed,
    /// `cannot open display|Missing X server|unable to open X display`
    DisplayUnavailable,
    /// `Cannot allocate memory|OutOfMemoryError|^Killed$`
    OutOfMemory,
    /// `Error response from daemon|Cannot connect to the Docker daemon`
    ContainerUnavailable,
    /// `Could not resolve host|Temporary failure in name resolution`
    NetworkUnreachable,
    /// `Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError`
    MissingModule,
    /// `no tests ran|collected 0 items`
    NoTestsCollected,
    /// `Timeout error: \d+ seconds exceeded` (the line the harness appends at its timeout)
    TestsTimedOut,
}

impl InfraFailureReason {
    /// All reasons in matching order.
    pub const ALL: [InfraFailureReason; 8] = [
        InfraFailureReason::BrowserLaunchFailed,
        InfraFailureReason::DisplayUnavailable,
        InfraFailureReason::OutOfMemory,
        InfraFailureReason::ContainerUnavailable,
        InfraFailureReason::NetworkUnreachable,
        InfraFailureReason::MissingModule,
        InfraFailureReason::NoTestsCollected,
        InfraFailureReason::TestsTimedOut,
    ];

    /// The reason string written to reports (`infra_failure_reason`, `failure_reasons`).
    pub fn as_str(self) -> &'static str {
        match self {
            InfraFailureReason::BrowserLaunchFailed => "browser_launch_failed",
            InfraFailureReason::DisplayUnavailable => "display_unavailable",
            InfraFailureReason::OutOfMemory => "out_of_memory",
            InfraFailureReason::ContainerUnavailable => "container_unavailable",
            InfraFailureReason::NetworkUnreachable => "network_unreachable",
            InfraFailureReason::MissingModule => "missing_module",
            InfraFailureReason::NoTestsCollected => "no_tests_collected",
            InfraFailureReason::TestsTimedOut => "tests_timed_out",
        }
    }

    /// The tier of this signature.
    pub fn tier(self) -> FailureTier {
        match self {
            InfraFailureReason::BrowserLaunchFailed
            | InfraFailureReason::DisplayUnavailable
            | InfraFailureReason::OutOfMemory
            | InfraFailureReason::ContainerUnavailable
            | InfraFailureReason::NetworkUnreachable => FailureTier::Environment,
            InfraFailureReason::MissingModule
            | InfraFailureReason::NoTestsCollected
            | InfraFailureReason::TestsTimedOut => FailureTier::Ambiguous,
        }
    }

    fn pattern(self) -> &'static str {
        match self {
            InfraFailureReason::BrowserLaunchFailed => {
                "Failed to launch|Failed to connect to the bus"
            }
            InfraFailureReason::DisplayUnavailable => {
                "cannot open display|Missing X server|unable to open X display"
            }
            InfraFailureReason::OutOfMemory => "Cannot allocate memory|OutOfMemoryError|^Killed$",
            InfraFailureReason::ContainerUnavailable => {
                "Error response from daemon|Cannot connect to the Docker daemon"
            }
            InfraFailureReason::NetworkUnreachable => {
                "Could not resolve host|Temporary failure in name resolution"
            }
            InfraFailureReason::MissingModule => {
                "Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError"
            }
            InfraFailureReason::NoTestsCollected => "no tests ran|collected 0 items",
            InfraFailureReason::TestsTimedOut => r"Timeout error: \d+ seconds exceeded",
        }
    }
}

impl fmt::Display for InfraFailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

static SIGNATURES: LazyLock<Vec<(InfraFailureReason, Regex)>> = LazyLock::new(|| {
    InfraFailureReason::ALL
        .into_iter()
        .map(|reason| {
            let regex = Regex::new(&format!("(?m){}", reason.pattern())).expect("valid regex");
            (reason, regex)
        })
        .collect()
});

/// The first signature (in [`InfraFailureReason::ALL`] order) that a multi-line regex search
/// finds anywhere in the log.
pub fn classify_infra_failure(log: &LogText<'_>) -> Option<InfraFailureReason> {
    SIGNATURES
        .iter()
        .find(|(_, regex)| regex.is_match(log.as_str()))
        .map(|&(reason, _)| reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_signature_in_table_order_wins() {
        let check = |raw: &str, expect: Option<&str>| {
            let got = classify_infra_failure(&LogText::new(raw)).map(InfraFailureReason::as_str);
            assert_eq!(got, expect, "{raw:?}");
        };
        check("all good", None);
        check(
            "x\n\nTimeout error: 1800 seconds exceeded.",
            Some("tests_timed_out"),
        );
        // Table order, not position in the log.
        check(
            "collected 0 items\nCould not resolve host: github.com",
            Some("network_unreachable"),
        );
        check("a\nKilled\nb", Some("out_of_memory"));
        check("a\r\nKilled\r\nb", Some("out_of_memory"));
        check("Process Killed here", None);
        check(
            "ModuleNotFoundError: No module named 'x'",
            Some("missing_module"),
        );
        check(
            "Error response from daemon: gone",
            Some("container_unavailable"),
        );
        check("Error: cannot open display :0", Some("display_unavailable"));
        check(
            "Failed to launch the browser",
            Some("browser_launch_failed"),
        );
        check("Timeout error:  seconds exceeded", None);
    }

    #[test]
    fn tiers() {
        let environment: Vec<_> = InfraFailureReason::ALL
            .into_iter()
            .filter(|r| r.tier() == FailureTier::Environment)
            .map(InfraFailureReason::as_str)
            .collect();
        assert_eq!(
            environment,
            [
                "browser_launch_failed",
                "display_unavailable",
                "out_of_memory",
                "container_unavailable",
                "network_unreachable"
            ]
        );
    }
}
