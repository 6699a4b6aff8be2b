//! Scores every development vector natively and prints microseconds per call, for comparison
//! with `benches/python/bench_swerl.py` (which reports the same statistics for CPython).
//!
//! Usage: `cargo run --release -p swerve-swe-rl --example native_bench [-- ROUNDS [VECTORS]]`
//!
//! Each vector is scored in `ROUNDS` rounds (default 3) of calls lasting at least 20 ms; its
//! per-call time is the best round's. The summary gives the median, mean, p90 and max over the
//! vectors, and the mean over all calls of one pass through every vector.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Deserialize;
use swerve_swe_rl::{FileMap, search_replace_reward};

#[derive(Deserialize)]
struct Vector {
    code_context: FileMap,
    oracle_new_content: FileMap,
    output: String,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args
        .next()
        .map(|s| s.parse().expect("ROUNDS must be a positive integer"))
        .unwrap_or(3);
    let path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/swerl-dev-vectors.jsonl")
    });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let vectors: Vec<Vector> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("a vector"))
        .collect();

    let min_round = Duration::from_millis(20);
    let mut micros: Vec<f64> = vectors
        .iter()
        .map(|v| {
            let mut best = f64::INFINITY;
            for _ in 0..rounds.max(1) {
                let (start, mut calls) = (Instant::now(), 0u32);
                while calls < 3 || start.elapsed() < min_round {
                    let outcome =
                        search_replace_reward(&v.code_context, &v.oracle_new_content, &v.output);
                    std::hint::black_box(outcome);
                    calls += 1;
                }
                best = best.min(start.elapsed().as_secs_f64() * 1e6 / f64::from(calls));
            }
            best
        })
        .collect();
    micros.sort_by(f64::total_cmp);

    let n = micros.len();
    let median = if n % 2 == 1 {
        micros[n / 2]
    } else {
        (micros[n / 2 - 1] + micros[n / 2]) / 2.0
    };
    let mean = micros.iter().sum::<f64>() / n as f64;
    let p90 = micros[(0.9 * (n - 1) as f64) as usize];
    println!(
        "native swerve-swe-rl: median {median:.2} us/call, mean {mean:.2} us/call, p90 {p90:.2} us, max {:.2} us over {n} vectors",
        micros[n - 1]
    );
}
