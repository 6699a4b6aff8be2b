//! Checks swerve's GRPO math against every expected number of the worked-example case files
//! (JSON in the layout of `grpo::case::CaseFile`, expected values computed with TRL's formulas in
//! full `f64` precision): rewards, advantages, metrics, losses and gradients.
//!
//! Files: every `grpo*.json` in this crate's `tests/data/` (the worked example is one), plus any
//! listed in `SWERVE_GRPO_CASE_FILES` (a path list, `:`-separated). Tolerance: 1e-12 relative,
//! the bound swerve holds its `f64` implementation to (1e-15 absolute for expected values at or
//! near 0); `SWERVE_GRPO_REL_TOL` overrides the relative bound.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use swerve_trainer::commands;
use swerve_trainer::grpo::case::{CaseFile, FileEvaluation, Matrix};
use swerve_trainer::grpo::{LossType, ScaleRewards};

const ABS_TOL: f64 = 1e-15;

/// The case files carried with the repository.
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn worked_example() -> PathBuf {
    data_dir().join("grpo-worked-example.json")
}

fn case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", data_dir().display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("grpo") && name.ends_with(".json")
        })
        .collect();
    files.sort();
    if let Some(extra) = std::env::var_os("SWERVE_GRPO_CASE_FILES") {
        files.extend(std::env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()));
    }
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("grpo-worked-example.json")),
        "the worked example must be among {files:?}"
    );
    files
}

fn rel_tol() -> f64 {
    std::env::var("SWERVE_GRPO_REL_TOL").map_or(1e-12, |v| v.parse().expect("SWERVE_GRPO_REL_TOL"))
}

/// Compares numbers, counts them and remembers the worst relative error and every failure.
struct Checker {
    rel_tol: f64,
    checked: usize,
    worst: (f64, String),
    failures: Vec<String>,
}

impl Checker {
    fn new() -> Self {
        Checker {
            rel_tol: rel_tol(),
            checked: 0,
            worst: (0.0, String::new()),
            failures: Vec::new(),
        }
    }

    /// `expected` None stands for NaN (`null` in the file).
    fn number(&mut self, what: &str, actual: f64, expected: Option<f64>) {
        self.checked += 1;
        let Some(expected) = expected else {
            if !actual.is_nan() {
                self.failures
                    .push(format!("{what}: expected NaN, got {actual}"));
            }
            return;
        };
        let error = (actual - expected).abs();
        let relative = if expected == 0.0 {
            error
        } else {
            error / expected.abs()
        };
        if expected.abs() > 1e-12 && relative > self.worst.0 {
            self.worst = (relative, what.to_owned());
        }
        if !(error <= self.rel_tol * expected.abs() || error <= ABS_TOL) {
            self.failures.push(format!(
                "{what}: expected {expected:e}, got {actual:e} (relative error {relative:e})"
            ));
        }
    }

    fn list(&mut self, what: &str, actual: &[f64], expected: &[Option<f64>]) {
        if actual.len() != expected.len() {
            self.failures.push(format!(
                "{what}: {} values, expected {}",
                actual.len(),
                expected.len()
            ));
            return;
        }
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            self.number(&format!("{what}[{i}]"), *a, *e);
        }
    }

    fn matrix(&mut self, what: &str, actual: &[Vec<f64>], expected: &Matrix) {
        if actual.len() != expected.len() {
            self.failures.push(format!(
                "{what}: {} rows, expected {}",
                actual.len(),
                expected.len()
            ));
            return;
        }
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            let e: Vec<Option<f64>> = e.iter().copied().map(Some).collect();
            self.list(&format!("{what}[{i}]"), a, &e);
        }
    }

    fn metrics(
        &mut self,
        what: &str,
        actual: &BTreeMap<String, f64>,
        expected: &BTreeMap<String, Option<f64>>,
    ) {
        for (name, value) in expected {
            match actual.get(name) {
                Some(a) => self.number(&format!("{what} {name}"), *a, *value),
                None => self
                    .failures
                    .push(format!("{what}: metric {name} is not computed")),
            }
        }
    }
}

