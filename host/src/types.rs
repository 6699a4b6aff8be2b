//! The plain data a host caller exchanges with plugins: samples, scores, test statuses, plugin
//! identity. These mirror the WIT records (`wit/plugin.wit`) and are what JSONL files hold.

use std::collections::BTreeMap;

/// Who a plugin is, as it says itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PluginInfo {
    /// Short, stable identifier.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// One sentence saying what it computes.
    pub description: String,
}

/// A test status, named exactly as SWE-bench names them. In JSON it is the bare word
/// (`"PASSED"`); any other word is kept as [`TestStatus::Other`].
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(from = "String", into = "String")]
pub enum TestStatus {
    /// `PASSED`
    Passed,
    /// `FAILED`
    Failed,
    /// `SKIPPED`
    Skipped,
    /// `ERROR`
    Error,
    /// `XFAIL`
    Xfail,
    /// A token a parser stored verbatim that is none of the five (e.g. `ERROR:`); it counts as
    /// neither passing nor failing.
    Other(String),
}

impl TestStatus {
    /// The status as SWE-bench writes it.
    pub fn as_str(&self) -> &str {
        match self {
            TestStatus::Passed => "PASSED",
            TestStatus::Failed => "FAILED",
            TestStatus::Skipped => "SKIPPED",
            TestStatus::Error => "ERROR",
            TestStatus::Xfail => "XFAIL",
            TestStatus::Other(s) => s,
        }
    }
}

impl From<String> for TestStatus {
    fn from(s: String) -> Self {
        match s.as_str() {
            "PASSED" => TestStatus::Passed,
            "FAILED" => TestStatus::Failed,
            "SKIPPED" => TestStatus::Skipped,
            "ERROR" => TestStatus::Error,
            "XFAIL" => TestStatus::Xfail,
            _ => TestStatus::Other(s),
        }
    }
}

impl From<TestStatus> for String {
    fn from(s: TestStatus) -> Self {
        match s {
            TestStatus::Other(s) => s,
            known => known.as_str().to_owned(),
        }
    }
}

/// Results of running a completion's patch in the sandbox.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Execution {
    /// Whether the patch applied.
    pub patch_applied: bool,
    /// Every test status the log parser found, by test name.
    #[serde(default)]
    pub tests: BTreeMap<String, TestStatus>,
    /// FAIL_TO_PASS tests and whether each passes now, in dataset order.
    #[serde(default)]
    pub fail_to_pass: Vec<TestOutcome>,
    /// PASS_TO_PASS tests and whether each still passes, in dataset order.
    #[serde(default)]
    pub pass_to_pass: Vec<TestOutcome>,
    /// SWE-bench's verdict.
    #[serde(default)]
    pub resolved: bool,
    /// An infrastructure failure (not the model's), when there was one.
    #[serde(default)]
    pub infra_error: Option<String>,
}

/// Whether one listed test passes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TestOutcome {
    /// The test's name.
    pub name: String,
    /// True when it ended PASSED or XFAIL.
    pub passed: bool,
}

/// One completion to score. In JSONL, `output` is accepted for `completion` (the SWE-RL
/// development vectors' name) and every field but `completion` may be left out.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Caller's identifier.
    #[serde(default)]
    pub id: String,
    /// The prompt the model saw.
    #[serde(default)]
    pub prompt: String,
    /// The model's completion.
    #[serde(alias = "output")]
    pub completion: String,
    /// Files shown to the model: path → original content.
    #[serde(default)]
    pub code_context: BTreeMap<String, String>,
    /// The oracle's new content of every file it touches: path → content.
    #[serde(default)]
    pub oracle_new_content: BTreeMap<String, String>,
    /// The reference patch, when known.
    #[serde(default)]
    pub reference_patch: Option<String>,
    /// Execution results, when the completion was run.
    #[serde(default)]
    pub execution: Option<Execution>,
    /// Free metadata.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// A plugin's score for one sample.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Score {
    /// The reward, or `None` when the plugin does not apply (TRL's `None`).
    pub reward: Option<f64>,
    /// Named metrics.
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// A note from the plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where a test log came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogContext {
    /// Repository as `owner/name`.
    pub repo: String,
    /// Dataset instance id.
    pub instance_id: String,
    /// The test command the eval script ran.
    pub test_command: String,
    /// The dataset's environment version, empty when unknown.
    pub version: String,
    /// The dataset row's `log_parser` name, empty when it has none.
    pub parser: String,
}
