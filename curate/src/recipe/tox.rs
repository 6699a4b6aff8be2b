//! `tox.ini`: the requirements of `[testenv] deps` (lines that are PEP 508 requirements; tox's
//! own syntax, `-r` files, `{posargs}` and factor-conditional lines, is left out) and whether a
//! `[pytest]` section configures pytest.

use super::ini::Ini;
use super::requirement;

/// The file's name, at the repository's root.
pub(super) const FILE: &str = "tox.ini";

/// A parsed `tox.ini`.
pub(super) struct Tox(Ini);

impl Tox {
    /// `text` as INI (which always parses).
    pub(super) fn parse(text: &str) -> Tox {
        Tox(Ini::parse(text))
    }

    /// The requirements `[testenv] deps` lists; `None` where it has no `deps`.
    pub(super) fn deps(&self) -> Option<Vec<String>> {
        let deps = self.0.get("testenv", "deps")?;
        Some(deps.lines().filter_map(requirement::from_line).collect())
    }

    /// Whether a `[pytest]` section configures pytest.
    pub(super) fn configures_pytest(&self) -> bool {
        self.0.has_section("pytest")
    }
}
