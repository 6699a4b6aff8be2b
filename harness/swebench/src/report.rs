//! The report files of a SWE-bench 5 run, serialised byte for byte as the Python harness
//! writes them: the per-instance `report.json` and the run report `<model>.<run_id>.json`.
//!
//! Python writes both with `json.dumps(obj, indent=4)`: four-space indentation, `": "` after
//! keys, `,` at line ends, `[]` / `{}` for empty containers, and `ensure_ascii` escaping
//! (every character outside U+0020–U+007E escaped, non-ASCII as `\uXXXX` with lower-case hex
//! and astral characters as surrogate pairs). [`crate::pyjson`] writes that.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::pyjson::Dumps;
use serde::{Deserialize, Serialize};
use swerve_log_parsers::{FailureTier, InfraFailureReason};

/// The per-instance report, the value under the instance id in `report.json`. Field order is
/// the file's key order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceReport {
    /// The prediction's `model_patch` was null.
    #[serde(rename = "patch_is_None")]
    pub patch_is_none: bool,
    /// The prediction had a patch (possibly `""`).
    pub patch_exists: bool,
    /// Misnamed upstream: the log was gradeable (`get_logs_eval` found results).
    pub patch_successfully_applied: bool,
    /// Resolution status `RESOLVED_FULL`.
    pub resolved: bool,
    /// v5: an ungradeable log matched an environment-tier failure signature.
    pub infra_failure: bool,
    /// v5: the signature an ungradeable log matched (environment or ambiguous tier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_failure_reason: Option<String>,
    /// The rule that decided `resolved` when it is not SWE-bench's (rows of SWE-rebench V2 and
    /// SWE-bench Pro: `exact-set` or `subset`); absent in SWE-bench's reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_rule: Option<String>,
    /// Per-test outcomes; present only when the log was gradeable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_status: Option<TestsStatus>,
}

/// `tests_status`: outcomes per test category. `FAIL_TO_FAIL` and `PASS_TO_FAIL` are always
/// empty in SWE-bench 5 reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestsStatus {
    /// Tests that must go from failing to passing.
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: TestOutcomes,
    /// Tests that must keep passing.
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: TestOutcomes,
    /// Always empty.
    #[serde(rename = "FAIL_TO_FAIL")]
    pub fail_to_fail: TestOutcomes,
    /// Always empty.
    #[serde(rename = "PASS_TO_FAIL")]
    pub pass_to_fail: TestOutcomes,
}

/// The tests of one category split by outcome, each list in dataset order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOutcomes {
    /// Tests that met the expectation.
    pub success: Vec<String>,
    /// Tests that did not.
    pub failure: Vec<String>,
}

/// `report.json`: `{instance_id: report}` as `json.dumps(..., indent=4)`, no trailing newline.
pub fn render_instance_report(instance_id: &str, report: &InstanceReport) -> String {
    crate::pyjson::dumps(&BTreeMap::from([(instance_id, report)]), Dumps::REPORT)
        .expect("report types serialise")
}

/// Docker leftovers the run report lists when the harness has a Docker client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerLeftovers {
    /// Number of `unstopped_containers`.
    pub unstopped_instances: usize,
    /// Names of containers whose name contains the run id, sorted.
    pub unstopped_containers: Vec<String>,
    /// Dataset images still present locally, sorted.
    pub unremoved_images: Vec<String>,
}

