//! `pyproject.toml`: `[project]` (`requires-python`, classifiers, `optional-dependencies`),
//! `[build-system] requires`, PEP 735 `[dependency-groups]` and whether `[tool.pytest]`
//! configures pytest.

use pep508_rs::ExtraName;

use super::{NoRecipe, TEST_NAMES, requirement};

/// The file's name, at the repository's root.
pub(super) const FILE: &str = "pyproject.toml";

/// A parsed `pyproject.toml`.
pub(super) struct Pyproject(toml::Table);

impl Pyproject {
    /// `text` as TOML; `Unreadable` where it is not.
    pub(super) fn parse(text: &str) -> Result<Pyproject, NoRecipe> {
        text.parse::<toml::Table>()
            .map(Pyproject)
            .map_err(|e| NoRecipe::Unreadable {
                file: FILE.into(),
                detail: e.message().to_owned(),
            })
    }

    /// The `[project]` table.
    fn project(&self) -> Option<&toml::Table> {
        self.0.get("project").and_then(|p| p.as_table())
    }

    /// `[project] requires-python`.
    pub(super) fn requires_python(&self) -> Option<&str> {
        self.project()?.get("requires-python")?.as_str()
    }

    /// `[project] classifiers`.
    pub(super) fn classifiers(&self) -> impl Iterator<Item = &str> {
        self.project()
            .and_then(|p| p.get("classifiers"))
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
    }

    /// `[project.optional-dependencies]`.
    fn optional_dependencies(&self) -> Option<&toml::Table> {
        self.project()?.get("optional-dependencies")?.as_table()
    }

    /// The extras that hold what the tests need.
    pub(super) fn test_extras(&self) -> impl Iterator<Item = &str> {
        self.optional_dependencies()
            .into_iter()
            .flat_map(|t| t.keys())
            .map(String::as_str)
            .filter(|k| TEST_NAMES.contains(k))
    }

    /// Whether an extra that holds what the tests need lists pytest.
    pub(super) fn test_extra_lists_pytest(&self) -> bool {
        self.optional_dependencies().is_some_and(|t| {
            TEST_NAMES.iter().any(|n| {
                t.get(*n)
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.as_str())
                    .any(requirement::is_pytest)
            })
        })
    }

    /// Whether the file describes a project pip can install (`[project]` or `[build-system]`).
    pub(super) fn installable(&self) -> bool {
        self.0.contains_key("project") || self.0.contains_key("build-system")
    }

    /// `[build-system] requires`, as written.
    pub(super) fn build_requires(&self) -> Vec<String> {
        self.0
            .get("build-system")
            .and_then(|b| b.get("requires"))
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// Whether `[tool.pytest]` (`ini_options`) configures pytest.
    pub(super) fn configures_pytest(&self) -> bool {
        self.0.get("tool").and_then(|t| t.get("pytest")).is_some()
    }

    /// The requirements of the dependency groups that hold what the tests need, in
    /// [`TEST_NAMES`] order, `include-group` entries expanded; `None` where there is none.
    pub(super) fn test_groups(&self) -> Result<Option<Vec<String>>, NoRecipe> {
        let Some(groups) = self.0.get("dependency-groups").and_then(|g| g.as_table()) else {
            return Ok(None);
        };
        let mut out = None;
        for name in TEST_NAMES.into_iter().filter(|n| groups.contains_key(*n)) {
            let requirements = dependency_group(groups, name, &mut Vec::new())?;
            out.get_or_insert_with(Vec::new).extend(requirements);
        }
        Ok(out)
    }
}

/// A PEP 735 group's requirements, `include-group` entries expanded (a cycle is an error).
/// Group names compare normalised, as PEP 735 says: as package and extra names do.
fn dependency_group(
    groups: &toml::Table,
    name: &str,
    seen: &mut Vec<ExtraName>,
) -> Result<Vec<String>, NoRecipe> {
    let unreadable = |detail: String| NoRecipe::Unreadable {
        file: FILE.into(),
        detail,
    };
    let key = ExtraName::new(name.to_owned())
        .map_err(|e| unreadable(format!("dependency group `{name}`: {e}")))?;
    if seen.contains(&key) {
        return Err(unreadable(format!(
            "dependency group `{name}` includes itself"
        )));
    }
    let Some((_, group)) = groups
        .iter()
        .find(|(k, _)| ExtraName::new((*k).clone()).is_ok_and(|k| k == key))
    else {
        return Err(unreadable(format!(
            "dependency group `{name}` is included but not defined"
        )));
    };
    seen.push(key);
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
