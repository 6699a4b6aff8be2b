//! The reward benchmark, side by side in one run with one thread (`--jobs 1`):
//!
//! 1. SWE-RL reward compiled natively (no sandbox), per call;
//! 2. the same code as the `swe-rl` plugin in the host, per call with a fresh store per sample
//!    (strict) and in batches of 16 (the harness's default), one worker thread;
//! 3. the same reward in CPython with difflib (`benches/python/swerl_reward.py`);
//! 4. a trivial plugin's call on a fresh instance (store + instantiate + call).
//!
//! Then the same on two sets the code was never tuned on, each of 500 cases written by
//! `benches/python/gen_swerl_cases.py` (seeded, so every run scores the same bytes): the default
//! set of files up to 250 KB, and the `--small` set of files of a few lines, where a whole
//! process is mostly what surrounds the scoring. Each set is scored as one pass natively and
//! through the plugin in this process, and as whole processes: `harness reward --plugin swe-rl
//! --jobs 1` (the release binary, when built) against CPython scoring the same file
//! (`benches/python/swerl_file.py`). Every reward of the four must be bit-identical. With the
//! small set comes the time from spawning `harness reward` on one small case to its result on
//! standard output (median of 50 processes).
//!
//! ```text
//! cargo build --release -p swerve-harness --bin harness
//! cargo bench -p swerve-tests --bench reward_speed [-- --only dev|generated|small]
//! ```
//!
//! Numbers go to docs/benchmarks.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use swerve_host::{
    BudgetOverrides, Host, HostConfig, Isolation, RewardPlugin, Sample, Scorer, ScorerConfig,
    WeightedPlugin,
};
use swerve_tests::{DevVector, dev_vectors, repo_root};

/// Per-vector time: best of 3 rounds, each at least 20 ms (the CPython script's method).
fn per_call(mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        let mut n = 0u32;
        while n < 3 || start.elapsed() < Duration::from_millis(20) {
            f();
            n += 1;
        }
        best = best.min(start.elapsed().as_secs_f64() / n as f64);
    }
    best * 1e6
}

fn stats(mut micros: Vec<f64>) -> (f64, f64) {
    micros.sort_by(f64::total_cmp);
    (
        micros[micros.len() / 2],
        micros.iter().sum::<f64>() / micros.len() as f64,
    )
}

