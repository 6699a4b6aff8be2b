//! The Python version of a recipe: the newest one the base images offer ([`PYTHONS`]) that
//! meets the project's `requires-python` (`[project]` in `pyproject.toml`, else
//! `python_requires` in `setup.cfg`, else in `setup.py`). A project that states none is placed
//! by its `Programming Language :: Python :: 3.X` classifiers.

use std::collections::BTreeSet;
use swerve_harness::images::PYTHONS;

use super::{NoRecipe, Project, Sources, pyproject, setuptools};

/// The offered Python for `project`; the file its specifier came from goes into `sources`.
pub(super) fn choose(
    project: &Project<'_>,
    sources: &mut Sources,
) -> Result<&'static str, NoRecipe> {
    let offered: Vec<&'static str> = PYTHONS.iter().map(|(version, _)| *version).collect();
    let Some((file, wanted)) = requires_python(project) else {
        return Ok(from_classifiers(&offered, &classifier_versions(project)));
    };
    sources.insert(file.to_owned());
    offered
        .iter()
        .copied()
        .find(|line| satisfies(line, &wanted))
        .ok_or_else(|| NoRecipe::Python {
            wanted,
            offered: offered.join(", "),
        })
}

/// The project's `requires-python` and the file that says it, the first of `pyproject.toml`,
/// `setup.cfg` and `setup.py` that does.
fn requires_python(project: &Project<'_>) -> Option<(&'static str, String)> {
    if let Some(spec) = project.pyproject.as_ref().and_then(|p| p.requires_python()) {
        return Some((pyproject::FILE, spec.to_owned()));
    }
    if let Some(spec) = project.setup_cfg.as_ref().and_then(|c| c.python_requires()) {
        return Some((setuptools::SETUP_CFG, spec.to_owned()));
    }
    let spec = project.setup_py.as_ref()?.python_requires()?;
    Some((setuptools::SETUP_PY, spec))
}

/// Whether version `v` (`3.X`) meets a PEP 440 specifier set such as `>=3.8, !=3.9.*, <4`.
/// Only the major and minor parts are compared, as a Python release line meets a specifier
/// when its newest patch release does.
fn satisfies(v: &str, spec: &str) -> bool {
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

/// The newest offered version the classifiers list; else the oldest offered one past what they
/// list; with no classifier, the newest offered.
fn from_classifiers(offered: &[&'static str], listed: &BTreeSet<String>) -> &'static str {
    let minor = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u32>().ok());
    let newest_listed = listed.iter().filter_map(|v| minor(v)).max();
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

/// The `3.X` versions the classifiers list (pyproject's, then `setup.cfg`'s / `setup.py`'s).
fn classifier_versions(project: &Project<'_>) -> BTreeSet<String> {
    let mut text = String::new();
    for c in project.pyproject.iter().flat_map(|p| p.classifiers()) {
        text.push_str(c);
        text.push('\n');
    }
    // Read as text: `setup.py` lists them in code, `setup.cfg` in an indented value.
    for f in [setuptools::SETUP_CFG, setuptools::SETUP_PY] {
        if let Some(t) = project.files.get(f) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