fn some(values: &[f64]) -> Vec<Option<f64>> {
    values.iter().copied().map(Some).collect()
}

fn check_file(path: &Path, checker: &mut Checker) -> FileEvaluation {
    let file = CaseFile::load(path).unwrap_or_else(|e| panic!("{e:#?}"));
    let evaluation = file
        .evaluate()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tag = file.name.clone();
    let batch = &evaluation.batch;

    if let Some(expected) = &file.expected {
        if let Some(rewards) = &expected.rewards {
            checker.list(&format!("{tag} rewards"), &batch.stats.rewards, rewards);
        }
        if let Some(group_std) = &expected.group_std {
            checker.list(
                &format!("{tag} group_std"),
                &batch.stats.group_std,
                group_std,
            );
        }
        for (mode, values) in expected.advantages.iter().flatten() {
            let scale = ScaleRewards::ALL
                .into_iter()
                .find(|s| s.as_str() == mode)
                .unwrap_or_else(|| panic!("{tag}: unknown scale_rewards mode {mode}"));
            checker.list(
                &format!("{tag} advantages/{mode}"),
                batch.advantages(scale),
                &some(values),
            );
        }
        if let Some(n) = expected.num_items_in_batch {
            checker.number(
                &format!("{tag} num_items_in_batch"),
                batch.num_items_in_batch,
                Some(n),
            );
        }
        if let Some(metrics) = &expected.metrics {
            checker.metrics(&tag, &batch.metrics, metrics);
        }
    }

    for (case, result) in file.cases.iter().zip(&evaluation.cases) {
        let Some(expected) = &case.expected else {
            continue;
        };
        let tag = format!("{tag}/{}", case.name);
        let report = &result.report;
        if let Some(ratio) = &expected.ratio {
            checker.matrix(&format!("{tag} ratio"), &report.ratio, ratio);
        }
        if let Some(per_token_loss) = &expected.per_token_loss {
            checker.matrix(
                &format!("{tag} per_token_loss"),
                &report.per_token_loss,
                per_token_loss,
            );
        }
        for loss_type in LossType::ALL {
            let name = loss_type.as_str();
            let actual = report.by_type(loss_type);
            if let Some(loss) = expected.loss.as_ref().and_then(|l| l.get(name)) {
                checker.number(&format!("{tag} loss/{name}"), actual.loss, Some(*loss));
            }
            if let Some(losses) = expected
                .micro_batch_losses
                .as_ref()
                .and_then(|l| l.get(name))
            {
                checker.list(
                    &format!("{tag} micro_batch_losses/{name}"),
                    &actual.micro_batch_losses,
                    &some(losses),
                );
            }
            if let Some(grad) = expected
                .grad_wrt_cur_logps
                .as_ref()
                .and_then(|g| g.get(name))
            {
                checker.matrix(
                    &format!("{tag} grad/{name}"),
                    &actual.grad_wrt_cur_logps,
                    grad,
                );
                // Padding must get exactly 0, not merely something small.
                for (i, (row, mask)) in actual
                    .grad_wrt_cur_logps
                    .iter()
                    .zip(&batch.completion_mask)
                    .enumerate()
                {
                    for (t, (g, m)) in row.iter().zip(mask).enumerate() {
                        if *m == 0.0 && *g != 0.0 {
                            checker
                                .failures
                                .push(format!("{tag} grad/{name}[{i}][{t}] is padding but {g:e}"));
                        }
                    }
                }
            }
        }
        if let Some(metrics) = &expected.metrics {
            let actual: BTreeMap<String, f64> = report
                .metrics
                .to_trl_names()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            checker.metrics(&tag, &actual, metrics);
        }
    }
    evaluation
}

#[test]
fn every_expected_number_matches() {
    let mut checker = Checker::new();
    for path in case_files() {
        check_file(&path, &mut checker);
    }
    println!(
        "checked {} values; worst relative error {:e} ({})",
        checker.checked, checker.worst.0, checker.worst.1
    );
    assert!(
        checker.failures.is_empty(),
        "{} of {} values differ:\n{}",
        checker.failures.len(),
        checker.checked,
        checker.failures.join("\n")
    );
    // The worked example alone has 8 rewards, … and 4 cases: far more than 500 numbers.
    assert!(
        checker.checked > 500,
        "only {} values checked",
        checker.checked
    );
}

