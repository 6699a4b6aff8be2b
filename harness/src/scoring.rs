//! `harness reward`: score a JSONL file of samples with weighted reward plugins and write one
//! JSON line per input line, in input order.
//!
//! Input lines are [`swerve_host::Sample`] objects (see `docs/plugins.md`, "Sample schema"); the
//! SWE-RL development vectors' lines (`output`, `code_context`, `oracle_new_content`) are valid
//! as they are, and metadata values that are not strings are kept as their JSON text. A line
//! that does not parse gets an output line with its `error` and does not stop the others.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
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
    /// Time from the first line read to the last result written (plugins loaded).
    pub scoring_time: Duration,
    /// How the output file was found: an earlier run's partial output continued (its lines
    /// count in the totals) or discarded.
    pub reopened: Option<swerve_cache::Reopened>,
}

/// A batch's input lines in order: each the index of its sample in the batch, or the reason it
/// is not one.
type BatchLines = Vec<Result<usize, String>>;

/// Reads the input a line at a time and groups it into batches of `batch` samples; a line that
/// is not a sample rides along with the batch it falls in. After an I/O error the iterator ends
/// and the error is in `error`.
struct Batches<'a, R> {
    reader: R,
    batch: usize,
    line: usize,
    buf: Vec<u8>,
    error: &'a mut Option<std::io::Error>,
}

impl<R: BufRead> Iterator for Batches<'_, R> {
    type Item = (BatchLines, Vec<Sample>);

    fn next(&mut self) -> Option<Self::Item> {
        let (mut lines, mut samples) = (Vec::new(), Vec::new());
        while samples.len() < self.batch {
            self.buf.clear();
            match self.reader.read_until(b'\n', &mut self.buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    *self.error = Some(e);
                    return None;
                }
            }
            self.line += 1;
            // As `str::lines` splits: the `\n` and a `\r` before it are not part of the line.
            let mut text = &self.buf[..];
            if let Some(rest) = text.strip_suffix(b"\n") {
                text = rest.strip_suffix(b"\r").unwrap_or(rest);
            }
            let parsed = std::str::from_utf8(text)
                .map_err(|e| format!("not UTF-8 ({e})"))
                .and_then(parse_line);
            lines.push(match parsed {
                Ok(sample) => {
                    samples.push(sample);
                    Ok(samples.len() - 1)
                }
                Err(e) => Err(format!("line {}: {e}", self.line)),
            });
        }
        (!lines.is_empty()).then_some((lines, samples))
    }
}

