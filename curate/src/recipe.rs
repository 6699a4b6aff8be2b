//! Environment recipes from a Python repository's own files (`../shared/specs/environments.md`
//! §3), no model needed: the Python version, the test dependencies, how the project installs
//! and which test runner it uses, as the [`RepoEnv`] that `harness run` builds images from.
//!
//! What is read, in order: `[project] requires-python`, `python_requires` in `setup.cfg` /
//! `setup.py`, `Programming Language :: Python :: 3.X` classifiers (the newest offered version
//! that satisfies them); `[project.optional-dependencies]` and `[options.extras_require]` /
//! `extras_require` extras named `test`, `tests`, `testing` or `dev` (installed with the
//! project, `pip install -e '.[test]'`); PEP 735 `[dependency-groups]` of those names (with
//! `include-group`); `requirements*.txt`, `requirements/*.txt`, `test-requirements.txt`,
//! `dev-requirements.txt`, `tests/requirements*.txt` (their `-r` includes followed;
//! documentation requirements left out);
//! `tox.ini` `[testenv] deps`; pins from `uv.lock` / `poetry.lock` (a package locked at one
//! version) and `constraints*.txt` (which win). Requirements go into the shared
//! environment layer; the project itself is installed editable in the instance layer, without
//! build isolation (the build backend from `[build-system] requires` is in the environment), so
//! that the eval script's offline re-install needs no network.
//!
//! Test runner: pytest when the project configures it or lists it (`pytest -rA --color=no`: the
//! log parser reads plain status lines whatever the project's `addopts` say), else `unittest`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use swerve_harness::images::{Lines, PYTHONS, RepoEnv, TestCmd};

/// Folders of tests whose `requirements*.txt` list what the tests need.
const TEST_FOLDERS: [&str; 2] = ["tests/", "test/"];

/// Extras and dependency groups that hold what the tests need.
const TEST_NAMES: [&str; 4] = ["test", "tests", "testing", "dev"];

/// What a recipe is derived from: the repository's files at the base commit, by path.
pub type Files = BTreeMap<String, String>;

/// Whether `path` is a file the rules read (so that only those are read from the mirror).
pub fn is_recipe_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let depth = path.matches('/').count();
    match depth {
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
            ) || (name.ends_with(".txt")
                && (name.starts_with("requirements")
                    || name.starts_with("constraints")
                    || name.ends_with("-requirements.txt")
                    || name.ends_with("_requirements.txt")))
        }
        1 => {
            name.ends_with(".txt")
                && (path.starts_with("requirements/")
                    || (TEST_FOLDERS.iter().any(|f| path.starts_with(f))
                        && name.contains("requirements")))
        }
        _ => false,
    }
}

/// Why no recipe could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRecipe {
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
pub struct Recipe {
    /// The environment spec, as `environments.json` holds it.
    pub env: RepoEnv,
    /// The files each decision came from, for the log.
    pub sources: Vec<String>,
}

impl Recipe {
    /// The version-group name of this recipe: tasks of one repository with equal recipes share
    /// one environment image. `env-` and 12 hex digits of the spec's digest.
    pub fn version(&self) -> String {
        let json = serde_json::to_string(&self.env).expect("a spec serialises");
        let digest = Sha256::digest(json.as_bytes());
        format!("env-{}", &hex::encode(digest)[..12])
    }
}

