//! Data-parallel ranks under Open MPI's `mpirun`: two ranks of `trainer grpo` and `trainer sft`
//! on the tiny fixture model give, step by step, the loss, metrics and final parameters of one
//! process with the same global batch; a rank that fails or is killed ends the job with an
//! error instead of leaving the other waiting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use safetensors::SafeTensors;
use swerve_trainer::report::metrics_log;

/// How close two ranks must come to one process: relative, on every metric and parameter.
const TOLERANCE: f64 = 1e-6;
/// Below this a metric's difference counts as equal whatever its relative size. Log-probs are
/// f32: near −5 their resolution is 4.8e-7, and a metric that sums them with weights of total
/// at most 1 into a near-cancellation (GRPO's loss of advantages that sum to zero; the KL of two
/// policies 1e-5 apart) carries rounding of that order in one process too.
const FLOOR: f64 = 1e-7;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2")
}

fn trainer() -> &'static str {
    env!("CARGO_BIN_EXE_trainer")
}

/// Whether `mpirun` is here (scripts/setup.sh installs Open MPI); skipped otherwise.
fn mpirun_available(what: &str) -> bool {
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        swerve_tests::skip(what, "no `mpirun` (scripts/setup.sh installs Open MPI)");
    }
    found
}

/// `mpirun -np <ranks>` of the trainer with `args` (as root where the tests run as root; one
/// kernel thread per rank; no binding, other tests share the cores).
fn mpirun(work: &Path, ranks: usize, args: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .args(["-np", &ranks.to_string(), trainer()])
    .args(args);
    mpi_env(&mut cmd, work);
    cmd
}

fn mpi_env(cmd: &mut Command, work: &Path) {
    cmd.current_dir(work)
        .env("RAYON_NUM_THREADS", "1")
        .env("SWERVE_PROGRESS_INTERVAL", "0")
        // Shared memory between the ranks without ptrace rights (containers).
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
}

fn single(work: &Path, args: &[&str]) -> Output {
    Command::new(trainer())
        .args(args)
        .current_dir(work)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("trainer runs")
}

fn succeeded(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `|a − b| / max(|a|, |b|)`, 0 when both are 0 (or both NaN, an undefined metric).
fn relative(a: f64, b: f64) -> f64 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0.0;
    }
    (a - b).abs() / a.abs().max(b.abs())
}

/// The largest relative difference between two runs' metrics of magnitude at least 1e-3, and
/// the largest absolute one of all, step by step and name by name, leaving out the wall-clock
/// ones; the runs must log the same steps and names, within [`TOLERANCE`] or [`FLOOR`].
fn metrics_difference(one: &Path, two: &Path) -> (f64, f64) {
    let a = metrics_log::read(&one.join("metrics.jsonl")).unwrap();
    let b = metrics_log::read(&two.join("metrics.jsonl")).unwrap();
    assert_eq!(a.len(), b.len(), "steps logged");
    let timing = ["step_time", "tokens_per_second", "allreduce_time"];
    let (mut worst, mut worst_abs) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.step, y.step);
        // The ranks also log the time their gradient sum took.
        assert!(y.get("allreduce_time").is_some_and(|t| t >= 0.0), "{y:?}");
        let names = |m: &metrics_log::StepMetrics| {
            m.values
                .keys()
                .filter(|n| *n != "allreduce_time")
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(names(x), names(y), "metric names at step {}", x.step);
        for (name, &value) in &x.values {
            if timing.contains(&name.as_str()) {
                continue;
            }
            let d = relative(value, y.values[name]);
            assert!(
                d <= TOLERANCE || (value - y.values[name]).abs() <= FLOOR,
                "step {} {name}: one process {value}, two ranks {}",
                x.step,
                y.values[name]
            );
            if value.abs() >= 1e-3 {
                worst = worst.max(d);
            }
            if !value.is_nan() {
                worst_abs = worst_abs.max((value - y.values[name]).abs());
            }
        }
    }
    (worst, worst_abs)
}