fn sample(v: &DevVector) -> Sample {
    Sample {
        id: v.id.clone(),
        completion: v.output.clone(),
        code_context: v.code_context.clone(),
        oracle_new_content: v.oracle_new_content.clone(),
        ..Sample::default()
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `--only NAME` picks one part.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only = args.iter().position(|a| a == "--only").map(|i| {
        args.get(i + 1)
            .expect("--only takes dev, generated or small")
            .as_str()
    });
    if let Some(o) = only {
        assert!(
            ["dev", "generated", "small"].contains(&o),
            "--only {o}: expected dev, generated or small"
        );
    }
    let part = |name: &str| only.is_none_or(|o| o == name);
    // Every figure below holds for this CPU only (docs/benchmarks.md).
    println!("CPU: {}", swerve_trainer::runtime::cpu_label());
    let host = Host::new(HostConfig::default()).expect("host");
    let swe_rl = host
        .load_reward(
            &swerve_host::bundled::require("swe-rl").unwrap(),
            &BudgetOverrides::default(),
        )
        .expect("swe-rl plugin");
    if part("dev") {
        dev_vector_set(&host, &swe_rl);
    }
    if part("generated") {
        generated_set(&swe_rl, GeneratedSet::Default);
    }
    if part("small") {
        generated_set(&swe_rl, GeneratedSet::Small);
    }
}

fn dev_vector_set(host: &Host, swe_rl: &RewardPlugin) {
    let vectors = dev_vectors();
    let samples: Vec<Sample> = vectors.iter().map(sample).collect();

    let native: Vec<f64> = vectors
        .iter()
        .map(|v| {
            per_call(|| {
                black_box(swerve_swe_rl::search_replace_reward(
                    &v.code_context,
                    &v.oracle_new_content,
                    &v.output,
                ));
            })
        })
        .collect();

    for (s, v) in samples.iter().zip(&vectors) {
        let r = swe_rl
            .score(std::slice::from_ref(s), Isolation::Strict)
            .pop()
            .unwrap()
            .expect("scored");
        assert!(
            v.accepted_bits().contains(&r.reward.unwrap().to_bits()),
            "{}: reward differs",
            v.id
        );
    }
    let strict: Vec<f64> = samples
        .iter()
        .map(|s| {
            per_call(|| {
                black_box(swe_rl.score(std::slice::from_ref(s), Isolation::Strict));
            })
        })
        .collect();
    // Batch throughput with one thread, as `harness reward --jobs 1` runs it.
    let scorer = Scorer::new(
        vec![WeightedPlugin {
            plugin: swe_rl.clone(),
            weight: 1.0,
        }],
        ScorerConfig {
            jobs: 1,
            ..ScorerConfig::default()
        },
    );
    let mut best_batch = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        black_box(scorer.score(&samples, &|_| {}).expect("scored"));
        best_batch = best_batch.min(start.elapsed().as_secs_f64() * 1e6 / samples.len() as f64);
    }
    let mut best_native_pass = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        for v in &vectors {
            black_box(swerve_swe_rl::search_replace_reward(
                &v.code_context,
                &v.oracle_new_content,
                &v.output,
            ));
        }
        best_native_pass =
            best_native_pass.min(start.elapsed().as_secs_f64() * 1e6 / vectors.len() as f64);
    }

    let trivial = host
        .load_reward(
            &swerve_host::bundled::require("rust-length").unwrap(),
            &BudgetOverrides::default(),
        )
        .expect("rust-length");
    let empty = [Sample {
        id: "t".into(),
        ..Sample::default()
    }];
    let mut calls: Vec<f64> = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        let start = Instant::now();
        black_box(trivial.score(&empty, Isolation::Strict));
        calls.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let (trivial_median, trivial_mean) = stats(calls);

    let python = Command::new("python3")
        .arg(repo_root().join("benches/python/bench_swerl.py"))
        .output();
    let cpython = match python {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let grab = |key: &str| -> Option<f64> {
                let rest = &text[text.find(key)? + key.len()..];
                rest.split_whitespace().next()?.parse().ok()
            };
            grab("median ").zip(grab("mean "))
        }
        Ok(o) => panic!(
            "bench_swerl.py failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run python3: {e}"),
    };

    let (nat_med, nat_mean) = stats(native);
    let (strict_med, strict_mean) = stats(strict);
    println!(
        "SWE-RL reward over {} development vectors, one thread (us per call)",
        vectors.len()
    );
    println!("{:<44} {:>10} {:>10}", "", "median", "mean");
    println!(
        "{:<44} {:>10.1} {:>10.1}",
        "native Rust (no sandbox)", nat_med, nat_mean
    );
    println!(
        "{:<44} {:>10.1} {:>10.1}",
        "swe-rl plugin, fresh store per sample", strict_med, strict_mean
    );
    println!(
        "{:<44} {:>10} {:>10.1}",
        "swe-rl plugin, batches of 16 (harness -j1)", "", best_batch
    );
    println!(
        "{:<44} {:>10} {:>10.1}",
        "native Rust, one pass over all vectors", "", best_native_pass
    );
    if let Some((py_med, py_mean)) = cpython {
        println!(
            "{:<44} {:>10.1} {:>10.1}",
            "CPython difflib", py_med, py_mean
        );
        println!(
            "speed-up over CPython (median, per call): native {:.1}x, plugin {:.1}x",
            py_med / nat_med,
            py_med / strict_med
        );
        println!(
            "speed-up over CPython (mean): plugin batches {:.1}x",
            py_mean / best_batch
        );
    }
    println!(
        "sandbox overhead: fresh store per sample {:+.1}% (median), batches {:+.1}% (mean over a pass)",
        (strict_med / nat_med - 1.0) * 100.0,
        (best_batch / best_native_pass - 1.0) * 100.0
    );
    println!(
        "trivial plugin call on a fresh instance: median {trivial_median:.1} us, mean {trivial_mean:.1} us"
    );
}

