//! The parser registry: SWE-bench's `log_parser` names, the repo → parser table, and dispatch.

use crate::error::ParseError;
use crate::javascript::{browser, deno, jest, mocha, tap};
use crate::status::StatusMap;
use crate::{c, django, go, java, php, pytest, ruby, rust_cargo, seaborn, sympy};

/// What the harness knows about the run whose log is parsed: the fields of SWE-bench's test
/// spec that parsers read. Four parsers read one: `parse_log_jekyll` and
/// `parse_log_immutable_js` choose a runner by `instance_id`, `parse_log_next` and
/// `parse_log_lighthouse` by `version`. `repo` and `test_command` are read by none of SWE-bench
/// 5.0.2's parsers; they are kept so that evaluator plugins get the same inputs.
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

/// One parser behaviour of SWE-bench 5.0.2. Several registered names share a behaviour
/// (`parse_log_xarray` is `parse_log_pytest`, `parse_log_react_pdf` is `parse_log_carbon`);
/// see [`LOG_PARSER_NAMES`]. Each variant's module documents the upstream behaviour it
/// reproduces, quirks included.
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
    /// `parse_log_calypso`: Jest `--verbose` after ` ./node_modules/.bin/jest `, suites by
    /// indentation.
    Calypso,
    /// `parse_log_chart_js`: Karma `Chrome … name FAILED` lines (failures only).
    ChartJs,
    /// `parse_log_marked`: jasmine `N) name` lines (failures only).
    Marked,
    /// `parse_log_p5js`: mocha `N) suite / name:` blocks (failures only).
    P5js,
    /// `parse_log_carbon` (also `parse_log_react_pdf`): Jest's per-file `PASS`/`FAIL` lines.
    Carbon,
    /// `parse_log_jest`: Jest `--verbose` `✓`/`✕`/`○` lines.
    Jest,
    /// `parse_log_jest_json`: `[PASSED] name` / `[FAILED] name` lines.
    JestJson,
    /// `parse_log_vitest`: vitest `--reporter=verbose` `✓`/`×`/`↓` lines.
    Vitest,
    /// `parse_log_karma`: karma-mocha-reporter `✔`/`✖` lines with suites by indentation.
    Karma,
    /// `parse_log_tap`: `ok N name` / `not ok N name` lines.
    Tap,
    /// `parse_log_immutable_js`: [`Parser::Jest`] or [`Parser::JestJson`] by instance id.
    ImmutableJs,
    /// `parse_log_bpmn_js`: PhantomJS/Chrome `… FAILED` lines (failures only).
    BpmnJs,
    /// `parse_log_eslint`: mocha `N) title … Error` blocks (failures only).
    Eslint,
    /// `parse_log_grommet`: Jest's per-file `FAIL` then `PASS` lines.
    Grommet,
    /// `parse_log_highlightjs`: mocha spec reporter `✓`/`N)` lines.
    Highlightjs,
    /// `parse_log_lighthouse`: mocha, Jest or legacy mocha JSON, by version.
    Lighthouse,
    /// `parse_log_next`: Karma, or Cypress-style output for version 1.27.
    Next,
    /// `parse_log_openlayers`: Karma `FAILED` lines, mocha failures, rendering mismatches.
    Openlayers,
    /// `parse_log_prismjs`: mocha's JSON reporter.
    Prismjs,
    /// `parse_log_quarto_cli`: Deno `[smoke]`/`[unit]` lines.
    QuartoCli,
    /// `parse_log_redis`: `[ok]`/`[err]`/`[skip]`/`[ignore]` lines (redis, valkey).
    Redis,
    /// `parse_log_jq`: `PASS:`/`FAIL:` lines.
    Jq,
    /// `parse_log_doctest`: doctest's XML report.
    Doctest,
    /// `parse_log_micropython_test`: `pass`/`FAIL`/`skip` lines.
    MicropythonTest,
    /// `parse_log_googletest`: `[ OK ]`/`[ FAILED ]` lines with a duration.
    Googletest,
    /// `parse_log_gotest`: `go test -v`'s `--- PASS/FAIL/SKIP:` lines.
    Gotest,
    /// `parse_log_maven`: one `-Dtest=` command per test and its `BUILD` line.
    Maven,
    /// `parse_log_ant`: `[junit] [PASS]` lines.
    Ant,
    /// `parse_log_gradle_custom`: `Class > method PASSED` lines.
    GradleCustom,
    /// `parse_log_phpunit`: `--testdox` output.
    Phpunit,
    /// `parse_log_minitest`: `name. … = .` lines.
    Minitest,
    /// `parse_log_cucumber`: `--format progress` scenario lines.
    Cucumber,
    /// `parse_log_ruby_unit`: test-unit's verbose `name: .` lines.
    RubyUnit,
    /// `parse_log_rspec_transformed_json`: `name - passed` lines.
    RspecTransformedJson,
    /// `parse_log_jekyll`: [`Parser::Minitest`] or [`Parser::Cucumber`] by instance id.
    Jekyll,
    /// `parse_log_cargo`: libtest's `test name ... ok` lines.
    Cargo,
}

