//! Resume by content: an instance's result is reused only when the image, the patch and the
//! eval script (and the run mode) are the ones it was produced with. The key and what the run
//! recorded outside the container sit in `swerve.json` beside `report.json`; files are written
//! atomically (temp file + rename) so a crash never leaves a truncated report.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::hardening::Undone;
use swerve_swebench::hardened::HardenedRegion;

/// The file beside `report.json` holding the cache key and run details.
pub(crate) const META_FILE: &str = "swerve.json";

/// Which results a rerun under the same run id reuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resume {
    /// A `report.json` whose recorded key matches (swerve's default).
    #[default]
    Content,
    /// Any `report.json` (SWE-bench's behaviour: the patch is not considered).
    Id,
}

/// How one instance ended. Model outcomes and swerve's own failures are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// Graded, `resolved: true`.
    Resolved,
    /// Graded (or not gradeable), `resolved: false`.
    Unresolved,
    /// No apply command accepted the patch (model failure; no `report.json`).
    PatchApplyFailed,
    /// The eval script ran past `--timeout` (no `report.json`).
    TimedOut,
    /// `""` or null patch: not run.
    EmptyPatch,
    /// The log parser plugin failed (swerve's or the user's plugin, not the model).
    EvaluatorFailed,
    /// Docker, image or file-system failure (infrastructure, not the model).
    InfraError,
    /// Hardened runs: the setup part (the patch's code at install time) changed the container
    /// outside the repository where no rule allows it; graded `resolved: false`.
    EnvironmentChanged,
    /// `--mode strict`: the patch's product code reaches into the test runner; graded
    /// `resolved: false`.
    TamperSuspected,
}

impl OutcomeKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Resolved => "resolved",
            OutcomeKind::Unresolved => "unresolved",
            OutcomeKind::PatchApplyFailed => "patch_apply_failed",
            OutcomeKind::TimedOut => "timed_out",
            OutcomeKind::EmptyPatch => "empty_patch",
            OutcomeKind::EvaluatorFailed => "evaluator_failed",
            OutcomeKind::InfraError => "infra_error",
            OutcomeKind::EnvironmentChanged => "environment_changed",
            OutcomeKind::TamperSuspected => "tamper_suspected",
        }
    }

    /// The outcome of a graded instance: resolved, unresolved, or not resolved because the
    /// setup changed the environment (hardened runs).
    pub(crate) fn of_grading(grading: &swerve_swebench::grading::Grading) -> OutcomeKind {
        if grading.report.resolved {
            OutcomeKind::Resolved
        } else if matches!(
            grading.problem(),
            Some(swerve_log_parsers::LogProblem::EnvironmentChanged { .. })
        ) {
            OutcomeKind::EnvironmentChanged
        } else if matches!(
            grading.problem(),
            Some(swerve_log_parsers::LogProblem::TamperSuspected { .. })
        ) {
            OutcomeKind::TamperSuspected
        } else {
            OutcomeKind::Unresolved
        }
    }

    /// Whether swerve (not the model) is to blame.
    pub fn is_infra(self) -> bool {
        matches!(self, OutcomeKind::EvaluatorFailed | OutcomeKind::InfraError)
    }
}

/// `swerve.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InstanceMeta {
    /// sha256 over the image id, the patch, the eval script and the mode.
    pub cache_key: String,
    /// The engine id of the instance image.
    pub image_id: String,
    /// `hardened` or `compat`.
    pub mode: String,
    /// How the instance ended.
    pub outcome: OutcomeKind,
    /// Details of the failure, for `infra_error` / `evaluator_failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Hardened runs: the marker nonces and the measured exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardened: Option<HardenedRegion>,
    /// Hardened runs: the tamper check's signals on the patch (reported in every hardened run;
    /// `--mode strict` makes them unresolve the instance).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tamper_suspected: Vec<String>,
    /// Hardened runs: the test files the patch contributed that were undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone: Option<Undone>,
    /// Milliseconds of the instance's wall time outside the eval script: container create and
    /// removal, copies, patch application, hardening's checks and process sweeps, parsing,
    /// report written.
    pub overhead_ms: u64,
    /// Milliseconds inside the eval script's own execs (hardened: its setup, tests and
    /// teardown parts; compatible: the one `eval.sh` exec).
    pub tests_ms: u64,
}

/// The cache key of an evaluation.
pub(crate) fn cache_key(image_id: &str, patch: &str, eval_script: &str, mode: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [image_id, patch, eval_script, mode] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Reads `swerve.json`, `None` when missing or unreadable.
pub(crate) fn read_meta(dir: &Path) -> Option<InstanceMeta> {
    let text = fs_err::read_to_string(dir.join(META_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether the folder's `report.json` may be reused for `key`.
pub(crate) fn reusable(dir: &Path, key: &str, resume: Resume) -> bool {
    if !dir.join("report.json").is_file() {
        return false;
    }
    match resume {
        Resume::Id => true,
        Resume::Content => read_meta(dir).is_some_and(|m| m.cache_key == key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use swerve_cache::write_atomic;

    #[test]
    fn reuse_needs_the_same_key() {
        let dir = tempfile::tempdir().expect("tmp");
        let key = cache_key("sha256:1", "p", "e", "hardened");
        assert_ne!(key, cache_key("sha256:1", "p2", "e", "hardened"));
        assert!(!reusable(dir.path(), &key, Resume::Id));
        write_atomic(&dir.path().join("report.json"), "{}").expect("write");
        assert!(reusable(dir.path(), &key, Resume::Id));
        assert!(!reusable(dir.path(), &key, Resume::Content));
        let meta = InstanceMeta {
            cache_key: key.clone(),
            image_id: "sha256:1".into(),
            mode: "hardened".into(),
            outcome: OutcomeKind::Resolved,
            error: None,
            hardened: None,
            undone: None,
            tamper_suspected: Vec::new(),
            overhead_ms: 1,
            tests_ms: 2,
        };
        write_atomic(
            &dir.path().join(META_FILE),
            serde_json::to_string(&meta).expect("json"),
        )
        .expect("write");
        assert!(reusable(dir.path(), &key, Resume::Content));
        assert!(!reusable(dir.path(), "other", Resume::Content));
    }
}
