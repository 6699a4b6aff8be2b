//! `curate run` on curate's own corpus (`swerve_tests::curation::corpus`): every rejection reason,
//! the tricky history shapes (merge commit after main moved on, squash merge with the head only
//! under `refs/pull/N/head`, a force-pushed head, trimmed 2025 payloads, renames, deletions, a
//! binary file, bot titles, every link form and non-links, a duplicate backport), bad input
//! (an invalid line, a repeated event, a truncated gzip), stable output, and shards that merge
//! into what one process writes.

use crate::support;
use std::collections::BTreeMap;
use std::path::Path;

use swerve_curate::{Config, Inputs, Reason, Shard};
use swerve_tests::curation::corpus::{WIDGET, build};

fn inputs(root: &Path) -> Inputs {
    Inputs {
        events: vec![root.join("events")],
        repos: root.join("repos"),
    }
}

#[test]
fn every_reason_and_shape() {
    let dir = tempfile::tempdir().unwrap();
    let built = build(dir.path());
    let config = Config {
        jobs: 2,
        ..Config::default()
    };
    let (a, b) = (dir.path().join("out-a"), dir.path().join("out-b"));
    let outcome = support::run(&inputs(dir.path()), &config, &a);
    let mut got = BTreeMap::new();
    for t in &outcome.tasks {
        got.insert((t.repo.clone(), t.pull_number), None);
    }
    for r in &outcome.rejected {
        got.insert((r.repo.clone(), r.pull_number), Some(r.reason.as_str()));
    }
    got.remove(&("x/y".to_owned(), 0));
    assert_eq!(got, built.expected, "rejected: {:#?}", outcome.rejected);

    let task = |n: u64| outcome.tasks.iter().find(|t| t.pull_number == n).unwrap();
    // Merge base, not base.sha; test files stay out of the oracle.
    let t2 = task(2);
    assert_eq!(t2.edited_test_files, ["tests/test_core.py"]);
    assert!(t2.oracle_new_content["src/widget/core.py"].contains(".lower()"));
    assert!(!t2.oracle_new_content.contains_key("tests/test_core.py"));
    assert!(t2.test_patch.contains("tests/test_core.py") && !t2.patch.contains("tests/"));
    assert_eq!(
        t2.problem_statement,
        "render keeps capitals\nrender('A') gives 'A'.\n"
    );
    // Rename = deletion + addition; a deleted file's new content is "".
    let t6 = task(6);
    assert_eq!(t6.oracle_new_content["src/widget/util.py"], "");
    assert_eq!(t6.oracle_new_content["src/widget/old.py"], "");
    assert!(t6.oracle_new_content["src/widget/helpers.py"].contains("max(size, 1)"));
    assert!(!t6.code_context.contains_key("src/widget/helpers.py"));
    // Binary files appear nowhere in the context or oracle.
    let t8 = task(8);
    assert_eq!(t8.binary_files, ["src/widget/data/blob.bin"]);
    assert!(
        !t8.code_context
            .keys()
            .chain(t8.oracle_new_content.keys())
            .any(|p| p.ends_with(".bin"))
    );
    // The closed event's head, not the force-pushed-away one.
    assert!(task(10).oracle_new_content["src/widget/core.py"].contains("text or ''"));
    assert_eq!(task(10).issue_numbers, [9]);
    // Trimmed payloads: merged per the clone, the merge commit found.
    assert!(task(12).merge_commit.is_some());
    assert_eq!(
        task(34).merge_commit.as_deref(),
        Some(built.squash34.as_str())
    );
    assert_eq!(task(34).issue_numbers, [33]);
    // Relevant files: existing, unedited, code.
    for t in &outcome.tasks {
        for p in &t.relevant_files {
            assert!(
                !t.edited_files.contains(p) && t.code_context.contains_key(p),
                "{p}"
            );
        }
    }
    let funnel = &outcome.funnel;
    assert_eq!(funnel.events.invalid_lines, 1);
    assert_eq!(funnel.events.duplicate_events, 1);
    assert_eq!(funnel.events.broken_files, 1);
    assert!(
        funnel
            .problems
            .iter()
            .any(|p| p.file.ends_with("2017-03-01-0.json.gz"))
    );

    // Written output is stable.
    support::run(
        &inputs(dir.path()),
        &Config {
            jobs: 1,
            ..Config::default()
        },
        &b,
    );
    // Many partitions on disk (one in memory at a time) write the same files as one.
    let c = dir.path().join("out-c");
    support::run(
        &inputs(dir.path()),
        &Config {
            partitions: 7,
            ..Config::default()
        },
        &c,
    );
    for file in ["tasks.jsonl", "rejected.jsonl"] {
        for other in [&b, &c] {
            assert_eq!(
                std::fs::read(a.join(file)).unwrap(),
                std::fs::read(other.join(file)).unwrap(),
                "{file} of {}",
                other.display()
            );
        }
    }
    let (mut fa, mut fb) = (
        support::read_output(&a).funnel,
        support::read_output(&b).funnel,
    );
    fa.timings_ms.clear();
    fb.timings_ms.clear();
    assert_eq!(fa, fb);

    // Shards merge into what one process writes.
    let mut shard_dirs = Vec::new();
    for k in 0..3 {
        let config = Config {
            shard: Some(Shard::parse(&format!("{k}/3")).unwrap()),
            partitions: 2,
            ..Config::default()
        };
        let out = dir.path().join(format!("shard-{k}"));
        support::run(&inputs(dir.path()), &config, &out);
        shard_dirs.push(out);
    }
    let merged = dir.path().join("merged");
    swerve_curate::merge::merge(
        &shard_dirs,
        &swerve_curate::Output {
            dir: merged.clone(),
            parquet: false,
        },
    )
    .unwrap();
    for file in ["tasks.jsonl", "rejected.jsonl"] {
        assert_eq!(
            std::fs::read(a.join(file)).unwrap(),
            std::fs::read(merged.join(file)).unwrap(),
            "{file}"
        );
    }
    let mut fm = support::read_output(&merged).funnel;
    fm.timings_ms.clear();
    assert_eq!(fa, fm);
}

