//! The metrics file of a training run: one JSON object per optimiser step, appended as the run
//! goes, with `step` and every metric under the name TRL logs it with. A NaN metric (undefined,
//! e.g. a std over one value) is written as `null`. With [`ReportTo::Tensorboard`] every step
//! also goes to a TensorBoard event file beside it (`crate::report::tensorboard`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoOp, MetricsLineError, Result};
use crate::report::tensorboard::EventWriter;

/// Where a run's metrics go besides `metrics.jsonl`, which is always written (plots and
/// `--resume` read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReportTo {
    /// `metrics.jsonl` only.
    Jsonl,
    /// `metrics.jsonl` and a TensorBoard event file in the same folder (the default).
    #[default]
    Tensorboard,
}

/// One line of the metrics file.
#[derive(Debug, Clone, PartialEq)]
pub struct StepMetrics {
    /// The optimiser step, counted from 1.
    pub step: u64,
    /// Metric name → value (NaN for undefined).
    pub values: BTreeMap<String, f64>,
}

impl StepMetrics {
    /// The JSON line: `{"step": N, "<metric>": value, ...}`.
    pub(crate) fn to_json_line(&self) -> String {
        let mut map = serde_json::Map::new();
        map.insert("step".into(), self.step.into());
        for (name, value) in &self.values {
            let v =
                serde_json::Number::from_f64(*value).map_or(serde_json::Value::Null, Into::into);
            map.insert(name.clone(), v);
        }
        serde_json::Value::Object(map).to_string()
    }

    /// A value by name, if present and defined.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied().filter(|v| !v.is_nan())
    }
}

/// An append-only metrics file, and the event file that mirrors it.
#[derive(Debug)]
pub struct MetricsLog {
    path: PathBuf,
    events: Option<EventWriter>,
}

impl MetricsLog {
    /// Opens `path` for a run that continues after step `keep_through`: lines of later steps
    /// (left by an interrupted run) are dropped, so a resumed run appends where its checkpoint
    /// left off. A fresh run passes 0 and starts an empty file. With [`ReportTo::Tensorboard`]
    /// the folder's event files are replaced by one holding the kept steps.
    pub fn open(path: &Path, keep_through: u64, report_to: ReportTo) -> Result<Self> {
        let kept: Vec<StepMetrics> = if keep_through > 0 && path.exists() {
            read(path)?
                .into_iter()
                .filter(|m| m.step <= keep_through)
                .collect()
        } else {
            Vec::new()
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs_err::create_dir_all(parent).map_err(|e| Error::io(IoOp::CreateDir, parent, e))?;
        }
        // Written whole or not at all: a crash here leaves the run's history as it was.
        let text: String = kept.iter().map(|m| m.to_json_line() + "\n").collect();
        swerve_cache::write_atomic(path, text).map_err(|e| Error::io(IoOp::Write, path, e))?;
        let events = match report_to {
            ReportTo::Jsonl => None,
            ReportTo::Tensorboard => {
                let dir = path.parent().unwrap_or(Path::new("."));
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                Some(EventWriter::create(dir, &kept)?)
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            events,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one step: its line in one write, so that the file holds whole lines.
    pub fn append(&mut self, metrics: &StepMetrics) -> Result<()> {
        let mut file = fs_err::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| Error::io(IoOp::Append, &self.path, e))?;
        file.write_all((metrics.to_json_line() + "\n").as_bytes())
            .map_err(|e| Error::io(IoOp::Append, &self.path, e))?;
        if let Some(events) = &mut self.events {
            events.append(metrics)?;
        }
        Ok(())
    }
}

/// Reads a metrics file (`null` reads back as NaN).
pub fn read(path: &Path) -> Result<Vec<StepMetrics>> {
    let text = fs_err::read_to_string(path).map_err(|e| Error::io(IoOp::Read, path, e))?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad = |problem| Error::MetricsLog {
            path: path.to_path_buf(),
            line: i + 1,
            problem,
        };
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(MetricsLineError::Json(e)))?;
        let obj = value
            .as_object()
            .ok_or_else(|| bad(MetricsLineError::NotAnObject))?;
        let step = obj
            .get("step")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| bad(MetricsLineError::NoStep))?;
        let values = obj
            .iter()
            .filter(|(k, _)| *k != "step")
            .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(f64::NAN)))
            .collect();
        out.push(StepMetrics { step, values });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(step: u64, reward: f64) -> StepMetrics {
        StepMetrics {
            step,
            values: BTreeMap::from([("reward".to_owned(), reward), ("kl".to_owned(), f64::NAN)]),
        }
    }

    #[test]
    fn an_error_names_the_operation_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.jsonl");
        let message = read(&path).unwrap_err().to_string();
        assert_eq!(message, format!("cannot read {}", path.display()));
    }

    #[test]
    fn lines_round_trip_and_resume_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        let mut log = MetricsLog::open(&path, 0, ReportTo::Jsonl).unwrap();
        for step in 1..=3 {
            log.append(&metrics(step, step as f64 / 2.0)).unwrap();
        }
        let first = fs_err::read_to_string(&path).unwrap();
        assert!(
            first.starts_with("{\"step\":1,\"kl\":null,\"reward\":0.5}\n"),
            "{first}"
        );
        let mut log = MetricsLog::open(&path, 2, ReportTo::Jsonl).unwrap();
        log.append(&metrics(3, 9.0)).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[2].get("reward"), Some(9.0));
        assert_eq!(back[0].get("kl"), None);
    }
}
