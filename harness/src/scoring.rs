//! `harness reward`: score a JSONL file of samples with weighted reward plugins and write one
//! JSON line per input line, in input order.
//!
//! Input lines are [`swerve_host::Sample`] objects (see `docs/plugins.md`, "Sample schema"); the
//! SWE-RL development vectors' lines (`output`, `code_context`, `oracle_new_content`) are valid
//! as they are, and metadata values that are not strings are kept as their JSON text. A line
//! that does not parse gets an output line with its `error` and does not stop the others.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use swerve_host::{FailureClass, Host, Sample, SampleScores, Scorer, ScorerConfig, WeightedPlugin};

use crate::error::HarnessError;
use swerve_host::PluginSpec;

/// What to score and how.
#[derive(Debug, Clone)]
pub struct RewardRun {
    /// The JSONL input.
    pub input: PathBuf,
    /// Where to write the results; `None` for standard output.
    pub output: Option<PathBuf>,
    /// The plugins and their weights.
    pub plugins: Vec<PluginSpec>,
    /// Threads, batch size, isolation, fallbacks.
    pub scorer: ScorerConfig,
}

/// Totals of a run, for the summary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RewardSummary {
    /// Input lines.
    pub lines: usize,
    /// Lines that did not parse.
    pub malformed: usize,
    /// Samples whose combined reward is a number.
    pub rewarded: usize,
    /// Mean combined reward over those samples.
    pub mean_reward: Option<f64>,
    /// Per plugin (in order): name, samples it gave a reward for, mean of those rewards.
    pub per_plugin: Vec<(String, usize, Option<f64>)>,
    /// Failed plugin calls per class.
    pub failures: BTreeMap<FailureClass, usize>,
    /// Plugin results the host cut to its caps (`swerve_host::limits`).
    pub truncated: usize,
    /// Time spent scoring (plugins loaded).
    pub scoring_time: Duration,
}

/// A parsed input line.
type Line = Result<Sample, String>;

/// Parses the input file; each line is a sample or the reason it is not one.
pub fn read_samples(path: &Path) -> Result<Vec<Line>, HarnessError> {
    let text = fs_err::read_to_string(path).map_err(|source| HarnessError::Read {
        path: path.to_owned(),
        source,
    })?;
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, line)| parse_line(line).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect())
}

