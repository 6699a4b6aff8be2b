//! Interrupts at random points: each long command is stopped by SIGINT or SIGTERM at a random
//! moment of its work (drawn within the time an uninterrupted run of it took), then run again
//! as the line it printed says, and what it leaves is checked against the rule every command
//! keeps (`docs/cli.md`, "Interrupts"):
//!
//! - it exits with the signal's status (130, 143) and its last line says what it kept and the
//!   command that continues (or it had finished, exit 0, before the signal came);
//! - its output file is the previous complete one (or none), never a torn one; a streamed
//!   output's lines so far are whole lines, `<output>.partial`, each one the uninterrupted run's;
//! - the command that continues ends with exactly the output of an uninterrupted run.
//!
//! The draws come from `SWERVE_INTERRUPT_SEED` when it is set, else from the clock; every
//! assertion names the seed, so a failure can be replayed.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use swerve_tests::cli::{command, signal_number, wait_until_catching, workspace_binary};

/// A small generator of the draws (xorshift64*), seeded once per test.
struct Draws {
    seed: u64,
    state: u64,
}

impl Draws {
    fn new() -> Draws {
        let seed = std::env::var("SWERVE_INTERRUPT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        Draws {
            seed,
            state: seed | 1,
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A moment within `span`.
    fn within(&mut self, span: Duration) -> Duration {
        let nanos = span.as_nanos().max(1) as u64;
        Duration::from_nanos(self.next() % nanos)
    }

    /// SIGINT or SIGTERM.
    fn signal(&mut self) -> &'static str {
        if self.next().is_multiple_of(2) {
            "INT"
        } else {
            "TERM"
        }
    }
}

/// Runs `bin args` in `dir` to its end, successfully; returns its output and how long it took.
fn run_to_end(bin: &Path, args: &[&str], dir: &Path) -> (Output, Duration) {
    let started = Instant::now();
    let out = command(bin)
        .args(args)
        .current_dir(dir)
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, started.elapsed())
}

/// What an interrupted run ended with.
struct Stopped {
    /// Whether the signal stopped it (else it had finished first, successfully).
    signalled: bool,
    /// Its last line on stderr.
    last_line: String,
}