/// Cases in each generated set, and its seed.
const GENERATED_CASES: usize = 500;
const GENERATED_SEED: u64 = 16;

/// Processes spawned to time `harness reward`'s start on one small case.
const START_RUNS: usize = 50;

/// Which of the generator's sets.
#[derive(Clone, Copy, PartialEq)]
enum GeneratedSet {
    /// Files from a dozen lines to 250 KB.
    Default,
    /// Files of a few lines (`--small`).
    Small,
}

/// The fastest of `rounds` runs of `f`, in seconds.
fn best_of(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Wall seconds of `cmd`, which must succeed.
fn timed(cmd: &mut Command) -> f64 {
    let start = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let secs = start.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    secs
}

/// The `reward` of every line of a results file, in line order.
fn rewards_of(path: &Path) -> Vec<Option<f64>> {
    let text = std::fs::read_to_string(path).expect("results file");
    let mut rows: Vec<(u64, Option<f64>)> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON result line");
            (v["line"].as_u64().expect("line"), v["reward"].as_f64())
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter().map(|r| r.1).collect()
}

/// Asserts that `who` scored every case and gave the native reward, bit for bit, on each.
fn assert_same_rewards(who: &str, got: &[Option<f64>], native: &[f64]) {
    assert_eq!(got.len(), native.len(), "{who} scored every line");
    for (i, (got, want)) in got.iter().zip(native).enumerate() {
        assert_eq!(
            got.map(f64::to_bits),
            Some(want.to_bits()),
            "line {}: {who} and native rewards differ",
            i + 1
        );
    }
}

/// The release `harness` binary next to this benchmark's target folder, if built.
fn release_harness() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let bin = target.join("release/harness");
    bin.is_file().then_some(bin)
}

