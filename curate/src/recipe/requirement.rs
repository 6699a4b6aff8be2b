//! Requirements as the rules use them: each read for its name and kept as written (the text is
//! what pip is given), and the list of them the environment layer installs.

use super::pins::Pins;
use super::shell_quote;

/// Whether `text` is a requirement on pytest.
pub(super) fn is_pytest(text: &str) -> bool {
    name(text).as_deref() == Some("pytest")
}

/// One requirement of a requirements-style line, `None` for comments, options, the project
/// itself and direct references.
pub(super) fn from_line(line: &str) -> Option<String> {
    let line = line.split('#').next().unwrap_or("").trim();
    if line.is_empty()
        || line.starts_with('-')
        || line.starts_with('.')
        || line.contains("://")
        || line.starts_with('{')
    {
        return None;
    }
    name(line)?;
    Some(line.to_owned())
}

/// The normalised distribution name a requirement starts with.
pub(super) fn name(req: &str) -> Option<String> {
    let name: String = req
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    (!name.is_empty()).then(|| name.to_ascii_lowercase().replace(['_', '.'], "-"))
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

    /// Whether a requirement is on the package `package` (normalised).
    pub(super) fn lists(&self, package: &str) -> bool {
        self.0.iter().any(|r| name(r).as_deref() == Some(package))
    }

    /// Replaces each requirement on a pinned package by its pin.
    pub(super) fn pin(&mut self, pins: &Pins) {
        for text in &mut self.0 {
            if let Some(pin) = name(text).and_then(|n| pins.get(&n)) {
                *text = pin.replacing(text);
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
