//! What `curate` prints, as snapshots (`tests/it/snapshots/`; `cargo insta review` after a
//! deliberate change): every `--help`, and the errors a user meets first.

use std::path::Path;

use swerve_tests::cli::{help_tree, run};

fn curate() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_curate"))
}

#[test]
fn help() {
    insta::assert_snapshot!(help_tree(curate()));
}

#[test]
fn errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repos")).unwrap();
    std::fs::create_dir(dir.path().join("events")).unwrap();
    let run_with = |extra: &[&'static str]| -> Vec<&'static str> {
        ["run", "--output", "out"]
            .iter()
            .chain(extra)
            .copied()
            .collect()
    };
    let cases = [
        run_with(&["--events", "missing", "--repos", "repos"]),
        run_with(&["--events", "events", "--repos", "repos", "--shard", "2/2"]),
        run_with(&["--events", "events", "--repos", "repos", "--jobs", "0"]),
    ];
    let text: Vec<String> = cases
        .iter()
        .map(|args| run(curate(), args, dir.path()))
        .collect();
    insta::assert_snapshot!(text.join("\n"));
}
