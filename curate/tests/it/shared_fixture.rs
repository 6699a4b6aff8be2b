//! The development fixture of the shared data folder (`curation/make_fixture.py` in the folder
//! `SWERVE_SHARED_DATA` names; data the repository does not carry), case by case:
//! outcome and reason of every PR, and for tasks the merge base, the linked issues, the edited
//! code files' contents at the merge base and the head, test and binary files kept out of the
//! oracle, and the problem statement. Prints one `skipped:` line and passes when no shared data
//! folder is named.

use crate::support;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use swerve_curate::{Config, Inputs};

/// `git show REV:PATH` in a bare mirror; `None` when the path does not exist there.
fn show(gd: &Path, rev: &str, path: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(gd)
        .args(["show", &format!("{rev}:{path}")])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap())
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn development_fixture_matches_expected_json() {
    let Some(script) =
        swerve_tests::shared_data("curation/make_fixture.py", "curation development fixture")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture");
    let status = Command::new("python3")
        .arg(&script)
        .arg(&fixture)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "make_fixture.py failed");
    let inputs = Inputs {
        events: vec![fixture.join("events")],
        repos: fixture.join("repos"),
    };
    let out = dir.path().join("out");
    let written = support::run(&inputs, &Config::default(), &out);
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("expected.json")).unwrap())
            .unwrap();
    let cases = expected["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let repo = case["repo"].as_str().unwrap();
        let number = case["pull_number"].as_u64().unwrap();
        let label = format!("{repo}#{number}");
        let task = written
            .tasks
            .iter()
            .find(|t| t.repo == repo && t.pull_number == number);
        let rejected = written
            .rejected
            .iter()
            .find(|r| r.repo == repo && r.pull_number == number);
        if case["outcome"] != "task" {
            let want = case["reason"].as_str().unwrap();
            match rejected {
                Some(r) if r.reason.as_str() == want => {}
                _ => failures.push(format!(
                    "{label}: want {want}, got {rejected:?} / task {}",
                    task.is_some()
                )),
            }
            continue;
        }
        let Some(task) = task else {
            failures.push(format!("{label}: want a task, got {rejected:?}"));
            continue;
        };
        let merge_base = case["merge_base"].as_str().unwrap();
        let head = case["head"].as_str().unwrap();
        if task.base_commit != merge_base {
            failures.push(format!(
                "{label}: base {} != merge base {merge_base}",
                task.base_commit
            ));
        }
        for issue in case["linked_issues"].as_array().unwrap() {
            if !task.issue_numbers.contains(&issue.as_u64().unwrap()) {
                failures.push(format!("{label}: issue {issue} missing"));
            }
        }
        let code = strings(&case["edited_code_files"]);
        if task.edited_code_files != code {
            failures.push(format!(
                "{label}: code files {:?} != {code:?}",
                task.edited_code_files
            ));
        }
        let gd = fixture.join("repos").join(format!("{repo}.git"));
        for path in &code {
            match show(&gd, merge_base, path) {
                Some(old) if task.code_context.get(path) != Some(&old) => {
                    failures.push(format!("{label}: code_context[{path}] differs"));
                }
                None if task.code_context.contains_key(path) => {
                    failures.push(format!("{label}: new file {path} in code_context"));
                }
                _ => {}
            }
            let new = show(&gd, head, path).unwrap_or_default();
            if task.oracle_new_content.get(path) != Some(&new) {
                failures.push(format!("{label}: oracle_new_content[{path}] differs"));
            }
        }
        for path in strings(&case["edited_test_files"]) {
            if task.oracle_new_content.contains_key(&path) {
                failures.push(format!("{label}: test file {path} in the oracle"));
            }
        }
        for path in strings(&case["binary_files"]) {
            if task.oracle_new_content.contains_key(&path) || task.code_context.contains_key(&path)
            {
                failures.push(format!("{label}: binary file {path} in the task"));
            }
        }
        if let Some(want) = case["problem_statement"].as_str()
            && task.problem_statement != want
        {
            failures.push(format!("{label}: problem statement differs"));
        }
    }
    let matched = cases.len() - {
        let mut labels: Vec<&str> = failures
            .iter()
            .map(|f| f.split(':').next().unwrap())
            .collect();
        labels.dedup();
        labels.len()
    };
    eprintln!("curation fixture: {matched} of {} cases match", cases.len());
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(written.tasks.len() + written.rejected.len(), cases.len());
    let events = &expected["events"];
    assert_eq!(
        written.funnel.events.lines,
        events["lines"].as_u64().unwrap()
    );
    assert_eq!(
        written.funnel.events.invalid_lines,
        events["invalid"].as_u64().unwrap()
    );
    assert_eq!(
        written.funnel.events.duplicate_events,
        events["duplicate"].as_u64().unwrap()
    );
    assert_eq!(
        written.funnel.events.files,
        events["files"].as_u64().unwrap()
    );
}
