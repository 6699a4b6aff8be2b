//! What `harness` prints, as snapshots (`tests/it/snapshots/`; `cargo insta review` after a
//! deliberate change): every `--help`, and the errors a user meets first.

use std::path::Path;

use swerve_tests::cli::{help_tree, run};

fn harness() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_harness"))
}

#[test]
fn help() {
    insta::assert_snapshot!(help_tree(harness()));
}

#[test]
fn errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("row.json"),
        r#"{"instance_id": "demo__demo-1", "repo": "demo/demo"}"#,
    )
    .unwrap();
    let cases: &[&[&str]] = &[
        &["run", "-d", "missing.jsonl", "-p", "gold", "--run-id", "r"],
        &[
            "run",
            "-d",
            "princeton-nlp/SWE-bench_Lite",
            "-p",
            "gold",
            "--run-id",
            "r",
        ],
        &["run", "-p", "missing-predictions.jsonl", "--run-id", "r"],
        &[
            "reward",
            "--plugin",
            "no-such-plugin",
            "--input",
            "samples.jsonl",
        ],
        &["reward", "--plugin", "swe-rl", "--jobs", "0"],
        &["grade", "--instance", "row.json", "--log", "missing.log"],
        &["plugin", "inspect", "no-such-plugin"],
    ];
    let text: Vec<String> = cases
        .iter()
        .map(|args| run(harness(), args, dir.path()))
        .collect();
    insta::assert_snapshot!(text.join("\n"));
}
