//! Plugin outcomes: every way a plugin call can fail, classified. Outcomes are data, not errors.

use std::fmt;

/// The class of a failed plugin call. The names (`timeout`, `out_of_memory`, `trap`,
/// `plugin_error`, `invalid_plugin`) are what reports and fallback settings use.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The fuel or the wall-clock budget ran out.
    Timeout,
    /// The plugin tried to grow its memory past the cap (or its allocator reported failure).
    OutOfMemory,
    /// The plugin trapped: a panic, an abort, an uncaught exception, a stack overflow, an
    /// out-of-bounds access.
    Trap,
    /// The plugin returned an error for this sample (its own message).
    PluginError,
    /// The plugin broke the contract: a non-finite reward or metric, the wrong number of results.
    InvalidPlugin,
}

impl FailureClass {
    /// Every class, in report order.
    pub const ALL: [FailureClass; 5] = [
        FailureClass::Timeout,
        FailureClass::OutOfMemory,
        FailureClass::Trap,
        FailureClass::PluginError,
        FailureClass::InvalidPlugin,
    ];

    /// The class's name as it appears in reports and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Timeout => "timeout",
            FailureClass::OutOfMemory => "out_of_memory",
            FailureClass::Trap => "trap",
            FailureClass::PluginError => "plugin_error",
            FailureClass::InvalidPlugin => "invalid_plugin",
        }
    }

    /// Parses a class name as written by [`FailureClass::as_str`].
    pub fn parse(name: &str) -> Option<FailureClass> {
        FailureClass::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed plugin call, with what is known about why.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// The class.
    pub class: FailureClass,
    /// What happened, in one line (the trap message, the plugin's own message, ...).
    pub message: String,
    /// The tail of what the plugin wrote to stdout and stderr (panic messages, tracebacks).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    /// Fuel the call consumed before it ended.
    pub fuel_consumed: u64,
    /// The host cut the plugin's message to its cap ([`crate::limits`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl Failure {
    /// A failure the host detected in a plugin's results (contract violations).
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::InvalidPlugin,
            message: message.into(),
            stderr_tail: String::new(),
            fuel_consumed: 0,
            truncated: false,
        }
    }
}

/// The fallback reward for each failure class: what a failed sample contributes to the combined
/// reward. `None` (the default for every class) makes the plugin "not applicable" to the sample,
/// as if it had returned TRL's `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fallbacks {
    /// Reward for `timeout`.
    pub timeout: Option<f64>,
    /// Reward for `out_of_memory`.
    pub out_of_memory: Option<f64>,
    /// Reward for `trap`.
    pub trap: Option<f64>,
    /// Reward for `plugin_error`.
    pub plugin_error: Option<f64>,
    /// Reward for `invalid_plugin`.
    pub invalid_plugin: Option<f64>,
}

impl Fallbacks {
    /// The fallback reward for a class.
    pub fn get(&self, class: FailureClass) -> Option<f64> {
        match class {
            FailureClass::Timeout => self.timeout,
            FailureClass::OutOfMemory => self.out_of_memory,
            FailureClass::Trap => self.trap,
            FailureClass::PluginError => self.plugin_error,
            FailureClass::InvalidPlugin => self.invalid_plugin,
        }
    }

    /// Sets the fallback reward for a class.
    pub fn set(&mut self, class: FailureClass, reward: Option<f64>) {
        let slot = match class {
            FailureClass::Timeout => &mut self.timeout,
            FailureClass::OutOfMemory => &mut self.out_of_memory,
            FailureClass::Trap => &mut self.trap,
            FailureClass::PluginError => &mut self.plugin_error,
            FailureClass::InvalidPlugin => &mut self.invalid_plugin,
        };
        *slot = reward;
    }
}

/// Markers in a guest's output that mean its allocator failed (Rust's alloc error handler,
/// Python's `MemoryError`), for allocations that never reached the host's memory limiter.
const OOM_MARKERS: [&str; 2] = ["memory allocation of ", "MemoryError"];

/// Classifies an error returned by a plugin call (rules: `docs/plugins.md`, "Failures").
pub(crate) fn classify_trap(
    err: &wasmtime::Error,
    memory_denied: bool,
    stderr_tail: String,
    fuel_consumed: u64,
) -> Failure {
    let trap = err.downcast_ref::<wasmtime::Trap>().copied();
    let class = match trap {
        _ if memory_denied => FailureClass::OutOfMemory,
        Some(wasmtime::Trap::OutOfFuel) | Some(wasmtime::Trap::Interrupt) => FailureClass::Timeout,
        _ if OOM_MARKERS.iter().any(|m| stderr_tail.contains(m)) => FailureClass::OutOfMemory,
        _ => FailureClass::Trap,
    };
    let message = match (class, trap) {
        (FailureClass::Timeout, Some(wasmtime::Trap::OutOfFuel)) => {
            format!("fuel budget exhausted ({fuel_consumed} units)")
        }
        (FailureClass::Timeout, _) => "wall-clock budget exhausted".to_owned(),
        (_, Some(t)) => t.to_string(),
        (_, None) => err.root_cause().to_string(),
    };
    let (message, truncated) = crate::limits::cap_text(message, crate::limits::MAX_MESSAGE_BYTES);
    Failure {
        class,
        message,
        stderr_tail,
        fuel_consumed,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_round_trip() {
        for class in FailureClass::ALL {
            assert_eq!(FailureClass::parse(class.as_str()), Some(class));
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
        }
        assert_eq!(FailureClass::parse("oom"), None);
    }

    #[test]
    fn classification_rules() {
        let fuel = wasmtime::Error::from(wasmtime::Trap::OutOfFuel);
        let epoch = wasmtime::Error::from(wasmtime::Trap::Interrupt);
        let unreachable = wasmtime::Error::from(wasmtime::Trap::UnreachableCodeReached);
        let stack = wasmtime::Error::from(wasmtime::Trap::StackOverflow);
        let check = |e: &wasmtime::Error, denied: bool, stderr: &str| {
            classify_trap(e, denied, stderr.to_owned(), 7).class
        };
        assert_eq!(check(&fuel, false, ""), FailureClass::Timeout);
        assert_eq!(check(&epoch, false, ""), FailureClass::Timeout);
        assert_eq!(check(&unreachable, true, ""), FailureClass::OutOfMemory);
        assert_eq!(
            check(
                &unreachable,
                false,
                "memory allocation of 2147483647 bytes failed\n"
            ),
            FailureClass::OutOfMemory
        );
        assert_eq!(
            check(&unreachable, false, "panicked at src/lib.rs"),
            FailureClass::Trap
        );
        assert_eq!(check(&stack, false, ""), FailureClass::Trap);
        let f = classify_trap(&fuel, false, String::new(), 42);
        assert_eq!(f.message, "fuel budget exhausted (42 units)");
        assert_eq!(f.fuel_consumed, 42);
    }

    #[test]
    fn fallbacks_per_class() {
        let mut f = Fallbacks::default();
        assert_eq!(f.get(FailureClass::Timeout), None);
        f.set(FailureClass::Timeout, Some(-1.0));
        assert_eq!(f.get(FailureClass::Timeout), Some(-1.0));
        assert_eq!(f.get(FailureClass::Trap), None);
    }
}
