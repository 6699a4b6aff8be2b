//! What `harness` prints, as snapshots (`tests/it/snapshots/`; `cargo insta review` after a
//! deliberate change): every `--help`, and the errors a user meets first.

use std::path::Path;

use swerve_tests::cli::{help_tree, run, run_signalled, run_signalled_when};

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
        &["report", "-p", "gold", "--run-id", "nosuchrun"],
    ];
    let text: Vec<String> = cases
        .iter()
        .map(|args| run(harness(), args, dir.path()))
        .collect();
    insta::assert_snapshot!(text.join("\n"));
}

/// Every code of the exit table that `harness` gives on its own (`docs/cli.md`; 3, work left
/// undone, is a Slurm run's and `curate`'s): done, an error, bad arguments as clap and as the
/// binary itself finds them, and each signal, which the binary's one exit classifier turns into
/// its code whatever the command was doing.
#[test]
fn exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let reward_stdin = [
        "-q",
        "reward",
        "--plugin",
        "swe-rl",
        "--input",
        "/dev/stdin",
    ];
    let text = [
        run(harness(), &["plugin", "list"], dir),
        run(
            harness(),
            &["grade", "--instance", "missing.json", "--log", "x.log"],
            dir,
        ),
        run(
            harness(),
            &["run", "-p", "gold", "--run-id", "r", "--timeout", "0"],
            dir,
        ),
        run(
            harness(),
            &[
                "reward",
                "--plugin",
                "swe-rl",
                "--input",
                "x.jsonl",
                "--fallback",
                "timeout",
            ],
            dir,
        ),
        run_signalled(harness(), &reward_stdin, dir, "INT"),
        // Signalled once the output is open (its key file written), so that there is a
        // partial file to name.
        run_signalled_when(
            harness(),
            &[&reward_stdin[..], &["--output", "out.jsonl"]].concat(),
            dir,
            "TERM",
            Some(&|| dir.join("out.jsonl.partial.key").exists()),
        ),
    ];
    insta::assert_snapshot!(text.join("\n"));
}