/// The largest difference between two checkpoints' parameters, relative to the largest
/// magnitude of each tensor.
fn params_difference(one: &Path, two: &Path) -> f64 {
    let read = |dir: &Path| fs_err::read(dir.join("model.safetensors")).unwrap();
    let (a, b) = (read(one), read(two));
    let (a, b) = (
        SafeTensors::deserialize(&a).unwrap(),
        SafeTensors::deserialize(&b).unwrap(),
    );
    let floats = |t: safetensors::tensor::TensorView<'_>| -> Vec<f32> {
        t.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let mut names = a.names();
    names.sort();
    let mut other = b.names();
    other.sort();
    assert_eq!(names, other);
    let mut worst = 0.0f64;
    for name in names {
        let (x, y) = (
            floats(a.tensor(name).unwrap()),
            floats(b.tensor(name).unwrap()),
        );
        let scale = x.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-12);
        let d = x
            .iter()
            .zip(&y)
            .map(|(p, q)| f64::from((p - q).abs() / scale))
            .fold(0.0, f64::max);
        worst = worst.max(d);
    }
    worst
}

/// Tasks and SFT pairs of unequal lengths in the fixture's word-level vocabulary.
fn write_data(work: &Path) {
    let tasks: String = (0..4)
        .map(|i| {
            let words: Vec<String> = (0..2 + i).map(|k| format!("w{}", 10 + i + k)).collect();
            serde_json::json!({
                "instance_id": format!("t__t-{i}"),
                "problem_statement": words.join(" "),
                "code_context": {"a.py": "w1\n"},
                "oracle_new_content": {"a.py": "w2\n"},
            })
            .to_string()
                + "\n"
        })
        .collect();
    fs_err::write(work.join("tasks.jsonl"), tasks).unwrap();
    let pairs: String = (0..8)
        .map(|i| {
            let completion: Vec<String> = (0..1 + i % 3).map(|k| format!("w{}", 20 + k)).collect();
            format!(
                "{{\"prompt\": \"w{i} w{}\", \"completion\": \"{}\"}}\n",
                i + 10,
                completion.join(" ")
            )
        })
        .collect();
    fs_err::write(work.join("pairs.jsonl"), pairs).unwrap();
}