fn parse_line(line: &str) -> Result<Sample, String> {
    if line.trim().is_empty() {
        return Err("empty line".into());
    }
    // Most lines are samples as they are: parsed straight into one, without a `Value` between.
    // Lines that need the rewriting below (metadata values that are not strings, `instance_id`
    // for a missing `id`) or that do not parse at all take the general path, which also words
    // the error.
    if let Ok(sample) = serde_json::from_str::<Sample>(line)
        && (!sample.id.is_empty() || !line.contains("\"instance_id\""))
    {
        return Ok(sample);
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
pub(crate) fn load_plugins(
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
///
/// The input is read, scored and written as a stream: lines are parsed on this thread while
/// the scorer's workers score the batches before them and another thread writes the results
/// in input order, so the file is never held in memory whole.
///
/// An output file is written as `<output>.partial` and renamed when every line is scored
/// ([`swerve_cache::PartialLines`]): an interrupted run leaves the previous output as it was
/// and the lines scored so far, which the same command continues (the key is the input's path,
/// size and modification time, and the plugins and settings that change a line). Each batch's
/// lines reach the file in one write that a signal cannot cut short (it takes effect after the
/// write: [`swerve_interrupt::shielded`]), so a stop leaves whole lines; the line it prints says
/// where they are and how to continue
/// ([`swerve_interrupt::set_resume_hint`]).
pub fn run(
    host: &Host,
    run: &RewardRun,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<RewardSummary, HarnessError> {
    let read_err = |source| HarnessError::Read {
        path: run.input.clone(),
        source,
    };
    let input = fs_err::File::open(&run.input).map_err(read_err)?;
    let write_err = |source| HarnessError::Write {
        path: run.output.clone().unwrap_or_else(|| "<stdout>".into()),
        source,
    };
    // The output is opened before any plugin is loaded: a folder or an unwritable path is an
    // error at once, not after the scoring.
    let (mut out, reopened) = match &run.output {
        Some(path) => {
            let key = resume_key(run, &input).map_err(read_err)?;
            let (partial, reopened) =
                swerve_cache::PartialLines::open(path, &key).map_err(write_err)?;
            swerve_interrupt::set_resume_hint(Some(format!(
                "the lines scored so far are kept in {}; run the same command again to continue after them",
                partial.partial_path().display()
            )));
            (Output::File(partial), Some(reopened))
        }
        None => (Output::Stdout(std::io::stdout(), Vec::new()), None),
    };
    let plugins = load_plugins(host, &run.plugins)?;
    let scorer = Scorer::new(plugins, run.scorer);
    let names = output_keys(&scorer);
    let mut totals = Totals::new(names.len());
    let skip = match &out {
        Output::File(partial) => {
            for line in partial.kept_lines().map_err(write_err)? {
                let record: Value =
                    serde_json::from_str(&line).map_err(|e| write_err(std::io::Error::other(e)))?;
                totals.add(&record, &names);
            }
            partial.done()
        }
        Output::Stdout(..) => 0,
    };
    let mut line = skip;
    let write_batch = |lines: BatchLines, samples: Vec<Sample>, scores: Vec<SampleScores>| {
        for entry in lines {
            line += 1;
            let record = match entry {
                Err(error) => json!({"line": line, "id": null, "reward": null, "error": error}),
                Ok(i) => record(line, &samples[i], &scores[i], &names),
            };
            totals.add(&record, &names);
            let text = serde_json::to_vec(&record).map_err(|e| write_err(e.into()))?;
            out.write_line(&text);
        }
        out.flush().map_err(write_err)?;
        Ok::<_, HarnessError>(())
    };
    let mut io_error = None;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, input.into_file());
    // The std file, not fs-err's: std's reads fill the buffer without zeroing it first, where
    // a wrapper's default `read_buf` writes zeros over the whole megabyte before the first
    // line (a fifth of a one-line run's time).
    skip_lines(&mut reader, skip).map_err(read_err)?;
    let batches = Batches {
        reader,
        batch: run.scorer.batch_size.max(1),
        line: skip,
        buf: Vec::new(),
        error: &mut io_error,
    };
    let started = Instant::now();
    // The closure is moved in, so its borrows of the summary end with the call.
    scorer.score_stream(batches, write_batch, progress)??;
    if let Some(e) = io_error {
        return Err(read_err(e));
    }
    out.finish().map_err(write_err)?;
    swerve_interrupt::set_resume_hint(None);
    let mut summary = totals.summary(names);
    summary.scoring_time = started.elapsed();
    summary.reopened = reopened;
    Ok(summary)
}

/// Where the lines go.
enum Output {
    /// An output file, through its partial file.
    File(swerve_cache::PartialLines),
    /// Standard output, and the batch's lines not written yet.
    Stdout(std::io::Stdout, Vec<u8>),
}

impl Output {
    fn write_line(&mut self, line: &[u8]) {
        match self {
            Output::File(partial) => partial.write_line(line),
            Output::Stdout(_, pending) => {
                pending.extend_from_slice(line);
                pending.push(b'\n');
            }
        }
    }

    /// Hands the batch's lines to the system in one write (not synced: a kill keeps them, a
    /// power cut may not).
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::File(partial) => partial.flush(),
            Output::Stdout(out, pending) => {
                out.write_all(pending)?;
                pending.clear();
                out.flush()
            }
        }
    }

    fn finish(mut self) -> std::io::Result<()> {
        self.flush()?;
        match self {
            Output::File(partial) => partial.commit(),
            Output::Stdout(..) => Ok(()),
        }
    }
}

/// What must be equal for a run to continue another's partial output: the input (its path,
/// size and modification time) and everything that changes a line (the plugins, their weights
/// and budgets, the isolation and the fallbacks).
fn resume_key(run: &RewardRun, input: &fs_err::File) -> std::io::Result<String> {
    let meta = input.metadata()?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let path = std::path::absolute(&run.input)?;
    let key = json!({
        "input": path,
        "input_bytes": meta.len(),
        "input_modified_ns": modified.to_string(),
        "plugins": run.plugins.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>(),
        "scorer": format!("{:?}", run.scorer),
    });
    Ok(key.to_string())
}

/// Reads past the first `lines` lines of `reader` (those an earlier run scored).
fn skip_lines(reader: &mut impl BufRead, lines: usize) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for _ in 0..lines {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
    }
    Ok(())
}

/// The run's totals, accumulated from the output records (kept ones and new ones alike, so that
/// a continued run's summary covers the whole output).
struct Totals {
    lines: usize,
    malformed: usize,
    rewarded: usize,
    total: f64,
    per_plugin: Vec<(usize, f64)>,
    failures: BTreeMap<FailureClass, usize>,
    truncated: usize,
}