#[test]
fn window_and_budget() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let config = Config {
        since: Some("2025-01-01".into()),
        max_prompt_tokens: 10,
        relevant_files: 0,
        ..Config::default()
    };
    let outcome = support::run(&inputs(dir.path()), &config, &dir.path().join("out-1"));
    assert!(outcome.tasks.is_empty());
    let reason = |repo: &str, n: u64| {
        outcome
            .rejected
            .iter()
            .find(|r| r.repo == repo && r.pull_number == n)
            .unwrap()
            .reason
    };
    assert_eq!(reason(WIDGET, 12), Reason::TooLong);
    assert_eq!(reason(WIDGET, 2), Reason::OutOfWindow);
    assert_eq!(reason("django/django", 1), Reason::ExcludedRepo);
}

#[test]
fn cli_run_shards_merge_and_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let curate = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_curate"))
            .args(args)
            .output()
            .unwrap()
    };
    let root = dir.path().to_str().unwrap().to_owned();
    let (events, repos) = (format!("{root}/events"), format!("{root}/repos"));
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "run", "--events", &events, "--repos", &repos, "--output", out,
        ];
        args.extend_from_slice(extra);
        curate(&args)
    };
    let whole = format!("{root}/whole");
    let out = run(&whole, &["--jobs", "2", "--relevant", "1", "--parquet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tasks: 7"), "{stderr}");
    assert!(
        support::read_output(Path::new(&whole))
            .tasks
            .iter()
            .all(|t| t.relevant_files.len() <= 1)
    );
    let (s0, s1) = (format!("{root}/s0"), format!("{root}/s1"));
    assert!(
        run(&s0, &["--shard", "0/2", "--relevant", "1"])
            .status
            .success()
    );
    assert!(
        run(&s1, &["--shard", "1/2", "--relevant", "1"])
            .status
            .success()
    );
    let merged = format!("{root}/merged");
    let out = curate(&["merge", &s0, &s1, "--output", &merged, "--parquet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["tasks.jsonl", "rejected.jsonl"] {
        let read = |d: &str| std::fs::read(Path::new(d).join(file)).unwrap();
        assert_eq!(read(&whole), read(&merged), "{file}");
    }
    check_parquet(Path::new(&whole));
    check_parquet(Path::new(&merged));
    assert!(
        !Path::new(&s0).join("tasks.parquet").exists(),
        "only when asked"
    );
    // Bad arguments are the only thing that stops a run.
    assert!(!run(&whole, &["--shard", "2/2"]).status.success());
    assert!(!run(&whole, &["--since", "2020/01/01"]).status.success());
    assert!(
        !curate(&["run", "--repos", &repos, "--output", &whole])
            .status
            .success()
    );
    let missing = format!("{root}/no-such-events");
    assert!(
        !curate(&[
            "run", "--events", &missing, "--repos", &repos, "--output", &whole
        ])
        .status
        .success()
    );
    // A missing repos folder is not bad arguments: every PR is `missing_clone` or earlier.
    let nowhere = format!("{root}/no-repos");
    let out = curate(&[
        "run", "--events", &events, "--repos", &nowhere, "--output", &whole,
    ]);
    assert!(out.status.success());
    assert!(support::read_output(Path::new(&whole)).tasks.is_empty());
}

