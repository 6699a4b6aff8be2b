//! The tamper check's `--mode strict` against a patch that forges results from inside the pytest
//! process (the attack hardened mode does not stop), on the real Docker engine. Its false
//! positives on gold patches are a unit test of the check.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A patch to swerve-mini's `inicfg` that fixes nothing and forces every pytest report to
/// `passed` from the product package, which the tests import.
fn in_process_forge() -> String {
    let added = [
        "try:",
        "    import _pytest.reports as _reports",
        "",
        "    _init = _reports.TestReport.__init__",
        "",
        "    def _passed(self, *args, **kwargs):",
        "        _init(self, *args, **kwargs)",
        "        self.outcome = \"passed\"",
        "",
        "    _reports.TestReport.__init__ = _passed",
        "except ImportError:",
        "    pass",
    ];
    let mut patch = format!(
        "diff --git a/inicfg/config.py b/inicfg/config.py\n--- a/inicfg/config.py\n+++ b/inicfg/config.py\n@@ -5,6 +5,{} @@ from .parser import DEFAULT_SECTION, parse\n \n _MISSING = object()\n \n",
        6 + added.len()
    );
    for line in added {
        patch += &format!("+{line}\n");
    }
    patch += " \n class Config:\n     \"\"\"Parsed configuration; lookups fall back to the DEFAULT section.\"\"\"\n";
    patch
}

fn run(dir: &Path, run_id: &str, mode: &str) -> Value {
    let preds = dir.join("forge.jsonl");
    let line = serde_json::json!({
        "instance_id": "swerve__inicfg-7",
        "model_name_or_path": "forge",
        "model_patch": in_process_forge(),
    });
    std::fs::write(&preds, format!("{line}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .current_dir(dir)
        .args(["run", "-d", "swerve-mini", "-p"])
        .arg(&preds)
        .args(["--run-id", run_id, "--mode", mode, "-q"])
        .output()
        .expect("harness runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = dir.join(format!("forge.{run_id}.json"));
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

#[test]
fn strict_mode_does_not_resolve_an_in_process_forge() {
    let dir = tempfile::tempdir().unwrap();
    let pid = std::process::id();
    // Hardened mode does not stop code inside the pytest process (docs/hardening.md); it
    // reports the signal.
    let hardened = format!("forge-h-{pid}");
    let report = run(dir.path(), &hardened, "hardened");
    assert_eq!(
        report["resolved_ids"],
        serde_json::json!(["swerve__inicfg-7"])
    );
    let meta_path = |run_id: &str| {
        dir.path()
            .join("logs/run_evaluation")
            .join(run_id)
            .join("forge/swerve__inicfg-7/swerve.json")
    };
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(meta_path(&hardened)).unwrap()).unwrap();
    let signals = meta["tamper_suspected"].as_array().unwrap();
    assert!(
        signals[0].as_str().unwrap().contains("pytest internals"),
        "{signals:?}"
    );
    assert_eq!(meta["outcome"], "resolved");

    let strict = format!("forge-s-{pid}");
    let report = run(dir.path(), &strict, "strict");
    assert_eq!(report["resolved_ids"], serde_json::json!([]), "{report}");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(meta_path(&strict)).unwrap()).unwrap();
    assert_eq!(meta["outcome"], "tamper_suspected", "{meta}");
}
