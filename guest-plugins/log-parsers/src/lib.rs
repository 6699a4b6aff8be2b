//! Behaviour-for-behaviour ports of the SWE-bench 5.0.2 log parsers for Python repositories,
//! and of `get_logs_eval`, which decides whether a `test_output.txt` is gradeable and which
//! status map it yields.
//!
//! The dataset's FAIL_TO_PASS / PASS_TO_PASS ids were produced by these parsers, quirks
//! included (ids cut at the first space, docstring lines as Django test names, sympy's
//! unparsed last test per file, ...), so nothing here is "fixed": every function documents the
//! upstream behaviour it reproduces. The crate is pure (no I/O, no threads) so that it also
//! builds as a wasm32-wasip2 evaluator component.
//!
//! What it is not: it does not grade (FAIL_TO_PASS outcomes, resolution and the report files
//! live in the harness crate), it does not read files, and it does not cover the non-Python
//! parsers of SWE-bench Multilingual/Multimodal (jest, gotest, maven, ...):
//! [`Parser::from_log_parser_name`] returns `None` for those, which evaluator plugins handle.
//!
//! Typical use:
//!
//! ```
//! use swerve_log_parsers::{evaluate_log, LogContext, LogText, Parser};
//!
//! let raw = "+ : '>>>>> Start Test Output'\nPASSED tests/t.py::test_a\n+ : '>>>>> End Test Output'\n";
//! let parser = Parser::from_log_parser_name("parse_log_pytest").unwrap();
//! let evaluation = evaluate_log(&LogText::new(raw), parser, &LogContext::default()).unwrap();
//! assert_eq!(evaluation.status_map.get("tests/t.py::test_a").unwrap().as_str(), "PASSED");
//! ```

#[cfg(target_arch = "wasm32")]
mod component;
mod django;
mod infra;
mod parser;
mod pystr;
mod pytest;
mod seaborn;
mod section;
mod status;
mod sympy;

pub use infra::{FailureTier, InfraFailureReason, classify_infra_failure};
pub use parser::{LOG_PARSER_NAMES, LogContext, Parser, REPO_PARSERS};
pub use section::{
    BadCode, END_TEST_OUTPUT, Evaluation, ExitCode, LogProblem, LogText, MissingMarkers,
    ParsedRegion, START_TEST_OUTPUT, TEST_EXIT_CODE, evaluate_log, evaluate_log_with,
    extract_test_section, shows_suite_evidence, test_exit_code,
};
pub use status::{Status, StatusMap, TestStatus};