impl Totals {
    fn new(plugins: usize) -> Totals {
        Totals {
            lines: 0,
            malformed: 0,
            rewarded: 0,
            total: 0.0,
            per_plugin: vec![(0, 0.0); plugins],
            failures: BTreeMap::new(),
            truncated: 0,
        }
    }

    /// Counts one output record (see [`record`]).
    fn add(&mut self, record: &Value, names: &[String]) {
        self.lines += 1;
        if record.get("error").is_some_and(|e| !e.is_null()) {
            self.malformed += 1;
            return;
        }
        if let Some(r) = record["reward"].as_f64() {
            self.rewarded += 1;
            self.total += r;
        }
        for (acc, name) in self.per_plugin.iter_mut().zip(names) {
            let plugin = &record["plugins"][name];
            if let Some(r) = plugin["reward"].as_f64() {
                acc.0 += 1;
                acc.1 += r;
            }
            let failure = &plugin["failure"];
            if let Some(class) = failure["class"].as_str().and_then(FailureClass::parse) {
                *self.failures.entry(class).or_default() += 1;
            }
            if failure["truncated"] == json!(true) || plugin["truncated"] == json!(true) {
                self.truncated += 1;
            }
        }
    }

    fn summary(self, names: Vec<String>) -> RewardSummary {
        RewardSummary {
            lines: self.lines,
            malformed: self.malformed,
            rewarded: self.rewarded,
            mean_reward: (self.rewarded > 0).then(|| self.total / self.rewarded as f64),
            per_plugin: names
                .into_iter()
                .zip(self.per_plugin)
                .map(|(n, (count, sum))| (n, count, (count > 0).then(|| sum / count as f64)))
                .collect(),
            failures: self.failures,
            truncated: self.truncated,
            scoring_time: Duration::ZERO,
            reopened: None,
        }
    }
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
        match self.reopened {
            Some(swerve_cache::Reopened::Continued { lines }) => out.push_str(&format!(
                "  continued an interrupted run: its first {lines} lines were kept\n"
            )),
            Some(swerve_cache::Reopened::Restarted) => out.push_str(
                "  an interrupted run's partial output of another input or other settings was discarded\n",
            ),
            _ => {}
        }
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
    fn batches_count_samples_and_carry_bad_lines_in_order() {
        let input: &[u8] = b"{\"id\":\"a\",\"output\":\"x\"}\r\n\n\xff\xfe\n[1]\n{\"id\":\"b\",\"output\":\"y\"}\n{\"id\":\"c\",\"output\":\"z\"}";
        let mut error = None;
        let batches: Vec<_> = Batches {
            reader: input,
            batch: 2,
            line: 0,
            buf: Vec::new(),
            error: &mut error,
        }
        .collect();
        assert!(error.is_none());
        assert_eq!(batches.len(), 2);
        let (lines, samples) = &batches[0];
        let ids: Vec<&str> = samples.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(lines[0], Ok(0));
        assert_eq!(lines[1], Err("line 2: empty line".to_owned()));
        assert!(
            lines[2]
                .as_ref()
                .unwrap_err()
                .starts_with("line 3: not UTF-8")
        );
        assert_eq!(lines[3], Err("line 4: not a JSON object".to_owned()));
        assert_eq!(lines[4], Ok(1));
        // The last line has no line break.
        let (lines, samples) = &batches[1];
        assert_eq!(
            (lines.as_slice(), samples[0].id.as_str()),
            (&[Ok(0)][..], "c")
        );
    }

    #[test]
    fn lines_parse_or_say_why() {
        let s = parse_line(r#"{"id":"a","output":"x","metadata":{"n":3,"s":"t"}}"#).unwrap();
        assert_eq!(s.completion, "x");
        assert_eq!(s.metadata["n"], "3");
        assert_eq!(s.metadata["s"], "t");
        let s = parse_line(r#"{"instance_id":"i","completion":"y"}"#).unwrap();
        assert_eq!(s.id, "i");
        let s = parse_line(r#"{"id":"","instance_id":"i","completion":"y"}"#).unwrap();
        assert_eq!(s.id, "", "only a missing id is taken from `instance_id`");
        let s = parse_line(r#"{"id":"a","instance_id":"i","completion":"y"}"#).unwrap();
        assert_eq!(s.id, "a", "an id is kept");
        let s = parse_line(r#"{"id":"a","output":"x","code_context":{"f.py":"1"},"extra":[1]}"#)
            .unwrap();
        assert_eq!(
            (s.completion.as_str(), s.code_context["f.py"].as_str()),
            ("x", "1")
        );
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
