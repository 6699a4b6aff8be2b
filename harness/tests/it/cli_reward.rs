//! `harness reward` and `harness plugin` through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A compile cache shared by the tests (the Python plugins take seconds to compile).
const CACHE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/test-plugin-cache");

fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .output()
        .expect("harness runs")
}

/// The SWE-RL development vectors: one copy in the repository, the `swerve-swe-rl` crate's test
/// data.
fn dev_vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guest-plugins/swe-rl/tests/data/swerl-dev-vectors.jsonl")
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn scores_the_development_vectors_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = harness(&[
        "reward",
        "--plugin",
        "swe-rl",
        "--plugin",
        "format=0.5",
        "--input",
        dev_vectors().to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--jobs",
        "2",
        "--batch-size",
        "7",
        "--cache-dir",
        CACHE,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let input: Vec<serde_json::Value> = std::fs::read_to_string(dev_vectors())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let output = lines(&out);
    assert_eq!(output.len(), input.len());
    for (i, (inp, out)) in input.iter().zip(&output).enumerate() {
        assert_eq!(out["line"], i + 1);
        assert_eq!(out["id"], inp["id"]);
        let swe_rl = out["plugins"]["swe-rl"]["reward"].as_f64().unwrap();
        let format = out["plugins"]["format"]["reward"].as_f64().unwrap();
        assert_eq!(
            swe_rl,
            inp["expected"]["reward"].as_f64().unwrap(),
            "{}",
            inp["id"]
        );
        assert_eq!(out["reward"].as_f64().unwrap(), swe_rl + 0.5 * format);
        assert_eq!(out["failure"], serde_json::Value::Null);
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("120 lines: 120 scored, 0 malformed"),
        "{stderr}"
    );
}

#[test]
fn a_malformed_line_is_reported_with_its_number_and_the_rest_is_scored() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"id":"a","completion":"one two three"}"#,
            "\n",
            r#"{"id":"b","prompt":"no completion"}"#,
            "\n",
            "not json\n",
            r#"{"id":"c","completion":"x","metadata":{"attack":"loop"}}"#,
            "\n",
            r#"{"id":"d","completion":""}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let o = harness(&[
        "reward",
        "--plugin",
        "rust-length",
        "--plugin",
        "hostile=2,fuel=1e7",
        "--fallback",
        "timeout=-1",
        "--input",
        input.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--cache-dir",
        CACHE,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = lines(&out);
    assert_eq!(out.len(), 5);
    assert!(
        out[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("line 2: missing field `completion`"),
        "{}",
        out[1]
    );
    assert!(
        out[2]["error"].as_str().unwrap().starts_with("line 3: "),
        "{}",
        out[2]
    );
    assert_eq!(out[0]["reward"].as_f64().unwrap(), 1.0 / 1.03 + 2.0);
    assert_eq!(out[3]["failure"], "timeout");
    assert_eq!(out[3]["plugins"]["hostile"]["failure"]["class"], "timeout");
    assert_eq!(out[3]["reward"].as_f64().unwrap(), 1.0 / 1.01 - 2.0);
    assert_eq!(out[4]["reward"].as_f64().unwrap(), 3.0);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("5 lines: 3 scored, 2 malformed"),
        "{stderr}"
    );
    assert!(stderr.contains("plugin failures: timeout 1"), "{stderr}");
}

#[test]
fn a_plugin_returning_huge_results_cannot_blow_up_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut text = String::new();
    for (id, attack) in [
        ("a", "huge-error"),
        ("b", "huge-error"),
        ("c", "huge-score"),
    ] {
        text += &format!(
            "{{\"id\":\"{id}\",\"completion\":\"x\",\"metadata\":{{\"attack\":\"{attack}\"}}}}\n"
        );
    }
    std::fs::write(&input, text).unwrap();
    let out = dir.path().join("out.jsonl");
    let o = harness(&[
        "reward",
        "--plugin",
        "hostile",
        "--input",
        input.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--cache-dir",
        CACHE,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let size = std::fs::metadata(&out).unwrap().len();
    assert!(size < 64 << 10, "{size} bytes written for three samples");
    let rows = lines(&out);
    assert_eq!(rows[0]["plugins"]["hostile"]["failure"]["truncated"], true);
    assert_eq!(rows[2]["plugins"]["hostile"]["truncated"], true);
    assert_eq!(rows[2]["reward"], 0.25);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.len() < 16 << 10, "{} bytes of stderr", stderr.len());
    assert!(
        stderr.contains("3 plugin results cut to the host's caps"),
        "{stderr}"
    );
}

