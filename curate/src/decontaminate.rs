//! Repository-level decontamination: a curated set that contains a benchmark repository is a
//! bug. Repositories are excluded by name (case-insensitive) and by GH Archive's `repo.id`, which
//! survives renames and transfers: the ids known here, every id an event under a benchmark name
//! carries in this run, and the user's own lists.

use std::collections::BTreeSet;

/// SWE-bench's repositories: the 12 of SWE-bench and SWE-bench Verified, then the other Python
/// repositories SWE-bench's harness has specifications for.
pub(crate) const BENCHMARK_REPOS: [&str; 18] = [
    "astropy/astropy",
    "django/django",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "pallets/flask",
    "psf/requests",
    "pydata/xarray",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "sympy/sympy",
    "marshmallow-code/marshmallow",
    "pvlib/pvlib-python",
    "pydicom/pydicom",
    "pylint-dev/astroid",
    "pyvista/pyvista",
    "sqlfluff/sqlfluff",
];

/// GH Archive `repo.id`s of benchmark repositories known without any events.
pub(crate) const BENCHMARK_REPO_IDS: [(u64, &str); 2] =
    [(596892, "pallets/flask"), (1362490, "psf/requests")];

/// Whether `name` is a benchmark repository's name.
pub(crate) fn is_benchmark_name(name: &str) -> bool {
    BENCHMARK_REPOS
        .iter()
        .any(|known| known.eq_ignore_ascii_case(name))
}

/// The exclusion lists of one run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exclusions {
    names: BTreeSet<String>,
    ids: BTreeSet<u64>,
}

impl Exclusions {
    /// The benchmark lists plus the user's names and ids, plus `seen_ids` (ids that events under
    /// benchmark names carried).
    pub(crate) fn new(
        user_names: &[String],
        user_ids: &[u64],
        seen_ids: &BTreeSet<u64>,
    ) -> Exclusions {
        let names = BENCHMARK_REPOS
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .chain(user_names.iter().map(|n| n.to_ascii_lowercase()))
            .collect();
        let ids = BENCHMARK_REPO_IDS
            .iter()
            .map(|(id, _)| *id)
            .chain(user_ids.iter().copied())
            .chain(seen_ids.iter().copied())
            .collect();
        Exclusions { names, ids }
    }

    /// Why `name` / `id` is excluded, or `None`.
    pub(crate) fn check(&self, name: &str, id: Option<u64>) -> Option<String> {
        if self.names.contains(&name.to_ascii_lowercase()) {
            return Some(format!("{name} is an excluded repository"));
        }
        match id {
            Some(id) if self.ids.contains(&id) => {
                Some(format!("repo.id {id} belongs to an excluded repository"))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::Exclusions;

    #[test]
    fn by_name_id_and_user_lists() {
        let seen = BTreeSet::from([42]);
        let ex = Exclusions::new(&["Me/Private".into()], &[7], &seen);
        assert!(ex.check("Pallets/Flask", None).is_some());
        assert!(ex.check("old-pallets/flask", Some(596892)).is_some());
        assert!(ex.check("x/requests-fork", Some(1362490)).is_some());
        assert!(ex.check("renamed/astropy", Some(42)).is_some());
        assert!(ex.check("me/private", Some(1)).is_some());
        assert!(ex.check("a/b", Some(7)).is_some());
        assert!(ex.check("quietpine/slugkit", Some(1)).is_none());
        assert!(ex.check("quietpine/slugkit", None).is_none());
    }
}
