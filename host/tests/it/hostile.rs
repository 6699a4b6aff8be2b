//! The hostile-plugin suite: every attack is contained, classified, and the host keeps serving.

use std::time::{Duration, Instant};

use crate::support::{hostile, sample};
use swerve_host::{
    BudgetOverrides, FailureClass, Host, HostConfig, Isolation, RewardPlugin, Sample,
};

fn host() -> Host {
    Host::new(HostConfig::default()).unwrap()
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Runs `attack` alone and checks its class, then checks a benign sample still scores.
fn check(plugin: &RewardPlugin, attack: &str, class: FailureClass) -> swerve_host::Failure {
    let out = plugin.score(&[sample(attack, Some(attack))], Isolation::Strict);
    let failure = out[0].clone().expect_err(attack);
    assert_eq!(failure.class, class, "{attack}: {failure:?}");
    let ok = plugin.score(&[sample("after", None)], Isolation::Strict);
    assert_eq!(
        ok[0].as_ref().unwrap().reward,
        Some(1.0),
        "host still serves after {attack}"
    );
    failure
}

#[test]
fn infinite_loop_runs_out_of_fuel_deterministically() {
    let host = host();
    let plugin = hostile(&host);
    let a = check(&plugin, "loop", FailureClass::Timeout);
    let b = check(&plugin, "loop", FailureClass::Timeout);
    assert!(a.message.contains("fuel"), "{}", a.message);
    assert_eq!(a.fuel_consumed, 200_000_000);
    assert_eq!(a, b, "the same plugin and input time out identically");
}

#[test]
fn wall_clock_backstop_stops_a_loop_that_has_fuel_left() {
    let host = host();
    let overrides = BudgetOverrides {
        fuel: Some(u64::MAX / 4),
        wall_clock: Some(Duration::from_millis(200)),
        ..BudgetOverrides::default()
    };
    let plugin = host
        .load_reward(
            &swerve_host::bundled::require("hostile").unwrap(),
            &overrides,
        )
        .unwrap();
    let started = Instant::now();
    let out = plugin.score(&[sample("loop", Some("loop"))], Isolation::Strict);
    let f = out[0].clone().unwrap_err();
    assert_eq!(f.class, FailureClass::Timeout);
    assert_eq!(f.message, "wall-clock budget exhausted");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn sleeping_does_not_block_the_host() {
    let host = host();
    let plugin = hostile(&host);
    let started = Instant::now();
    let out = plugin.score(&[sample("sleep", Some("sleep"))], Isolation::Strict);
    let score = out[0]
        .clone()
        .expect("a sleep completes at once: time stands still");
    assert_eq!(score.reward, Some(1.0));
    assert_eq!(score.metrics.get("elapsed_nanos"), Some(&0.0));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn allocating_4_gib_is_out_of_memory_and_host_memory_stays_bounded() {
    let host = host();
    let plugin = hostile(&host);
    let before = rss_bytes();
    let f = check(&plugin, "alloc-4g", FailureClass::OutOfMemory);
    assert!(f.message.contains("memory limit"), "{}", f.message);
    let f = check(&plugin, "alloc-huge", FailureClass::OutOfMemory);
    assert!(!f.message.is_empty());
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown < 256 << 20, "host RSS grew by {grown} bytes");
}

#[test]
fn unbounded_recursion_is_a_trap() {
    let host = host();
    let f = check(&hostile(&host), "recurse", FailureClass::Trap);
    assert!(!f.message.is_empty());
}

#[test]
fn panic_is_a_trap_with_the_panic_message() {
    let host = host();
    let f = check(&hostile(&host), "panic", FailureClass::Trap);
    assert!(
        f.stderr_tail
            .contains("hostile plugin panicked on purpose for sample panic"),
        "{f:?}"
    );
}

#[test]
fn exit_is_a_trap() {
    let host = host();
    check(&hostile(&host), "exit", FailureClass::Trap);
}

#[test]
fn plugin_error_and_contract_violations() {
    let host = host();
    let plugin = hostile(&host);
    let f = check(&plugin, "error", FailureClass::PluginError);
    assert_eq!(f.message, "sample error is not scorable");
    let f = check(&plugin, "nan", FailureClass::InvalidPlugin);
    assert!(f.message.contains("not finite"), "{}", f.message);
}

#[test]
fn huge_output_is_bounded_and_does_not_fail_the_plugin() {
    let host = host();
    let plugin = hostile(&host);
    let before = rss_bytes();
    let out = plugin.score(&[sample("output", Some("output"))], Isolation::Strict);
    assert_eq!(out[0].as_ref().unwrap().reward, Some(0.5));
    assert!(rss_bytes().saturating_sub(before) < 64 << 20);
}

#[test]
fn probes_see_no_files_environment_network_or_real_clock() {
    let host = host();
    let plugin = hostile(&host);
    let metric = |attack: &str, name: &str| -> f64 {
        let out = plugin.score(&[sample(attack, Some(attack))], Isolation::Strict);
        out[0]
            .as_ref()
            .unwrap_or_else(|e| panic!("{attack}: {e:?}"))
            .metrics[name]
    };
    assert_eq!(metric("files", "paths_readable"), 0.0);
    assert_eq!(metric("env", "env_vars"), 0.0);
    assert_eq!(metric("env", "args"), 0.0);
    assert_eq!(metric("network", "connections"), 0.0);
    assert_eq!(metric("network", "dns"), 0.0);
    assert_eq!(
        metric("clock", "wall_clock_secs"),
        swerve_host::FIXED_WALL_CLOCK.as_secs_f64()
    );
    assert_eq!(metric("clock", "elapsed_nanos"), 0.0);
    let r1 = metric("random", "hash_low_bits");
    let other = hostile(&host);
    let out = other.score(&[sample("random", Some("random"))], Isolation::Strict);
    assert_eq!(
        out[0].as_ref().unwrap().metrics["hash_low_bits"],
        r1,
        "randomness is fixed"
    );
}

#[test]
fn a_mixed_batch_still_scores_every_benign_sample() {
    let host = host();
    let plugin = hostile(&host);
    let attacks = [
        None,
        Some("loop"),
        None,
        Some("panic"),
        None,
        Some("alloc-4g"),
        Some("error"),
        None,
    ];
    let samples: Vec<Sample> = attacks
        .iter()
        .enumerate()
        .map(|(i, a)| sample(&format!("s{i}"), *a))
        .collect();
    for isolation in [Isolation::Batch, Isolation::Strict] {
        let out = plugin.score(&samples, isolation);
        assert_eq!(out.len(), samples.len());
        let classes: Vec<Option<FailureClass>> = out
            .iter()
            .map(|o| o.as_ref().err().map(|f| f.class))
            .collect();
        assert_eq!(
            classes,
            [
                None,
                Some(FailureClass::Timeout),
                None,
                Some(FailureClass::Trap),
                None,
                Some(FailureClass::OutOfMemory),
                Some(FailureClass::PluginError),
                None
            ],
            "{isolation:?}"
        );
        for (o, a) in out.iter().zip(attacks) {
            if a.is_none() {
                assert_eq!(o.as_ref().unwrap().reward, Some(1.0));
            }
        }
    }
}

#[test]
fn plugins_are_shared_across_threads() {
    let host = host();
    let plugin = hostile(&host);
    std::thread::scope(|s| {
        for t in 0..4 {
            let plugin = plugin.clone();
            std::thread::Builder::new()
                .stack_size(swerve_host::WORKER_STACK_BYTES)
                .spawn_scoped(s, move || {
                    let attack = if t % 2 == 0 { Some("panic") } else { None };
                    for _ in 0..20 {
                        let out = plugin.score(&[sample("t", attack)], Isolation::Strict);
                        assert_eq!(out[0].is_ok(), attack.is_none());
                    }
                })
                .unwrap();
        }
    });
}