/// The worked example's headline losses (per case and loss type, to 10 decimals), written out
/// here so that they are checked independently of the JSON's expected sections.
#[test]
fn headline_losses_of_the_worked_example() {
    let evaluation = CaseFile::load(&worked_example())
        .unwrap()
        .evaluate()
        .unwrap();
    let expected = [
        (
            "on_policy",
            [0.0, -0.0168364497, -0.0121011982, -0.0168364497],
        ),
        (
            "off_policy",
            [0.0135571668, 0.0052277858, 0.0037574711, 0.0052277858],
        ),
        (
            "off_policy_bias_corrected_kl",
            [0.0135948116, 0.0052807420, 0.0037955333, 0.0052807420],
        ),
        (
            "off_policy_two_micro_batches",
            [0.0135571668, 0.0046499217, 0.0037574711, 0.0052277858],
        ),
    ];
    for (name, losses) in expected {
        let case = evaluation.cases.iter().find(|c| c.name == name).unwrap();
        for (loss_type, value) in LossType::ALL.into_iter().zip(losses) {
            let actual = case.report.by_type(loss_type).loss;
            assert!(
                (actual - value).abs() < 5e-11,
                "{name} {loss_type:?}: {actual} vs {value}"
            );
        }
    }
}

#[test]
fn cli_loss_prints_one_object_keyed_by_case() {
    let path = worked_example();
    let text = commands::loss::run(&path).unwrap();
    assert!(!text.contains('\n'), "one line: {text}");
    let output: serde_json::Value = serde_json::from_str(&text).unwrap();
    let output = output.as_object().expect("a JSON object");
    let file = CaseFile::load(&path).unwrap();
    // Key order follows serde_json's `preserve_order` feature, which other crates of the
    // workspace may switch on; the set of names is what matters.
    let mut names: Vec<&str> = output.keys().map(String::as_str).collect();
    names.sort();
    let mut expected_names: Vec<&str> = file.cases.iter().map(|c| c.name.as_str()).collect();
    expected_names.sort();
    assert_eq!(names, expected_names);

    let mut checker = Checker::new();
    for case in &file.cases {
        let entry = output[&case.name].as_object().unwrap();
        let expected = case.expected.as_ref().unwrap();
        for loss_type in LossType::ALL {
            let name = loss_type.as_str();
            let printed = entry[name]
                .as_f64()
                .unwrap_or_else(|| panic!("{} {name} is a number", case.name));
            checker.number(
                &format!("{} {name}", case.name),
                printed,
                expected.loss.as_ref().unwrap().get(name).copied(),
            );
            let micro: Vec<f64> = entry["micro_batch_losses"][name]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            checker.list(
                &format!("{} micro/{name}", case.name),
                &micro,
                &some(&expected.micro_batch_losses.as_ref().unwrap()[name]),
            );
        }
        for (metric, value) in expected.metrics.iter().flatten() {
            let printed = entry["metrics"][metric].as_f64();
            checker.number(
                &format!("{} {metric}", case.name),
                printed.unwrap_or(f64::NAN),
                *value,
            );
        }
    }
    assert!(
        checker.failures.is_empty(),
        "{}",
        checker.failures.join("\n")
    );
    // 16 losses, 20 micro-batch losses, 15 metrics.
    assert_eq!(checker.checked, 51);

    // Printed floats read back to the very same f64.
    let evaluation = file.evaluate().unwrap();
    let off = evaluation
        .cases
        .iter()
        .find(|c| c.name == "off_policy")
        .unwrap();
    assert_eq!(
        output["off_policy"]["dapo"].as_f64().unwrap(),
        off.report.by_type(LossType::Dapo).loss
    );
}

#[test]
fn cli_loss_reports_a_missing_file_with_its_path() {
    let err = commands::loss::run(Path::new("/nonexistent/case.json")).unwrap_err();
    assert!(
        format!("{err:#}").contains("/nonexistent/case.json"),
        "{err:#}"
    );
}