#[test]
fn bad_arguments_name_what_is_wrong() {
    let o = harness(&["reward", "--plugin", "nope", "--input", "x.jsonl"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("plugin `nope` is neither a file nor a bundled plugin")
    );
    let o = harness(&[
        "reward",
        "--plugin",
        "swe-rl",
        "--input",
        "/no/such/file.jsonl",
        "--cache-dir",
        CACHE,
    ]);
    assert_eq!(o.status.code(), Some(1), "an error that stops the command");
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read /no/such/file.jsonl"));
    let o = harness(&[
        "reward",
        "--plugin",
        "swe-rl",
        "--input",
        "x",
        "--fallback",
        "oom=0",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown class `oom`"));
}

#[test]
fn plugin_inspect_describes_a_bundled_plugin() {
    let o = harness(&["plugin", "inspect", "swe-rl", "--cache-dir", CACHE]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("world       swerve:plugin/reward@0.1.0"),
        "{text}"
    );
    assert!(text.contains("name        swe-rl 0.1.0"), "{text}");
    assert!(text.contains("exports     info, score"), "{text}");
    let o = harness(&[
        "plugin",
        "inspect",
        "swebench-parsers",
        "--json",
        "--cache-dir",
        CACHE,
    ]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["world"], "evaluator");
    assert_eq!(report["info"]["name"], "swebench-parsers");
    let o = harness(&["plugin", "inspect", "hostile-imports", "--cache-dir", CACHE]);
    assert_eq!(o.status.code(), Some(1), "an error that stops the command");
    assert!(String::from_utf8_lossy(&o.stderr).contains("evil:exfil/net"));
}

/// Runs a command in `dir`, failing the test with its output when it fails.
fn run_in(dir: &Path, program: &str, args: &[&str], envs: &[(&str, &Path)]) {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir).args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        o.status.success(),
        "{program} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn score_with(plugin: &Path, samples: &Path) -> Vec<serde_json::Value> {
    let out = plugin.with_extension("out.jsonl");
    let o = harness(&[
        "reward",
        "--plugin",
        plugin.to_str().unwrap(),
        "--input",
        samples.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--cache-dir",
        CACHE,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    lines(&out)
}

#[test]
fn a_new_rust_plugin_builds_passes_its_test_and_runs_in_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let o = harness(&[
        "plugin",
        "new",
        "my-reward",
        "--lang",
        "rust",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let project = dir.path().join("my-reward");
    // A shared target folder keeps repeated runs of this test cheap.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/scaffold-test");
    let env = [("CARGO_TARGET_DIR", target.as_path())];
    run_in(&project, "cargo", &["test", "--quiet"], &env);
    run_in(
        &project,
        "cargo",
        &["build", "--release", "--target", "wasm32-wasip2", "--quiet"],
        &env,
    );
    let wasm = target.join("wasm32-wasip2/release/my_reward.wasm");
    let out = score_with(&wasm, &project.join("samples.jsonl"));
    assert_eq!(out[0]["plugins"]["my-reward"]["reward"], 1.0);
    assert_eq!(out[1]["plugins"]["my-reward"]["reward"], 0.0);
}

#[test]
fn a_new_python_plugin_builds_passes_its_test_and_runs_in_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let o = harness(&[
        "plugin",
        "new",
        "py-reward",
        "--lang",
        "python",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let project = dir.path().join("py-reward");
    run_in(&project, "bash", &["build.sh"], &[]);
    let out = score_with(
        &project.join("py-reward.wasm"),
        &project.join("samples.jsonl"),
    );
    assert_eq!(out[0]["plugins"]["py-reward"]["reward"], 1.0);
    assert_eq!(out[1]["plugins"]["py-reward"]["reward"], 0.0);
    let o = harness(&[
        "plugin",
        "new",
        "py-reward",
        "--lang",
        "python",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "refuses to overwrite");
}
