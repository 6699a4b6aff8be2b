//! The project's own install: whether pip can install it (a `pyproject.toml` with `[project]`
//! or `[build-system]`, a `setup.cfg`, a `setup.py`), with which test extras, and what its build
//! backend needs in the environment layer, as the install runs without build isolation.

use std::collections::BTreeSet;

use super::pyproject::{self, Pyproject};
use super::requirement::Requirements;
use super::{Files, Project, setuptools, shell_quote};

/// An installable project's install.
pub(super) struct Install {
    /// The extras installed with it (its test extras).
    extras: BTreeSet<String>,
}

impl Install {
    /// The install of `project`; `None` where pip cannot install it (requirements files only).
    pub(super) fn of(project: &Project<'_>) -> Option<Install> {
        let installable = project
            .pyproject
            .as_ref()
            .is_some_and(Pyproject::installable)
            || project.setup_cfg.is_some()
            || project.setup_py.is_some();
        if !installable {
            return None;
        }
        let mut extras = BTreeSet::new();
        if let Some(pyproject) = &project.pyproject {
            extras.extend(pyproject.test_extras().map(str::to_owned));
        }
        if let Some(cfg) = &project.setup_cfg {
            extras.extend(cfg.test_extras().map(str::to_owned));
        }
        if let Some(setup_py) = &project.setup_py {
            extras.extend(setup_py.test_extras());
        }
        Some(Install { extras })
    }

    /// The install command: editable, with the test extras, without build isolation.
    pub(super) fn command(&self) -> String {
        let target = if self.extras.is_empty() {
            ".".to_owned()
        } else {
            format!(
                ".[{}]",
                self.extras.iter().cloned().collect::<Vec<_>>().join(",")
            )
        };
        format!(
            "python -m pip install --no-build-isolation -e {}",
            shell_quote(&target)
        )
    }

    /// The files the install is described by.
    pub(super) fn sources(&self, files: &Files) -> Vec<String> {
        [pyproject::FILE, setuptools::SETUP_CFG, setuptools::SETUP_PY]
            .into_iter()
            .filter(|f| files.contains_key(*f))
            .map(str::to_owned)
            .collect()
    }
}

/// What the environment layer needs to build the project: `[build-system] requires` (setuptools
/// and wheel where it names none, as pip assumes), and what its backend needs for an editable
/// build without isolation: an older setuptools (the virtual environment's own, which satisfies
/// `setuptools>=61`) needs `wheel` for `bdist_wheel`, hatchling needs `editables`.
pub(super) fn build_requirements(pyproject: Option<&Pyproject>) -> Requirements {
    let mut requirements = Requirements::default();
    let build_requires = pyproject.map(Pyproject::build_requires).unwrap_or_default();
    if build_requires.is_empty() {
        requirements.extend(["setuptools".to_owned(), "wheel".to_owned()]);
    }
    requirements.extend(build_requires);
    for (backend, needs) in [("setuptools", "wheel"), ("hatchling", "editables")] {
        if requirements.lists(backend) {
            requirements.push(needs.to_owned());
        }
    }
    requirements
}
