//! The Python version of a recipe: the newest one the base images offer ([`PYTHONS`]) that
//! meets the project's `requires-python` (`[project]` in `pyproject.toml`, else
//! `python_requires` in `setup.cfg`, else in `setup.py`), read as a PEP 440 specifier set with
//! `pep440_rs`. A project that states none is placed by its `Programming Language :: Python ::
//! 3.X` classifiers.

use std::collections::BTreeSet;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers, VersionSpecifiersParseError};
use swerve_harness::execution::PYTHONS;

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
    let specifiers = specifier_set(&wanted).map_err(|source| NoRecipe::Specifier {
        file: file.to_owned(),
        wanted: wanted.clone(),
        source,
    })?;
    offered
        .iter()
        .copied()
        .find(|line| line_meets(line, &specifiers))
        .ok_or_else(|| NoRecipe::Python {
            wanted,
            offered: offered.join(", "),
        })
}

/// `wanted` as a PEP 440 specifier set. Empty clauses are dropped first, as `packaging` (which
/// pip checks `requires-python` with) drops them: `>=3.7,` is `>=3.7`.
fn specifier_set(wanted: &str) -> Result<VersionSpecifiers, VersionSpecifiersParseError> {
    let clauses: Vec<&str> = wanted
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    VersionSpecifiers::from_str(&clauses.join(","))
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

/// Whether the release line `line` (`3.X`) meets `specifiers`. A line meets them when its
/// newest patch release does: the images' Python is a Debian release's, whose patch number
/// the rules do not know, and the newest patch is newer than any patch a specifier names
/// (`>=3.10.2` is met by 3.10, `<=3.11` is not met by 3.11, whose releases after 3.11.0 are
/// above it).
fn line_meets(line: &str, specifiers: &VersionSpecifiers) -> bool {
    let Ok(line) = Version::from_str(line) else {
        return false;
    };
    // No release has this patch number, so no specifier names one above it.
    let newest = Version::new(line.release().iter().copied().chain([u64::MAX]));
    specifiers.contains(&newest)
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

    fn satisfies(line: &str, spec: &str) -> bool {
        line_meets(line, &specifier_set(spec).unwrap())
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

    /// Where PEP 440 and the line's newest patch release decide otherwise than comparing only
    /// the major and minor parts would.
    #[test]
    fn a_line_is_its_newest_patch_release() {
        for (spec, met) in [
            // Releases after 3.11.0 are above 3.11.
            ("<=3.11", false),
            ("==3.11", false),
            ("==3", false),
            ("==3.11.4", false),
            // Only 3.11.0 is excluded.
            ("!=3.11", true),
            ("~=3.11.2", true),
            ("~=3.10.2", false),
            ("<3.11.4", false),
            ("<3.12", true),
            ("<=3.12", true),
            ("!=3.11.2", true),
            ("", true),
        ] {
            assert_eq!(satisfies("3.11", spec), met, "3.11 against `{spec}`");
        }
    }

    /// What PEP 440 refuses, and the empty clauses `packaging` drops.
    #[test]
    fn malformed_specifiers() {
        for spec in [">=3.6.*", "3.8", ">=3.8 <4", ">=3.7;", "=>3.7"] {
            assert!(specifier_set(spec).is_err(), "`{spec}`");
        }
        assert!(satisfies("3.11", ">=3.7,"));
        assert!(satisfies("3.11", " , >=3.7, ,<4"));
    }
}