/// Starts `bin args` in `dir`, sends it `signal` `after` it began catching it, and waits; checks
/// the exit status and the last line (the module documentation).
fn interrupt(
    bin: &Path,
    args: &[&str],
    dir: &Path,
    after: Duration,
    signal: &str,
    seed: u64,
) -> Stopped {
    let number = signal_number(signal);
    let child = command(bin)
        .args(args)
        .current_dir(dir)
        .env("RAYON_NUM_THREADS", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the binary");
    wait_until_catching(&child, number, &format!("{args:?}"));
    std::thread::sleep(after);
    // The process may have ended by now: kill then fails, and the run finished.
    let _ = std::process::Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let out = child.wait_with_output().expect("wait for the binary");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let last_line = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_owned();
    let context = format!("seed {seed}: SIG{signal} after {after:?} to {args:?}:\n{stderr}");
    // Seen with --nocapture: where the draws fell.
    eprintln!(
        "SIG{signal} after {after:?}: exit {:?}, {last_line}",
        out.status.code()
    );
    match out.status.code() {
        Some(0) => Stopped {
            signalled: false,
            last_line,
        },
        Some(code) => {
            assert_eq!(u32::try_from(code).ok(), Some(128 + number), "{context}");
            assert!(
                last_line.starts_with(&format!("interrupted by SIG{signal}")),
                "{context}"
            );
            Stopped {
                signalled: true,
                last_line,
            }
        }
        None => panic!("killed instead of stopping: {context}"),
    }
}

/// `path` with `suffix` added to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// What a stopped streaming command left: the output is `previous` (or absent when `None`), and
/// the partial file, if any, holds whole lines, each the complete run's line at its place.
fn check_left(output: &Path, previous: Option<&str>, complete: &str, context: &str) {
    match previous {
        Some(previous) => assert_eq!(
            fs_err::read_to_string(output).ok().as_deref(),
            Some(previous),
            "the previous complete output was changed: {context}"
        ),
        None => assert!(!output.exists(), "a torn output is left: {context}"),
    }
    let Ok(partial) = fs_err::read_to_string(with_suffix(output, ".partial")) else {
        return;
    };
    assert!(
        partial.is_empty() || partial.ends_with('\n'),
        "a torn line is left: {context}"
    );
    let lines: Vec<&str> = partial.lines().collect();
    let expected: Vec<&str> = complete.lines().take(lines.len()).collect();
    assert_eq!(lines, expected, "{context}");
}

/// Four stops of a command whose output `output` streams: over no output, then over the
/// finished one (which a stopped rerun must not destroy), twice each, each at a drawn moment
/// within `took` by a drawn signal. Each stop leaves what [`check_left`] checks and names the
/// partial file and the command that continues it (unless it came before the output was opened,
/// when nothing is kept); continued, the output is `complete` and no partial file is left.
fn stop_and_continue(
    bin: &Path,
    args: &[&str],
    dir: &Path,
    output: &Path,
    complete: &str,
    took: Duration,
    draws: &mut Draws,
) {
    let seed = draws.seed;
    let partial_file = with_suffix(output, ".partial");
    let partial_name = partial_file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for trial in 0..4 {
        let previous = (trial % 2 == 1).then_some(complete);
        match previous {
            Some(previous) => fs_err::write(output, previous).unwrap(),
            None => fs_err::remove_file(output).unwrap(),
        }
        let (after, signal) = (draws.within(took), draws.signal());
        let context = format!("seed {seed}: trial {trial}, SIG{signal} after {after:?}");
        let stopped = interrupt(bin, args, dir, after, signal, seed);
        if stopped.signalled {
            // Stopped before its output was opened (a signal in its first milliseconds), it
            // names nothing and has kept nothing.
            let named = stopped.last_line.contains(&partial_name)
                && stopped.last_line.contains("run the same command again");
            let partial = fs_err::read_to_string(&partial_file);
            assert!(
                named || partial.ok().is_none_or(|text| text.is_empty()),
                "{context}: {}",
                stopped.last_line
            );
            check_left(output, previous, complete, &context);
            run_to_end(bin, args, dir);
        }
        assert_eq!(
            fs_err::read_to_string(output).unwrap(),
            complete,
            "{context}"
        );
        assert!(!partial_file.exists(), "{context}");
    }
}

/// `harness reward` over a file of thousands of samples, written as it scores: stopped at
/// random points, first with no output yet, then over a finished output; each stop leaves whole
/// lines that the same command continues to the uninterrupted output.
#[test]
fn harness_reward_continues_where_it_stopped() {
    let harness = workspace_binary("harness");
    let mut draws = Draws::new();
    let dir = tempfile::tempdir().unwrap();
    let samples = fs_err::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../harness/samples/swerve-mini-completions.jsonl"),
    )
    .unwrap();
    let input: String = samples
        .lines()
        .cycle()
        .take(6000)
        .map(|l| format!("{l}\n"))
        .collect();
    fs_err::write(dir.path().join("samples.jsonl"), input).unwrap();
    let args = [
        "-q",
        "reward",
        "--plugin",
        "swe-rl",
        "--input",
        "samples.jsonl",
        "--output",
        "scored.jsonl",
        "--batch-size",
        "64",
    ];
    let output = dir.path().join("scored.jsonl");
    let (_, took) = run_to_end(&harness, &args, dir.path());
    let complete = fs_err::read_to_string(&output).unwrap();
    assert_eq!(complete.lines().count(), 6000);

    stop_and_continue(
        &harness,
        &args,
        dir.path(),
        &output,
        &complete,
        took,
        &mut draws,
    );
}

/// The tiny fixture model of the trainer's tests.
fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trainer/fixtures/tiny-qwen2")
}