/// From spawning `harness reward` on the one-line `input` to its result line on standard
/// output, and to the process's exit, in seconds; the result line is returned too.
fn time_to_first_result(bin: &Path, input: &Path) -> (f64, f64, String) {
    use std::io::BufRead;
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args([
            "reward", "--quiet", "--plugin", "swe-rl", "--jobs", "1", "--input",
        ])
        .arg(input)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("harness output");
    let first = start.elapsed().as_secs_f64();
    assert!(child.wait().expect("harness exits").success());
    (first, start.elapsed().as_secs_f64(), line)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn generated_set(swe_rl: &RewardPlugin, set: GeneratedSet) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let cases = dir.path().join("cases.jsonl");
    let mut generate = Command::new("python3");
    generate
        .arg(repo_root().join("benches/python/gen_swerl_cases.py"))
        .args(["--cases", &GENERATED_CASES.to_string()])
        .args(["--seed", &GENERATED_SEED.to_string()])
        .arg(&cases);
    if set == GeneratedSet::Small {
        generate.arg("--small");
    }
    timed(&mut generate);
    let bytes = std::fs::metadata(&cases).expect("cases").len();
    let samples: Vec<Sample> = std::fs::read_to_string(&cases)
        .expect("cases")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a generated case"))
        .collect();

    let native_rewards: Vec<f64> = samples
        .iter()
        .map(|s| {
            swerve_swe_rl::search_replace_reward(
                &s.code_context,
                &s.oracle_new_content,
                &s.completion,
            )
            .reward
        })
        .collect();
    let native = best_of(3, || {
        for s in &samples {
            black_box(swerve_swe_rl::search_replace_reward(
                &s.code_context,
                &s.oracle_new_content,
                &s.completion,
            ));
        }
    });

    let scorer = Scorer::new(
        vec![WeightedPlugin {
            plugin: swe_rl.clone(),
            weight: 1.0,
        }],
        ScorerConfig {
            jobs: 1,
            ..ScorerConfig::default()
        },
    );
    let scored = scorer.score(&samples, &|_| {}).expect("scored");
    for ((s, got), want) in samples.iter().zip(&scored).zip(&native_rewards) {
        assert_eq!(
            got.reward.map(f64::to_bits),
            Some(want.to_bits()),
            "{}: plugin and native rewards differ",
            s.id
        );
    }
    let plugin = best_of(3, || {
        black_box(scorer.score(&samples, &|_| {}).expect("scored"));
    });

    let bin = release_harness();
    let harness = bin.as_ref().map(|bin| {
        let out = dir.path().join("harness.jsonl");
        let secs = best_of(3, || {
            timed(
                Command::new(bin)
                    .args(["reward", "--plugin", "swe-rl", "--jobs", "1", "--input"])
                    .arg(&cases)
                    .arg("--output")
                    .arg(&out),
            );
        });
        assert_same_rewards("harness", &rewards_of(&out), &native_rewards);
        secs
    });
    // One process per small case, for the set's first START_RUNS cases.
    let start = bin
        .as_ref()
        .filter(|_| set == GeneratedSet::Small)
        .map(|bin| {
            let text = std::fs::read_to_string(&cases).expect("cases");
            let (mut firsts, mut wholes) = (Vec::new(), Vec::new());
            for (i, line) in text.lines().take(START_RUNS).enumerate() {
                let one = dir.path().join("one.jsonl");
                std::fs::write(&one, format!("{line}\n")).expect("one case");
                let (first, whole, result) = time_to_first_result(bin, &one);
                let v: serde_json::Value =
                    serde_json::from_str(&result).expect("a JSON result line");
                let want = native_rewards[i];
                assert_eq!(
                    v["reward"].as_f64().map(f64::to_bits),
                    Some(want.to_bits()),
                    "case {}: harness and native rewards differ",
                    i + 1
                );
                firsts.push(first);
                wholes.push(whole);
            }
            (median(firsts), median(wholes))
        });
    let py_out = dir.path().join("cpython.jsonl");
    let cpython = timed(
        Command::new("python3")
            .arg(repo_root().join("benches/python/swerl_file.py"))
            .arg(&cases)
            .arg(&py_out),
    );
    assert_same_rewards("CPython", &rewards_of(&py_out), &native_rewards);

    println!();
    println!(
        "SWE-RL reward over {GENERATED_CASES} generated {}cases (seed {GENERATED_SEED}, {:.1} MB), one thread, \
         all rewards bit-identical (seconds for the whole set)",
        if set == GeneratedSet::Small {
            "small "
        } else {
            ""
        },
        bytes as f64 / 1e6
    );
    println!(
        "{:<44} {:>10}",
        "native Rust, one pass",
        format!("{native:.3}")
    );
    println!(
        "{:<44} {:>10} {:>8.2}x native",
        "swe-rl plugin, batches of 16, in process",
        format!("{plugin:.3}"),
        plugin / native
    );
    match harness {
        Some(h) => println!(
            "{:<44} {:>10} {:>8.1}x faster than CPython",
            "harness reward --jobs 1, whole process",
            format!("{h:.3}"),
            cpython / h
        ),
        None => println!(
            "harness reward: skipped (no target/release/harness; cargo build --release -p swerve-harness --bin harness)"
        ),
    }
    println!(
        "{:<44} {:>10}",
        "CPython difflib, whole process",
        format!("{cpython:.3}")
    );
    if let Some((first, whole)) = start {
        println!(
            "harness reward on one small case, median of {START_RUNS} processes: first result {:.2} ms \
             after the spawn, exit {:.2} ms",
            first * 1e3,
            whole * 1e3
        );
    }
}