/// Derives the recipe of a repository from its files.
pub fn derive(files: &Files) -> Result<Recipe, NoRecipe> {
    let pyproject = match files.get("pyproject.toml") {
        Some(text) => Some(
            text.parse::<toml::Table>()
                .map_err(|e| NoRecipe::Unreadable {
                    file: "pyproject.toml".into(),
                    detail: e.message().to_owned(),
                })?,
        ),
        None => None,
    };
    let setup_cfg = files.get("setup.cfg").map(|t| Ini::parse(t));
    let setup_py = files.get("setup.py").map(String::as_str);
    let tox = files.get("tox.ini").map(|t| Ini::parse(t));
    let has_requirements = files.keys().any(|p| p.contains("requirements"));
    if pyproject.is_none() && setup_cfg.is_none() && setup_py.is_none() && !has_requirements {
        return Err(NoRecipe::NotPython);
    }
    let mut sources = BTreeSet::new();
    let project = pyproject
        .as_ref()
        .and_then(|t| t.get("project"))
        .and_then(|p| p.as_table());

    // Python.
    let mut wanted = None;
    if let Some(spec) = project
        .and_then(|p| p.get("requires-python"))
        .and_then(|v| v.as_str())
    {
        wanted = Some(spec.to_owned());
        sources.insert("pyproject.toml".to_owned());
    } else if let Some(spec) = setup_cfg
        .as_ref()
        .and_then(|c| c.get("options", "python_requires"))
    {
        wanted = Some(spec.to_owned());
        sources.insert("setup.cfg".to_owned());
    } else if let Some(spec) = setup_py.and_then(|t| python_string_arg(t, "python_requires")) {
        wanted = Some(spec);
        sources.insert("setup.py".to_owned());
    }
    let offered: Vec<&str> = PYTHONS.iter().map(|(version, _)| *version).collect();
    let python = match &wanted {
        Some(spec) => {
            offered
                .iter()
                .find(|v| satisfies(v, spec))
                .ok_or_else(|| NoRecipe::Python {
                    wanted: spec.clone(),
                    offered: offered.join(", "),
                })?
        }
        None => {
            let listed = classifier_versions(files, project);
            let minor = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u32>().ok());
            let newest_listed = listed.iter().filter_map(|v| minor(v)).max();
            // The newest offered version the classifiers list; else the oldest offered one
            // past what they list; with no classifier, the newest.
            offered
                .iter()
                .find(|v| listed.contains(**v))
                .or_else(|| {
                    let newest = newest_listed?;
                    offered
                        .iter()
                        .rev()
                        .find(|v| minor(v).is_some_and(|m| m > newest))
                })
                .unwrap_or(&offered[0])
        }
    };

    // The project's own install, with its test extras.
    let mut extras = BTreeSet::new();
    if let Some(table) = project
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(|v| v.as_table())
    {
        extras.extend(
            table
                .keys()
                .filter(|k| TEST_NAMES.contains(&k.as_str()))
                .cloned(),
        );
    }
    if let Some(cfg) = &setup_cfg {
        extras.extend(
            cfg.keys("options.extras_require")
                .filter(|k| TEST_NAMES.contains(k))
                .map(str::to_owned),
        );
    }
    if let Some(text) = setup_py {
        extras.extend(setup_py_extras(text));
    }
    let installable = pyproject
        .as_ref()
        .is_some_and(|t| t.contains_key("project") || t.contains_key("build-system"))
        || setup_cfg.is_some()
        || setup_py.is_some();

    // Requirements for the shared environment layer.
    let mut requirements: Vec<String> = Vec::new();
    let push = |req: String, requirements: &mut Vec<String>| {
        if !requirements.contains(&req) {
            requirements.push(req);
        }
    };
    let build_requires: Vec<String> = pyproject
        .as_ref()
        .and_then(|t| t.get("build-system"))
        .and_then(|b| b.get("requires"))
        .and_then(|r| r.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if installable {
        if build_requires.is_empty() {
            push("setuptools".to_owned(), &mut requirements);
            push("wheel".to_owned(), &mut requirements);
        }
        for req in build_requires {
            push(req, &mut requirements);
        }
        // Without build isolation what a backend asks for an editable build must be there
        // already: an older setuptools (the virtual environment's own, which satisfies
        // `setuptools>=61`) needs `wheel` for `bdist_wheel`, hatchling needs `editables`.
        for (backend, needs) in [("setuptools", "wheel"), ("hatchling", "editables")] {
            if requirements
                .iter()
                .any(|r| requirement_name(r).as_deref() == Some(backend))
            {
                push(needs.to_owned(), &mut requirements);
            }
        }
    }
    if let Some(groups) = pyproject
        .as_ref()
        .and_then(|t| t.get("dependency-groups"))
        .and_then(|g| g.as_table())
    {
        for name in TEST_NAMES {
            if groups.contains_key(name) {
                sources.insert("pyproject.toml".to_owned());
                for req in dependency_group(groups, name, &mut Vec::new())? {
                    push(req, &mut requirements);
                }
            }
        }
    }
    let mut requirement_files: Vec<&String> = files
        .keys()
        .filter(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            name.ends_with(".txt")
                && (name.contains("requirements") || p.starts_with("requirements/"))
                && !name.contains("doc")
                && is_recipe_file(p)
        })
        .collect();
    requirement_files.sort();
    for path in requirement_files {
        sources.insert(path.clone());
        for req in requirements_file(files, path, &mut Vec::new()) {
            push(req, &mut requirements);
        }
    }
    if let Some(tox) = &tox
        && let Some(deps) = tox.get("testenv", "deps")
    {
        sources.insert("tox.ini".to_owned());
        for line in deps.lines() {
            if let Some(req) = requirement_line(line) {
                push(req, &mut requirements);
            }
        }
    }
    // Pins: a lock file's versions, then constraints files' lines (which win).
    let mut pins: BTreeMap<String, String> = BTreeMap::new();
    for lock in LOCK_FILES {
        if let Some(text) = files.get(lock) {
            let locked = locked_versions(text).map_err(|detail| NoRecipe::Unreadable {
                file: lock.to_owned(),
                detail,
            })?;
            if !locked.is_empty() {
                sources.insert(lock.to_owned());
            }
            for (name, version) in locked {
                pins.entry(name.clone())
                    .or_insert_with(|| format!("{name}=={version}"));
            }
        }
    }
    let constraints: Vec<String> = files
        .keys()
        .filter(|p| !p.contains('/') && p.starts_with("constraints") && p.ends_with(".txt"))
        .cloned()
        .collect();
    for req in constraints
        .iter()
        .flat_map(|p| requirements_file(files, p, &mut Vec::new()))
    {
        if let Some(name) = requirement_name(&req) {
            pins.insert(name, req);
        }
    }
    sources.extend(constraints);
    for req in &mut requirements {
        if let Some(pin) = requirement_name(req).and_then(|n| pins.get(&n)) {
            // The requirement's extras stay, its version is the pin's; its markers go (the
            // environment has one Python, the pin was made for it).
            let extras = req
                .split_once('[')
                .and_then(|(_, rest)| rest.split_once(']'))
                .map(|(extras, _)| format!("[{extras}]"))
                .unwrap_or_default();
            let pinned = match pin.split_once("==") {
                Some((name, version)) if !extras.is_empty() => {
                    format!("{}{extras}=={version}", name.trim())
                }
                _ => pin.clone(),
            };
            *req = pinned;
        }
    }

    // The test runner.
    let pytest_configured = pyproject
        .as_ref()
        .and_then(|t| t.get("tool"))
        .and_then(|t| t.get("pytest"))
        .is_some()
        || files.contains_key("pytest.ini")
        || files.contains_key("conftest.py")
        || setup_cfg
            .as_ref()
            .is_some_and(|c| c.has_section("tool:pytest"))
        || tox.as_ref().is_some_and(|c| c.has_section("pytest"));
    let pytest_listed = requirements
        .iter()
        .any(|r| requirement_name(r).as_deref() == Some("pytest"))
        || extras_mention_pytest(project, setup_cfg.as_ref(), setup_py);
    let pytest = pytest_configured || pytest_listed;
    if pytest && !pytest_listed {
        push("pytest".to_owned(), &mut requirements);
    }

    let mut install = Vec::new();
    if installable {
        let target = if extras.is_empty() {
            ".".to_owned()
        } else {
            format!(
                ".[{}]",
                extras.iter().cloned().collect::<Vec<_>>().join(",")
            )
        };
        install.push(format!(
            "python -m pip install --no-build-isolation -e {}",
            shell_quote(&target)
        ));
        for f in ["pyproject.toml", "setup.cfg", "setup.py"] {
            if files.contains_key(f) {
                sources.insert(f.to_owned());
            }
        }
    }
    let (test_cmd, log_parser) = if pytest {
        // `--color=no` after the project's own `addopts` (which may say `--color=yes`): the log
        // parser reads plain status lines.
        ("pytest -rA --color=no", "parse_log_pytest")
    } else {
        ("python -m unittest -v", "parse_log_django")
    };
    Ok(Recipe {
        env: RepoEnv {
            python: Some((*python).to_owned()),
            packages: None,
            pre_install: Lines::None,
            install: Lines::Many(install),
            pip_packages: requirements.iter().map(|r| shell_quote(r)).collect(),
            eval_commands: Vec::new(),
            test_cmd: TestCmd::One(test_cmd.to_owned()),
            log_parser: Some(log_parser.to_owned()),
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

/// Whether an extra of the project lists pytest.
fn extras_mention_pytest(
    project: Option<&toml::Table>,
    setup_cfg: Option<&Ini>,
    setup_py: Option<&str>,
) -> bool {
    let in_pyproject = project
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(|v| v.as_table())
        .is_some_and(|t| {
            TEST_NAMES.iter().any(|n| {
                t.get(*n).and_then(|v| v.as_array()).is_some_and(|a| {
                    a.iter().any(|r| {
                        r.as_str()
                            .and_then(requirement_name)
                            .is_some_and(|n| n == "pytest")
                    })
                })
            })
        });
    let in_cfg = setup_cfg.is_some_and(|c| {
        TEST_NAMES.iter().any(|n| {
            c.get("options.extras_require", n).is_some_and(|v| {
                v.lines()
                    .filter_map(requirement_line)
                    .any(|r| requirement_name(&r).as_deref() == Some("pytest"))
            })
        })
    });
    in_pyproject || in_cfg || setup_py.is_some_and(|t| t.contains("pytest"))
}

/// A PEP 735 group's requirements, `include-group` entries expanded (a cycle is an error).
fn dependency_group(
    groups: &toml::Table,
    name: &str,
    seen: &mut Vec<String>,
) -> Result<Vec<String>, NoRecipe> {
    let normal = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    if seen.iter().any(|s| normal(s) == normal(name)) {
        return Err(NoRecipe::Unreadable {
            file: "pyproject.toml".into(),
            detail: format!("dependency group `{name}` includes itself"),
        });
    }
    let Some((_, group)) = groups.iter().find(|(k, _)| normal(k) == normal(name)) else {
        return Err(NoRecipe::Unreadable {
            file: "pyproject.toml".into(),
            detail: format!("dependency group `{name}` is included but not defined"),
        });
    };
    seen.push(name.to_owned());
    let mut out = Vec::new();
    for item in group.as_array().into_iter().flatten() {
        if let Some(req) = item.as_str() {
            out.push(req.to_owned());
        } else if let Some(include) = item.get("include-group").and_then(|v| v.as_str()) {
            out.extend(dependency_group(groups, include, seen)?);
        }
    }
    seen.pop();
    Ok(out)
}

/// The requirements of a requirements file, its `-r` includes followed (relative to the file);
/// the project itself (`.`, `-e .`), options and URLs are left out.
fn requirements_file(files: &Files, path: &str, seen: &mut Vec<String>) -> Vec<String> {
    if seen.iter().any(|s| s == path) {
        return Vec::new();
    }
    seen.push(path.to_owned());
    let Some(text) = files.get(path) else {
        return Vec::new();
    };
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split(" #").next().unwrap_or(line).trim();
        let include = line
            .strip_prefix("-r ")
            .or_else(|| line.strip_prefix("--requirement "))
            .or_else(|| line.strip_prefix("-r"));
        if let Some(include) = include {
            let include = include.trim();
            let joined = if dir.is_empty() {
                include.to_owned()
            } else {
                format!("{dir}/{include}")
            };
            out.extend(requirements_file(files, &normalise(&joined), seen));
        } else if let Some(req) = requirement_line(line) {
            out.push(req);
        }
    }
    out
}

/// `a/./b/../c` → `a/c`.
fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// One requirement of a requirements-style line, `None` for comments, options, the project
/// itself and direct references.
fn requirement_line(line: &str) -> Option<String> {
    let line = line.split('#').next().unwrap_or("").trim();
    if line.is_empty()
        || line.starts_with('-')
        || line.starts_with('.')
        || line.contains("://")
        || line.starts_with('{')
    {
        return None;
    }
    requirement_name(line)?;
    Some(line.to_owned())
}

/// The normalised distribution name a requirement starts with.
fn requirement_name(req: &str) -> Option<String> {
    let name: String = req
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    (!name.is_empty()).then(|| name.to_ascii_lowercase().replace(['_', '.'], "-"))
}

/// Lock files whose versions pin the requirements, in the order they are read.
const LOCK_FILES: [&str; 2] = ["uv.lock", "poetry.lock"];

/// The versions a `uv.lock` or `poetry.lock` gives its packages (`[[package]]` tables with
/// `name` and `version`), by normalised name; a package locked at more than one version (for
/// different platforms or Pythons) is left unpinned.
fn locked_versions(text: &str) -> Result<BTreeMap<String, String>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_owned())?;
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in table
        .get("package")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(version)) = (
            package.get("name").and_then(|v| v.as_str()),
            package.get("version").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        // The project itself (uv: an editable or virtual source) is not a requirement.
        let local = package
            .get("source")
            .and_then(|s| s.as_table())
            .is_some_and(|s| s.contains_key("editable") || s.contains_key("virtual"));
        if let Some(name) = requirement_name(name).filter(|_| !local) {
            versions.entry(name).or_default().insert(version.to_owned());
        }
    }
    Ok(versions
        .into_iter()
        .filter(|(_, v)| v.len() == 1)
        .filter_map(|(name, v)| Some((name, v.into_iter().next()?)))
        .collect())
}

