//! The parser registry: SWE-bench's `log_parser` names, the repo → parser table, and dispatch.

use crate::status::StatusMap;
use crate::{django, pytest, seaborn, sympy};

/// What the harness knows about the run whose log is parsed. The Python parsers receive the
/// instance's test spec but none of the Python-repo parsers reads it; it is kept so that
/// parsers for other ecosystems (evaluator plugins) get the same inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogContext {
    /// `owner/name`, e.g. `django/django`.
    pub repo: String,
    /// e.g. `django__django-11099`.
    pub instance_id: String,
    /// The test command of the eval script.
    pub test_command: String,
    /// The environment version key, e.g. `3.0`.
    pub version: String,
}

/// One parser behaviour of SWE-bench 5.0.2 for Python repositories. Several registered names
/// share a behaviour (`parse_log_xarray` is `parse_log_pytest`); see [`LOG_PARSER_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parser {
    /// `parse_log_pytest`: `-rA` summary lines, key = second token.
    Pytest,
    /// `parse_log_pytest_options`: pytest with temporary paths in parameters normalised.
    PytestOptions,
    /// `parse_log_pytest_v2`: ANSI remnants removed, ids with spaces kept, `id STATUS` lines.
    PytestV2,
    /// `parse_log_django`: `runtests.py --verbosity 2` lines.
    Django,
    /// `parse_log_sympy`: `bin/test --verbose` lines and traceback headers.
    Sympy,
    /// `parse_log_matplotlib`: pytest with `MouseButton.LEFT/RIGHT` replaced by `1`/`3`.
    Matplotlib,
    /// `parse_log_seaborn`: summary lines plus verbose `test PASSED [ n%]` lines.
    Seaborn,
}

/// Every Python `log_parser` name SWE-bench 5.0.2 registers, with its behaviour.
pub const LOG_PARSER_NAMES: [(&str, Parser); 20] = [
    ("parse_log_pytest", Parser::Pytest),
    ("parse_log_pytest_options", Parser::PytestOptions),
    ("parse_log_pytest_v2", Parser::PytestV2),
    ("parse_log_django", Parser::Django),
    ("parse_log_sympy", Parser::Sympy),
    ("parse_log_matplotlib", Parser::Matplotlib),
    ("parse_log_seaborn", Parser::Seaborn),
    ("parse_log_astroid", Parser::Pytest),
    ("parse_log_flask", Parser::Pytest),
    ("parse_log_marshmallow", Parser::Pytest),
    ("parse_log_pvlib", Parser::Pytest),
    ("parse_log_pyvista", Parser::Pytest),
    ("parse_log_sqlfluff", Parser::Pytest),
    ("parse_log_xarray", Parser::Pytest),
    ("parse_log_pydicom", Parser::PytestOptions),
    ("parse_log_requests", Parser::PytestOptions),
    ("parse_log_pylint", Parser::PytestOptions),
    ("parse_log_astropy", Parser::PytestV2),
    ("parse_log_scikit", Parser::PytestV2),
    ("parse_log_sphinx", Parser::PytestV2),
];

/// SWE-bench's `MAP_REPO_TO_PARSER_PY`: repository → `log_parser` name.
pub const REPO_PARSERS: [(&str, &str); 18] = [
    ("astropy/astropy", "parse_log_astropy"),
    ("django/django", "parse_log_django"),
    ("marshmallow-code/marshmallow", "parse_log_marshmallow"),
    ("matplotlib/matplotlib", "parse_log_matplotlib"),
    ("mwaskom/seaborn", "parse_log_seaborn"),
    ("pallets/flask", "parse_log_flask"),
    ("psf/requests", "parse_log_requests"),
    ("pvlib/pvlib-python", "parse_log_pvlib"),
    ("pydata/xarray", "parse_log_xarray"),
    ("pydicom/pydicom", "parse_log_pydicom"),
    ("pylint-dev/astroid", "parse_log_astroid"),
    ("pylint-dev/pylint", "parse_log_pylint"),
    ("pytest-dev/pytest", "parse_log_pytest"),
    ("pyvista/pyvista", "parse_log_pyvista"),
    ("scikit-learn/scikit-learn", "parse_log_scikit"),
    ("sqlfluff/sqlfluff", "parse_log_sqlfluff"),
    ("sphinx-doc/sphinx", "parse_log_sphinx"),
    ("sympy/sympy", "parse_log_sympy"),
];

impl Parser {
    /// Every built-in parser.
    pub const ALL: [Parser; 7] = [
        Parser::Pytest,
        Parser::PytestOptions,
        Parser::PytestV2,
        Parser::Django,
        Parser::Sympy,
        Parser::Matplotlib,
        Parser::Seaborn,
    ];

    /// The parser registered under a dataset row's `log_parser` name; `None` for names of
    /// other ecosystems (jest, gotest, ...), which are evaluator plugins' business.
    pub fn from_log_parser_name(name: &str) -> Option<Parser> {
        LOG_PARSER_NAMES
            .iter()
            .find(|(registered, _)| *registered == name)
            .map(|&(_, parser)| parser)
    }