/// Every `log_parser` name SWE-bench 5.0.2 registers (its `PARSER_REGISTRY`, in its order),
/// with its behaviour.
pub const LOG_PARSER_NAMES: [(&str, Parser); 57] = [
    ("parse_log_pytest", Parser::Pytest),
    ("parse_log_pytest_options", Parser::PytestOptions),
    ("parse_log_django", Parser::Django),
    ("parse_log_pytest_v2", Parser::PytestV2),
    ("parse_log_seaborn", Parser::Seaborn),
    ("parse_log_sympy", Parser::Sympy),
    ("parse_log_matplotlib", Parser::Matplotlib),
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
    ("parse_log_calypso", Parser::Calypso),
    ("parse_log_bpmn_js", Parser::BpmnJs),
    ("parse_log_carbon", Parser::Carbon),
    ("parse_log_eslint", Parser::Eslint),
    ("parse_log_grommet", Parser::Grommet),
    ("parse_log_highlightjs", Parser::Highlightjs),
    ("parse_log_lighthouse", Parser::Lighthouse),
    ("parse_log_next", Parser::Next),
    ("parse_log_openlayers", Parser::Openlayers),
    ("parse_log_prismjs", Parser::Prismjs),
    ("parse_log_quarto_cli", Parser::QuartoCli),
    ("parse_log_chart_js", Parser::ChartJs),
    ("parse_log_marked", Parser::Marked),
    ("parse_log_p5js", Parser::P5js),
    ("parse_log_react_pdf", Parser::Carbon),
    ("parse_log_jest", Parser::Jest),
    ("parse_log_jest_json", Parser::JestJson),
    ("parse_log_vitest", Parser::Vitest),
    ("parse_log_karma", Parser::Karma),
    ("parse_log_tap", Parser::Tap),
    ("parse_log_immutable_js", Parser::ImmutableJs),
    ("parse_log_redis", Parser::Redis),
    ("parse_log_jq", Parser::Jq),
    ("parse_log_doctest", Parser::Doctest),
    ("parse_log_micropython_test", Parser::MicropythonTest),
    ("parse_log_googletest", Parser::Googletest),
    ("parse_log_gotest", Parser::Gotest),
    ("parse_log_maven", Parser::Maven),
    ("parse_log_ant", Parser::Ant),
    ("parse_log_gradle_custom", Parser::GradleCustom),
    ("parse_log_phpunit", Parser::Phpunit),
    ("parse_log_minitest", Parser::Minitest),
    ("parse_log_cucumber", Parser::Cucumber),
    ("parse_log_ruby_unit", Parser::RubyUnit),
    (
        "parse_log_rspec_transformed_json",
        Parser::RspecTransformedJson,
    ),
    ("parse_log_jekyll", Parser::Jekyll),
    ("parse_log_cargo", Parser::Cargo),
];

