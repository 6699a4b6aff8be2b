//! The test runner: pytest where the project configures it (`[tool.pytest]`, `pytest.ini`,
//! `conftest.py`, `setup.cfg`'s `[tool:pytest]`, `tox.ini`'s `[pytest]`) or lists it (a
//! requirement, a test extra), else `unittest`.

use super::Project;
use super::requirement::Requirements;

/// Files whose presence says pytest runs the tests.
const PYTEST_FILES: [&str; 2] = ["pytest.ini", "conftest.py"];

/// How the tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runner {
    /// `pytest -rA --color=no`.
    Pytest,
    /// `python -m unittest -v`.
    Unittest,
}

impl Runner {
    /// The runner of `project`; pytest that the project configures but lists nowhere is added
    /// to `requirements`.
    pub(super) fn choose(project: &Project<'_>, requirements: &mut Requirements) -> Runner {
        let listed = requirements.lists("pytest")
            || project
                .pyproject
                .as_ref()
                .is_some_and(|p| p.test_extra_lists_pytest())
            || project
                .setup_cfg
                .as_ref()
                .is_some_and(|c| c.test_extra_lists_pytest())
            || project
                .setup_py
                .as_ref()
                .is_some_and(|s| s.mentions_pytest());
        if listed {
            return Runner::Pytest;
        }
        let configured = project
            .pyproject
            .as_ref()
            .is_some_and(|p| p.configures_pytest())
            || PYTEST_FILES.iter().any(|f| project.files.contains_key(*f))
            || project
                .setup_cfg
                .as_ref()
                .is_some_and(|c| c.configures_pytest())
            || project.tox.as_ref().is_some_and(|t| t.configures_pytest());
        if configured {
            requirements.push("pytest".to_owned());
            Runner::Pytest
        } else {
            Runner::Unittest
        }
    }

    /// The command the eval script runs the test files with.
    pub(super) fn command(self) -> &'static str {
        match self {
            // `--color=no` after the project's own `addopts` (which may say `--color=yes`): the
            // log parser reads plain status lines.
            Runner::Pytest => "pytest -rA --color=no",
            Runner::Unittest => "python -m unittest -v",
        }
    }

    /// The log parser that reads the command's output.
    pub(super) fn log_parser(self) -> &'static str {
        match self {
            Runner::Pytest => "parse_log_pytest",
            // Django's parser reads `unittest -v`'s `test (module.Class) ... ok` lines.
            Runner::Unittest => "parse_log_django",
        }
    }
}
