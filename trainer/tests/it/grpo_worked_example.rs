//! Checks swerve's GRPO math against every expected number of the worked-example case files
//! (JSON in the layout of `grpo::case::CaseFile`): rewards, advantages, metrics, masks, losses
//! and gradients.
//!
//! Files: every `grpo*.json` in this crate's `tests/data/` (the worked example, expected values
//! computed with TRL's formulas in full `f64` precision) and in `tests/data/trl-1.16/` (computed
//! by TRL 1.16.0 itself, see its README), plus any listed in `SWERVE_GRPO_CASE_FILES` (a path
//! list, `:`-separated). Tolerance: 1e-12 relative, the bound swerve holds its `f64`
//! implementation to (1e-15 absolute for expected values at or near 0); `SWERVE_GRPO_REL_TOL`
//! overrides the relative bound. The metrics a file lists under `dtype.float32_metrics` are
//! float32 roundings in TRL (`.float()` of boolean and integer tensors) and are compared to
//! 2⁻²³ relative, one float32 rounding.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use swerve_trainer::commands;
use swerve_trainer::grpo::case::{CaseFile, FileEvaluation, Matrix};
use swerve_trainer::grpo::{LossType, ScaleRewards};

const ABS_TOL: f64 = 1e-15;

/// One float32 rounding, relative.
const F32_TOL: f64 = 1.0 / 8_388_608.0;

/// The case files carried with the repository.
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn worked_example() -> PathBuf {
    data_dir().join("grpo-worked-example.json")
}

fn case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [data_dir(), data_dir().join("trl-1.16")]
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(dir)
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .map(|entry| entry.unwrap().path())
        })
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
            .any(|f| f.ends_with("grpo-worked-example.json"))
            && files
                .iter()
                .filter(|f| f.parent().unwrap().ends_with("trl-1.16"))
                .count()
                >= 6,
        "the worked example and TRL's six files must be among {files:?}"
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
    /// Metrics compared at [`F32_TOL`] in the file being checked.
    float32: Vec<String>,
}

impl Checker {
    fn new() -> Self {
        Checker {
            rel_tol: rel_tol(),
            checked: 0,
            worst: (0.0, String::new()),
            failures: Vec::new(),
            float32: Vec::new(),
        }
    }

    /// `expected` None stands for NaN (`null` in the file).
    fn number(&mut self, what: &str, actual: f64, expected: Option<f64>) {
        self.number_within(what, actual, expected, self.rel_tol);
    }

    fn number_within(&mut self, what: &str, actual: f64, expected: Option<f64>, rel_tol: f64) {
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
        if !(error <= rel_tol * expected.abs() || error <= ABS_TOL) {
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
            let tol = if self.float32.contains(name) {
                F32_TOL
            } else {
                self.rel_tol
            };
            match actual.get(name) {
                Some(a) => self.number_within(&format!("{what} {name}"), *a, *value, tol),
                None => self
                    .failures
                    .push(format!("{what}: metric {name} is not computed")),
            }
        }
    }

    /// The metrics and no others (for files TRL wrote, which hold every metric it logged).
    fn exact_metrics(
        &mut self,
        what: &str,
        actual: &BTreeMap<String, f64>,
        expected: &BTreeMap<String, Option<f64>>,
    ) {
        self.metrics(what, actual, expected);
        for name in actual.keys() {
            if !expected.contains_key(name) {
                self.failures.push(format!(
                    "{what}: metric {name} is logged but TRL does not log it"
                ));
            }
        }
    }
}

fn some(values: &[f64]) -> Vec<Option<f64>> {
    values.iter().copied().map(Some).collect()
}

/// TRL's name of a `scale_rewards` key (`"group"`, … or the booleans `"true"`/`"false"`).
fn scale_by_name(name: &str) -> ScaleRewards {
    match name {
        "true" => ScaleRewards::Group,
        "false" => ScaleRewards::None,
        _ => ScaleRewards::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .unwrap_or_else(|| panic!("unknown scale_rewards mode {name}")),
    }
}

