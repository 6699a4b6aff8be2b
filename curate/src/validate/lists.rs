//! The lists of `../shared/specs/environments.md` §2 from the statuses of every run of both
//! sides: FAIL_TO_PASS, PASS_TO_PASS, flaky tests, and why a side's runs cannot be used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use swerve_host::{Execution, Status};

use super::DropReason;

/// Which side of the fix a run is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Before,
    After,
}

/// The statuses of one side over its runs, or why they cannot be used.
pub(super) enum SideResult {
    Statuses(Vec<BTreeMap<String, Status>>),
    Failed(DropReason, String),
}

pub(super) fn side_result(
    executions: Vec<Execution>,
    logs: &Path,
    id: &str,
    side: Side,
) -> SideResult {
    let mut out = Vec::new();
    for (run, execution) in executions.into_iter().enumerate() {
        if let Some(error) = execution.infra_error {
            return SideResult::Failed(DropReason::InfraError, error);
        }
        if execution.tests.is_empty() && timed_out(logs, run, id, side) {
            return SideResult::Failed(
                DropReason::TimedOut,
                format!("{side:?} run {} hit the time limit", run + 1),
            );
        }
        out.push(execution.tests);
    }
    SideResult::Statuses(out)
}

/// Whether the run's `test_output.txt` ends with the harness's timeout line.
pub(super) fn timed_out(logs: &Path, run: usize, id: &str, side: Side) -> bool {
    side_logs(logs, run, id, side).iter().any(|dir| {
        fs_err::read_to_string(dir.join("test_output.txt"))
            .is_ok_and(|t| t.contains("\n\nTimeout error: "))
    })
}

/// The log folders of one side of one run (`<logs>/run-<n>/<id>/<key>/`, told apart by whether
/// `patch.diff` is empty).
pub(super) fn side_logs(logs: &Path, run: usize, id: &str, side: Side) -> Vec<PathBuf> {
    let dir = logs.join(format!("run-{}", run + 1)).join(id);
    let Ok(entries) = fs_err::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let empty = fs_err::read_to_string(p.join("patch.diff"))
                .map(|t| t.trim().is_empty())
                .unwrap_or(false);
            empty == (side == Side::Before)
        })
        .collect()
}

/// Whether a run collected any test: a status map holding only `ERROR`s of whole files (what
/// pytest reports for a test file that does not import) collected none.
pub(super) fn collected(statuses: &BTreeMap<String, Status>) -> bool {
    statuses.iter().any(|(name, status)| {
        let file_error =
            status.as_str() == "ERROR" && !name.contains("::") && name.ends_with(".py");
        !file_error
    })
}

/// A test's statuses over runs: the same in every run, or flaky.
pub(super) fn stable(runs: &[BTreeMap<String, Status>], test: &str) -> Option<Option<bool>> {
    let mut seen: Option<Option<bool>> = None;
    for run in runs {
        let passed = run.get(test).map(|s| s.is_pass());
        match seen {
            None => seen = Some(passed),
            Some(p) if p != passed => return None,
            Some(_) => {}
        }
    }
    seen
}

/// The lists of §2 from the two sides' runs.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Lists {
    pub(super) fail_to_pass: Vec<String>,
    pub(super) pass_to_pass: Vec<String>,
    pub(super) flaky: Vec<String>,
    pub(super) failing_after: Vec<String>,
}

pub(super) fn derive_lists(
    before: &[BTreeMap<String, Status>],
    after: &[BTreeMap<String, Status>],
) -> Lists {
    let names: BTreeSet<&String> = before.iter().chain(after).flat_map(|m| m.keys()).collect();
    let mut lists = Lists::default();
    for name in names {
        // `None`: flaky; `Some(None)`: absent in every run; `Some(Some(p))`: passed or not.
        let (b, a) = (stable(before, name), stable(after, name));
        match (b, a) {
            (None, _) | (_, None) => lists.flaky.push(name.clone()),
            (Some(b), Some(a)) => {
                let passed_before = b == Some(true);
                let passed_after = a == Some(true);
                if !passed_before && passed_after {
                    lists.fail_to_pass.push(name.clone());
                } else if passed_before && passed_after {
                    lists.pass_to_pass.push(name.clone());
                } else if a.is_some() && !passed_after {
                    lists.failing_after.push(name.clone());
                }
            }
        }
    }
    lists
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_follow_the_rules() {
        use swerve_host::TestStatus;
        let run = |failed: &[&str], passed: &[&str]| -> BTreeMap<String, Status> {
            let f = failed
                .iter()
                .map(|t| ((*t).to_owned(), Status::Known(TestStatus::Failed)));
            let p = passed
                .iter()
                .map(|t| ((*t).to_owned(), Status::Known(TestStatus::Passed)));
            f.chain(p).collect()
        };
        let before = [run(&["a", "g"], &["b", "f"]), run(&["a", "f", "g"], &["b"])];
        let after = [
            run(&["g"], &["a", "b", "c", "f"]),
            run(&["g"], &["a", "b", "c", "f"]),
        ];
        let lists = derive_lists(&before, &after);
        // `c` is absent before and passes after: FAIL_TO_PASS.
        assert_eq!(lists.fail_to_pass, ["a", "c"]);
        assert_eq!(lists.pass_to_pass, ["b"]);
        assert_eq!(lists.flaky, ["f"]);
        assert_eq!(lists.failing_after, ["g"]);
    }
}