/// The run report `<model>.<run_id>.json` (v5, `schema_version` 2). Field order is the file's
/// key order; every id list is sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// Size of the (filtered) dataset.
    pub total_instances: usize,
    /// Number of predictions, all of them, not intersected with the dataset.
    pub submitted_instances: usize,
    /// Instances with a `report.json`.
    pub completed_instances: usize,
    /// Instances resolved.
    pub resolved_instances: usize,
    /// Instances graded but not resolved.
    pub unresolved_instances: usize,
    /// Unresolved or errored instances whose logs match an environment-tier signature.
    pub infra_failure_instances: usize,
    /// Unresolved or errored instances whose logs match an ambiguous-tier signature.
    pub ambiguous_failure_instances: usize,
    /// Instances whose patch was `""` or null (not run).
    pub empty_patch_instances: usize,
    /// Instances with no usable `report.json`.
    pub error_instances: usize,
    /// Ids with a `report.json` (an unreadable one included).
    pub completed_ids: Vec<String>,
    /// Dataset ids without a prediction.
    pub incomplete_ids: Vec<String>,
    /// Ids whose patch was `""` or null.
    pub empty_patch_ids: Vec<String>,
    /// All prediction ids.
    pub submitted_ids: Vec<String>,
    /// Resolved ids.
    pub resolved_ids: Vec<String>,
    /// Graded, unresolved ids.
    pub unresolved_ids: Vec<String>,
    /// Ids classified as environment failures.
    pub infra_failure_ids: Vec<String>,
    /// Ids classified as ambiguous failures.
    pub ambiguous_failure_ids: Vec<String>,
    /// Id → failure signature, sorted by id.
    pub failure_reasons: BTreeMap<String, String>,
    /// Ids without a usable `report.json` (apply failures, timeouts, crashes, bad files).
    pub error_ids: Vec<String>,
    /// Always 2.
    pub schema_version: u32,
    /// Present when a Docker client was available.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerLeftovers>,
}

/// One entry of the predictions file, as far as the run report cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmittedPrediction<'a> {
    /// The prediction's `instance_id`.
    pub instance_id: &'a str,
    /// Its `model_patch` (`None` for JSON null).
    pub model_patch: Option<&'a str>,
}

/// The run report plus what only the printed summary needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResults {
    /// The report file's content.
    pub report: RunReport,
    /// Predictions whose id is in the dataset (the printed `Instances submitted`, unlike the
    /// JSON field).
    pub submitted_in_dataset: usize,
}

