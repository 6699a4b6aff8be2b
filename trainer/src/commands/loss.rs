//! `trainer loss --case FILE.json`: evaluate a worked GRPO case file (layout:
//! [`crate::grpo::case::CaseFile`]) and print the losses.
//!
//! The output is one JSON object on one line, keyed by case name (sorted). Each value holds the
//! accumulated loss under the case's `loss_type` (or under `grpo`, `bnpo`, `dr_grpo` and `dapo`
//! for a case without one), plus `micro_batch_losses` (loss type → one loss per micro-batch) and
//! `metrics` (the loss-side metrics TRL logs for the step, under TRL's names: the mean over
//! micro-batches; for a case of several loss types, the first one's). Floats are printed with the
//! shortest text that reads back to the same `f64`; an undefined value (NaN) is `null`.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::grpo::case::CaseFile;

/// Evaluates the case file at `case` and returns the JSON text `trainer loss --case` prints
/// (without a trailing newline).
pub fn run(case: &Path) -> Result<String> {
    let fail = |source| Error::GrpoCase {
        path: case.to_path_buf(),
        source,
    };
    let evaluation = CaseFile::load(case)
        .and_then(|file| file.evaluate())
        .map_err(fail)?;
    let mut output = Map::new();
    for case in &evaluation.cases {
        let mut entry = Map::new();
        let mut micro_batches = Map::new();
        for report in &case.report.loss_types {
            let name = report.loss_type.as_str().to_owned();
            entry.insert(name.clone(), json!(report.loss));
            micro_batches.insert(name, json!(report.micro_batch_losses));
        }
        entry.insert(
            "micro_batch_losses".to_owned(),
            Value::Object(micro_batches),
        );
        let metrics: Map<String, Value> = case
            .report
            .loss_types
            .first()
            .map(|report| {
                report
                    .metrics
                    .iter()
                    .map(|(name, value)| (name.clone(), json!(value)))
                    .collect()
            })
            .unwrap_or_default();
        entry.insert("metrics".to_owned(), Value::Object(metrics));
        output.insert(case.name.clone(), Value::Object(entry));
    }
    Ok(Value::Object(output).to_string())
}
