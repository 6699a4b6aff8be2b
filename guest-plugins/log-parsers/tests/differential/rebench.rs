//! SWE-rebench V2's parsers: every case under `tests/rebench-logs/<part>/cases.jsonl` through
//! this crate's port, against the output upstream's own parser gave on it (`expected.jsonl`
//! beside it, written by `tests/rebench-logs/expected.py` from a checkout of SWE-rebench V2).
//! Both must give the same status map in the same order, or raise the same exception class.
//! Every name upstream's evaluation can resolve has at least one case.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};
use swerve_log_parsers::{RebenchParser, normalize_test_name};

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/rebench-logs")
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn jsonl(path: &std::path::Path) -> Vec<Value> {
    read(path)
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{}:{}: {err}", path.display(), number + 1))
        })
        .collect()
}

/// The keys of upstream's `NAME_TO_PARSER` (the names a row's `install_config.log_parser` takes).
const UPSTREAM_NAMES: &[&str] = &[
    "parse_log_pytest",
    "parse_log_pytest_options",
    "parse_log_pytest_v2",
    "parse_log_pytest_nebo",
    "parse_combined_test_reports",
    "parse_log_gotest",
    "parse_log_redis",
    "parse_log_jq",
    "parse_log_doctest",
    "parse_log_micropython_test",
    "parse_log_googletest",
    "parse_log_minitest",
    "parse_log_cucumber",
    "parse_log_ruby_unit",
    "parse_log_rspec_transformed_json",
    "parse_log_cargo",
    "parse_log_phpunit",
    "parse_log_maven",
    "parse_log_ant",
    "parse_log_gradle_custom",
    "parse_log_calypso",
    "parse_log_chart_js",
    "parse_log_marked",
    "parse_log_p5js",
    "parse_log_react_pdf",
    "parse_log_jest",
    "parse_log_jest_json",
    "parse_log_vitest",
    "parse_log_karma",
    "parse_log_tap",
    "parse_log_elixir",
    "parse_log_ruby_v1",
    "parse_log_cpp",
    "parse_log_cpp_v2",
    "parse_log_cpp_v3",
    "parse_log_cpp_v4",
    "parse_lue_nvim",
    "parse_lua_nvim",
    "parse_log_lua_nvim",
    "parse_java_mvn",
    "parse_log_java_mvn",
    "parse_java_mvn_v2",
    "parse_log_java_mvn_v2",
    "parse_log_php_v1",
    "parse_log_ruby_v2",
    "parse_log_haskell",
    "parse_log_haskell_v2",
    "parse_log_js",
    "parse_log_js_2",
    "parse_log_js_3",
    "parse_log_js_4",
    "parse_log_gradlew_v1",
    "parse_log_julia",
    "parse_log_npx",
    "parse_log_r",
    "parse_log_r_v2",
    "parse_log_lein",
    "parse_log_dart",
    "parse_log_dart_v2",
    "parse_log_dart_v3",
    "parse_log_scala",
    "parse_log_scala_v2",
    "parse_log_scala_v3",
    "parse_log_ocaml",
    "parse_log_ocaml_v2",
    "parse_log_ocaml_v3",
    "parse_log_ocaml_v4",
    "parse_log_ocaml_v5",
    "parse_log_sbt",
    "parse_log_junit",
    "parse_logs_r_junit",
    "parse_logs_kotlin_junit",
    "parse_log_r_junit",
    "parse_log_kotlin_junit",
    "parse_log_swift",
    "parse_log_csharp",
];

#[test]
fn rebench_parsers_match_upstream_outputs() {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("tests/rebench-logs")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_dir())
        .collect();
    parts.sort();
    let mut covered = BTreeSet::new();
    let mut failures = Vec::new();
    let mut count = 0;
    for part in &parts {
        let cases = jsonl(&part.join("cases.jsonl"));
        let expected = jsonl(&part.join("expected.jsonl"));
        assert_eq!(
            cases.len(),
            expected.len(),
            "{}: expected.jsonl is stale; rerun tests/rebench-logs/expected.py",
            part.display()
        );
        for (case, want) in cases.iter().zip(&expected) {
            count += 1;
            let name = case["parser"].as_str().expect("parser");
            assert_eq!(
                want["parser"],
                json!(name),
                "{}: cases and outputs out of step",
                part.display()
            );
            let log = match case.get("log") {
                Some(file) => read(&part.join(file.as_str().expect("log file"))),
                None => case["text"].as_str().expect("text").to_owned(),
            };
            let parser = RebenchParser::from_name(name)
                .unwrap_or_else(|| panic!("{}: no port of `{name}`", part.display()));
            covered.insert(name.to_owned());
            let ours = match parser.try_parse_raw(&log) {
                Ok(map) => json!({
                    "map": map.iter().map(|(test, status)| json!([test, status.as_str()])).collect::<Vec<_>>(),
                }),
                Err(err) => json!({ "error": err.exception.as_str() }),
            };
            let theirs = json!({
                "map": want.get("map"),
                "error": want.get("error"),
            });
            let ours_cmp = json!({ "map": ours.get("map"), "error": ours.get("error") });
            if ours_cmp != theirs {
                failures.push(format!(
                    "{} case {} ({name}):\n  ours:   {ours_cmp}\n  theirs: {theirs}",
                    part.display(),
                    want["case"]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let unresolved: Vec<&str> = UPSTREAM_NAMES
        .iter()
        .copied()
        .filter(|name| RebenchParser::from_name(name).is_none())
        .collect();
    assert!(
        unresolved.is_empty(),
        "names upstream resolves that swerve does not: {unresolved:?}"
    );
    // An alias shares its target's code, so a case of either covers both.
    let missing: Vec<&str> = RebenchParser::names()
        .filter(|name| !covered.contains(*name))
        .filter(|name| {
            let parser = RebenchParser::from_name(name).expect("listed names resolve");
            !covered
                .iter()
                .any(|other| RebenchParser::from_name(other).is_some_and(|o| o.same_code(&parser)))
        })
        .collect();
    assert!(missing.is_empty(), "parsers without a case: {missing:?}");
}

#[test]
fn timing_suffixes_are_stripped_as_the_evaluation_strips_them() {
    for (raw, want) in [
        ("Suite > adds [1.34 ms]", "Suite > adds"),
        ("Suite > adds[123 MS]", "Suite > adds"),
        ("botan: hashes in 29.08 msec ok", "botan: hashes ok"),
        ("botan: hashes in 1 sec", "botan: hashes"),
        ("works (1.234s)", "works"),
        ("works (12ms)  ", "works"),
        ("keeps (slow) words", "keeps (slow) words"),
        ("  padded  ", "padded"),
    ] {
        assert_eq!(normalize_test_name(raw), want, "{raw:?}");
    }
}
