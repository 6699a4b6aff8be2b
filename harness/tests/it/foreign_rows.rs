//! Rows of other benchmarks against the real Docker engine, each in an image the test builds as
//! that benchmark ships them (a prebuilt image whose repository still reaches the fix):
//!
//! - SWE-rebench V2: a Go project at `/calc`, `install_config.test_cmd` `go test -v ./...`,
//!   `parse_log_gotest` (SWE-rebench V2's) reading the log; the exact-set verdict by default and
//!   the subset one with `--verdict subset` (also when `harness report` re-grades); a patch that
//!   does not apply; a `TestMain` forger resolved in compat mode and undone in hardened mode;
//!   the image's later tag found and cut in a derived image.
//! - SWE-bench Pro: a Python project at `/app` with its own `run_script.sh`, `parser.py` and two
//!   Dockerfiles whose `ENV` lines the run script needs, in a `--pro-scripts` checkout; the
//!   image named by `dockerhub_tag`; compat mode takes the tests from the fix commit as upstream
//!   does, hardened mode from the test patch (the history cut); a patch whose code rewrites
//!   `parser.py` while the tests run fools compat mode and not hardened mode, which parses in a
//!   fresh container.
//!
//! On each, `harness agent` with a scripted agent works in the repository's own folder of the
//! cut image, sees no commit past the base, and submits a fix that `harness run` resolves.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{base_image, harness};
use serde_json::{Value, json};
use swerve_harness::execution::{DatasetSource, ExecuteConfig, ExecutionOutcome, PatchExecutor};
use swerve_host::{BudgetOverrides, Host, HostConfig};
use swerve_sandbox::{Sandbox, SandboxConfig};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // Fixed identity and dates: the same commits (and image names) on every run.
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A project with a base commit and a fix commit (`files` then `fixed`, path → text): the gold
/// patch and the test patch are the fix's diffs of `code` and of the other files; the checkout
/// is left at the base with the fix still reachable (tag `v2`, `ORIG_HEAD`, the reflog), as a
/// prebuilt image often holds it. Returns (base, fix, gold patch, test patch).
fn project(
    dir: &Path,
    files: &[(&str, &str)],
    fixed: &[(&str, &str)],
    code: &str,
) -> (String, String, String, String) {
    std::fs::create_dir_all(dir).expect("project folder");
    git(dir, &["init", "-q", "-b", "main"]);
    let write = |files: &[(&str, &str)]| {
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
            std::fs::write(path, text).expect("write");
        }
        git(dir, &["add", "-A"]);
    };
    write(files);
    git(dir, &["commit", "-q", "-m", "base"]);
    let base = git(dir, &["rev-parse", "HEAD"]).trim().to_owned();
    write(fixed);
    git(dir, &["commit", "-q", "-m", "fix"]);
    let fix = git(dir, &["rev-parse", "HEAD"]).trim().to_owned();
    git(dir, &["tag", "v2"]);
    let gold = git(dir, &["diff", &base, &fix, "--", code]);
    let tests = git(
        dir,
        &["diff", &base, &fix, "--", ".", &format!(":(exclude){code}")],
    );
    git(dir, &["reset", "-q", "--hard", &base]);
    (base, fix, gold, tests)
}

/// Builds `name` from `folder`'s Dockerfile unless it exists (its name carries the content).
fn build(name: &str, folder: &Path) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let sandbox = Sandbox::connect(SandboxConfig::default())
            .await
            .expect("Docker engine");
        sandbox
            .ensure_dockerfile_image(name, folder)
            .await
            .expect("image");
    });
}

fn write_jsonl(path: &Path, rows: &[Value]) {
    let text: String = rows.iter().map(|row| format!("{row}\n")).collect();
    std::fs::write(path, text).expect("write rows");
}