/// `trainer predict` writes predictions as it makes them: stopped at random points it leaves
/// whole lines, and the same command continues them to the predictions of an uninterrupted run
/// (each row samples as its place in the dataset says).
#[test]
fn trainer_predict_continues_where_it_stopped() {
    let trainer = workspace_binary("trainer");
    let mut draws = Draws::new();
    let dir = tempfile::tempdir().unwrap();
    let tasks: String = (0..24)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({
                    "instance_id": format!("t__t-{i}"),
                    "problem_statement": format!("w{} w{}", i % 10, i % 7 + 10),
                    "code_context": {"a.py": "w1\n"},
                    "oracle_new_content": {"a.py": "w2\n"},
                })
            )
        })
        .collect();
    fs_err::write(dir.path().join("tasks.jsonl"), tasks).unwrap();
    let model = tiny_model();
    let args = [
        "-q",
        "predict",
        "--model",
        model.to_str().unwrap(),
        "--dataset",
        "tasks.jsonl",
        "--output",
        "predictions.jsonl",
        "--prompt-format",
        "bare",
        "--batch",
        "2",
        "--max-new-tokens",
        "12",
        "--temperature",
        "1.0",
        "--seed",
        "7",
    ];
    let output = dir.path().join("predictions.jsonl");
    let (_, took) = run_to_end(&trainer, &args, dir.path());
    let complete = fs_err::read_to_string(&output).unwrap();
    assert_eq!(complete.lines().count(), 24);

    stop_and_continue(
        &trainer,
        &args,
        dir.path(),
        &output,
        &complete,
        took,
        &mut draws,
    );
}

/// `trainer sft` takes a signal at the end of the step it falls in: it saves a checkpoint and
/// names the `--resume` that continues it; continued, the run's losses are those of an
/// uninterrupted run, step for step. A signal before training began (loading the model) leaves
/// nothing to continue, and the same command starts over.
#[test]
fn trainer_sft_saves_and_resumes_where_it_stopped() {
    let trainer = workspace_binary("trainer");
    let mut draws = Draws::new();
    let seed = draws.seed;
    let dir = tempfile::tempdir().unwrap();
    let pairs: String = (0..8)
        .map(|i| {
            format!(
                "{{\"prompt\": \"w{i} w{}\", \"completion\": \"w7 w7 w{}\"}}\n",
                i + 10,
                i + 20
            )
        })
        .collect();
    fs_err::write(dir.path().join("pairs.jsonl"), pairs).unwrap();
    let model = tiny_model();
    let args = |output: &'static str| {
        vec![
            "-q".to_owned(),
            "sft".to_owned(),
            "--model".to_owned(),
            model.to_str().unwrap().to_owned(),
            "--data".to_owned(),
            "pairs.jsonl".to_owned(),
            "--output".to_owned(),
            output.to_owned(),
            "--save-steps".to_owned(),
            "100".to_owned(),
            "--set".to_owned(),
            "max_steps=16".to_owned(),
            "--set".to_owned(),
            "per_device_train_batch_size=2".to_owned(),
        ]
    };
    let losses = |output: &str| -> Vec<String> {
        fs_err::read_to_string(dir.path().join(output).join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|line| {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                format!("{} {}", row["step"], row["loss"])
            })
            .collect()
    };
    let reference = args("reference");
    let reference: Vec<&str> = reference.iter().map(String::as_str).collect();
    let (_, took) = run_to_end(&trainer, &reference, dir.path());
    let complete = losses("reference");
    assert_eq!(complete.len(), 16);

    for (trial, output) in ["stopped-1", "stopped-2", "stopped-3", "stopped-4"]
        .into_iter()
        .enumerate()
    {
        let run = args(output);
        let run: Vec<&str> = run.iter().map(String::as_str).collect();
        let (after, signal) = (draws.within(took), draws.signal());
        let context = format!("seed {seed}: trial {trial}, SIG{signal} after {after:?}");
        let stopped = interrupt(&trainer, &run, dir.path(), after, signal, seed);
        if stopped.signalled {
            let resume = stopped
                .last_line
                .split("--resume ")
                .nth(1)
                .and_then(|rest| rest.split('`').next());
            match resume {
                Some(checkpoint) => {
                    assert!(
                        dir.path()
                            .join(checkpoint)
                            .join("swerve_run_state.json")
                            .is_file(),
                        "{context}: {}",
                        stopped.last_line
                    );
                    let mut resumed = run.clone();
                    resumed.extend(["--resume", checkpoint]);
                    run_to_end(&trainer, &resumed, dir.path());
                }
                // Stopped before training began: nothing kept, the command starts over.
                None => {
                    run_to_end(&trainer, &run, dir.path());
                }
            }
        }
        assert_eq!(losses(output), complete, "{context}");
    }
}
