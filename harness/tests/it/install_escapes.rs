//! Install-time escapes on swerve-mini, against the real Docker engine: a model patch whose code
//! runs in the eval script's setup part (here through `python -m pip`, which imports a `pip`
//! package from the working directory, `/testbed`) changes the container outside the
//! repository. One patch per route; every one is not resolved in hardened mode, with outcome
//! `environment_changed` and the path in `swerve.json`. The route that really forges results
//! (a `.pth` file that loads a pytest plugin reporting every test as passed) is resolved in
//! compatible mode, so the check is what stops it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_harness");

/// A patch adding new files (`path`, content) to the repository.
fn adding(files: &[(&str, &str)]) -> String {
    let mut patch = String::new();
    for (path, content) in files {
        let lines: Vec<&str> = content.lines().collect();
        patch += &format!(
            "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n",
            lines.len()
        );
        for line in lines {
            patch += &format!("+{line}\n");
        }
    }
    patch
}

/// A `pip` package in the repository whose `__main__` runs `plant` (Python, with `sp` bound to
/// the environment's site-packages folder) instead of pip, and exits 0.
fn pip_shadow(plant: &str) -> String {
    let main = format!(
        "import os, subprocess, sysconfig\nsp = sysconfig.get_paths()['purelib']\n{plant}\n"
    );
    adding(&[
        ("pip/__init__.py", "# shadows pip\n"),
        ("pip/__main__.py", &main),
    ])
}

/// The forging route: a `.pth` file that names a pytest plugin which reports every test passed.
fn forging_patch() -> String {
    pip_shadow(concat!(
        "open(os.path.join(sp, 'zz_forge_plugin.py'), 'w').write(\n",
        "    'import pytest\\n'\n",
        "    '@pytest.hookimpl(hookwrapper=True)\\n'\n",
        "    'def pytest_runtest_makereport(item, call):\\n'\n",
        "    '    report = (yield).get_result()\\n'\n",
        "    '    report.outcome = \"passed\"\\n')\n",
        "open(os.path.join(sp, 'zz_forge.pth'), 'w').write(\n",
        "    'import os; os.environ.setdefault(\"PYTEST_PLUGINS\", \"zz_forge_plugin\")\\n')",
    ))
}

/// One route per instance: (instance, Python that plants it, a path the finding names).
fn routes() -> Vec<(&'static str, String, &'static str)> {
    vec![
        ("swerve__inicfg-3", forging_patch(), "/zz_forge.pth"),
        (
            "swerve__inicfg-7",
            pip_shadow("open(os.path.join(sp, 'sitecustomize.py'), 'w').write('pass\\n')"),
            "/sitecustomize.py",
        ),
        (
            "swerve__textkit-9",
            pip_shadow(
                "open(os.path.join(sp, '_pytest', 'terminal.py'), 'a').write('\\n# replaced\\n')",
            ),
            "/_pytest/terminal.py",
        ),
        (
            "swerve__textkit-13",
            pip_shadow(concat!(
                "d = os.path.join(sp, '_pytest', '__pycache__'); os.makedirs(d, exist_ok=True)\n",
                "open(os.path.join(d, 'zz.cpython-311.pyc'), 'wb').write(b'\\0' * 16)",
            )),
            "/_pytest/__pycache__/zz.cpython-311.pyc",
        ),
        (
            "swerve__spans-2",
            pip_shadow(
                "open('/usr/local/bin/pytest', 'w').write('#!/bin/sh\\necho forged\\n'); os.chmod('/usr/local/bin/pytest', 0o755)",
            ),
            "/usr/local/bin/pytest",
        ),
        (
            "swerve__spans-8",
            pip_shadow("subprocess.run(['git', 'config', '--global', 'alias.st', '!echo forged'])"),
            "/root/.gitconfig",
        ),
        (
            "swerve__spans-13",
            pip_shadow("open('/etc/zz-swerve.conf', 'w').write('x\\n')"),
            "/etc/zz-swerve.conf",
        ),
    ]
}

fn write_predictions(dir: &Path, preds: &[(&str, String)]) -> PathBuf {
    let path = dir.join("escapes.jsonl");
    let lines: Vec<String> = preds
        .iter()
        .map(|(id, patch)| {
            serde_json::json!({"instance_id": id, "model_name_or_path": "escapes", "model_patch": patch})
                .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn run(dir: &Path, predictions: &Path, run_id: &str, extra: &[&str]) -> Value {
    let out = Command::new(BIN)
        .current_dir(dir)
        .args(["run", "-d", "swerve-mini", "-p"])
        .arg(predictions)
        .args(["--run-id", run_id, "--max-workers", "2", "-q"])
        .args(extra)
        .output()
        .expect("harness runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = dir.join(format!("escapes.{run_id}.json"));
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

fn ids(value: &Value) -> Vec<String> {
    let mut ids: Vec<String> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn every_install_time_route_is_caught_in_hardened_mode() {
    let dir = tempfile::tempdir().unwrap();
    let routes = routes();
    let preds: Vec<(&str, String)> = routes.iter().map(|(id, p, _)| (*id, p.clone())).collect();
    let predictions = write_predictions(dir.path(), &preds);
    let run_id = format!("escapes-{}", std::process::id());
    let report = run(dir.path(), &predictions, &run_id, &[]);
    assert!(ids(&report["resolved_ids"]).is_empty(), "{report}");
    assert_eq!(ids(&report["error_ids"]), Vec::<String>::new(), "{report}");
    for (id, _, path) in &routes {
        let instance = dir
            .path()
            .join("logs/run_evaluation")
            .join(&run_id)
            .join("escapes")
            .join(id);
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(instance.join("swerve.json")).unwrap())
                .unwrap();
        let log = std::fs::read_to_string(instance.join("run_instance.log")).unwrap();
        assert_eq!(
            meta["outcome"], "environment_changed",
            "{id}: {meta}\n{log}"
        );
        let findings = meta["hardened"]["environment_changes"].as_array().unwrap();
        assert!(
            findings.iter().any(|f| f.as_str().unwrap().ends_with(path)),
            "{id}: {path} not in {findings:?}"
        );
        assert!(
            log.contains("changed the environment outside the repository"),
            "{id}"
        );
        let graded: Value =
            serde_json::from_str(&std::fs::read_to_string(instance.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(graded[id]["resolved"], false, "{id}");
    }

    // SWE-bench's way, the forging route is resolved: the check is what stops it.
    let compat_id = format!("escapes-compat-{}", std::process::id());
    let forged = write_predictions(dir.path(), &[("swerve__inicfg-3", forging_patch())]);
    let report = run(dir.path(), &forged, &compat_id, &["--mode", "compat"]);
    assert_eq!(
        ids(&report["resolved_ids"]),
        ["swerve__inicfg-3"],
        "{report}"
    );
}
