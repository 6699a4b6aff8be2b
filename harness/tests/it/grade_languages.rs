//! Differential: `report.json` of SWE-bench Multilingual-style rows, graded by swerve and by
//! SWE-bench 5.0.2's own `get_eval_report`, byte for byte. The logs are the real runner output
//! of `guest-plugins/log-parsers/tests/runner-logs/` (cargo test, go test, PHPUnit, GoogleTest,
//! doctest, Node's TAP, mocha reporters, RSpec, test-unit, Jest), each wrapped the way an eval
//! script writes `test_output.txt`, under several rows: tests that pass, tests that fail, tests
//! the log lacks, both eval types, a failed exit code, a log without markers, a null patch.
//! SWE-bench runs in the tests' shared environment (`swerve_tests::swebench_venv`), one process
//! for all cases, through the parsers' driver (`tests/swebench_parse.py` of that crate).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use swerve_swebench::dataset::Instance;
use swerve_swebench::grading::{PatchState, grade};
use swerve_swebench::report::render_instance_report;

fn parsers_dir() -> PathBuf {
    swerve_tests::repo_root().join("guest-plugins/log-parsers/tests")
}

/// `test_output.txt` as an eval script writes it: commands echoed, the markers around the test
/// command's output, its exit code after the end marker.
fn wrapped(log: &str, exit_code: i32) -> String {
    format!(
        "+ git apply -v /tmp/patch.diff\nApplied patch src/lib.rs cleanly.\n\
         + : '>>>>> Start Test Output'\n{log}\n+ : '>>>>> End Test Output'\n\
         >>>>> Test Exit Code: {exit_code}\n"
    )
}

struct Case {
    name: String,
    row: Value,
    log: String,
    patch: Option<String>,
}

/// Rows over one log: the tests its parser reads split into the row's lists several ways.
fn cases_for(runner: &str, parser: &str, log: &str) -> Vec<Case> {
    let ours = swerve_log_parsers::Parser::from_log_parser_name(parser)
        .expect("registered parser")
        .parse(
            swerve_log_parsers::LogText::new(log).as_str(),
            &Default::default(),
        );
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for (name, status) in ours.iter() {
        match status.as_str() {
            "PASSED" | "XFAIL" => passed.push(name.to_owned()),
            _ => failed.push(name.to_owned()),
        }
    }
    assert!(
        !ours.is_empty(),
        "{runner}: {parser} reads no test from its own runner's log"
    );
    let row = |f2p: Vec<String>, p2p: Vec<String>, eval_type: &str| {
        json!({
            "instance_id": format!("demo__{runner}-1"),
            "repo": format!("demo/{runner}"),
            "version": "1.0",
            "base_commit": "0".repeat(40),
            "patch": "",
            "test_patch": "",
            "problem_statement": "",
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": p2p,
            "log_parser": parser,
            "eval_type": eval_type,
        })
    };
    let half = passed.len() / 2;
    let resolved = row(
        passed[..half].to_vec(),
        passed[half..].to_vec(),
        "pass_and_fail",
    );
    let mut with_failure = passed.clone();
    with_failure.extend(failed.iter().take(1).cloned());
    let unresolved = row(
        with_failure,
        vec![
            "not in the log".into(),
            passed.first().cloned().unwrap_or_default(),
        ],
        "pass_and_fail",
    );
    let fail_only = row(
        vec!["not in the log".into()],
        failed.iter().take(2).cloned().collect(),
        "fail_only",
    );
    // Lists present but empty: SWE-bench grades them (no test decides), as swerve must.
    let no_fail_to_pass = row(Vec::new(), passed.clone(), "pass_and_fail");
    let no_tests = row(Vec::new(), Vec::new(), "pass_and_fail");
    let present = Some("diff --git a/x b/x\n".to_owned());
    let case = |name: &str, row: &Value, log: String, patch: Option<String>| Case {
        name: format!("{runner}/{name}"),
        row: row.clone(),
        log,
        patch,
    };
    let exit = if failed.is_empty() { 0 } else { 1 };
    vec![
        case("resolved", &resolved, wrapped(log, exit), present.clone()),
        case(
            "unresolved",
            &unresolved,
            wrapped(log, exit),
            present.clone(),
        ),
        case("fail_only", &fail_only, wrapped(log, exit), present.clone()),
        case(
            "no FAIL_TO_PASS",
            &no_fail_to_pass,
            wrapped(log, exit),
            present.clone(),
        ),
        case("no tests", &no_tests, wrapped(log, exit), present.clone()),
        case(
            "no tests, no markers",
            &no_tests,
            log.to_owned(),
            present.clone(),
        ),
        // A failed exit code under results that show no failure is not trusted.
        case("exit code", &resolved, wrapped(log, 2), present.clone()),
        case("no markers", &resolved, log.to_owned(), present.clone()),
        case("null patch", &resolved, wrapped(log, exit), None),
    ]
}

fn ask_swebench(python: &PathBuf, requests: &[Value]) -> Vec<Value> {
    let mut child = Command::new(python)
        .arg(parsers_dir().join("swebench_parse.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start SWE-bench's driver");
    let mut stdin = child.stdin.take().expect("stdin");
    let lines: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(lines.as_bytes()));
    let answers: Vec<Value> = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map(|line| serde_json::from_str(&line.expect("driver output")).expect("JSON answer"))
        .collect();
    writer.join().expect("writer").expect("write requests");
    assert!(
        child.wait().expect("driver").success(),
        "SWE-bench's driver failed"
    );
    answers
}

#[test]
fn reports_of_other_languages_match_swebench_byte_for_byte() {
    let Some(venv) = swerve_tests::swebench_venv("report.json against SWE-bench 5.0.2's") else {
        return;
    };
    let mut cases = Vec::new();
    let runners = swerve_tests::runner_parsers();
    for (runner, parser) in &runners {
        let path = parsers_dir().join(format!("runner-logs/{runner}.log"));
        let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        cases.extend(cases_for(runner, parser, &String::from_utf8_lossy(&raw)));
    }
    let requests: Vec<Value> = cases
        .iter()
        .map(|c| {
            let mut row = c.row.clone();
            row["model_patch"] = json!(c.patch);
            json!({"report": row, "log": c.log})
        })
        .collect();
    let answers = ask_swebench(&venv.join("bin/python"), &requests);
    assert_eq!(answers.len(), cases.len());
    let mut mismatches = Vec::new();
    let mut resolved = 0;
    for (case, answer) in cases.iter().zip(&answers) {
        let instance = Instance::from_json(&case.row.to_string()).expect("row");
        let patch = match case.patch {
            Some(_) => PatchState::Present,
            None => PatchState::Null,
        };
        let ours = grade(&instance, &case.log, patch)
            .map(|g| {
                resolved += usize::from(g.report.resolved);
                render_instance_report(&instance.instance_id, &g.report)
            })
            .map_err(|e| e.to_string());
        match (&ours, answer.get("report_json").and_then(Value::as_str)) {
            (Ok(ours), Some(theirs)) if ours == theirs => {}
            _ => mismatches.push(format!(
                "{}:\n--- SWE-bench\n{answer}\n--- swerve\n{ours:?}",
                case.name
            )),
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
    // Not a vacuous comparison: some rows resolve, most do not.
    assert!(
        resolved > 0 && resolved < cases.len(),
        "{resolved} of {}",
        cases.len()
    );
    eprintln!(
        "compared {} report.json files over {} runner logs",
        cases.len(),
        runners.len()
    );
}