fn instance_dir(dir: &Path, run: &str, model: &str, id: &str) -> PathBuf {
    dir.join(format!("logs/run_evaluation/{run}/{model}/{id}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `report.json`'s value for `id`, with the instance's logs in the message when it is missing.
fn report(dir: &Path, run: &str, model: &str, id: &str) -> Value {
    let folder = instance_dir(dir, run, model, id);
    let path = folder.join("report.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        panic!(
            "no report for {id}:\n{}\n{}",
            std::fs::read_to_string(folder.join("swerve.json")).unwrap_or_default(),
            std::fs::read_to_string(folder.join("run_instance.log")).unwrap_or_default()
        );
    };
    serde_json::from_str::<Value>(&text).expect("report")[id].clone()
}

fn outcome(dir: &Path, run: &str, model: &str, id: &str) -> String {
    let meta: Value = serde_json::from_str(&read(
        &instance_dir(dir, run, model, id).join("swerve.json"),
    ))
    .expect("swerve.json");
    meta["outcome"].as_str().expect("outcome").to_owned()
}

fn predictions(path: &Path, model: &str, patches: &[(&str, &str)]) {
    let rows: Vec<Value> = patches
        .iter()
        .map(|(id, patch)| json!({"instance_id": id, "model_name_or_path": model, "model_patch": patch}))
        .collect();
    write_jsonl(path, &rows);
}

const CALC_GO: &str = "package calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n\n// Sub returns a minus b.\nfunc Sub(a, b int) int {\n\treturn a - b\n}\n";
const CALC_TEST_GO: &str = "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal(\"5 - 3\")\n\t}\n}\n";
const FIXED_TEST_GO: &str = "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal(\"5 - 3\")\n\t}\n}\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatalf(\"2 + 3 = %d\", Add(2, 3))\n\t}\n}\n";

/// A patch that leaves `Add` wrong and adds a `TestMain` printing every test as passed.
const MAIN_FORGER: &str = "diff --git a/zz_main_test.go b/zz_main_test.go\nnew file mode 100644\n--- /dev/null\n+++ b/zz_main_test.go\n@@ -0,0 +1,15 @@\n+package calc\n+\n+import (\n+\t\"fmt\"\n+\t\"os\"\n+\t\"testing\"\n+)\n+\n+func TestMain(m *testing.M) {\n+\tfor _, name := range []string{\"TestSub\", \"TestAdd\"} {\n+\t\tfmt.Printf(\"=== RUN   %s\\n--- PASS: %s (0.00s)\\n\", name, name)\n+\t}\n+\tfmt.Println(\"PASS\")\n+\tos.Exit(0)\n+}\n";

/// `harness agent` (`rows`: its row flags) with a scripted agent that prints its folder and
/// checks the history, applies `gold` and submits, writing `predictions`; the episode must
/// submit. Returns the trajectory.
fn agent_gold(
    dir: &Path,
    rows: &[&str],
    id: &str,
    gold: &str,
    run_id: &str,
    predictions: &str,
) -> Value {
    let command = |c: &str| format!("THOUGHT: next.\n\n```mswea_bash_command\n{c}\n```");
    let replies = json!([
        command(
            "pwd && test \"$(git rev-list --all --reflog | sort)\" = \"$(git rev-list HEAD | sort)\" && echo HISTORY_CUT"
        ),
        command(&format!(
            "cat > /tmp/fix.diff <<'SWERVE_EOF'\n{gold}SWERVE_EOF\ngit apply /tmp/fix.diff"
        )),
        command("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"),
    ]);
    let script = dir.join(format!("{run_id}.script.jsonl"));
    std::fs::write(
        &script,
        json!({"instance_id": id, "replies": replies}).to_string() + "\n",
    )
    .expect("script");
    let mut args = vec![
        "agent",
        "--run-id",
        run_id,
        "-q",
        "-o",
        predictions,
        "--script",
    ];
    args.push(script.to_str().expect("utf-8"));
    args.extend(rows);
    harness(dir, &args);
    let trajectory: Value = serde_json::from_str(&read(
        &dir.join("logs/agent")
            .join(run_id)
            .join("scripted")
            .join(id)
            .join("trajectory.json"),
    ))
    .expect("json");
    assert_eq!(trajectory["reason"], "submitted", "{trajectory}");
    trajectory
}

#[test]
fn swe_rebench_v2_rows_run_as_their_evaluation_runs_them_with_either_verdict() {
    let dir = tempfile::tempdir().expect("temp dir");
    let context = dir.path().join("image");
    let (base, _, gold, test_patch) = project(
        &context.join("calc"),
        &[
            ("go.mod", "module calc\n\ngo 1.19\n"),
            ("calc.go", CALC_GO),
            ("calc_test.go", CALC_TEST_GO),
        ],
        &[
            ("calc.go", &CALC_GO.replacen("a - b", "a + b", 1)),
            ("calc_test.go", FIXED_TEST_GO),
        ],
        "calc.go",
    );
    // The same first layers as the Go task repository's test, so the engine reuses them.
    std::fs::write(
        context.join("Dockerfile"),
        format!(
            "FROM {}\n\
             RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
             --no-install-recommends golang-go git ca-certificates >/dev/null \
             && rm -rf /var/lib/apt/lists/*\n\
             ENV GOFLAGS=-mod=mod GOTOOLCHAIN=local GOCACHE=/root/.cache/go-build\n\
             COPY calc /calc\nRUN cd /calc && go vet ./...\nWORKDIR /calc\n",
            base_image()
        ),
    )
    .expect("Dockerfile");
    let image = format!("swerve-test/rebench-calc:{}", &base[..12]);
    build(&image, &context);

    let row = |id: &str, pass_to_pass: &[&str]| {
        json!({
            "instance_id": id, "repo": "demo/calc", "base_commit": base, "patch": gold,
            "test_patch": test_patch, "problem_statement": "Add subtracts.",
            "language": "go", "FAIL_TO_PASS": ["TestAdd"], "PASS_TO_PASS": pass_to_pass,
            "image_name": image,
            "install_config": {"install": ["go vet ./..."], "test_cmd": ["go test -v ./..."],
                               "log_parser": "parse_log_gotest", "base_image_name": "golang"},
        })
    };
    // calc-8's list leaves out a test that passes: the exact-set rule does not resolve it.
    let rows = dir.path().join("rebench.jsonl");
    write_jsonl(
        &rows,
        &[row("demo__calc-7", &["TestSub"]), row("demo__calc-8", &[])],
    );
    let rows_arg = rows.display().to_string();
    let run = |run_id: &str, predictions: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "-d",
            &rows_arg,
            "-p",
            predictions,
            "--run-id",
            run_id,
        ];
        args.extend(extra);
        harness(dir.path(), &args)
    };

    let exact = format!("t-rebench-exact-{}", std::process::id());
    run(&exact, "gold", &[]);
    let seven = report(dir.path(), &exact, "gold", "demo__calc-7");
    let eight = report(dir.path(), &exact, "gold", "demo__calc-8");
    assert_eq!(seven["resolved"], true, "{seven:#}");
    assert_eq!(seven["verdict_rule"], "exact-set");
    assert_eq!(
        seven["tests_status"]["FAIL_TO_PASS"]["success"],
        json!(["TestAdd"])
    );
    assert_eq!(eight["resolved"], false, "{eight:#}");
    assert_eq!(
        eight["tests_status"]["FAIL_TO_PASS"]["success"],
        json!(["TestAdd"])
    );
    let folder = instance_dir(dir.path(), &exact, "gold", "demo__calc-7");
    let log = read(&folder.join("run_instance.log"));
    assert!(
        log.contains(&format!(
            "History check: {image} reaches past the base commit"
        )) && log.contains("running in swerve/scrubbed:"),
        "{log}"
    );
    let output = read(&folder.join("test_output.txt"));
    assert!(output.contains("--- PASS: TestAdd"), "{output}");
    // The applies' messages (stderr) come after the tests' stdout, as upstream joins them.
    let pass = output.find("--- PASS: TestAdd").expect("test line");
    let applied = output.find("Applied patch").expect("apply line");
    assert!(pass < applied, "{output}");
    let script = read(&folder.join("eval.sh"));
    assert!(
        script.contains("git apply -v --3way --recount --ignore-space-change --whitespace=nowarn /patches/patch.diff")
            && script.contains("set -e\ngo test -v ./..."),
        "{script}"
    );

    // `harness report --verdict subset` re-grades the same logs under the other rule.
    let rewritten = harness(
        dir.path(),
        &[
            "report",
            "-d",
            &rows_arg,
            "-p",
            "gold",
            "--run-id",
            &exact,
            "--verdict",
            "subset",
        ],
    );
    let eight = report(dir.path(), &exact, "gold", "demo__calc-8");
    assert_eq!(eight["resolved"], true, "{eight:#}");
    assert_eq!(eight["verdict_rule"], "subset");
    let summary = String::from_utf8_lossy(&rewritten.stdout);
    assert!(summary.contains("Instances resolved: 2"), "{summary}");

    // A run under the subset rule, with a patch that does not apply and one that does nothing
    // useful (the test patch's TestAdd fails).
    let patches = dir.path().join("patches.jsonl");
    let useless = "diff --git a/calc.go b/calc.go\n--- a/calc.go\n+++ b/calc.go\n@@ -1,3 +1,4 @@\n package calc\n \n+// Calc is a calculator.\n // Add returns the sum of a and b.\n";
    predictions(
        &patches,
        "model",
        &[
            (
                "demo__calc-7",
                "diff --git a/nope.go b/nope.go\n--- a/nope.go\n+++ b/nope.go\n@@ -1 +1 @@\n-x\n+y\n",
            ),
            ("demo__calc-8", useless),
        ],
    );
    let subset = format!("t-rebench-subset-{}", std::process::id());
    run(
        &subset,
        &patches.display().to_string(),
        &["--verdict", "subset"],
    );
    assert_eq!(
        outcome(dir.path(), &subset, "model", "demo__calc-7"),
        "patch_apply_failed"
    );
    let eight = report(dir.path(), &subset, "model", "demo__calc-8");
    assert_eq!(eight["resolved"], false, "{eight:#}");
    assert_eq!(
        eight["tests_status"]["FAIL_TO_PASS"]["failure"],
        json!(["TestAdd"])
    );
    assert_eq!(eight["verdict_rule"], "subset");

    // A patch that adds a `TestMain` printing every test as passed: compat mode (upstream's
    // procedure) resolves it; hardened mode removes the file before the test patch.
    let forger = dir.path().join("forger.jsonl");
    predictions(&forger, "forger", &[("demo__calc-7", MAIN_FORGER)]);
    for (mode, resolved) in [("compat", true), ("hardened", false)] {
        let run_id = format!("t-rebench-forger-{mode}-{}", std::process::id());
        run(&run_id, &forger.display().to_string(), &["--mode", mode]);
        let report = report(dir.path(), &run_id, "forger", "demo__calc-7");
        assert_eq!(report["resolved"], resolved, "{mode}: {report:#}");
        if mode == "hardened" {
            let meta: Value = serde_json::from_str(&read(
                &instance_dir(dir.path(), &run_id, "forger", "demo__calc-7").join("swerve.json"),
            ))
            .expect("swerve.json");
            assert_eq!(
                meta["undone"]["removed"],
                json!(["zz_main_test.go"]),
                "{meta:#}"
            );
        }
    }

    // Single executions (execution rewards, `curate validate`) run the same way.
    let source = DatasetSource::resolve(&rows_arg, "test", None).expect("rows");
    let host = Host::new(HostConfig::default()).expect("host");
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers").expect("bundled"),
            &BudgetOverrides::default(),
        )
        .expect("evaluator");
    let executor = PatchExecutor::new(
        source,
        evaluator,
        ExecuteConfig {
            run_id: format!("t-rebench-execute-{}", std::process::id()),
            work_dir: dir.path().join("executions"),
            workers: 1,
            ..ExecuteConfig::default()
        },
    )
    .expect("docker");
    let gold_run = executor.execute("demo__calc-7", &gold);
    assert!(gold_run.resolved(), "{gold_run:?}");
    let ExecutionOutcome::Graded(useless_run) = executor.execute("demo__calc-7", useless) else {
        panic!("a patch that applies is graded");
    };
    assert!(!useless_run.resolved);
    let passed: Vec<(&str, bool)> = useless_run
        .fail_to_pass
        .iter()
        .chain(&useless_run.pass_to_pass)
        .map(|t| (t.name.as_str(), t.passed))
        .collect();
    assert_eq!(passed, [("TestAdd", false), ("TestSub", true)]);

    // `harness agent` on the row: the agent works in the cut image, in the repository's own
    // folder, sees no commit past the base, and its submission resolves.
    let agent_run = format!("t-rebench-agent-{}", std::process::id());
    let trajectory = agent_gold(
        dir.path(),
        &["-d", &rows_arg, "-i", "demo__calc-7"],
        "demo__calc-7",
        &gold,
        &agent_run,
        "agent.jsonl",
    );
    assert!(
        trajectory["image"]
            .as_str()
            .expect("image")
            .starts_with("swerve/scrubbed:"),
        "{}",
        trajectory["image"]
    );
    let first = trajectory["turns"][0]["observation"]
        .as_str()
        .expect("observation");
    assert!(first.contains("/calc\nHISTORY_CUT"), "{first}");
    run(&agent_run, "agent.jsonl", &[]);
    let graded = report(dir.path(), &agent_run, "scripted", "demo__calc-7");
    assert_eq!(graded["resolved"], true, "{graded:#}");
}

const CALC_PY: &str = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n";
const TEST_PY: &str = "import unittest\n\nimport calc\n\n\nclass CalcTest(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(calc.sub(5, 3), 2)\n";
const FIXED_TEST_PY: &str = "import unittest\n\nimport calc\n\n\nclass CalcTest(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(calc.sub(5, 3), 2)\n\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n";

/// The instance's run script: fails without the Dockerfiles' ENV exports, then runs each
/// selected file with unittest (whose results go to stderr).
const RUN_SCRIPT: &str = "#!/bin/bash\nset -e\ntest \"$CALC_MODE\" = strict || { echo \"no ENV exports\"; exit 3; }\ncd /app\nIFS=',' read -ra files <<< \"$1\"\nfor file in \"${files[@]}\"; do\n  echo \"running $file\"\n  python -m unittest -v \"$file\" || true\ndone\n";

/// The instance's parser: unittest's `name (module.Class.name) ... ok` lines of both logs.
const PARSER_PY: &str = "import json\nimport re\nimport sys\n\nLINE = re.compile(r'^(\\w+) \\(([\\w.]+)\\.(\\w+)\\.\\w+\\) \\.\\.\\. (ok|FAIL|ERROR|skipped.*)$')\nSTATUS = {'ok': 'PASSED', 'FAIL': 'FAILED', 'ERROR': 'ERROR'}\n\ntests = []\nfor path in sys.argv[1:3]:\n    for line in open(path).read().splitlines():\n        m = LINE.match(line)\n        if m:\n            name = m.group(2).replace('.', '/') + '.py | ' + m.group(3) + ' ' + m.group(1)\n            tests.append({'name': name, 'status': STATUS.get(m.group(4), 'SKIPPED')})\njson.dump({'tests': tests}, open(sys.argv[3], 'w'))\n";

/// A patch that leaves `add` wrong and, when imported by the tests, rewrites the evaluation's
/// parser so that it reports every listed test as passed.
const PARSER_FORGER: &str = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,3 +1,10 @@\n+import os\n+\n+if os.path.isdir('/workspace'):\n+    with open('/workspace/parser.py', 'w') as f:\n+        f.write(\"import json, sys\\nnames = ['tests/test_calc.py | CalcTest test_add', 'tests/test_calc.py | CalcTest test_sub']\\njson.dump({'tests': [{'name': n, 'status': 'PASSED'} for n in names]}, open(sys.argv[3], 'w'))\\n\")\n+\n+\n def add(a, b):\n     return a - b\n \n";

#[test]
fn swe_bench_pro_rows_run_their_scripts_and_hardened_mode_parses_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let context = dir.path().join("image");
    let (base, fix, gold, test_patch) = project(
        &context.join("app"),
        &[("calc.py", CALC_PY), ("tests/test_calc.py", TEST_PY)],
        &[
            ("calc.py", &CALC_PY.replacen("a - b", "a + b", 1)),
            ("tests/test_calc.py", FIXED_TEST_PY),
        ],
        "calc.py",
    );
    std::fs::write(
        context.join("Dockerfile"),
        format!(
            "FROM {}\nRUN ln -s /usr/bin/python3 /usr/local/bin/python\nCOPY app /app\nWORKDIR /app\n",
            base_image()
        ),
    )
    .expect("Dockerfile");
    let tag = format!("demo.calc-{}", &base[..12]);
    build(&format!("jefzda/sweap-images:{tag}"), &context);

    let id = format!("instance_demo__calc-{}", &fix[..12]);
    let checkout = dir.path().join("pro");
    let scripts = checkout.join("run_scripts").join(&id);
    std::fs::create_dir_all(&scripts).expect("run_scripts");
    std::fs::write(scripts.join("run_script.sh"), RUN_SCRIPT).expect("run_script.sh");
    std::fs::write(scripts.join("parser.py"), PARSER_PY).expect("parser.py");
    for (kind, text) in [
        (
            "base_dockerfile",
            "FROM debian\nENV CALC_MODE=strict\nRUN true\n",
        ),
        (
            "instance_dockerfile",
            "FROM base\n  ENV PYTHONDONTWRITEBYTECODE=1\n",
        ),
    ] {
        let folder = checkout.join("dockerfiles").join(kind).join(&id);
        std::fs::create_dir_all(&folder).expect("dockerfiles");
        std::fs::write(folder.join("Dockerfile"), text).expect("Dockerfile");
    }
    let rows = dir.path().join("pro.jsonl");
    write_jsonl(
        &rows,
        &[json!({
            "instance_id": id, "repo": "demo/calc", "base_commit": base, "patch": gold,
            "test_patch": test_patch, "problem_statement": "add subtracts",
            "repo_language": "python",
            "fail_to_pass": "['tests/test_calc.py | CalcTest test_add']",
            "pass_to_pass": "['tests/test_calc.py | CalcTest test_sub']",
            "selected_test_files_to_run": "['tests/test_calc.py']",
            "before_repo_set_cmd": format!("git reset --hard {base}\ngit clean -fd\ngit checkout {fix} -- tests/test_calc.py"),
            "dockerhub_tag": tag,
        })],
    );
    let rows_arg = rows.display().to_string();
    let checkout_arg = checkout.display().to_string();
    let run = |run_id: &str, predictions: &str, mode: &str| {
        harness(
            dir.path(),
            &[
                "run",
                "-d",
                &rows_arg,
                "-p",
                predictions,
                "--run-id",
                run_id,
                "--pro-scripts",
                &checkout_arg,
                "--mode",
                mode,
            ],
        );
    };

    for mode in ["compat", "hardened"] {
        let run_id = format!("t-pro-gold-{mode}-{}", std::process::id());
        run(&run_id, "gold", mode);
        let gold = report(dir.path(), &run_id, "gold", &id);
        let folder = instance_dir(dir.path(), &run_id, "gold", &id);
        let log = read(&folder.join("run_instance.log"));
        assert_eq!(gold["resolved"], true, "{mode}: {gold:#}\n{log}");
        assert_eq!(gold["verdict_rule"], "subset");
        assert_eq!(
            gold["tests_status"]["PASS_TO_PASS"]["success"],
            json!(["tests/test_calc.py | CalcTest test_sub"])
        );
        let stderr = read(&folder.join("stderr.log"));
        assert!(
            stderr.contains("test_add (tests.test_calc.CalcTest.test_add) ... ok"),
            "{stderr}"
        );
        let script = read(&folder.join("eval.sh"));
        assert!(
            script.contains(
                "export CALC_MODE=strict\nexport PYTHONDONTWRITEBYTECODE=1\n# apply patch\ncd /app"
            ),
            "{script}"
        );
        if mode == "compat" {
            assert!(
                script.contains(&format!("git checkout {fix} -- tests/test_calc.py")),
                "{script}"
            );
            assert!(!log.contains("History check"), "{log}");
        } else {
            assert!(
                script.contains("git apply -v /workspace/test_patch.diff"),
                "{script}"
            );
            assert!(
                log.contains("Tests from the row's test_patch")
                    && log.contains("History check:")
                    && log.contains("Parsing with parser.py in a fresh container"),
                "{log}"
            );
        }
    }

    // The parser forger: compat mode runs parser.py where the patch's code rewrote it;
    // hardened mode parses the logs in a fresh container.
    let forged = dir.path().join("forger.jsonl");
    predictions(&forged, "forger", &[(&id, PARSER_FORGER)]);
    for (mode, resolved) in [("compat", true), ("hardened", false)] {
        let run_id = format!("t-pro-forger-{mode}-{}", std::process::id());
        run(&run_id, &forged.display().to_string(), mode);
        let report = report(dir.path(), &run_id, "forger", &id);
        assert_eq!(report["resolved"], resolved, "{mode}: {report:#}");
    }

    // `harness agent` on the row: in `/app` of the cut image, no commit past the base (the
    // image's repository holds the fix's commit), and its submission resolves.
    let agent_run = format!("t-pro-agent-{}", std::process::id());
    let trajectory = agent_gold(
        dir.path(),
        &["-d", &rows_arg, "--pro-scripts", &checkout_arg],
        &id,
        &gold,
        &agent_run,
        "agent-preds.jsonl",
    );
    let first = trajectory["turns"][0]["observation"]
        .as_str()
        .expect("observation");
    assert!(first.contains("/app\nHISTORY_CUT"), "{first}");
    run(&agent_run, "agent-preds.jsonl", "hardened");
    let graded = report(dir.path(), &agent_run, "scripted", &id);
    assert_eq!(graded["resolved"], true, "{graded:#}");
}