#[test]
fn cli_run_on_slurm_writes_what_one_process_writes() {
    if !swerve_tests::slurm_up("curate run --executor slurm") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let root = dir.path().to_str().unwrap().to_owned();
    let (events, repos) = (format!("{root}/events"), format!("{root}/repos"));
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--events",
            &events,
            "--repos",
            &repos,
            "--output",
            out,
            "--relevant",
            "1",
        ];
        args.extend_from_slice(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_curate"))
            .args(&args)
            .output()
            .unwrap()
    };
    let (whole, cluster) = (format!("{root}/whole"), format!("{root}/cluster"));
    assert!(run(&whole, &["--parquet"]).status.success());
    let out = run(
        &cluster,
        &["--parquet", "--executor", "slurm", "--slurm-tasks", "3"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Submitted Slurm job"), "{stderr}");
    for file in ["tasks.jsonl", "rejected.jsonl", "funnel.json"] {
        let read = |d: &str| std::fs::read(Path::new(d).join(file)).unwrap();
        if file == "funnel.json" {
            // Timings differ; the counts do not.
            let counts = |d: &str| {
                let mut v: serde_json::Value = serde_json::from_slice(&read(d)).unwrap();
                v.as_object_mut().unwrap().remove("timings_ms");
                v
            };
            assert_eq!(counts(&whole), counts(&cluster), "{file}");
        } else {
            assert_eq!(read(&whole), read(&cluster), "{file}");
        }
    }
    check_parquet(Path::new(&cluster));
    assert!(
        !Path::new(&cluster).join(".slurm").exists(),
        "the shards are merged and removed"
    );
    // A partition that does not exist is refused before any work.
    let bad = format!("{root}/bad");
    let out = run(
        &bad,
        &["--executor", "slurm", "--slurm-arg=--partition=nope"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("sbatch refused"),
        "{stderr}"
    );
    assert!(!Path::new(&bad).exists(), "{stderr}");
}

/// `tasks.parquet` holds the rows of `tasks.jsonl`: the same rows for the dataset reader, and
/// every field of every task (maps, lists, a null merge commit) read back as written.
fn check_parquet(dir: &Path) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let rows = |file: &str| swerve_swebench::dataset::read_rows(&dir.join(file)).unwrap();
    let jsonl = rows("tasks.jsonl");
    assert!(jsonl.iter().any(|row| !row.code_context.is_empty()));
    assert_eq!(rows("tasks.parquet"), jsonl);
    let file = std::fs::File::open(dir.join("tasks.parquet")).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let tasks: Vec<swerve_curate::Task> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| serde_json::from_value(row.unwrap().to_json_value()).unwrap())
        .collect();
    assert_eq!(tasks, support::read_output(dir).tasks);
}

#[test]
fn relevant_files_from_a_model_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    // A missing file, an edited file, a binary file and a real one: only the real one is kept.
    let answer =
        "1. `src/widget/missing.py`\n- src/widget/core.py\n- src/widget/__init__.py\nREADME.md";
    let (url, served) = support::mock_chat_server(answer);
    let config = Config {
        relevant_endpoint: Some(swerve_curate::endpoint::EndpointConfig::new(&url, "m")),
        ..Config::default()
    };
    let outcome = support::run(&inputs(dir.path()), &config, &dir.path().join("out-2"));
    assert!(served.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    let t2 = outcome.tasks.iter().find(|t| t.pull_number == 2).unwrap();
    assert_eq!(t2.relevant_files, ["src/widget/__init__.py", "README.md"]);
    assert_eq!(t2.code_context["README.md"], "# widget\n");

    // An endpoint that does not answer: the deterministic rule, and the run goes on.
    let config = Config {
        relevant_endpoint: Some(swerve_curate::endpoint::EndpointConfig {
            timeout_s: 2,
            ..swerve_curate::endpoint::EndpointConfig::new("http://127.0.0.1:9/v1", "m")
        }),
        ..Config::default()
    };
    let fallback = support::run(&inputs(dir.path()), &config, &dir.path().join("out-3"));
    let plain = support::run(
        &inputs(dir.path()),
        &Config::default(),
        &dir.path().join("out-4"),
    );
    assert_eq!(fallback.tasks, plain.tasks);
}