/// Builds the run report like SWE-bench 5's `make_run_report`, without touching the disk.
///
/// - `dataset_ids`: the dataset, filtered to the `-i` ids when given, in any order;
/// - `predictions`: every prediction (a later entry for the same id replaces an earlier one,
///   as in the Python dict);
/// - `read_report(id)`: the text of the instance's `report.json`, `None` when it does not exist;
/// - `classify(id)`: the failure signature of the instance's `test_output.txt` and
///   `run_instance.log` (see [`swerve_log_parsers::classify_infra_failure`]), asked only for
///   unresolved and errored ids;
/// - `docker`: leftovers when a Docker client is available.
///
/// Per dataset id, in this order: no prediction → `incomplete_ids`; patch `""` or null →
/// `empty_patch_ids`; a `report.json` → `completed_ids` and then `resolved_ids` /
/// `unresolved_ids` by the truthiness of `report[id]["resolved"]`, or `error_ids` (while
/// staying completed) when the file is blank, not JSON or lacks the key; no `report.json` →
/// `error_ids`. (Upstream crashes on a `report.json` whose top level is not an object; here
/// that counts as an error.)
pub fn build_run_report(
    dataset_ids: &[String],
    predictions: &[SubmittedPrediction<'_>],
    mut read_report: impl FnMut(&str) -> Option<String>,
    mut classify: impl FnMut(&str) -> Option<InfraFailureReason>,
    docker: Option<DockerLeftovers>,
) -> RunResults {
    let submitted: BTreeMap<&str, Option<&str>> = predictions
        .iter()
        .map(|p| (p.instance_id, p.model_patch))
        .collect();
    let mut completed = BTreeSet::new();
    let mut incomplete = BTreeSet::new();
    let mut empty_patch = BTreeSet::new();
    let mut resolved = BTreeSet::new();
    let mut unresolved = BTreeSet::new();
    let mut errors = BTreeSet::new();
    for id in dataset_ids {
        let id = id.as_str();
        let Some(&patch) = submitted.get(id) else {
            incomplete.insert(id);
            continue;
        };
        if patch.is_none_or(str::is_empty) {
            empty_patch.insert(id);
            continue;
        }
        let Some(text) = read_report(id) else {
            errors.insert(id);
            continue;
        };
        completed.insert(id);
        match report_resolved(&text, id) {
            Some(true) => resolved.insert(id),
            Some(false) => unresolved.insert(id),
            None => errors.insert(id),
        };
    }

    let mut infra = BTreeSet::new();
    let mut ambiguous = BTreeSet::new();
    let mut failure_reasons = BTreeMap::new();
    for &id in unresolved.union(&errors) {
        if let Some(reason) = classify(id) {
            match reason.tier() {
                FailureTier::Environment => infra.insert(id),
                FailureTier::Ambiguous => ambiguous.insert(id),
            };
            failure_reasons.insert(id.to_owned(), reason.as_str().to_owned());
        }
    }

    let ids = |set: BTreeSet<&str>| -> Vec<String> { set.into_iter().map(str::to_owned).collect() };
    let dataset: BTreeSet<&str> = dataset_ids.iter().map(String::as_str).collect();
    let report = RunReport {
        total_instances: dataset_ids.len(),
        submitted_instances: submitted.len(),
        completed_instances: completed.len(),
        resolved_instances: resolved.len(),
        unresolved_instances: unresolved.len(),
        infra_failure_instances: infra.len(),
        ambiguous_failure_instances: ambiguous.len(),
        empty_patch_instances: empty_patch.len(),
        error_instances: errors.len(),
        completed_ids: ids(completed),
        incomplete_ids: ids(incomplete),
        empty_patch_ids: ids(empty_patch),
        submitted_ids: submitted.keys().map(|id| (*id).to_owned()).collect(),
        resolved_ids: ids(resolved),
        unresolved_ids: ids(unresolved),
        infra_failure_ids: ids(infra),
        ambiguous_failure_ids: ids(ambiguous),
        failure_reasons,
        error_ids: ids(errors),
        schema_version: 2,
        docker,
    };
    RunResults {
        report,
        submitted_in_dataset: submitted.keys().filter(|id| dataset.contains(*id)).count(),
    }
}

/// `report[instance_id]["resolved"]` of a `report.json` text, by Python truthiness; `None`
/// when the file is blank, not JSON, or lacks the keys.
fn report_resolved(text: &str, instance_id: &str) -> Option<bool> {
    let text = text.trim_matches(|c: char| c.is_whitespace() || matches!(c, '\u{1C}'..='\u{1F}'));
    if text.is_empty() {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let resolved = value.get(instance_id)?.as_object()?.get("resolved")?;
    Some(match resolved {
        serde_json::Value::Null => false,
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        serde_json::Value::String(s) => !s.is_empty(),
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::Object(o) => !o.is_empty(),
    })
}

/// The run report file's content: `json.dumps(report, indent=4)` plus a newline.
pub fn render_run_report(report: &RunReport) -> String {
    let mut text = crate::pyjson::dumps(report, Dumps::REPORT).expect("report types serialise");
    text.push('\n');
    text
}

/// The run report's file name: `<model_name_or_path with '/' → '__'>.<run_id>.json`.
pub(crate) fn run_report_file_name(model_name_or_path: &str, run_id: &str) -> String {
    format!("{}.{run_id}.json", model_name_or_path.replace('/', "__"))
}

/// Where the run report goes, spelled as Python's `pathlib` spells `Path(report_dir) / name`
/// (`.` components dropped: `--report_dir .` gives `gold.run1.json`, not `./gold.run1.json`),
/// so that `Report written to <file>` reads as upstream's.
pub fn run_report_path(report_dir: &Path, model_name_or_path: &str, run_id: &str) -> PathBuf {
    report_dir
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect::<PathBuf>()
        .join(run_report_file_name(model_name_or_path, run_id))
}

impl RunResults {
    /// The summary v5 prints after writing the report, one line each, ending with
    /// `Report written to <file>`.
    pub fn summary(&self, report_file: &str) -> String {
        let r = &self.report;
        let mut lines = vec![
            format!("Total instances: {}", r.total_instances),
            format!("Instances submitted: {}", self.submitted_in_dataset),
            format!("Instances completed: {}", r.completed_instances),
            format!("Instances incomplete: {}", r.incomplete_ids.len()),
            format!("Instances resolved: {}", r.resolved_instances),
            format!("Instances unresolved: {}", r.unresolved_instances),
            format!(
                "Instances with likely infrastructure failures: {}",
                r.infra_failure_instances
            ),
            format!(
                "Instances with ambiguous failures: {}",
                r.ambiguous_failure_instances
            ),
            format!("Instances with empty patches: {}", r.empty_patch_instances),
            format!("Instances with errors: {}", r.error_instances),
        ];
        if let Some(docker) = &r.docker {
            lines.push(format!(
                "Unstopped containers: {}",
                docker.unstopped_containers.len()
            ));
            lines.push(format!(
                "Unremoved images: {}",
                docker.unremoved_images.len()
            ));
        }
        lines.push(format!("Report written to {report_file}"));
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_indent_4() {
        let report = InstanceReport {
            patch_exists: true,
            infra_failure_reason: Some("tests_timed_out".to_owned()),
            ..InstanceReport::default()
        };
        let expect = r#"{
    "x__y-1": {
        "patch_is_None": false,
        "patch_exists": true,
        "patch_successfully_applied": false,
        "resolved": false,
        "infra_failure": false,
        "infra_failure_reason": "tests_timed_out"
    }
}"#;
        assert_eq!(render_instance_report("x__y-1", &report), expect);

        let report = InstanceReport {
            patch_exists: true,
            patch_successfully_applied: true,
            tests_status: Some(TestsStatus {
                fail_to_pass: TestOutcomes {
                    success: vec!["t\u{e9}st".to_owned()],
                    failure: vec![],
                },
                ..TestsStatus::default()
            }),
            ..InstanceReport::default()
        };
        let expect = r#"{
    "x__y-1": {
        "patch_is_None": false,
        "patch_exists": true,
        "patch_successfully_applied": true,
        "resolved": false,
        "infra_failure": false,
        "tests_status": {
            "FAIL_TO_PASS": {
                "success": [
                    "t\u00e9st"
                ],
                "failure": []
            },
            "PASS_TO_PASS": {
                "success": [],
                "failure": []
            },
            "FAIL_TO_FAIL": {
                "success": [],
                "failure": []
            },
            "PASS_TO_FAIL": {
                "success": [],
                "failure": []
            }
        }
    }
}"#;
        let text = render_instance_report("x__y-1", &report);
        assert_eq!(text, expect);
        // The file round-trips through serde.
        let back: BTreeMap<String, InstanceReport> = serde_json::from_str(&text).expect("json");
        assert_eq!(back["x__y-1"], report);
    }

    fn s(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    fn graded(resolved: &str) -> String {
        format!("{{\"{{id}}\": {{\"resolved\": {resolved}}}}}")
    }

    #[test]
    fn run_report_buckets() {
        let dataset = s(&["a", "b", "c", "d", "e", "f", "g", "h", "i"]);
        let predictions = [
            SubmittedPrediction {
                instance_id: "b",
                model_patch: Some(""),
            },
            SubmittedPrediction {
                instance_id: "c",
                model_patch: None,
            },
            SubmittedPrediction {
                instance_id: "d",
                model_patch: Some("diff"),
            },
            SubmittedPrediction {
                instance_id: "e",
                model_patch: Some("diff"),
            },
            SubmittedPrediction {
                instance_id: "f",
                model_patch: Some("diff"),
            },
            SubmittedPrediction {
                instance_id: "g",
                model_patch: Some("diff"),
            },
            SubmittedPrediction {
                instance_id: "h",
                model_patch: Some("diff"),
            },
            SubmittedPrediction {
                instance_id: "i",
                model_patch: Some("diff"),
            },
            SubmittedPrediction {
                instance_id: "zz-not-in-dataset",
                model_patch: Some("diff"),
            },
        ];
        let read_report = |id: &str| -> Option<String> {
            let text = match id {
                "d" => graded("true"),
                "e" => graded("false"),
                "f" => "  \n".to_owned(),
                "g" => "{\"other\": {}}".to_owned(),
                "h" => return None,
                "i" => graded("1"),
                _ => unreachable!("asked for {id}"),
            };
            Some(text.replace("{id}", id))
        };
        let mut asked = Vec::new();
        let classify = |id: &str| {
            asked.push(id.to_owned());
            match id {
                "e" => Some(InfraFailureReason::OutOfMemory),
                "h" => Some(InfraFailureReason::TestsTimedOut),
                _ => None,
            }
        };
        let results = build_run_report(&dataset, &predictions, read_report, classify, None);
        let r = &results.report;
        assert_eq!(r.completed_ids, s(&["d", "e", "f", "g", "i"]));
        assert_eq!(r.incomplete_ids, s(&["a"]));
        assert_eq!(r.empty_patch_ids, s(&["b", "c"]));
        assert_eq!(r.resolved_ids, s(&["d", "i"]));
        assert_eq!(r.unresolved_ids, s(&["e"]));
        assert_eq!(r.error_ids, s(&["f", "g", "h"]));
        assert_eq!(r.infra_failure_ids, s(&["e"]));
        assert_eq!(r.ambiguous_failure_ids, s(&["h"]));
        assert_eq!(r.submitted_instances, 9);
        assert_eq!(r.submitted_ids.len(), 9);
        assert_eq!(results.submitted_in_dataset, 8);
        assert_eq!(asked, s(&["e", "f", "g", "h"]));
        let expect = r#"{
    "total_instances": 9,
    "submitted_instances": 9,
    "completed_instances": 5,
    "resolved_instances": 2,
    "unresolved_instances": 1,
    "infra_failure_instances": 1,
    "ambiguous_failure_instances": 1,
    "empty_patch_instances": 2,
    "error_instances": 3,
    "completed_ids": [
        "d",
        "e",
        "f",
        "g",
        "i"
    ],
    "incomplete_ids": [
        "a"
    ],
    "empty_patch_ids": [
        "b",
        "c"
    ],
    "submitted_ids": [
        "b",
        "c",
        "d",
        "e",
        "f",
        "g",
        "h",
        "i",
        "zz-not-in-dataset"
    ],
    "resolved_ids": [
        "d",
        "i"
    ],
    "unresolved_ids": [
        "e"
    ],
    "infra_failure_ids": [
        "e"
    ],
    "ambiguous_failure_ids": [
        "h"
    ],
    "failure_reasons": {
        "e": "out_of_memory",
        "h": "tests_timed_out"
    },
    "error_ids": [
        "f",
        "g",
        "h"
    ],
    "schema_version": 2
}
"#;
        assert_eq!(render_run_report(r), expect);
    }

    #[test]
    fn run_report_with_docker_and_summary() {
        let dataset = s(&["a"]);
        let predictions = [SubmittedPrediction {
            instance_id: "a",
            model_patch: Some("d"),
        }];
        let docker = DockerLeftovers {
            unstopped_instances: 1,
            unstopped_containers: s(&["sweb.eval.a.run1"]),
            unremoved_images: vec![],
        };
        let results = build_run_report(
            &dataset,
            &predictions,
            |id| Some(graded("true").replace("{id}", id)),
            |_| None,
            Some(docker),
        );
        let text = render_run_report(&results.report);
        assert!(
            text.ends_with(
                "    \"schema_version\": 2,\n    \"unstopped_instances\": 1,\n    \"unstopped_containers\": [\n        \"sweb.eval.a.run1\"\n    ],\n    \"unremoved_images\": []\n}\n"
            ),
            "{text}"
        );
        assert!(text.contains("    \"failure_reasons\": {},\n"), "{text}");
        let summary = results.summary("gold.run1.json");
        assert_eq!(
            summary,
            "Total instances: 1\nInstances submitted: 1\nInstances completed: 1\n\
             Instances incomplete: 0\nInstances resolved: 1\nInstances unresolved: 0\n\
             Instances with likely infrastructure failures: 0\n\
             Instances with ambiguous failures: 0\nInstances with empty patches: 0\n\
             Instances with errors: 0\nUnstopped containers: 1\nUnremoved images: 0\n\
             Report written to gold.run1.json\n"
        );
        let path = |dir: &str| run_report_path(Path::new(dir), "org/m", "r1");
        assert_eq!(path("."), Path::new("org__m.r1.json"));
        assert_eq!(path("./out/./x"), Path::new("out/x/org__m.r1.json"));
        assert_eq!(path("/tmp"), Path::new("/tmp/org__m.r1.json"));
        assert_eq!(
            run_report_file_name("org/model-x", "run1"),
            "org__model-x.run1.json"
        );
    }
}