    /// The `log_parser` name SWE-bench uses for a repository (`pydata/xarray` →
    /// `parse_log_xarray`), for rows that predate the `log_parser` field.
    pub fn log_parser_name_for_repo(repo: &str) -> Option<&'static str> {
        REPO_PARSERS
            .iter()
            .find(|(known, _)| *known == repo)
            .map(|&(_, name)| name)
    }

    /// The parser for a repository (v4 chose by repo; v5 rows name it, with the same mapping).
    pub fn for_repo(repo: &str) -> Option<Parser> {
        Parser::log_parser_name_for_repo(repo).and_then(Parser::from_log_parser_name)
    }

    /// The generic registered name of this behaviour (`parse_log_pytest`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Parser::Pytest => "parse_log_pytest",
            Parser::PytestOptions => "parse_log_pytest_options",
            Parser::PytestV2 => "parse_log_pytest_v2",
            Parser::Django => "parse_log_django",
            Parser::Sympy => "parse_log_sympy",
            Parser::Matplotlib => "parse_log_matplotlib",
            Parser::Seaborn => "parse_log_seaborn",
        }
    }

    /// Parses a log (or the test section of one) into a status map. `log` must already have
    /// had its newlines translated (see [`crate::LogText`]); lines are split on `\n` only.
    pub fn parse(&self, log: &str, _ctx: &LogContext) -> StatusMap {
        match self {
            Parser::Pytest => pytest::parse_pytest(log),
            Parser::PytestOptions => pytest::parse_pytest_options(log),
            Parser::PytestV2 => pytest::parse_pytest_v2(log),
            Parser::Django => django::parse_django(log),
            Parser::Sympy => sympy::parse_sympy(log),
            Parser::Matplotlib => pytest::parse_matplotlib(log),
            Parser::Seaborn => seaborn::parse_seaborn(log),
        }
    }
}

/// Test helper shared by the parser modules: parse `log` and compare the map, in order, with
/// `expect` (key, status string) pairs.
#[cfg(test)]
pub(crate) fn check_parser(parser: Parser, log: &str, expect: &[(&str, &str)]) {
    let map = parser.parse(log, &LogContext::default());
    let got: Vec<(&str, &str)> = map.iter().map(|(k, s)| (k, s.as_str())).collect();
    assert_eq!(got, expect, "{} on {log:?}", parser.name());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_table_resolves_to_the_spec_behaviours() {
        let check = |repo: &str, name: &str, parser: Parser| {
            assert_eq!(Parser::log_parser_name_for_repo(repo), Some(name), "{repo}");
            assert_eq!(Parser::for_repo(repo), Some(parser), "{repo}");
        };
        check("astropy/astropy", "parse_log_astropy", Parser::PytestV2);
        check("django/django", "parse_log_django", Parser::Django);
        check(
            "marshmallow-code/marshmallow",
            "parse_log_marshmallow",
            Parser::Pytest,
        );
        check(
            "matplotlib/matplotlib",
            "parse_log_matplotlib",
            Parser::Matplotlib,
        );
        check("mwaskom/seaborn", "parse_log_seaborn", Parser::Seaborn);
        check("pallets/flask", "parse_log_flask", Parser::Pytest);
        check("psf/requests", "parse_log_requests", Parser::PytestOptions);
        check("pvlib/pvlib-python", "parse_log_pvlib", Parser::Pytest);
        check("pydata/xarray", "parse_log_xarray", Parser::Pytest);
        check(
            "pydicom/pydicom",
            "parse_log_pydicom",
            Parser::PytestOptions,
        );
        check("pylint-dev/astroid", "parse_log_astroid", Parser::Pytest);
        check(
            "pylint-dev/pylint",
            "parse_log_pylint",
            Parser::PytestOptions,
        );
        check("pytest-dev/pytest", "parse_log_pytest", Parser::Pytest);
        check("pyvista/pyvista", "parse_log_pyvista", Parser::Pytest);
        check(
            "scikit-learn/scikit-learn",
            "parse_log_scikit",
            Parser::PytestV2,
        );
        check("sqlfluff/sqlfluff", "parse_log_sqlfluff", Parser::Pytest);
        check("sphinx-doc/sphinx", "parse_log_sphinx", Parser::PytestV2);
        check("sympy/sympy", "parse_log_sympy", Parser::Sympy);
        assert_eq!(Parser::for_repo("facebook/react"), None);
    }

    #[test]
    fn generic_names_round_trip() {
        for parser in Parser::ALL {
            assert_eq!(Parser::from_log_parser_name(parser.name()), Some(parser));
        }
        assert_eq!(Parser::from_log_parser_name("parse_log_jest"), None);
        assert_eq!(Parser::from_log_parser_name("parse_log_Pytest"), None);
    }
}