fn parse_line(line: &str) -> Result<Sample, String> {
    if line.trim().is_empty() {
        return Err("empty line".into());
    }
    let mut value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let obj = value.as_object_mut().ok_or("not a JSON object")?;
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        for v in meta.values_mut() {
            if !v.is_string() {
                *v = Value::String(v.to_string());
            }
        }
    }
    if !obj.contains_key("id")
        && let Some(id) = obj.get("instance_id").cloned()
    {
        obj.insert("id".into(), id);
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Loads the plugins of a run.
pub fn load_plugins(
    host: &Host,
    specs: &[PluginSpec],
) -> Result<Vec<WeightedPlugin>, HarnessError> {
    specs
        .iter()
        .map(|s| {
            Ok(WeightedPlugin {
                plugin: host.load_reward(&s.path, &s.budgets)?,
                weight: s.weight,
            })
        })
        .collect()
}

/// Scores the run's input and writes its output; `progress` gets the number of samples done.
pub fn run(
    host: &Host,
    run: &RewardRun,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<RewardSummary, HarnessError> {
    let lines = read_samples(&run.input)?;
    let plugins = load_plugins(host, &run.plugins)?;
    let samples: Vec<Sample> = lines
        .iter()
        .filter_map(|l| l.as_ref().ok().cloned())
        .collect();
    let scorer = Scorer::new(plugins, run.scorer);
    let started = Instant::now();
    let scores = scorer.score(&samples, progress)?;
    let scoring_time = started.elapsed();

    let names = output_keys(&scorer);
    let mut out: Box<dyn Write> = match &run.output {
        Some(p) => Box::new(std::io::BufWriter::new(fs_err::File::create(p).map_err(
            |source| HarnessError::Write {
                path: p.clone(),
                source,
            },
        )?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let write_err = |source| HarnessError::Write {
        path: run.output.clone().unwrap_or_else(|| "<stdout>".into()),
        source,
    };
    let mut summary = RewardSummary {
        lines: lines.len(),
        scoring_time,
        ..RewardSummary::default()
    };
    let mut per_plugin: Vec<(usize, f64)> = vec![(0, 0.0); names.len()];
    let mut total = 0.0;
    let mut scores = scores.into_iter();
    for (i, line) in lines.iter().enumerate() {
        let record = match line {
            Err(error) => {
                summary.malformed += 1;
                json!({"line": i + 1, "id": null, "reward": null, "error": error})
            }
            Ok(sample) => {
                let s = scores.next().expect("one score per parsed sample");
                if let Some(r) = s.reward {
                    summary.rewarded += 1;
                    total += r;
                }
                for (acc, p) in per_plugin.iter_mut().zip(&s.plugins) {
                    if let Some(r) = p.reward {
                        acc.0 += 1;
                        acc.1 += r;
                    }
                    match &p.outcome {
                        Err(f) => {
                            *summary.failures.entry(f.class).or_default() += 1;
                            summary.truncated += usize::from(f.truncated);
                        }
                        Ok(score) => summary.truncated += usize::from(score.truncated),
                    }
                }
                record(i + 1, sample, &s, &names)
            }
        };
        serde_json::to_writer(&mut out, &record).map_err(|e| write_err(e.into()))?;
        out.write_all(b"\n").map_err(write_err)?;
    }
    out.flush().map_err(write_err)?;
    summary.mean_reward = (summary.rewarded > 0).then(|| total / summary.rewarded as f64);
    summary.per_plugin = names
        .into_iter()
        .zip(per_plugin)
        .map(|(n, (count, sum))| (n, count, (count > 0).then(|| sum / count as f64)))
        .collect();
    Ok(summary)
}

/// Output keys of the plugins: their names, with `#2`, `#3`... when a name repeats.
fn output_keys(scorer: &Scorer) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    scorer
        .plugins()
        .iter()
        .map(|p| {
            let name = p.plugin.info().name.clone();
            let n = seen.entry(name.clone()).or_default();
            *n += 1;
            if *n == 1 { name } else { format!("{name}#{n}") }
        })
        .collect()
}

fn record(line: usize, sample: &Sample, s: &SampleScores, names: &[String]) -> Value {
    let mut plugins = Map::new();
    for (name, p) in names.iter().zip(&s.plugins) {
        let mut entry = Map::new();
        entry.insert("weight".into(), json!(p.weight));
        entry.insert("reward".into(), json!(p.reward));
        match &p.outcome {
            Ok(score) => {
                entry.insert("metrics".into(), json!(score.metrics));
                if let Some(m) = &score.message {
                    entry.insert("message".into(), json!(m));
                }
                if score.truncated {
                    entry.insert("truncated".into(), json!(true));
                }
            }
            Err(f) => {
                entry.insert("failure".into(), json!(f));
            }
        }
        plugins.insert(name.clone(), Value::Object(entry));
    }
    let failure = s
        .plugins
        .iter()
        .find_map(|p| p.outcome.as_ref().err().map(|f| f.class));
    json!({"line": line, "id": sample.id, "reward": s.reward, "failure": failure, "plugins": plugins})
}

impl RewardSummary {
    /// The summary as printed on stderr.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} lines: {} scored, {} malformed; combined reward for {} samples, mean {}\n",
            self.lines,
            self.lines - self.malformed,
            self.malformed,
            self.rewarded,
            fmt_mean(self.mean_reward)
        );
        for (name, n, mean) in &self.per_plugin {
            out.push_str(&format!(
                "  {name}: {n} rewards, mean {}\n",
                fmt_mean(*mean)
            ));
        }
        if self.failures.is_empty() {
            out.push_str("  no plugin failures\n");
        } else {
            let list: Vec<String> = self
                .failures
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            out.push_str(&format!("  plugin failures: {}\n", list.join(", ")));
        }
        if self.truncated > 0 {
            out.push_str(&format!(
                "  {} plugin results cut to the host's caps (marked in the output)\n",
                self.truncated
            ));
        }
        let scored = (self.lines - self.malformed) as f64;
        out.push_str(&format!(
            "  scored in {:.3} s ({:.0} samples/s)",
            self.scoring_time.as_secs_f64(),
            scored / self.scoring_time.as_secs_f64().max(1e-9)
        ));
        out
    }
}

fn fmt_mean(m: Option<f64>) -> String {
    m.map_or("n/a".into(), |m| format!("{m:.4}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_or_say_why() {
        let s = parse_line(r#"{"id":"a","output":"x","metadata":{"n":3,"s":"t"}}"#).unwrap();
        assert_eq!(s.completion, "x");
        assert_eq!(s.metadata["n"], "3");
        assert_eq!(s.metadata["s"], "t");
        let s = parse_line(r#"{"instance_id":"i","completion":"y"}"#).unwrap();
        assert_eq!(s.id, "i");
        assert_eq!(parse_line("").unwrap_err(), "empty line");
        assert_eq!(parse_line("[1]").unwrap_err(), "not a JSON object");
        assert!(
            parse_line(r#"{"id":"a"}"#)
                .unwrap_err()
                .contains("missing field `completion`")
        );
        assert!(
            parse_line("{oops")
                .unwrap_err()
                .contains("key must be a string")
        );
    }
}
