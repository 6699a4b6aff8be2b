//! The task's test lists from the statuses of every run of both sides: FAIL_TO_PASS (failing or
//! absent in every run before the fix, passing in every run after it), PASS_TO_PASS (passing in
//! every run of both sides), the flaky tests (a status that differs between runs of a side),
//! the tests failing after the fix, and why a side's runs cannot be used at all. Every run's
//! outcome is the harness executor's typed [`ExecutionOutcome`]: nothing here reads a log.

use std::collections::{BTreeMap, BTreeSet};

use swerve_harness::execution::ExecutionOutcome;
use swerve_host::Status;

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

/// Why a run ends its task's testing (its side cannot be used): an infrastructure failure or a
/// run past the time limit; `None` for a run whose statuses count (a patch that did not apply
/// counts as a run that collected no test).
pub(super) fn stops(outcome: &ExecutionOutcome) -> Option<(DropReason, String)> {
    match outcome {
        ExecutionOutcome::Infrastructure { error } => Some((DropReason::InfraError, error.clone())),
        ExecutionOutcome::TimedOut => Some((DropReason::TimedOut, "hit the time limit".to_owned())),
        ExecutionOutcome::NotApplied | ExecutionOutcome::Graded(_) => None,
    }
}

/// The statuses of one side's runs, or why the side cannot be used.
pub(super) fn side_result(outcomes: Vec<ExecutionOutcome>, side: Side) -> SideResult {
    let mut out = Vec::new();
    for (run, outcome) in outcomes.into_iter().enumerate() {
        if let Some((reason, detail)) = stops(&outcome) {
            let detail = match reason {
                DropReason::TimedOut => format!("{side:?} run {} {detail}", run + 1),
                _ => detail,
            };
            return SideResult::Failed(reason, detail);
        }
        out.push(match outcome {
            ExecutionOutcome::Graded(graded) => graded.tests,
            _ => BTreeMap::new(),
        });
    }
    SideResult::Statuses(out)
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
