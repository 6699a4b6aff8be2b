//! A SWE-bench 5 task repository of another language, end to end against the real Docker
//! engine: a small Go project whose `Add` is wrong, its fix as the gold patch and a test that
//! catches it as the test patch, written in SWE-bench 5's layout with a task `Dockerfile` (the
//! project's base image, Debian's Go, the project at `/testbed`). `harness images build
//! --task-repo` builds it from the folder; `harness run --task-repo` resolves it with the gold
//! patch (the test fixed, the other kept passing, `parse_log_gotest` reading `go test -v`) and
//! not with an empty patch; `run.json` names the task repository. One of its tests reads a
//! binary baseline that only the task's `test_assets/` holds (a patch asset, restored by the
//! eval script as SWE-bench 5 restores `image_assets`); a patch whose setup rewrites that asset
//! is caught by hardened mode's comparison with the staged bytes; a `TestMain` that prints every
//! test as passed resolves in compat mode and is undone in hardened mode.
//!
//! The base image is the one the other Docker tests share; the build installs `golang-go` from
//! Debian (network while building only, as the tests then run without it).

use std::path::{Path, PathBuf};

use crate::support::{base_image, harness};
use serde_json::{Map, Value, json};
use swerve_swebench::task_repo;

const ID: &str = "demo__calc-1";

const CALC: &str = "package calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n\n// Sub returns a minus b.\nfunc Sub(a, b int) int {\n\treturn a - b\n}\n";

const TESTS: &str = "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal(\"5 - 3\")\n\t}\n}\n";

const GOLD: &str = "diff --git a/calc.go b/calc.go\n--- a/calc.go\n+++ b/calc.go\n@@ -2,7 +2,7 @@ package calc\n \n // Add returns the sum of a and b.\n func Add(a, b int) int {\n-\treturn a - b\n+\treturn a + b\n }\n \n // Sub returns a minus b.\n";

const TEST_PATCH: &str = "diff --git a/calc_test.go b/calc_test.go\n--- a/calc_test.go\n+++ b/calc_test.go\n@@ -7,3 +7,9 @@ func TestSub(t *testing.T) {\n \t\tt.Fatal(\"5 - 3\")\n \t}\n }\n+\n+func TestAdd(t *testing.T) {\n+\tif Add(2, 3) != 5 {\n+\t\tt.Fatalf(\"2 + 3 = %d\", Add(2, 3))\n+\t}\n+}\ndiff --git a/golden_test.go b/golden_test.go\nnew file mode 100644\n--- /dev/null\n+++ b/golden_test.go\n@@ -0,0 +1,17 @@\n+package calc\n+\n+import (\n+\t\"bytes\"\n+\t\"os\"\n+\t\"testing\"\n+)\n+\n+// The binary baseline a text patch cannot carry: a patch asset.\n+func TestGolden(t *testing.T) {\n+\tgot, err := os.ReadFile(\"testdata/golden.bin\")\n+\twant := []byte{0x89, 'P', 'N', 'G', 0, 0xff, byte(Add(2, 3))}\n+\tif err != nil || !bytes.Equal(got, want) {\n+\t\tt.Fatalf(\"golden: %v %x\", err, got)\n+\t}\n+}\n+\n";

/// A patch that leaves `Add` wrong and, through `go generate` in the eval script's setup,
/// rewrites the staged asset to the baseline its wrong `Add` produces, before the restore
/// command copies it into the repository.
const FORGER: &str = r#"diff --git a/gen.go b/gen.go
new file mode 100644
--- /dev/null
+++ b/gen.go
@@ -0,0 +1,3 @@
+package calc
+
+//go:generate sh -c "printf '\\211PNG\\000\\377\\377' > /image_assets/testdata__golden.bin"
"#;

/// A patch that leaves `Add` wrong and adds a `TestMain` printing every test as passed: Go's
/// counterpart of a `conftest.py` hook, undone by hardened mode, resolved in compat mode.
const MAIN_FORGER: &str = "diff --git a/zz_main_test.go b/zz_main_test.go\nnew file mode 100644\n--- /dev/null\n+++ b/zz_main_test.go\n@@ -0,0 +1,15 @@\n+package calc\n+\n+import (\n+\t\"fmt\"\n+\t\"os\"\n+\t\"testing\"\n+)\n+\n+func TestMain(m *testing.M) {\n+\tfor _, name := range []string{\"TestSub\", \"TestAdd\", \"TestGolden\"} {\n+\t\tfmt.Printf(\"=== RUN   %s\\n--- PASS: %s (0.00s)\\n\", name, name)\n+\t}\n+\tfmt.Println(\"PASS\")\n+\tos.Exit(0)\n+}\n";