/// `trainer grpo` on the fixture with `settings`, writing to `out`; `batch` rows per device.
fn grpo_args(out: &str, batch: usize, settings: &[&str]) -> Vec<String> {
    let model = fixture();
    let mut args: Vec<String> = [
        "grpo",
        "--model",
        model.to_str().unwrap(),
        "--dataset",
        "tasks.jsonl",
        "--plugin",
        "format",
        "--plugin",
        "rust-length",
        "--prompt-format",
        "bare",
        "--output",
        out,
        "--reward-jobs",
        "1",
        "--set",
        "max_steps=3",
        "--set",
        "num_generations=2",
        "--set",
        "max_completion_length=8",
        "--set",
    ]
    .map(str::to_owned)
    .to_vec();
    args.push(format!("per_device_train_batch_size={batch}"));
    for s in settings {
        args.extend(["--set".to_owned(), (*s).to_owned()]);
    }
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn two_ranks_train_as_one_process_with_the_same_global_batch() {
    if !mpirun_available("two ranks against one process") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    write_data(work);
    let mut report = BTreeMap::new();

    // GRPO (rewards that differ within groups: completions of different lengths): the default
    // `dapo` loss with a KL term, two micro-batches per step and data replayed after a step (old
    // log-probs); then `bnpo` with batch-scaled rewards, whose normaliser and std are the whole
    // batch's. Learning rates are TRL's defaults or near them: AdamW's first update is
    // lr·g/(|g| + ε), which turns the f32 rounding of gradient entries near ε (sums in another
    // order on two ranks) into parameter differences of up to ~lr·1e-3; at lr = 1e-3 that is
    // 9e-6 of a tensor's scale after one step, the same for any data-parallel trainer.
    // Then TRL 1.16's newer objective on top: GSPO's sequence ratios, two-sided clipping, the
    // off-policy mask, the entropy mask and bonus (a quantile and a token count of the whole
    // micro-batch, over both ranks) and GDPO's batch-standardised advantages.
    let configs: [(&str, &[&str]); 3] = [
        (
            "dapo",
            &[
                "beta=0.04",
                "gradient_accumulation_steps=2",
                "steps_per_generation=4",
                "learning_rate=1e-5",
            ],
        ),
        (
            "bnpo",
            &[
                "loss_type=\"bnpo\"",
                "scale_rewards=\"batch\"",
                "learning_rate=1e-5",
            ],
        ),
        (
            "gspo",
            &[
                "loss_type=\"grpo\"",
                "importance_sampling_level=\"sequence\"",
                "delta=1.5",
                "off_policy_mask_threshold=0.0",
                "top_entropy_quantile=0.5",
                "entropy_coef=0.01",
                "multi_objective_aggregation=\"normalize_then_sum\"",
                "beta=0.04",
                "gradient_accumulation_steps=2",
                "steps_per_generation=4",
                "learning_rate=1e-5",
            ],
        ),
    ];
    for (name, settings) in configs {
        let one = format!("grpo-{name}-1");
        let two = format!("grpo-{name}-2");
        succeeded(
            &format!("grpo {name}, one process"),
            single(work, &strs(&grpo_args(&one, 4, settings))),
        );
        let out = succeeded(
            &format!("grpo {name}, two ranks"),
            mpirun(work, 2, &strs(&grpo_args(&two, 2, settings)))
                .output()
                .unwrap(),
        );
        // Rank 0 alone prints the final checkpoint.
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        assert!(stdout.trim_end().ends_with("checkpoint-3"), "{stdout}");
        let metrics = metrics_difference(&work.join(&one), &work.join(&two));
        // Not a vacuous comparison: the rewards differ within groups, and the weights moved.
        let first = &metrics_log::read(&work.join(&one).join("metrics.jsonl")).unwrap()[0];
        assert!(first.get("reward_std").unwrap() > 0.0, "{first:?}");
        assert!(params_difference(&fixture(), &work.join(&one).join("checkpoint-3")) > 1e-5);
        let params = params_difference(
            &work.join(&one).join("checkpoint-3"),
            &work.join(&two).join("checkpoint-3"),
        );
        assert!(
            params <= TOLERANCE,
            "grpo {name}: parameters differ by {params:e}"
        );
        report.insert(format!("grpo {name}"), (metrics, params));
    }

    // SFT: 4 examples per step as one process, 2 per rank.
    succeeded("sft, one process", single(work, &strs(&sft("sft-1", 4))));
    succeeded(
        "sft, two ranks",
        mpirun(work, 2, &strs(&sft("sft-2", 2))).output().unwrap(),
    );
    let metrics = metrics_difference(&work.join("sft-1"), &work.join("sft-2"));
    let params = params_difference(
        &work.join("sft-1/checkpoint-3"),
        &work.join("sft-2/checkpoint-3"),
    );
    assert!(params <= TOLERANCE, "sft: parameters differ by {params:e}");
    assert!(params_difference(&fixture(), &work.join("sft-1/checkpoint-3")) > 1e-5);
    report.insert("sft".to_owned(), (metrics, params));
    for (run, ((relative, absolute), params)) in &report {
        eprintln!(
            "{run}: metrics within {relative:.1e} relative (those ≥ 1e-3) and {absolute:.1e} \
             absolute, parameters within {params:.1e} of each tensor's scale"
        );
    }

    // Resuming on another number of ranks is refused, saying why.
    let mut args = sft("sft-2", 4);
    args.extend(["--resume".to_owned(), "sft-2/checkpoint-3".to_owned()]);
    let out = single(work, &strs(&args));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("written by a run of 2 rank(s) and this run has 1"),
        "{stderr}"
    );
}