/// The `3.X` versions the classifiers list (pyproject's, then `setup.cfg`'s / `setup.py`'s).
fn classifier_versions(files: &Files, project: Option<&toml::Table>) -> BTreeSet<String> {
    let mut text = String::new();
    if let Some(list) = project
        .and_then(|p| p.get("classifiers"))
        .and_then(|v| v.as_array())
    {
        for c in list.iter().filter_map(|v| v.as_str()) {
            text.push_str(c);
            text.push('\n');
        }
    }
    for f in ["setup.cfg", "setup.py"] {
        if let Some(t) = files.get(f) {
            text.push_str(t);
        }
    }
    let marker = "Programming Language :: Python :: ";
    text.match_indices(marker)
        .filter_map(|(i, _)| {
            let rest = &text[i + marker.len()..];
            let v: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            (v.starts_with("3.") && v.len() > 2).then_some(v)
        })
        .collect()
}

/// Whether version `v` (`3.X`) meets a PEP 440 specifier set such as `>=3.8, !=3.9.*, <4`.
/// Only the major and minor parts are compared, as a Python release line meets a specifier
/// when its newest patch release does.
pub fn satisfies(v: &str, spec: &str) -> bool {
    let parse = |s: &str| -> Vec<u64> {
        s.trim()
            .trim_end_matches(".*")
            .split('.')
            .map_while(|p| p.parse().ok())
            .collect()
    };
    let have = parse(v);
    spec.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .all(|clause| {
            let (op, rest) = ["~=", "==", "!=", "<=", ">=", "<", ">", "==="]
                .iter()
                .filter(|op| clause.starts_with(**op))
                .max_by_key(|op| op.len())
                .map_or(("==", clause), |op| (*op, &clause[op.len()..]));
            let want = parse(rest);
            let wildcard = rest.trim().ends_with(".*");
            // Compare on the parts both have; a longer `want` (3.8.1) compares its minor.
            let n = want.len().clamp(1, 2);
            let a: Vec<u64> = have.iter().copied().take(n).collect();
            let b: Vec<u64> = want.iter().copied().take(n).collect();
            match op {
                // The line's newest patch release is above any release of the same line
                // but its own newest.
                ">=" | ">" => a >= b,
                "<=" => a < b || (a == b && want.len() <= 2),
                "<" => a < b,
                "!=" => !(a == b && (wildcard || want.len() <= 2)),
                "~=" => {
                    let prefix = want.len().saturating_sub(1).max(1);
                    a >= b && have.iter().take(prefix).eq(want.iter().take(prefix))
                }
                _ => a == b,
            }
        })
}

