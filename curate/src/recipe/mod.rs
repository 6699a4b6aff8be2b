//! Environment recipes from a Python repository's own files, no model needed: the Python
//! version, the test dependencies, how the project installs and which test runner it uses, as
//! the [`RepoEnv`] that `harness run` builds images from. A repository the rules make no recipe
//! for (or whose recipe does not install) is left to the setup model of [`crate::setup`].
//!
//! What is read, a module each: the Python version (`python.rs`: `[project] requires-python`,
//! else `python_requires` in `setup.cfg` / `setup.py`, else the `Programming Language ::
//! Python :: 3.X` classifiers); the project's own install with its test extras (`install.rs`,
//! from `pyproject.rs` and `setuptools.rs`: extras named `test`, `tests`, `testing` or `dev`,
//! installed with the project as `pip install -e '.[test]'`); PEP 735 `[dependency-groups]` of
//! those names (`pyproject.rs`); requirements files (`requirements_files.rs`); `tox.ini`
//! `[testenv] deps` (`tox.rs`); pins from lock files and constraints files (`pins.rs`); the
//! test runner (`runner.rs`). Version specifiers and requirement lines are read as PEP 440 and
//! PEP 508 say, with `pep440_rs` and `pep508_rs` (`requirement.rs`).
//!
//! Requirements go into the shared environment layer; the project itself is installed editable
//! in the instance layer, without build isolation (the build backend from `[build-system]
//! requires` is in the environment), so that the eval script's offline re-install needs no
//! network.

mod ini;
mod install;
mod pins;
mod pyproject;
mod python;
mod requirement;
mod requirements_files;
mod runner;
mod setuptools;
mod tox;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use swerve_harness::execution::{Lines, RepoEnv, TestCmd};

use self::install::Install;
use self::pyproject::Pyproject;
use self::requirement::Requirements;
use self::runner::Runner;
use self::setuptools::{SetupCfg, SetupPy};
use self::tox::Tox;

/// Extras and dependency groups that hold what the tests need.
const TEST_NAMES: [&str; 4] = ["test", "tests", "testing", "dev"];

/// What a recipe is derived from: the repository's files at the base commit, by path.
pub(crate) type Files = BTreeMap<String, String>;

/// Whether `path` is a file the rules read (so that only those are read from the mirror).
pub(crate) fn is_recipe_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match path.matches('/').count() {
        0 => {
            matches!(
                name,
                "pyproject.toml"
                    | "setup.cfg"
                    | "setup.py"
                    | "tox.ini"
                    | "pytest.ini"
                    | "conftest.py"
                    | "uv.lock"
                    | "poetry.lock"
            ) || requirements_files::is_top_level(name)
        }
        1 => requirements_files::is_in_folder(path, name),
        _ => false,
    }
}

/// Why no recipe could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoRecipe {
    /// Nothing says this is a Python project.
    #[error("no pyproject.toml, setup.cfg, setup.py or requirements file at the base commit")]
    NotPython,
    /// The project needs a Python no base image offers.
    #[error("requires-python `{wanted}` is met by none of the offered versions ({offered})")]
    Python {
        /// The specifier.
        wanted: String,
        /// What the base images have.
        offered: String,
    },
    /// The project's Python specifier is not a PEP 440 specifier set.
    #[error("{file}: `{wanted}` is not a PEP 440 version specifier set")]
    Specifier {
        /// The file that says it.
        file: String,
        /// The specifier as written.
        wanted: String,
        /// What `pep440_rs` found wrong.
        #[source]
        source: pep440_rs::VersionSpecifiersParseError,
    },
    /// A file the rules read does not parse.
    #[error("{file}: {detail}")]
    Unreadable {
        /// The file.
        file: String,
        /// What is wrong.
        detail: String,
    },
}

/// A derived recipe and where each part came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Recipe {
    /// The environment spec, as `environments.json` holds it.
    pub env: RepoEnv,
    /// The files each decision came from, for the log.
    pub sources: Vec<String>,
}

impl Recipe {
    /// The version-group name of this recipe: tasks of one repository with equal recipes share
    /// one environment image. `env-` and 12 hex digits of the spec's digest.
    pub(crate) fn version(&self) -> String {
        let json = serde_json::to_string(&self.env).expect("a spec serialises");
        let digest = Sha256::digest(json.as_bytes());
        format!("env-{}", &hex::encode(digest)[..12])
    }
}

/// The files the rules read, each parsed once.
struct Project<'a> {
    files: &'a Files,
    pyproject: Option<Pyproject>,
    setup_cfg: Option<SetupCfg>,
    setup_py: Option<SetupPy<'a>>,
    tox: Option<Tox>,
}

impl<'a> Project<'a> {
    /// The parsed files; `NotPython` where nothing says this is a Python project.
    fn read(files: &'a Files) -> Result<Project<'a>, NoRecipe> {
        let project = Project {
            files,
            pyproject: files
                .get(pyproject::FILE)
                .map(|t| Pyproject::parse(t))
                .transpose()?,
            setup_cfg: files.get(setuptools::SETUP_CFG).map(|t| SetupCfg::parse(t)),
            setup_py: files.get(setuptools::SETUP_PY).map(|t| SetupPy::new(t)),
            tox: files.get(tox::FILE).map(|t| Tox::parse(t)),
        };
        let has_requirements = files.keys().any(|p| p.contains("requirements"));
        if project.pyproject.is_none()
            && project.setup_cfg.is_none()
            && project.setup_py.is_none()
            && !has_requirements
        {
            return Err(NoRecipe::NotPython);
        }
        Ok(project)
    }
}

/// The files each decision came from.
type Sources = BTreeSet<String>;

/// Derives the recipe of a repository from its files.
pub(crate) fn derive(files: &Files) -> Result<Recipe, NoRecipe> {
    let project = Project::read(files)?;
    let mut sources = Sources::new();
    let python = python::choose(&project, &mut sources)?;
    let install = Install::of(&project);

    // Requirements for the shared environment layer, in this order: the build backend, the
    // test dependency groups, requirements files, tox's deps; then pinned.
    let mut requirements = Requirements::default();
    if install.is_some() {
        requirements.extend(install::build_requirements(project.pyproject.as_ref()));
    }
    if let Some(pyproject) = &project.pyproject
        && let Some(groups) = pyproject.test_groups()?
    {
        sources.insert(pyproject::FILE.to_owned());
        requirements.extend(groups);
    }
    requirements.extend(requirements_files::test_requirements(files, &mut sources));
    if let Some(deps) = project.tox.as_ref().and_then(Tox::deps) {
        sources.insert(tox::FILE.to_owned());
        requirements.extend(deps);
    }
    requirements.pin(&pins::read(files, &mut sources)?);

    let runner = Runner::choose(&project, &mut requirements);

    let install = match install {
        Some(install) => {
            sources.extend(install.sources(files));
            vec![install.command()]
        }
        None => Vec::new(),
    };
    Ok(Recipe {
        env: RepoEnv {
            python: Some(python.to_owned()),
            packages: None,
            pre_install: Lines::None,
            install: Lines::Many(install),
            pip_packages: requirements.shell_words(),
            eval_commands: Vec::new(),
            test_cmd: TestCmd::One(runner.command().to_owned()),
            log_parser: Some(runner.log_parser().to_owned()),
        },
        sources: sources.into_iter().collect(),
    })
}

/// `s` as one shell word (single-quoted unless it is plain).
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '='))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;