/// The patch asset `TestGolden` reads (SWE-bench 5's `test_assets/`), restored by the eval
/// script after the test patch.
const GOLDEN: &[u8] = &[0x89, b'P', b'N', b'G', 0, 0xff, 5];

fn write_task_repo(root: &Path) {
    let eval = format!(
        "#!/bin/bash\nset -uxo pipefail\ncd /testbed\ngit checkout HEAD -- calc_test.go\nrm -f golden_test.go\n\
         git apply -v - <<'EOF_114329324912'\n{TEST_PATCH}EOF_114329324912\ngo generate ./...\n\
         : '>>>>> Start Test Output'\ngo test -v ./...\n: '>>>>> End Test Output'\n\
         git checkout HEAD -- calc_test.go\nrm -f golden_test.go\n"
    );
    let row: Map<String, Value> = json!({
        "instance_id": ID,
        "repo": "demo/calc",
        "version": "1.0",
        "base_commit": "HEAD",
        "patch": GOLD,
        "test_patch": TEST_PATCH,
        "problem_statement": "Add subtracts instead of adding.\n",
        "hints_text": "",
        "FAIL_TO_PASS": ["TestAdd", "TestGolden"],
        "PASS_TO_PASS": ["TestSub"],
        "eval_script": eval,
        "log_parser": "parse_log_gotest",
        "eval_type": "pass_and_fail",
        "image_assets": {"test_patch": [{"path": "testdata/golden.bin", "url": ""}], "patch": []},
        "created_at": "2026-12-04T00:00:00Z",
    })
    .as_object()
    .expect("object")
    .clone();
    let dockerfile = format!(
        "FROM {}\n\
         RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         --no-install-recommends golang-go git ca-certificates >/dev/null \
         && rm -rf /var/lib/apt/lists/*\n\
         ENV GOFLAGS=-mod=mod GOTOOLCHAIN=local GOCACHE=/root/.cache/go-build\n\
         COPY repo /testbed\n\
         RUN cd /testbed && git init -q && git add -A \
         && git -c user.name=t -c user.email=t@t commit -qm base && go vet ./...\n\
         WORKDIR /testbed\n",
        base_image()
    );
    task_repo::write_config(root, &["demo/multilingual"], &[task_repo::DEFAULT_SPLIT])
        .expect("sweb.yaml");
    let dir = task_repo::write_task(root, &row, "demo/multilingual", "test", &dockerfile)
        .expect("task folder");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("repo folder");
    std::fs::write(repo.join("go.mod"), "module calc\n\ngo 1.19\n").expect("go.mod");
    std::fs::write(repo.join("calc.go"), CALC).expect("calc.go");
    std::fs::write(repo.join("calc_test.go"), TESTS).expect("calc_test.go");
    let asset = dir.join("test_assets/testdata/golden.bin");
    std::fs::create_dir_all(asset.parent().expect("parent")).expect("test_assets");
    std::fs::write(asset, GOLDEN).expect("golden.bin");
}

