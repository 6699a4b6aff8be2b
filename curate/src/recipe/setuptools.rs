//! setuptools' own files: `setup.cfg`, read as `configparser` reads it (`[options]
//! python_requires`, `[options.extras_require]`, `[tool:pytest]`), and `setup.py`, read as text
//! (the rules run no code: a keyword argument's string literal, the keys of `extras_require`).

use super::TEST_NAMES;
use super::ini::Ini;
use super::requirement;

/// `setup.cfg`'s name, at the repository's root.
pub(super) const SETUP_CFG: &str = "setup.cfg";
/// `setup.py`'s name, at the repository's root.
pub(super) const SETUP_PY: &str = "setup.py";

/// The section of `setup.cfg` whose keys are extras.
const EXTRAS: &str = "options.extras_require";

/// A parsed `setup.cfg`.
pub(super) struct SetupCfg(Ini);

impl SetupCfg {
    /// `text` as INI (which always parses).
    pub(super) fn parse(text: &str) -> SetupCfg {
        SetupCfg(Ini::parse(text))
    }

    /// `[options] python_requires`.
    pub(super) fn python_requires(&self) -> Option<&str> {
        self.0.get("options", "python_requires")
    }

    /// The extras that hold what the tests need.
    pub(super) fn test_extras(&self) -> impl Iterator<Item = &str> {
        self.0.keys(EXTRAS).filter(|k| TEST_NAMES.contains(k))
    }

    /// Whether an extra that holds what the tests need lists pytest.
    pub(super) fn test_extra_lists_pytest(&self) -> bool {
        TEST_NAMES.iter().any(|n| {
            self.0.get(EXTRAS, n).is_some_and(|v| {
                v.lines()
                    .filter_map(requirement::from_line)
                    .any(|r| requirement::is_pytest(&r))
            })
        })
    }

    /// Whether `[tool:pytest]` configures pytest.
    pub(super) fn configures_pytest(&self) -> bool {
        self.0.has_section("tool:pytest")
    }
}

/// `setup.py`'s text.
pub(super) struct SetupPy<'a>(&'a str);

impl<'a> SetupPy<'a> {
    /// The file's text.
    pub(super) fn new(text: &'a str) -> SetupPy<'a> {
        SetupPy(text)
    }

    /// `python_requires=">=3.8"`'s string.
    pub(super) fn python_requires(&self) -> Option<String> {
        string_arg(self.0, "python_requires")
    }

    /// The extras that hold what the tests need: keys of `extras_require` that are test names
    /// (read as text, up to the first `}`).
    pub(super) fn test_extras(&self) -> Vec<String> {
        let Some(i) = self.0.find("extras_require") else {
            return Vec::new();
        };
        let rest = &self.0[i..];
        let end = rest.find('}').unwrap_or(rest.len());
        TEST_NAMES
            .iter()
            .filter(|n| {
                rest[..end].contains(&format!("\"{n}\"")) || rest[..end].contains(&format!("'{n}'"))
            })
            .map(|n| (*n).to_owned())
            .collect()
    }

    /// Whether the file mentions pytest at all: what its extras list is code, not data, so a
    /// mention is the best evidence the rules have.
    pub(super) fn mentions_pytest(&self) -> bool {
        self.0.contains("pytest")
    }
}

/// The string value of a keyword argument in Python source (`python_requires=">=3.8"`).
fn string_arg(text: &str, key: &str) -> Option<String> {
    let i = text.find(key)?;
    let rest = text[i + key.len()..]
        .trim_start()
        .strip_prefix('=')?
        .trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &rest[1..];
    Some(body[..body.find(quote)?].to_owned())
}
