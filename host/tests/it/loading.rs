//! Loading: what is refused and why, the precompile cache, and `inspect`.

use std::time::Instant;

use swerve_host::{BudgetOverrides, Host, HostConfig, HostError, World};

fn host() -> Host {
    Host::new(HostConfig::default()).unwrap()
}

fn invalid_reason(result: Result<impl Sized, HostError>) -> String {
    match result {
        Err(HostError::InvalidPlugin { reason, .. }) => reason,
        Err(other) => panic!("expected invalid_plugin, got {other}"),
        Ok(_) => panic!("expected invalid_plugin, the plugin loaded"),
    }
}

#[test]
fn refuses_imports_the_host_does_not_grant() {
    let r = invalid_reason(host().load_reward(
        &swerve_host::bundled::require("hostile-imports").unwrap(),
        &BudgetOverrides::default(),
    ));
    assert!(r.contains("evil:exfil/net"), "{r}");
    assert!(r.contains("does not grant"), "{r}");
}

#[test]
fn refuses_core_modules_native_code_and_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "core.wasm",
            &b"\0asm\x01\0\0\0"[..],
            "core WebAssembly module",
        ),
        (
            "native.cwasm",
            &b"\x7fELF\x02\x01\x01\0"[..],
            "precompiled native code",
        ),
        ("text.wasm", &b"print('hi')"[..], "not a WebAssembly binary"),
    ];
    for (name, bytes, expect) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let r = invalid_reason(host().load_reward(&path, &BudgetOverrides::default()));
        assert!(r.contains(expect), "{name}: {r}");
    }
}

#[test]
fn a_missing_file_names_the_path() {
    let err = host()
        .load_reward("/no/such/plugin.wasm".as_ref(), &BudgetOverrides::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("/no/such/plugin.wasm"), "{err}");
}

#[test]
fn refuses_a_plugin_of_the_other_world() {
    let r = invalid_reason(host().load_evaluator(
        &swerve_host::bundled::require("rust-length").unwrap(),
        &BudgetOverrides::default(),
    ));
    assert!(r.contains("targets the `reward` world"), "{r}");
    let r = invalid_reason(host().load_reward(
        &swerve_host::bundled::require("swebench-parsers").unwrap(),
        &BudgetOverrides::default(),
    ));
    assert!(r.contains("targets the `evaluator` world"), "{r}");
}

#[test]
fn inspect_reports_world_info_imports_and_budgets() {
    let report = host()
        .inspect(
            &swerve_host::bundled::require("rust-length").unwrap(),
            &BudgetOverrides::default(),
        )
        .unwrap();
    assert_eq!(report.world, World::Reward);
    assert_eq!(report.info.name, "rust-length");
    assert!(
        report
            .imports
            .iter()
            .any(|i| i.starts_with("swerve:plugin/types@0.1.0")),
        "{:?}",
        report.imports
    );
    assert!(report.imports.iter().all(|i| {
        swerve_host::ALLOWED_IMPORTS
            .iter()
            .any(|p| i.starts_with(p))
    }));
    assert_eq!(report.exports, ["info", "score"]);
    assert_eq!(report.budgets, *host().budgets());
    assert_eq!(report.sha256.len(), 64);
}

#[test]
fn precompile_cache_is_written_once_reused_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let config = || HostConfig {
        cache_dir: Some(dir.path().to_owned()),
        ..HostConfig::default()
    };
    let plugin = swerve_host::bundled::require("rust-length").unwrap();
    let t = Instant::now();
    Host::new(config())
        .unwrap()
        .load_reward(&plugin, &BudgetOverrides::default())
        .unwrap();
    let cold = t.elapsed();
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let cwasm: Vec<_> = entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(cwasm.len(), 1, "{entries:?}");
    let t = Instant::now();
    Host::new(config())
        .unwrap()
        .load_reward(&plugin, &BudgetOverrides::default())
        .unwrap();
    let warm = t.elapsed();
    eprintln!("cold load {cold:?}, warm load {warm:?}");

    // A cache entry that was tampered with is ignored (and replaced), never loaded.
    std::fs::write(cwasm[0], b"\x7fELF not what the host wrote").unwrap();
    let p = Host::new(config())
        .unwrap()
        .load_reward(&plugin, &BudgetOverrides::default())
        .unwrap();
    assert_eq!(p.info().name, "rust-length");
    assert_ne!(
        std::fs::read(cwasm[0]).unwrap(),
        b"\x7fELF not what the host wrote"
    );
}