fn report(dir: &Path, run_id: &str, model: &str) -> Value {
    let path = instance_dir(dir, run_id, model).join("report.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Value>(&text).expect("report")[ID].clone()
}

/// Writes one prediction of `patch` by `model`, evaluates it with `harness run --task-repo` in
/// `mode`, and returns the run id.
fn run_patch(dir: &Path, repo: &str, model: &str, patch: &str, mode: &str) -> String {
    let predictions = dir.join(format!("{model}-{mode}.jsonl"));
    std::fs::write(
        &predictions,
        json!({"instance_id": ID, "model_name_or_path": model, "model_patch": patch}).to_string()
            + "\n",
    )
    .expect("predictions");
    let run = format!("t-taskrepo-{model}-{mode}-{}", std::process::id());
    harness(
        dir,
        &[
            "run",
            "--task-repo",
            repo,
            "-p",
            &predictions.display().to_string(),
            "--run-id",
            &run,
            "--mode",
            mode,
        ],
    );
    run
}

/// An instance's log folder.
fn instance_dir(dir: &Path, run: &str, model: &str) -> PathBuf {
    dir.join(format!("logs/run_evaluation/{run}/{model}/{ID}"))
}

#[test]
fn a_go_task_repository_resolves_with_gold_and_not_with_an_empty_patch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("tasks-repo");
    write_task_repo(&root);
    let repo = root.display().to_string();

    let built = harness(dir.path(), &["images", "build", "--task-repo", &repo]);
    let built = String::from_utf8_lossy(&built.stdout).into_owned();
    assert!(
        built.contains(&task_repo::image_name(ID)) && built.starts_with("task\t"),
        "{built}"
    );

    let gold_run = format!("t-taskrepo-gold-{}", std::process::id());
    harness(
        dir.path(),
        &[
            "run",
            "--task-repo",
            &repo,
            "-p",
            "gold",
            "--run-id",
            &gold_run,
        ],
    );
    let gold = report(dir.path(), &gold_run, "gold");
    let instance = instance_dir(dir.path(), &gold_run, "gold");
    let log = std::fs::read_to_string(instance.join("run_instance.log")).expect("log");
    let output = std::fs::read_to_string(instance.join("test_output.txt")).unwrap_or_default()
        + &std::fs::read_to_string(instance.join("swerve.json")).unwrap_or_default()
        + &log;
    assert_eq!(gold["resolved"], true, "{gold:#}\n{output}");
    assert_eq!(
        gold["tests_status"]["FAIL_TO_PASS"]["success"],
        json!(["TestAdd", "TestGolden"])
    );
    // The asset staged as SWE-bench stages it: in the log folder, in the container's
    // /image_assets, restored by the eval script right before the tests start.
    assert_eq!(
        std::fs::read(instance.join("image_assets/testdata__golden.bin")).expect("staged"),
        GOLDEN
    );
    let eval = std::fs::read_to_string(instance.join("eval.sh")).expect("eval.sh");
    assert!(
        eval.contains(
            "EOF_114329324912\ngo generate ./...\nmkdir -p $(dirname testdata/golden.bin) && \
             cp /image_assets/testdata__golden.bin testdata/golden.bin\n: '>>>>> Start Test Output'"
        ),
        "{eval}"
    );
    assert!(
        log.contains("Staged 1 patch asset(s) for restore after git apply"),
        "{log}"
    );
    assert_eq!(
        gold["tests_status"]["PASS_TO_PASS"]["success"],
        json!(["TestSub"])
    );
    let run_json: Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path()
                .join(format!("logs/run_evaluation/{gold_run}/run.json")),
        )
        .expect("run.json"),
    )
    .expect("json");
    assert_eq!(run_json["task_repo"], repo.as_str());

    // A setup that rewrites a staged asset: hardened mode compares both copies with what it
    // staged and does not resolve the instance.
    let forged_run = run_patch(dir.path(), &repo, "forger", FORGER, "hardened");
    let forger = instance_dir(dir.path(), &forged_run, "forger");
    let meta = std::fs::read_to_string(forger.join("swerve.json")).expect("swerve.json");
    let output = std::fs::read_to_string(forger.join("test_output.txt")).unwrap_or_default();
    assert!(
        meta.contains("C /image_assets/testdata__golden.bin (not the staged patch asset)")
            && meta.contains("C /testbed/testdata/golden.bin (not the staged patch asset)"),
        "{meta}\n{output}"
    );
    assert_eq!(report(dir.path(), &forged_run, "forger")["resolved"], false);

    // A Go `TestMain` that prints every test as passed: compat mode (SWE-bench's procedure)
    // resolves it; hardened mode removes the file the patch added before the tests run.
    for (mode, resolved) in [("compat", true), ("hardened", false)] {
        let run = run_patch(dir.path(), &repo, "mainforger", MAIN_FORGER, mode);
        let report = report(dir.path(), &run, "mainforger");
        assert_eq!(report["resolved"], resolved, "{mode}: {report:#}");
        if mode == "hardened" {
            let meta: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    instance_dir(dir.path(), &run, "mainforger").join("swerve.json"),
                )
                .expect("swerve.json"),
            )
            .expect("json");
            assert_eq!(
                meta["undone"]["removed"],
                json!(["zz_main_test.go"]),
                "{meta:#}"
            );
        }
    }

    let empty_run = run_patch(dir.path(), &repo, "empty", "", "hardened");
    let report_path = instance_dir(dir.path(), &empty_run, "empty").join("report.json");
    // SWE-bench writes no report for an empty patch it skips; when one is written it must not
    // resolve.
    if report_path.is_file() {
        let empty = report(dir.path(), &empty_run, "empty");
        assert_eq!(empty["resolved"], false, "{empty:#}");
    }
    let summary = std::fs::read_dir(dir.path())
        .expect("run folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.to_string_lossy()
                .ends_with(&format!("empty.{empty_run}.json"))
        })
        .expect("run report");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(summary).expect("summary")).expect("json");
    assert_eq!(summary["resolved_instances"], 0, "{summary:#}");
}