/// The string value of a keyword argument in `setup.py` (`python_requires=">=3.8"`).
fn python_string_arg(text: &str, key: &str) -> Option<String> {
    let i = text.find(key)?;
    let rest = text[i + key.len()..]
        .trim_start()
        .strip_prefix('=')?
        .trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &rest[1..];
    Some(body[..body.find(quote)?].to_owned())
}

/// The test extras `setup.py`'s `extras_require` names (read as text: keys that are test names).
fn setup_py_extras(text: &str) -> Vec<String> {
    let Some(i) = text.find("extras_require") else {
        return Vec::new();
    };
    let rest = &text[i..];
    let end = rest.find('}').unwrap_or(rest.len());
    TEST_NAMES
        .iter()
        .filter(|n| {
            rest[..end].contains(&format!("\"{n}\"")) || rest[..end].contains(&format!("'{n}'"))
        })
        .map(|n| (*n).to_owned())
        .collect()
}

/// An INI file as Python's `configparser` reads `setup.cfg` and `tox.ini`: sections, `key = value`
/// (or `:`), indented continuation lines, `#` and `;` comment lines.
#[derive(Debug, Default)]
struct Ini {
    sections: BTreeMap<String, Vec<(String, String)>>,
}

impl Ini {
    fn parse(text: &str) -> Ini {
        let mut ini = Ini::default();
        let mut section = String::new();
        let mut last: Option<usize> = None;
        for raw in text.lines() {
            let trimmed = raw.trim();
            if trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            if trimmed.is_empty() {
                continue;
            }
            let indented = raw.starts_with([' ', '\t']);
            if indented && let Some(i) = last {
                let entries = ini.sections.entry(section.clone()).or_default();
                let value = &mut entries[i].1;
                value.push('\n');
                value.push_str(trimmed);
                continue;
            }
            if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                section = name.trim().to_owned();
                ini.sections.entry(section.clone()).or_default();
                last = None;
                continue;
            }
            let split = trimmed.find(['=', ':']);
            if let Some(at) = split {
                let entries = ini.sections.entry(section.clone()).or_default();
                entries.push((
                    trimmed[..at].trim().to_ascii_lowercase(),
                    trimmed[at + 1..].trim().to_owned(),
                ));
                last = Some(entries.len() - 1);
            }
        }
        ini
    }

    fn has_section(&self, name: &str) -> bool {
        self.sections.contains_key(name)
    }

    fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .get(section)?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
    }

    fn keys<'a>(&'a self, section: &str) -> impl Iterator<Item = &'a str> {
        self.sections
            .get(section)
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> Files {
        entries
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn specifiers() {
        assert!(satisfies("3.11", ">=3.8"));
        assert!(!satisfies("3.11", ">=3.12"));
        assert!(satisfies("3.11", ">=3.8, <4"));
        assert!(!satisfies("3.11", "<3.11"));
        assert!(satisfies("3.11", "~=3.9"));
        assert!(!satisfies("3.11", "!=3.11.*"));
        assert!(satisfies("3.11", ">=3.10.2"));
        assert!(satisfies("3.13", ">3.12"));
        assert!(satisfies("3.11", "==3.11.*"));
    }

    #[test]
    fn pyproject_extra_and_pytest_config() {
        let f = files(&[(
            "pyproject.toml",
            r#"
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
[project]
name = "demo"
requires-python = ">=3.9"
[project.optional-dependencies]
test = ["pytest>=7", "attrs"]
docs = ["sphinx"]
[tool.pytest.ini_options]
addopts = "-q"
"#,
        )]);
        let r = derive(&f).unwrap();
        // The newest offered Python that meets `>=3.9`.
        assert_eq!(r.env.python.as_deref(), Some("3.13"));
        // Without build isolation hatchling's editable build needs `editables`.
        assert_eq!(r.env.pip_packages, ["hatchling", "editables"]);
        assert_eq!(
            r.env.install.to_vec(),
            ["python -m pip install --no-build-isolation -e '.[test]'"]
        );
        assert_eq!(r.env.test_cmd, TestCmd::One("pytest -rA --color=no".into()));
        assert_eq!(r.env.log_parser.as_deref(), Some("parse_log_pytest"));
    }

    #[test]
    fn python_from_the_specifier_else_the_classifiers() {
        let python = |file: &str, text: &str| {
            derive(&files(&[(file, text)]))
                .map(|r| r.env.python.unwrap_or_default())
                .map_err(|e| e.to_string())
        };
        let pyproject =
            |spec: &str| format!("[project]\nname = \"d\"\nrequires-python = \"{spec}\"\n");
        assert_eq!(
            python("pyproject.toml", &pyproject(">=3.8")),
            Ok("3.13".into())
        );
        assert_eq!(
            python("pyproject.toml", &pyproject(">=3.8,<3.12")),
            Ok("3.11".into())
        );
        assert_eq!(
            python("pyproject.toml", &pyproject(">=3.12")),
            Ok("3.13".into())
        );
        assert!(
            python("pyproject.toml", &pyproject(">=3.14"))
                .unwrap_err()
                .contains("none of the offered versions (3.13, 3.11)")
        );
        let classifiers = |versions: &[&str]| {
            let lines: Vec<String> = versions
                .iter()
                .map(|v| format!("    Programming Language :: Python :: {v}"))
                .collect();
            format!(
                "[metadata]\nname = d\nclassifiers =\n{}\n",
                lines.join("\n")
            )
        };
        assert_eq!(
            python("setup.cfg", &classifiers(&["3.10", "3.11"])),
            Ok("3.11".into())
        );
        // Listed versions none of the images has: the oldest offered one past them.
        assert_eq!(
            python("setup.cfg", &classifiers(&["3.8", "3.9"])),
            Ok("3.11".into())
        );
        assert_eq!(
            python("setup.cfg", &classifiers(&["3.12"])),
            Ok("3.13".into())
        );
        assert_eq!(
            python("setup.cfg", "[metadata]\nname = d\n"),
            Ok("3.13".into())
        );
    }

    #[test]
    fn requirements_folder_includes_and_constraints() {
        let f = files(&[
            (
                "setup.cfg",
                "[metadata]\nname = demo\n[options]\npython_requires = >=3.7\n",
            ),
            (
                "requirements/tests.txt",
                "-r base.txt\npytest==8.3.4  # pinned\n-e .\n",
            ),
            ("requirements/base.txt", "iniconfig\n"),
            ("requirements/docs.txt", "sphinx\n"),
            ("constraints.txt", "iniconfig==2.0.0\n"),
        ]);
        let r = derive(&f).unwrap();
        assert_eq!(
            r.env.pip_packages,
            ["setuptools", "wheel", "iniconfig==2.0.0", "pytest==8.3.4"]
        );
        assert_eq!(r.env.test_cmd, TestCmd::One("pytest -rA --color=no".into()));
    }

    #[test]
    fn dependency_groups_with_includes() {
        let f = files(&[(
            "pyproject.toml",
            r#"
[project]
name = "demo"
[dependency-groups]
lint = ["ruff"]
test = ["pytest", {include-group = "base"}]
base = ["six"]
"#,
        )]);
        let r = derive(&f).unwrap();
        assert!(r.env.pip_packages.contains(&"pytest".to_owned()));
        assert!(r.env.pip_packages.contains(&"six".to_owned()));
        assert!(!r.env.pip_packages.contains(&"ruff".to_owned()));
    }

    #[test]
    fn unittest_when_nothing_says_pytest_and_refusals() {
        let r = derive(&files(&[(
            "setup.py",
            "from setuptools import setup\nsetup(name='x')\n",
        )]))
        .unwrap();
        assert_eq!(r.env.test_cmd, TestCmd::One("python -m unittest -v".into()));
        assert_eq!(r.env.log_parser.as_deref(), Some("parse_log_django"));
        assert_eq!(
            derive(&files(&[("README.md", "hi")])),
            Err(NoRecipe::NotPython)
        );
        let e = derive(&files(&[(
            "pyproject.toml",
            "[project]\nname='x'\nrequires-python='>=3.14'\n",
        )]))
        .unwrap_err();
        assert!(matches!(e, NoRecipe::Python { .. }), "{e}");
        let e = derive(&files(&[("pyproject.toml", "[project\n")])).unwrap_err();
        assert!(e.to_string().starts_with("pyproject.toml: "), "{e}");
    }

    #[test]
    fn setup_cfg_extras_and_tox_deps() {
        let f = files(&[
            (
                "setup.cfg",
                "[options.extras_require]\ntesting =\n    pytest\n    attrs\n[tool:pytest]\naddopts = -q\n",
            ),
            (
                "tox.ini",
                "[testenv]\ndeps =\n    coverage\ncommands = pytest\n",
            ),
        ]);
        let r = derive(&f).unwrap();
        assert_eq!(
            r.env.install.to_vec(),
            ["python -m pip install --no-build-isolation -e '.[testing]'"]
        );
        assert!(r.env.pip_packages.contains(&"coverage".to_owned()));
        assert!(
            !r.env.pip_packages.contains(&"pytest".to_owned()),
            "pytest comes with the extra"
        );
        assert_eq!(r.version(), r.clone().version());
    }

    #[test]
    fn lock_files_pin_the_requirements() {
        let uv_lock = r#"version = 1
requires-python = ">=3.9"

[[package]]
name = "demo"
version = "0.1.0"
source = { editable = "." }

[[package]]
name = "pytest"
version = "8.3.4"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "1.26.4"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "2.2.1"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "Attrs"
version = "24.2.0"
"#;
        let f = files(&[
            (
                "pyproject.toml",
                "[project]\nname = \"demo\"\n[dependency-groups]\ntest = [\"pytest[testing]>=8\", \"attrs\", \"numpy\"]\n",
            ),
            ("uv.lock", uv_lock),
            ("constraints.txt", "attrs==23.1.0\n"),
        ]);
        let r = derive(&f).unwrap();
        // A constraints line wins over the lock; a package locked twice stays as it was.
        for wanted in ["'pytest[testing]==8.3.4'", "attrs==23.1.0", "numpy"] {
            assert!(
                r.env.pip_packages.iter().any(|p| p == wanted),
                "{wanted}: {:?}",
                r.env.pip_packages
            );
        }
        assert!(r.sources.contains(&"uv.lock".to_owned()));
        let broken = files(&[
            ("pyproject.toml", "[project]\nname = \"d\"\n"),
            ("poetry.lock", "[[package]\n"),
        ]);
        assert!(
            matches!(derive(&broken), Err(NoRecipe::Unreadable { file, .. }) if file == "poetry.lock")
        );
    }

    #[test]
    fn recipe_files() {
        for p in [
            "pyproject.toml",
            "requirements-dev.txt",
            "requirements/tests.txt",
            "tox.ini",
            "test-requirements.txt",
            "tests/requirements.txt",
        ] {
            assert!(is_recipe_file(p), "{p}");
        }
        for p in [
            "src/setup.py",
            "docs/requirements.txt",
            "README.md",
            "tests/data.txt",
            "tests/fixtures/requirements.txt",
        ] {
            assert!(!is_recipe_file(p), "{p}");
        }
    }
}
