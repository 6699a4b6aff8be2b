//! Differential test: every parser of this crate against SWE-bench 5.0.2's own, run by
//! `tests/swebench_parse.py` in the SWE-bench 5.0.2 environment the tests share
//! (`swerve_tests::swebench_venv`, made by `scripts/swebench-venv.sh`).
//!
//! Cases: every real runner log under `tests/runner-logs/` (written by its `generate.sh`)
//! through every registered parser, and the hand-written edge cases of `tests/cases.jsonl`
//! (at least one for each of the 57 names). Both sides get the same newline-translated text
//! and must give the same status map in the same order, or both raise the same exception
//! class. The registry and the repository maps are compared too. One Python process answers
//! all cases.

#[path = "differential/rebench.rs"]
mod rebench;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use swerve_log_parsers::{LOG_PARSER_NAMES, LogContext, LogText, Parser, REPO_PARSERS};

/// One parse to compare.
struct Case {
    /// Where it comes from, for failure messages.
    label: String,
    parser: String,
    log: String,
    ctx: LogContext,
}

impl Case {
    fn request(&self) -> Value {
        json!({
            "parser": self.parser,
            "log": self.log,
            "test_spec": {
                "instance_id": self.ctx.instance_id,
                "version": self.ctx.version,
                "repo": self.ctx.repo,
            },
        })
    }

    /// Our answer in the driver's shape.
    fn ours(&self) -> Value {
        let parser = Parser::from_log_parser_name(&self.parser)
            .unwrap_or_else(|| panic!("{}: unknown parser {}", self.label, self.parser));
        match parser.try_parse(&self.log, &self.ctx) {
            Ok(map) => json!({
                "map": map.iter().map(|(test, status)| json!([test, status.as_str()])).collect::<Vec<_>>(),
            }),
            Err(err) => json!({ "error": err.exception.as_str() }),
        }
    }
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn context(instance_id: &str, version: &str) -> LogContext {
    LogContext {
        repo: "demo/demo".to_owned(),
        instance_id: instance_id.to_owned(),
        test_command: String::new(),
        version: version.to_owned(),
    }
}

/// The test specs a real log is parsed with: a neutral one for every parser, plus one per
/// branch of the parsers that dispatch on the instance id or the version.
fn specs_for(parser: &str) -> Vec<LogContext> {
    match parser {
        "parse_log_jekyll" => vec![
            context("jekyll__jekyll-9141", "4.3"),
            context("jekyll__jekyll-8761", "4.3"),
        ],
        "parse_log_immutable_js" => vec![
            context("immutable-js__immutable-js-2006", "4.3"),
            context("immutable-js__immutable-js-2005", "4.3"),
        ],
        "parse_log_lighthouse" => vec![
            context("demo__demo-1", "9.5"),
            context("demo__demo-1", "11.0"),
            context("demo__demo-1", "2.0"),
        ],
        "parse_log_next" => vec![
            context("demo__demo-1", "1.0"),
            context("demo__demo-1", "1.27"),
        ],
        _ => vec![context("demo__demo-1", "1.0")],
    }
}

fn runner_logs() -> Vec<(String, String)> {
    let dir = crate_dir().join("tests/runner-logs");
    let mut logs: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .map(|path| {
            let raw = std::fs::read(&path).expect("read log");
            let text = String::from_utf8_lossy(&raw).into_owned();
            let name = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .into_owned();
            (name, LogText::new(&text).as_str().to_owned())
        })
        .collect();
    logs.sort();
    logs
}

fn runner_cases(logs: &[(String, String)]) -> Vec<Case> {
    let mut cases = Vec::new();
    for (name, log) in logs {
        for (parser, _) in LOG_PARSER_NAMES {
            for ctx in specs_for(parser) {
                cases.push(Case {
                    label: format!("runner-logs/{name}.log with {parser} ({ctx:?})"),
                    parser: parser.to_owned(),
                    log: log.clone(),
                    ctx,
                });
            }
        }
    }
    cases
}

fn edge_cases() -> Vec<Case> {
    let path = crate_dir().join("tests/cases.jsonl");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(at, line)| {
            let case: Value = serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("cases.jsonl:{}: {err}", at + 1));
            let field = |name: &str| case["test_spec"][name].as_str().unwrap_or("").to_owned();
            let log = case["log"].as_str().expect("log").to_owned();
            Case {
                label: format!(
                    "cases.jsonl:{} ({})",
                    at + 1,
                    case["note"].as_str().unwrap_or("")
                ),
                parser: case["parser"].as_str().expect("parser").to_owned(),
                log: LogText::new(&log).as_str().to_owned(),
                ctx: LogContext {
                    repo: field("repo"),
                    instance_id: field("instance_id"),
                    test_command: String::new(),
                    version: field("version"),
                },
            }
        })
        .collect()
}