fn check_file(path: &Path, checker: &mut Checker) -> FileEvaluation {
    let file = CaseFile::load(path).unwrap_or_else(|e| panic!("{e:#?}"));
    // Keys beyond the case layout: who wrote the file and which metrics are float32.
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let by_trl = raw.get("generated_by").is_some();
    checker.float32 = raw["dtype"]["float32_metrics"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .map(|n| n.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
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
        let modes = expected
            .advantages
            .iter()
            .flatten()
            .chain(expected.advantages_scale_rewards_bool.iter().flatten());
        for (mode, values) in modes {
            let scale = scale_by_name(mode);
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
        if let Some(mask) = &expected.completion_mask_after_masking {
            checker.matrix(
                &format!("{tag} completion_mask_after_masking"),
                &batch.completion_mask,
                mask,
            );
        }
        if let Some(metrics) = &expected.metrics {
            checker.metrics(&tag, &batch.metrics, metrics);
        }
    }

    // The loss side is checked on the file's own advantages where it has them, so that it is
    // checked alone: an advantage that is 0 up to rounding (GDPO's centred sum of a group with
    // equal rewards, −5.5e-17 in TRL, summed in torch's SIMD order) has a sign that decides
    // whether its tokens count as clipped, while the advantages themselves agree to 1e-15 above.
    let mut given = batch.clone();
    for (mode, values) in file
        .expected
        .iter()
        .flat_map(|e| e.advantages.iter().flatten())
    {
        let index = ScaleRewards::ALL
            .iter()
            .position(|s| *s == scale_by_name(mode))
            .unwrap();
        given.advantages_by_mode[index].values.clone_from(values);
    }
    let reports: Vec<_> = file
        .cases
        .iter()
        .map(|case| {
            file.evaluate_case(case, &given)
                .unwrap_or_else(|e| panic!("{tag}/{}: {e}", case.name))
        })
        .collect();
    for (case, report) in file.cases.iter().zip(&reports) {
        let Some(expected) = &case.expected else {
            continue;
        };
        let tag = format!("{tag}/{}", case.name);
        let names: Vec<String> = expected
            .loss
            .iter()
            .flat_map(|l| l.keys().cloned())
            .collect();
        for name in &names {
            let loss_type = LossType::from_name(name)
                .unwrap_or_else(|| panic!("{tag}: unknown loss type {name}"));
            let Some(actual) = report.by_type(loss_type) else {
                checker
                    .failures
                    .push(format!("{tag}: {name} was not evaluated"));
                continue;
            };
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
            if let Some(ratio) = &expected.ratio {
                checker.matrix(&format!("{tag} ratio/{name}"), &actual.ratio, ratio);
            }
            if let Some(per_token_loss) = &expected.per_token_loss {
                checker.matrix(
                    &format!("{tag} per_token_loss/{name}"),
                    &actual.per_token_loss,
                    per_token_loss,
                );
            }
            if let Some(metrics) = &expected.metrics {
                if by_trl {
                    checker.exact_metrics(&tag, &actual.metrics, metrics);
                } else {
                    checker.metrics(&tag, &actual.metrics, metrics);
                }
            }
            if let Some(micro) = &expected.micro_batch_metrics {
                if micro.len() != actual.micro_batch_metrics.len() {
                    checker
                        .failures
                        .push(format!("{tag}: micro-batch metric count differs"));
                }
                for (k, (a, e)) in actual.micro_batch_metrics.iter().zip(micro).enumerate() {
                    checker.exact_metrics(&format!("{tag} micro-batch {k}"), a, e);
                }
            }
            if let Some(mask) = &expected.entropy_mask {
                let kept: Vec<Vec<f64>> = actual
                    .entropy_mask
                    .iter()
                    .flatten()
                    .map(|row| row.iter().map(|&k| f64::from(u8::from(k))).collect())
                    .collect();
                checker.matrix(&format!("{tag} entropy_mask"), &kept, mask);
            }
            if let Some(mask) = &expected.off_policy_mask {
                let kept: Vec<f64> = actual
                    .off_policy_mask
                    .iter()
                    .flatten()
                    .map(|&k| f64::from(u8::from(k)))
                    .collect();
                checker.list(&format!("{tag} off_policy_mask"), &kept, &some(mask));
            }
            if let Some(phi) = &expected.phi_seq {
                let actual_phi = actual.phi_seq.clone().unwrap_or_default();
                checker.list(&format!("{tag} phi_seq"), &actual_phi, &some(phi));
            }
        }
        if names.is_empty() {
            checker.failures.push(format!("{tag}: no expected loss"));
        }
        if let Some(generation) = &expected.generation_metrics {
            for (name, value) in generation {
                assert_eq!(
                    name, "frac_reward_zero_std",
                    "{tag}: unknown generation metric"
                );
                checker.number_within(
                    &format!("{tag} {name}"),
                    batch.frac_reward_zero_std(case.scale_rewards),
                    *value,
                    F32_TOL,
                );
            }
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
        for (loss_type, value) in LossType::CLASSIC.into_iter().zip(losses) {
            let actual = case.report.by_type(loss_type).unwrap().loss;
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
        for loss_type in LossType::CLASSIC {
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
    // 16 losses, 20 micro-batch losses, 19 metrics.
    assert_eq!(checker.checked, 55);

    // Printed floats read back to the very same f64.
    let evaluation = file.evaluate().unwrap();
    let off = evaluation
        .cases
        .iter()
        .find(|c| c.name == "off_policy")
        .unwrap();
    assert_eq!(
        output["off_policy"]["dapo"].as_f64().unwrap(),
        off.report.by_type(LossType::Dapo).unwrap().loss
    );
}

/// `trainer loss --case` on the files TRL wrote: each case's loss under its own `loss_type`,
/// and its step metrics, as TRL computed them.
#[test]
fn cli_loss_prints_trl_cases_under_their_loss_type() {
    let mut checker = Checker::new();
    for path in case_files()
        .into_iter()
        .filter(|p| p.parent().unwrap().ends_with("trl-1.16"))
    {
        let output: serde_json::Value =
            serde_json::from_str(&commands::loss::run(&path).unwrap()).unwrap();
        let file = CaseFile::load(&path).unwrap();
        for case in &file.cases {
            let expected = case.expected.as_ref().unwrap();
            let loss_type = case.loss_type.unwrap().as_str();
            let entry = &output[&case.name];
            checker.number(
                &format!("{} {loss_type}", case.name),
                entry[loss_type].as_f64().unwrap(),
                Some(expected.loss.as_ref().unwrap()[loss_type]),
            );
            // One loss type per case: no other loss is printed.
            assert_eq!(entry["micro_batch_losses"].as_object().unwrap().len(), 1);
            // GDPO centres the summed group scores on the batch mean, which is 0 up to rounding
            // for a group of equal rewards: torch's four-lane sum leaves 4.4e-16, a sequential
            // one 0, so such rows' advantage is −5.5e-17 in TRL and 0 here, and whether their
            // tokens count as clipped (A < 0) differs. `every_expected_number_matches` checks
            // these metrics on TRL's advantages; here the clip shares of that file are skipped.
            let gdpo = path.ends_with("grpo-gdpo.json");
            for (metric, value) in expected.metrics.iter().flatten() {
                if gdpo && metric.contains("clip") {
                    continue;
                }
                checker.number_within(
                    &format!("{} {metric}", case.name),
                    entry["metrics"][metric].as_f64().unwrap_or(f64::NAN),
                    *value,
                    // The clip shares are float32 in TRL.
                    if metric.contains("clip") {
                        F32_TOL
                    } else {
                        1e-12
                    },
                );
            }
        }
    }
    assert!(
        checker.failures.is_empty(),
        "{}",
        checker.failures.join("\n")
    );
    assert!(checker.checked > 400, "{}", checker.checked);
}

#[test]
fn cli_loss_reports_a_missing_file_with_its_path() {
    let err = commands::loss::run(Path::new("/nonexistent/case.json")).unwrap_err();
    assert!(
        format!("{err:#}").contains("/nonexistent/case.json"),
        "{err:#}"
    );
}
