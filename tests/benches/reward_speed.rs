//! The reward benchmark, side by side in one run with one thread (`--jobs 1`):
//!
//! 1. SWE-RL reward compiled natively (no sandbox), per call;
//! 2. the same code as the `swe-rl` plugin in the host, per call with a fresh store per sample
//!    (strict) and in batches of 16 (the harness's default), one worker thread;
//! 3. the same reward in CPython with difflib (`benches/python/swerl_reward.py`);
//! 4. a trivial plugin's call on a fresh instance (store + instantiate + call).
//!
//! `cargo bench -p swerve-tests --bench reward_speed` — numbers go to docs/benchmarks.md.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use swerve_host::{
    BudgetOverrides, Host, HostConfig, Isolation, Sample, Scorer, ScorerConfig, WeightedPlugin,
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

    let host = Host::new(HostConfig::default()).expect("host");
    let swe_rl = host
        .load_reward(
            &swerve_host::bundled::expect("swe-rl"),
            &BudgetOverrides::default(),
        )
        .expect("swe-rl plugin");
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
            &swerve_host::bundled::expect("rust-length"),
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