/// Sends every request to one driver process and returns its answers in order.
fn ask_swebench(python: &Path, requests: Vec<Value>) -> Vec<Value> {
    let mut child = Command::new(python)
        .arg(crate_dir().join("tests/swebench_parse.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the SWE-bench driver");
    let mut stdin = child.stdin.take().expect("stdin");
    let count = requests.len();
    let writer = std::thread::spawn(move || {
        for request in requests {
            writeln!(stdin, "{request}").expect("write request");
        }
    });
    let stdout = child.stdout.take().expect("stdout");
    let answers: Vec<Value> = BufReader::new(stdout)
        .lines()
        .map(|line| serde_json::from_str(&line.expect("read answer")).expect("JSON answer"))
        .collect();
    writer.join().expect("writer thread");
    let status = child.wait().expect("driver exit");
    assert!(status.success(), "the SWE-bench driver failed: {status}");
    assert_eq!(answers.len(), count, "one answer per request");
    answers
}

#[test]
fn parsers_match_swebench() {
    let Some(venv) = swerve_tests::swebench_venv("the parsers against SWE-bench 5.0.2's") else {
        return;
    };
    let python = venv.join("bin/python");
    let logs = runner_logs();
    for (runner, parser) in swerve_tests::runner_parsers() {
        let (_, log) = logs
            .iter()
            .find(|(name, _)| *name == runner)
            .unwrap_or_else(|| panic!("tests/runner-logs/{runner}.log is missing"));
        let map = Parser::from_log_parser_name(&parser)
            .expect("registered")
            .parse(log, &context("demo__demo-1", "1.0"));
        assert!(!map.is_empty(), "{parser} finds nothing in {runner}.log");
    }
    let edge = edge_cases();
    for (name, _) in LOG_PARSER_NAMES {
        assert!(
            edge.iter().any(|case| case.parser == name),
            "tests/cases.jsonl has no case for {name}"
        );
    }
    let mut cases = runner_cases(&logs);
    let runner_count = cases.len();
    cases.extend(edge);

    let mut requests = vec![json!({ "registry": true })];
    requests.extend(cases.iter().map(Case::request));
    let mut answers = ask_swebench(&python, requests).into_iter();
    let registry = answers.next().expect("registry answer");

    let names: Vec<&str> = LOG_PARSER_NAMES.iter().map(|(name, _)| *name).collect();
    let upstream: Vec<&str> = registry["registry"]
        .as_array()
        .expect("registry list")
        .iter()
        .map(|name| name.as_str().expect("name"))
        .collect();
    assert_eq!(
        names, upstream,
        "LOG_PARSER_NAMES is PARSER_REGISTRY, in order"
    );
    let repos = registry["repos"].as_object().expect("repo maps");
    for (repo, function) in repos {
        let expect = function.as_str().and_then(Parser::from_log_parser_name);
        assert_eq!(Parser::for_repo(repo), expect, "repository {repo}");
    }
    for (repo, _) in REPO_PARSERS {
        assert!(
            repos.contains_key(repo),
            "{repo} is in no MAP_REPO_TO_PARSER_*"
        );
    }

    let mut mismatches = Vec::new();
    for (case, theirs) in cases.iter().zip(answers) {
        let ours = case.ours();
        if ours != theirs {
            mismatches.push(format!(
                "{}\n  log: {:?}\n  swerve:   {ours}\n  swebench: {theirs}",
                case.label,
                case.log.chars().take(300).collect::<String>()
            ));
        }
    }
    println!(
        "compared {} cases ({runner_count} from {} runner logs, {} edge cases) over {} parsers",
        cases.len(),
        logs.len(),
        cases.len() - runner_count,
        names.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ from SWE-bench 5.0.2:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}
