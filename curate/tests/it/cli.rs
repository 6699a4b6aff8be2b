//! What `curate` prints, as snapshots (`tests/it/snapshots/`; `cargo insta review` after a
//! deliberate change): every `--help`, and the errors a user meets first.

use std::path::Path;

use swerve_tests::cli::{help_tree, run, run_env, run_signalled_when};

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

/// The codes of the exit table `curate` gives beyond `harness`'s (`docs/cli.md`): 3 when part
/// of the work is left to a rerun (here every task that needs an engine ended in an
/// infrastructure error: there is none), and a signal while the events are read.
#[test]
fn exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    // Paths relative to the folder the commands run in, so that the snapshot holds none of the
    // temporary folder's.
    let fixture = swerve_tests::environments::build(&dir.path().join("fixture"));
    std::fs::create_dir(dir.path().join("repos")).unwrap();
    let relative = |path: &Path| {
        let path = path.strip_prefix(dir.path()).expect("in the folder");
        path.display().to_string()
    };
    let (tasks, repos) = (relative(&fixture.tasks), relative(&fixture.repos));
    let no_engine = run_env(
        curate(),
        &[
            "-q", "validate", "--tasks", &tasks, "--repos", &repos, "--output", "out",
        ],
        dir.path(),
        &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
    );
    let events_stdin = [
        "-q",
        "run",
        "--events",
        "/dev/stdin",
        "--repos",
        "repos",
        "--output",
        "o",
    ];
    let text = [
        no_engine,
        // Signalled once the run has started (its spill folder is made after its resume hint).
        run_signalled_when(
            curate(),
            &events_stdin,
            dir.path(),
            "INT",
            Some(&|| {
                std::fs::read_dir(dir.path().join("o")).is_ok_and(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .any(|e| e.file_name().to_string_lossy().starts_with(".curate-"))
                })
            }),
        ),
    ];
    insta::assert_snapshot!(text.join("\n"));
}
