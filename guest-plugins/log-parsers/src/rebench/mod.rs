//! SWE-rebench V2's named log parsers: every function its evaluation can name in a row's
//! `install_config.log_parser` (its `NAME_TO_PARSER` table, and the module-level parsers and
//! aliases its `get_parser` reaches by attribute), ported behaviour for behaviour, with the
//! timing-suffix normalisation its evaluation applies to the names a parser returns.
//!
//! These are a sibling of the SWE-bench parsers, not a part of them: several names exist in both
//! projects with different behaviour (`parse_log_pytest`, `parse_log_gotest`,
//! `parse_log_cargo`, ...), so a row says which family it comes from and [`RebenchParser`] is
//! looked up only for SWE-rebench V2 rows. SWE-rebench V2 has four statuses (`PASSED`,
//! `FAILED`, `SKIPPED`, `ERROR`); its parsers never write `XFAIL` or another token.
//!
//! `tests/rebench.rs` checks every parser against the outputs SWE-rebench V2's own parsers gave
//! on the cases under `tests/rebench-logs/` (the outputs are committed, the upstream code is
//! not; `tests/rebench-logs/expected.py` recomputes them from a checkout of SWE-rebench V2).
//!
//! Module map: `first` and `second` hold the ports, each with its `PARSERS` table of
//! `(name, function)`; this file joins the tables, resolves the aliases and normalises names.

use std::sync::LazyLock;

use regex::Regex;

use crate::error::ParseError;
use crate::status::StatusMap;

mod first;
mod second;

/// How an evaluator context names one of these parsers: `swe-rebench-v2:<name>` (the bare
/// names belong to SWE-bench's parsers).
pub const REBENCH_PARSER_PREFIX: &str = "swe-rebench-v2:";

/// A ported parser: the log in, the status map out (or the exception upstream raises).
pub(crate) type ParseFn = fn(&str) -> Result<StatusMap, ParseError>;

/// Names that upstream binds to another parser at module level (`parse_log_flask =
/// parse_log_pytest`, ...), resolved before the tables are searched.
const ALIASES: &[(&str, &str)] = &[
    ("parse_log_astroid", "parse_log_pytest"),
    ("parse_log_flask", "parse_log_pytest"),
    ("parse_log_marshmallow", "parse_log_pytest"),
    ("parse_log_pvlib", "parse_log_pytest"),
    ("parse_log_pyvista", "parse_log_pytest"),
    ("parse_log_sqlfluff", "parse_log_pytest"),
    ("parse_log_xarray", "parse_log_pytest"),
    ("parse_log_pydicom", "parse_log_pytest_options"),
    ("parse_log_requests", "parse_log_pytest_options"),
    ("parse_log_pylint", "parse_log_pytest_options"),
    ("parse_log_astropy", "parse_log_pytest_v2"),
    ("parse_log_scikit", "parse_log_pytest_v2"),
    ("parse_log_sphinx", "parse_log_pytest_v2"),
    ("parse_log_pydantic", "parse_log_pytest"),
    ("parse_log_dvc", "parse_log_pytest"),
    ("parse_lua_nvim", "parse_lue_nvim"),
    ("parse_log_lua_nvim", "parse_lue_nvim"),
    ("parse_log_java_mvn", "parse_java_mvn"),
    ("parse_log_java_mvn_v2", "parse_java_mvn_v2"),
    ("parse_log_r_junit", "parse_logs_r_junit"),
    ("parse_log_kotlin_junit", "parse_logs_kotlin_junit"),
    ("parse_log_ocaml_v5", "parse_log_ocaml_v4"),
    ("parse_log_junit", "parse_log_sbt"),
];

/// One of SWE-rebench V2's parsers, by the name a row gives.
#[derive(Debug, Clone, Copy)]
pub struct RebenchParser {
    name: &'static str,
    parse: ParseFn,
}

impl RebenchParser {
    /// The parser a row's `install_config.log_parser` names (a table name or an alias).
    pub fn from_name(name: &str) -> Option<RebenchParser> {
        let target = ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map_or(name, |(_, target)| *target);
        first::PARSERS
            .iter()
            .chain(second::PARSERS)
            .find(|(known, _)| *known == target)
            .map(|&(_, parse)| RebenchParser {
                name: ALIASES
                    .iter()
                    .find(|(alias, _)| *alias == name)
                    .map_or_else(|| table_name(target), |(alias, _)| *alias),
                parse,
            })
    }

    /// Every name [`RebenchParser::from_name`] knows: the ported functions, then the aliases.
    pub fn names() -> impl Iterator<Item = &'static str> {
        first::PARSERS
            .iter()
            .chain(second::PARSERS)
            .map(|(name, _)| *name)
            .chain(ALIASES.iter().map(|(alias, _)| *alias))
    }

    /// The name it was looked up by.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parser's status map with every name normalised as the evaluation does
    /// ([`normalize_test_name`]; two names that normalise alike keep the first one's place and
    /// the last one's status, as a Python dict comprehension does).
    pub fn try_parse(&self, log: &str) -> Result<StatusMap, ParseError> {
        let raw = (self.parse)(log)?;
        let mut out = StatusMap::new();
        for (name, status) in raw.iter() {
            out.insert(normalize_test_name(name), status.clone());
        }
        Ok(out)
    }

    /// Whether two names run the same port (an alias and its target).
    pub fn same_code(&self, other: &RebenchParser) -> bool {
        std::ptr::fn_addr_eq(self.parse, other.parse)
    }

    /// The parser's own status map, before the evaluation's normalisation.
    pub fn try_parse_raw(&self, log: &str) -> Result<StatusMap, ParseError> {
        (self.parse)(log)
    }
}

fn table_name(target: &str) -> &'static str {
    first::PARSERS
        .iter()
        .chain(second::PARSERS)
        .find(|(known, _)| *known == target)
        .map_or("", |(name, _)| *name)
}

/// Timing patterns some runners put in test names, stripped in this order.
static TIMING: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        // ` [1.34 ms]`, `[123 ms]` at the end.
        Regex::new(r"(?i)[\s\x1C-\x1F]*\[[\s\x1C-\x1F]*\d+(?:\.\d+)?[\s\x1C-\x1F]*(?:ms|s)[\s\x1C-\x1F]*\][\s\x1C-\x1F]*\z")
            .expect("valid pattern"),
        // ` in 29.08 msec`, ` in 1 sec` anywhere.
        Regex::new(r"(?i)[\s\x1C-\x1F]+in[\s\x1C-\x1F]+\d+(?:\.\d+)?[\s\x1C-\x1F]+(?:msec|sec)\b")
            .expect("valid pattern"),
        // ` (1.234s)`, ` (123ms)` at the end.
        Regex::new(r"(?i)[\s\x1C-\x1F]*\([\s\x1C-\x1F]*\d+(?:\.\d+)?[\s\x1C-\x1F]*(?:ms|s)[\s\x1C-\x1F]*\)[\s\x1C-\x1F]*\z")
            .expect("valid pattern"),
    ]
});

/// A test name with the timing suffixes SWE-rebench V2's evaluation strips from both the parsed
/// and the expected names, then Python's `str.strip()`.
pub fn normalize_test_name(name: &str) -> String {
    let mut name = name.to_owned();
    for pattern in TIMING.iter() {
        name = pattern.replace_all(&name, "").into_owned();
    }
    crate::pystr::strip(&name).to_owned()
}