/// SWE-bench 5.0.2's `MAP_REPO_TO_PARSER_{PY,JS,C,GO,JAVA,PHP,RUBY,RUST}`: repository →
/// `log_parser` name (the registered name of the function the map holds; prettier's and
/// scratch-gui's aliases of `parse_log_carbon` are given as `parse_log_carbon`). Repositories
/// are matched exactly, as upstream's dicts are (`burntsushi/ripgrep` is spelled in lower
/// case there).
///
/// Left out: `cypress-io/cypress`, `emotion-js/emotion` and `plotly/plotly.js`, which upstream
/// maps to `parse_log_cypress`, `parse_log_emotion` and `parse_plotly_js` — functions that are
/// not in `PARSER_REGISTRY`, so SWE-bench 5.0.2 cannot grade those repositories either.
pub const REPO_PARSERS: [(&str, &str); 76] = [
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
    // JavaScript and TypeScript.
    ("Automattic/wp-calypso", "parse_log_calypso"),
    ("chartjs/Chart.js", "parse_log_chart_js"),
    ("markedjs/marked", "parse_log_marked"),
    ("processing/p5.js", "parse_log_p5js"),
    ("diegomura/react-pdf", "parse_log_react_pdf"),
    ("babel/babel", "parse_log_jest"),
    ("vuejs/core", "parse_log_vitest"),
    ("facebook/docusaurus", "parse_log_jest"),
    ("immutable-js/immutable-js", "parse_log_immutable_js"),
    ("mrdoob/three.js", "parse_log_tap"),
    ("preactjs/preact", "parse_log_karma"),
    ("axios/axios", "parse_log_tap"),
    ("alibaba-fusion/next", "parse_log_next"),
    ("bpmn-io/bpmn-js", "parse_log_bpmn_js"),
    ("carbon-design-system/carbon", "parse_log_carbon"),
    ("eslint/eslint", "parse_log_eslint"),
    ("GoogleChrome/lighthouse", "parse_log_lighthouse"),
    ("grommet/grommet", "parse_log_grommet"),
    ("highlightjs/highlight.js", "parse_log_highlightjs"),
    ("openlayers/openlayers", "parse_log_openlayers"),
    ("prettier/prettier", "parse_log_carbon"),
    ("PrismJS/prism", "parse_log_prismjs"),
    ("quarto-dev/quarto-cli", "parse_log_quarto_cli"),
    ("scratchfoundation/scratch-gui", "parse_log_carbon"),
    // C and C++.
    ("redis/redis", "parse_log_redis"),
    ("jqlang/jq", "parse_log_jq"),
    ("nlohmann/json", "parse_log_doctest"),
    ("micropython/micropython", "parse_log_micropython_test"),
    ("valkey-io/valkey", "parse_log_redis"),
    ("fmtlib/fmt", "parse_log_googletest"),
    // Go.
    ("caddyserver/caddy", "parse_log_gotest"),
    ("hashicorp/terraform", "parse_log_gotest"),
    ("prometheus/prometheus", "parse_log_gotest"),
    ("gohugoio/hugo", "parse_log_gotest"),
    ("gin-gonic/gin", "parse_log_gotest"),
    // Java.
    ("google/gson", "parse_log_maven"),
    ("apache/druid", "parse_log_maven"),
    ("javaparser/javaparser", "parse_log_maven"),
    ("projectlombok/lombok", "parse_log_ant"),
    ("apache/lucene", "parse_log_gradle_custom"),
    ("reactivex/rxjava", "parse_log_gradle_custom"),
    // PHP.
    ("phpoffice/phpspreadsheet", "parse_log_phpunit"),
    ("laravel/framework", "parse_log_phpunit"),
    ("php-cs-fixer/php-cs-fixer", "parse_log_phpunit"),
    ("briannesbitt/carbon", "parse_log_phpunit"),
    // Ruby.
    ("jekyll/jekyll", "parse_log_jekyll"),
    ("fluent/fluentd", "parse_log_ruby_unit"),
    ("fastlane/fastlane", "parse_log_rspec_transformed_json"),
    ("jordansissel/fpm", "parse_log_rspec_transformed_json"),
    ("faker-ruby/faker", "parse_log_ruby_unit"),
    ("rubocop/rubocop", "parse_log_rspec_transformed_json"),
    // Rust.
    ("burntsushi/ripgrep", "parse_log_cargo"),
    ("sharkdp/bat", "parse_log_cargo"),
    ("astral-sh/ruff", "parse_log_cargo"),
    ("tokio-rs/tokio", "parse_log_cargo"),
    ("uutils/coreutils", "parse_log_cargo"),
    ("nushell/nushell", "parse_log_cargo"),
    ("tokio-rs/axum", "parse_log_cargo"),
];

impl Parser {
    /// Every built-in behaviour.
    pub const ALL: [Parser; 43] = [
        Parser::Pytest,
        Parser::PytestOptions,
        Parser::PytestV2,
        Parser::Django,
        Parser::Sympy,
        Parser::Matplotlib,
        Parser::Seaborn,
        Parser::Calypso,
        Parser::ChartJs,
        Parser::Marked,
        Parser::P5js,
        Parser::Carbon,
        Parser::Jest,
        Parser::JestJson,
        Parser::Vitest,
        Parser::Karma,
        Parser::Tap,
        Parser::ImmutableJs,
        Parser::BpmnJs,
        Parser::Eslint,
        Parser::Grommet,
        Parser::Highlightjs,
        Parser::Lighthouse,
        Parser::Next,
        Parser::Openlayers,
        Parser::Prismjs,
        Parser::QuartoCli,
        Parser::Redis,
        Parser::Jq,
        Parser::Doctest,
        Parser::MicropythonTest,
        Parser::Googletest,
        Parser::Gotest,
        Parser::Maven,
        Parser::Ant,
        Parser::GradleCustom,
        Parser::Phpunit,
        Parser::Minitest,
        Parser::Cucumber,
        Parser::RubyUnit,
        Parser::RspecTransformedJson,
        Parser::Jekyll,
        Parser::Cargo,
    ];

