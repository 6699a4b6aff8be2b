//! The plain data a host caller exchanges with plugins: samples, scores, executions, plugin
//! identity (test statuses are `swerve_log_parsers::Status`, the one status type). These mirror the WIT records (`wit/plugin.wit`) and are what JSONL files hold.

use std::collections::BTreeMap;

use swerve_log_parsers::Status;

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

/// Results of running a completion's patch in the sandbox.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Execution {
    /// Whether the patch applied.
    pub patch_applied: bool,
    /// Every test status the log parser found, by test name.
    #[serde(default)]
    pub tests: BTreeMap<String, Status>,
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
    /// The host cut the message, a metric name or the metric list to its cap
    /// ([`crate::limits`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
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
