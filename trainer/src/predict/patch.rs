//! From a completion to a SWE-bench prediction: its SEARCH/REPLACE edits applied to the task's
//! files in memory (the SWE-RL reward's own parser, so a completion that scores −1 yields no
//! patch), then a `git apply`-able unified diff of every file they change.

use std::collections::BTreeMap;

use swerve_swebench::Instance;

/// The unified diff that `completion`'s edits make to `task`'s files, or `None` when the
/// completion breaks the SWE-RL format (missing tags, no blocks, a SEARCH part not found).
pub(crate) fn completion_patch(task: &Instance, completion: &str) -> Option<String> {
    let edits = swerve_swe_rl::parse_and_apply(&task.code_context, completion).ok()?;
    Some(files_diff(&task.code_context, &edits.new_content))
}

/// A git-style unified diff (three context lines) turning `old` into `new` for every path of
/// `new` whose text differs; a path missing from `old` is a new file.
pub(crate) fn files_diff(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (path, after) in new {
        let before = old.get(path);
        let before_text = before.map_or("", String::as_str);
        if before.is_some() && before_text == after {
            continue;
        }
        out.push_str(&format!("diff --git a/{path} b/{path}\n"));
        let from = if before.is_some() {
            format!("a/{path}")
        } else {
            out.push_str("new file mode 100644\n");
            "/dev/null".to_owned()
        };
        let diff = similar::TextDiff::from_lines(before_text, after.as_str());
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&from, &format!("b/{path}"))
                .to_string(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::gold_completion;

    fn task() -> Instance {
        let old: String = (1..=8).map(|i| format!("x{i} = {i}\n")).collect();
        Instance {
            instance_id: "o__r-1".into(),
            code_context: BTreeMap::from([("m.py".to_owned(), old.clone())]),
            oracle_new_content: BTreeMap::from([
                ("m.py".to_owned(), old.replace("x4 = 4\n", "x4 = 40\n")),
                ("new.py".to_owned(), "y = 1\n".to_owned()),
            ]),
            ..Instance::default()
        }
    }

    #[test]
    fn gold_completion_becomes_the_gold_diff() {
        let t = task();
        let patch = completion_patch(&t, &gold_completion(&t)).unwrap();
        assert_eq!(
            patch,
            "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,7 +1,7 @@\n x1 = 1\n x2 = 2\n \
             x3 = 3\n-x4 = 4\n+x4 = 40\n x5 = 5\n x6 = 6\n x7 = 7\n\
             diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n\
             @@ -0,0 +1 @@\n+y = 1\n"
        );
    }

    #[test]
    fn malformed_completion_has_no_patch() {
        assert_eq!(
            completion_patch(&task(), "<think>x</think> no solution"),
            None
        );
    }
}
