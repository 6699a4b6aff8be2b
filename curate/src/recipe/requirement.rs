//! Requirements as the rules use them: each read with `pep508_rs` for its name and extras and
//! kept as written (the text is what pip is given), and the list of them the environment layer
//! installs.

use std::str::FromStr;

use pep508_rs::{Requirement, VersionOrUrl};

use super::pins::Pins;
use super::shell_quote;

/// `text` as a PEP 508 requirement; `None` where it is not one.
pub(super) fn parse(text: &str) -> Option<Requirement> {
    Requirement::from_str(text.trim()).ok()
}

/// Whether `text` is a requirement on pytest.
pub(super) fn is_pytest(text: &str) -> bool {
    parse(text).is_some_and(|r| r.name.as_ref() == "pytest")
}

/// The requirement on a requirements-style line (a requirements file's, tox's `deps`, a
/// `setup.cfg` extra's): the line without its comment, where that is a PEP 508 requirement on
/// a package from an index. `None` for blank lines, comments, options (`-r`, `-e .`), the
/// project itself (`.`), direct references (`name @ URL`, bare URLs) and whatever else is not
/// PEP 508 (tox's `{posargs}`, factor-conditional `py38: mock`): none of them is something the
/// environment layer can install from an index.
pub(super) fn from_line(line: &str) -> Option<String> {
    let line = line.split('#').next().unwrap_or("").trim();
    match parse(line)?.version_or_url {
        Some(VersionOrUrl::Url(_)) => None,
        Some(VersionOrUrl::VersionSpecifier(_)) | None => Some(line.to_owned()),
    }
}

/// The environment layer's requirements, in the order they were found, each once, as written.
#[derive(Debug, Default)]
pub(super) struct Requirements(Vec<String>);

impl Requirements {
    /// Adds `requirement` unless the same text is there already.
    pub(super) fn push(&mut self, requirement: String) {
        if !self.0.contains(&requirement) {
            self.0.push(requirement);
        }
    }

    /// Adds each of `requirements`, as [`Requirements::push`] does.
    pub(super) fn extend(&mut self, requirements: impl IntoIterator<Item = String>) {
        for requirement in requirements {
            self.push(requirement);
        }
    }

    /// Whether a requirement is on the package `name` (normalised, as `pep508_rs` names it).
    pub(super) fn lists(&self, name: &str) -> bool {
        self.0
            .iter()
            .any(|r| parse(r).is_some_and(|r| r.name.as_ref() == name))
    }

    /// Replaces each requirement on a pinned package by its pin.
    pub(super) fn pin(&mut self, pins: &Pins) {
        for text in &mut self.0 {
            if let Some(requirement) = parse(text)
                && let Some(pin) = pins.get(&requirement.name)
            {
                *text = pin.replacing(&requirement);
            }
        }
    }

    /// Each requirement as one shell word, as the image build passes them to pip.
    pub(super) fn shell_words(&self) -> Vec<String> {
        self.0.iter().map(|r| shell_quote(r)).collect()
    }
}

impl IntoIterator for Requirements {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