    /// The parser registered under a dataset row's `log_parser` name; `None` for a name
    /// SWE-bench 5.0.2 does not register (upstream raises `KeyError` for it).
    pub fn from_log_parser_name(name: &str) -> Option<Parser> {
        LOG_PARSER_NAMES
            .iter()
            .find(|(registered, _)| *registered == name)
            .map(|&(_, parser)| parser)
    }

    /// The `log_parser` name SWE-bench uses for a repository (`pydata/xarray` →
    /// `parse_log_xarray`, `tokio-rs/tokio` → `parse_log_cargo`), for rows that predate the
    /// `log_parser` field.
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
            Parser::Calypso => "parse_log_calypso",
            Parser::ChartJs => "parse_log_chart_js",
            Parser::Marked => "parse_log_marked",
            Parser::P5js => "parse_log_p5js",
            Parser::Carbon => "parse_log_carbon",
            Parser::Jest => "parse_log_jest",
            Parser::JestJson => "parse_log_jest_json",
            Parser::Vitest => "parse_log_vitest",
            Parser::Karma => "parse_log_karma",
            Parser::Tap => "parse_log_tap",
            Parser::ImmutableJs => "parse_log_immutable_js",
            Parser::BpmnJs => "parse_log_bpmn_js",
            Parser::Eslint => "parse_log_eslint",
            Parser::Grommet => "parse_log_grommet",
            Parser::Highlightjs => "parse_log_highlightjs",
            Parser::Lighthouse => "parse_log_lighthouse",
            Parser::Next => "parse_log_next",
            Parser::Openlayers => "parse_log_openlayers",
            Parser::Prismjs => "parse_log_prismjs",
            Parser::QuartoCli => "parse_log_quarto_cli",
            Parser::Redis => "parse_log_redis",
            Parser::Jq => "parse_log_jq",
            Parser::Doctest => "parse_log_doctest",
            Parser::MicropythonTest => "parse_log_micropython_test",
            Parser::Googletest => "parse_log_googletest",
            Parser::Gotest => "parse_log_gotest",
            Parser::Maven => "parse_log_maven",
            Parser::Ant => "parse_log_ant",
            Parser::GradleCustom => "parse_log_gradle_custom",
            Parser::Phpunit => "parse_log_phpunit",
            Parser::Minitest => "parse_log_minitest",
            Parser::Cucumber => "parse_log_cucumber",
            Parser::RubyUnit => "parse_log_ruby_unit",
            Parser::RspecTransformedJson => "parse_log_rspec_transformed_json",
            Parser::Jekyll => "parse_log_jekyll",
            Parser::Cargo => "parse_log_cargo",
        }
    }

    /// Parses a log (or the test section of one) into a status map, or returns the exception
    /// SWE-bench's parser raises on it (an unknown instance for jekyll and immutable_js, a
    /// malformed report for doctest and prismjs, and the like; see [`ParseError`]). `log` must
    /// already have had its newlines translated (see [`crate::LogText`]); lines are split on
    /// `\n` only.
    pub fn try_parse(&self, log: &str, ctx: &LogContext) -> Result<StatusMap, ParseError> {
        Ok(match self {
            Parser::Pytest => pytest::parse_pytest(log),
            Parser::PytestOptions => pytest::parse_pytest_options(log),
            Parser::PytestV2 => pytest::parse_pytest_v2(log),
            Parser::Django => django::parse_django(log)?,
            Parser::Sympy => sympy::parse_sympy(log),
            Parser::Matplotlib => pytest::parse_matplotlib(log),
            Parser::Seaborn => seaborn::parse_seaborn(log),
            Parser::Calypso => jest::parse_calypso(log)?,
            Parser::ChartJs => browser::parse_chart_js(log),
            Parser::Marked => mocha::parse_marked(log),
            Parser::P5js => mocha::parse_p5js(log),
            Parser::Carbon => jest::parse_carbon(log),
            Parser::Jest => jest::parse_jest(log),
            Parser::JestJson => jest::parse_jest_json(log),
            Parser::Vitest => jest::parse_vitest(log),
            Parser::Karma => browser::parse_karma(log)?,
            Parser::Tap => tap::parse_tap(log),
            Parser::ImmutableJs => jest::parse_immutable_js(log, ctx)?,
            Parser::BpmnJs => browser::parse_bpmn_js(log),
            Parser::Eslint => mocha::parse_eslint(log),
            Parser::Grommet => jest::parse_grommet(log),
            Parser::Highlightjs => mocha::parse_highlightjs(log),
            Parser::Lighthouse => mocha::parse_lighthouse(log, ctx)?,
            Parser::Next => browser::parse_next(log, ctx),
            Parser::Openlayers => browser::parse_openlayers(log),
            Parser::Prismjs => mocha::parse_prismjs(log)?,
            Parser::QuartoCli => deno::parse_quarto_cli(log),
            Parser::Redis => c::parse_redis(log),
            Parser::Jq => c::parse_jq(log),
            Parser::Doctest => c::parse_doctest(log)?,
            Parser::MicropythonTest => c::parse_micropython_test(log),
            Parser::Googletest => c::parse_googletest(log),
            Parser::Gotest => go::parse_gotest(log),
            Parser::Maven => java::parse_maven(log),
            Parser::Ant => java::parse_ant(log),
            Parser::GradleCustom => java::parse_gradle_custom(log),
            Parser::Phpunit => php::parse_phpunit(log),
            Parser::Minitest => ruby::parse_minitest(log),
            Parser::Cucumber => ruby::parse_cucumber(log),
            Parser::RubyUnit => ruby::parse_ruby_unit(log),
            Parser::RspecTransformedJson => ruby::parse_rspec_transformed_json(log),
            Parser::Jekyll => ruby::parse_jekyll(log, ctx)?,
            Parser::Cargo => rust_cargo::parse_cargo(log),
        })
    }

    /// [`Parser::try_parse`], with an empty map where SWE-bench's parser raises. Upstream, the
    /// exception ends the instance's evaluation with an error; callers that must tell the two
    /// apart (an evaluator, `evaluate_log_with`) use [`Parser::try_parse`].
    pub fn parse(&self, log: &str, ctx: &LogContext) -> StatusMap {
        self.try_parse(log, ctx).unwrap_or_default()
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
    fn other_languages_resolve_by_repo() {
        let check = |repo: &str, name: &str, parser: Parser| {
            assert_eq!(Parser::log_parser_name_for_repo(repo), Some(name), "{repo}");
            assert_eq!(Parser::for_repo(repo), Some(parser), "{repo}");
        };
        check("tokio-rs/tokio", "parse_log_cargo", Parser::Cargo);
        check("gin-gonic/gin", "parse_log_gotest", Parser::Gotest);
        check("diegomura/react-pdf", "parse_log_react_pdf", Parser::Carbon);
        check("prettier/prettier", "parse_log_carbon", Parser::Carbon);
        check("jekyll/jekyll", "parse_log_jekyll", Parser::Jekyll);
        check("nlohmann/json", "parse_log_doctest", Parser::Doctest);
        check(
            "apache/lucene",
            "parse_log_gradle_custom",
            Parser::GradleCustom,
        );
        check("laravel/framework", "parse_log_phpunit", Parser::Phpunit);
        // Upstream maps these to parsers it does not register.
        assert_eq!(Parser::for_repo("cypress-io/cypress"), None);
        assert_eq!(Parser::for_repo("plotly/plotly.js"), None);
        // Exact spelling, as upstream's dict.
        assert_eq!(Parser::for_repo("BurntSushi/ripgrep"), None);
        for (repo, name) in REPO_PARSERS {
            assert!(
                Parser::from_log_parser_name(name).is_some(),
                "{repo} → {name}"
            );
        }
    }

    #[test]
    fn generic_names_round_trip() {
        for parser in Parser::ALL {
            assert_eq!(Parser::from_log_parser_name(parser.name()), Some(parser));
        }
        assert_eq!(
            Parser::from_log_parser_name("parse_log_jest"),
            Some(Parser::Jest)
        );
        assert_eq!(Parser::from_log_parser_name("parse_log_cypress"), None);
        assert_eq!(Parser::from_log_parser_name("parse_log_Pytest"), None);
    }

    #[test]
    fn registry_is_complete() {
        let mut names: Vec<&str> = LOG_PARSER_NAMES.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 57);
        for parser in Parser::ALL {
            assert!(
                LOG_PARSER_NAMES.iter().any(|&(_, p)| p == parser),
                "{parser:?}"
            );
        }
    }

    #[test]
    fn raising_parsers_give_an_empty_map_through_parse() {
        let ctx = LogContext {
            instance_id: "jekyll__jekyll-1".to_owned(),
            ..LogContext::default()
        };
        assert!(Parser::Jekyll.try_parse("x", &ctx).is_err());
        assert!(Parser::Jekyll.parse("x", &ctx).is_empty());
    }
}