/// `trainer sft` on the fixture's pairs, writing to `out`; `batch` examples per device.
fn sft(out: &str, batch: usize) -> Vec<String> {
    let model = fixture();
    [
        "sft",
        "--model",
        model.to_str().unwrap(),
        "--data",
        "pairs.jsonl",
        "--output",
        out,
        "--set",
        "max_steps=3",
        "--set",
        "learning_rate=2e-5",
        "--set",
    ]
    .map(str::to_owned)
    .into_iter()
    .chain([format!("per_device_train_batch_size={batch}")])
    .collect()
}

/// `srun --mpi=pmix -n 2` on the local one-node cluster (scripts/slurm-local.sh): Slurm's own
/// launcher starts the ranks and its PMIx plugin wires them, no `mpirun`.
#[test]
fn slurm_srun_starts_two_ranks_that_train_as_one_process() {
    if !mpirun_available("srun -n 2") || !swerve_tests::slurm_up("srun -n 2") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    write_data(work);
    succeeded("sft, one process", single(work, &strs(&sft("sft-1", 4))));
    let mut cmd = Command::new("srun");
    cmd.args(["--mpi=pmix", "-n", "2", "--time=5", trainer()])
        .args(sft("sft-srun", 2));
    mpi_env(&mut cmd, work);
    succeeded("sft under srun -n 2", cmd.output().unwrap());
    let (relative, absolute) = metrics_difference(&work.join("sft-1"), &work.join("sft-srun"));
    let params = params_difference(
        &work.join("sft-1/checkpoint-3"),
        &work.join("sft-srun/checkpoint-3"),
    );
    assert!(params <= TOLERANCE, "parameters differ by {params:e}");
    eprintln!(
        "srun sft: metrics within {relative:.1e} relative, {absolute:.1e} absolute; parameters {params:.1e}"
    );
}

/// Waits for `child` at most `limit`; `None` (after killing it) when it is still running.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().ok();
    child.wait().ok();
    None
}

/// The processes whose parent is `parent` and whose command is the trainer.
fn trainer_children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces, so split after its `)`.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(parent) && head.ends_with("(trainer") {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_failed_or_killed_rank_ends_the_job() {
    if !mpirun_available("a failed rank ends the job") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    write_data(work);
    let limit = Duration::from_secs(120);

    // Rank 1 alone names a dataset that does not exist (MPMD: `A : B`): it fails while rank 0
    // is on its way to the first collective.
    let good = grpo_args("grpo-fail", 2, &["max_steps=100"]);
    let mut bad = good.clone();
    let dataset = bad.iter().position(|a| a == "tasks.jsonl").unwrap();
    bad[dataset] = "no-such-tasks.jsonl".to_owned();
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .args(["-np", "1", trainer()])
    .args(&good)
    .arg(":")
    .args(["-np", "1", trainer()])
    .args(&bad);
    mpi_env(&mut cmd, work);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status = wait_at_most(&mut child, limit).expect("the job ends, not hangs");
    let stderr = reader.join().unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("rank 1 of 2") && stderr.contains("no-such-tasks.jsonl"),
        "{stderr}"
    );

    // A rank killed mid-run (SIGKILL: no chance to say anything) ends the job too.
    let args = grpo_args("grpo-kill", 2, &["max_steps=100000"]);
    let mut child = mpirun(work, 2, &strs(&args))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let ranks = loop {
        let ranks = trainer_children(child.id());
        // Both ranks up and training (rank 0 has logged a step).
        if ranks.len() == 2 && work.join("grpo-kill/metrics.jsonl").is_file() {
            break ranks;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the job ended before a rank was killed"
        );
        assert!(started.elapsed() < limit, "the ranks did not start");
        std::thread::sleep(Duration::from_millis(100));
    };
    Command::new("kill")
        .args(["-KILL", &ranks[1].to_string()])
        .status()
        .unwrap();
    let status = wait_at_most(&mut child, limit).expect("the job ends, not hangs");
    assert!(!status.success());
}
