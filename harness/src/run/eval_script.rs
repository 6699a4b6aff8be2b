//! The eval script (`eval.sh`), generated exactly as SWE-bench generates it for Python
//! repositories, v5's exit-code recording (both described in `docs/harness.md`, "Inputs"), and
//! the split of a script into the three parts a hardened run executes separately (see
//! `docs/hardening.md`).

use std::sync::LazyLock;

use regex::Regex;
use swerve_log_parsers::{END_TEST_OUTPUT, START_TEST_OUTPUT};

use crate::images::RepoEnv;
use swerve_swebench::dataset::Instance;

/// The fixed heredoc delimiter of SWE-bench's test-patch application.
pub(crate) const HEREDOC_DELIMITER: &str = "EOF_114329324912";

/// Where SWE-bench's (and swerve's) images hold the repository.
pub(crate) const REPO_DIRECTORY: &str = "/testbed";

/// File endings (`csv` without a dot, as upstream) whose paths are not passed to the test
/// command.
const NON_TEST_EXTS: [&str; 11] = [
    ".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml",
];

/// What the generator needs from a dataset row and its environment spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScriptInputs<'a> {
    /// `owner/name`.
    pub repo: &'a str,
    /// The task's base commit.
    pub base_commit: &'a str,
    /// The row's `test_patch`.
    pub test_patch: &'a str,
    /// The spec's `eval_commands`.
    pub eval_commands: &'a [String],
    /// The spec's `install` command(s), run again before the tests.
    pub install: &'a [String],
    /// The spec's `test_cmd`.
    pub test_cmd: &'a str,
}

/// The source paths (without `a/`) of the diff's file entries whose source is not `/dev/null`
/// — what SWE-bench resets with `git checkout <base> ...` (unidiff's `PatchedFile.path`).
pub(crate) fn modified_files(patch: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut lines = patch.split('\n').peekable();
    while let Some(line) = lines.next() {
        let Some(source) = line.strip_prefix("--- ") else {
            continue;
        };
        let Some(target) = lines.peek().and_then(|l| l.strip_prefix("+++ ")) else {
            continue;
        };
        // unidiff drops a tab-separated timestamp after the file name.
        let source = source.split('\t').next().unwrap_or(source);
        let target = target.split('\t').next().unwrap_or(target);
        if source == "/dev/null" {
            continue;
        }
        let path = match (source.strip_prefix("a/"), target.strip_prefix("b/")) {
            (Some(s), Some(_)) => s,
            (Some(s), None) if target == "/dev/null" => s,
            _ => source,
        };
        files.push(path.to_owned());
    }
    files
}

/// Every path captured by `diff --git a/.* b/(.*)` (greedy), as upstream.
pub fn diff_paths(patch: &str) -> Vec<String> {
    static DIFF_GIT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"diff --git a/.* b/(.*)").expect("valid regex"));
    DIFF_GIT
        .captures_iter(patch)
        .map(|c| c[1].to_owned())
        .collect()
}

/// The test directives (SWE-bench's `get_test_directives`): the test patch's paths minus
/// non-test files; Django paths become module labels.
pub(crate) fn test_directives(repo: &str, test_patch: &str) -> Vec<String> {
    if repo == "swe-bench/humaneval" {
        return vec!["test.py".to_owned()];
    }
    let paths = diff_paths(test_patch)
        .into_iter()
        .filter(|p| !NON_TEST_EXTS.iter().any(|ext| p.ends_with(ext)));
    if repo == "django/django" {
        paths
            .map(|p| {
                let p = p.strip_suffix(".py").unwrap_or(&p);
                let p = p.strip_prefix("tests/").unwrap_or(p);
                p.replace('/', ".")
            })
            .collect()
    } else {
        paths.collect()
    }
}

/// The v4 generator's `eval.sh` for a Python repository (what v5 datasets embed).
pub(crate) fn make_eval_script(inputs: &ScriptInputs<'_>) -> String {
    let test_files = modified_files(inputs.test_patch);
    let reset_tests = format!(
        "git checkout {} {}",
        inputs.base_commit,
        test_files.join(" ")
    );
    let apply_test_patch = format!(
        "git apply -v - <<'{HEREDOC_DELIMITER}'\n{}\n{HEREDOC_DELIMITER}",
        inputs.test_patch
    );
    let mut test_command = vec![inputs.test_cmd.to_owned()];
    test_command.extend(test_directives(inputs.repo, inputs.test_patch));
    let mut lines = vec![
        "#!/bin/bash".to_owned(),
        "set -uxo pipefail".to_owned(),
        "source /opt/miniconda3/bin/activate".to_owned(),
        "conda activate testbed".to_owned(),
        format!("cd {REPO_DIRECTORY}"),
    ];
    lines.extend(inputs.eval_commands.iter().cloned());
    lines.extend([
        format!("git config --global --add safe.directory {REPO_DIRECTORY}"),
        format!("cd {REPO_DIRECTORY}"),
        "git status".to_owned(),
        "git show".to_owned(),
        format!("git -c core.fileMode=false diff {}", inputs.base_commit),
        "source /opt/miniconda3/bin/activate".to_owned(),
        "conda activate testbed".to_owned(),
    ]);
    lines.extend(inputs.install.iter().cloned());
    lines.extend([
        reset_tests.clone(),
        apply_test_patch,
        format!(": '{START_TEST_OUTPUT}'"),
        test_command.join(" "),
        format!(": '{END_TEST_OUTPUT}'"),
        reset_tests,
    ]);
    let mut script = lines.join("\n");
    script.push('\n');
    script
}

/// The generated `eval.sh` of a row from its environment spec, with `test_cmd` as the test
/// command (the spec's, or its hardened form), before v5's exit-code lines.
pub fn script_from_spec(row: &Instance, env: &RepoEnv, test_cmd: &str) -> String {
    make_eval_script(&ScriptInputs {
        repo: &row.repo,
        base_commit: row.base_commit.as_deref().unwrap_or("HEAD"),
        test_patch: row.test_patch.as_deref().unwrap_or(""),
        eval_commands: &env.eval_commands,
        install: &env.install.to_vec(),
        test_cmd,
    })
}

/// v5's rewrite of a dataset eval script before it runs it: trim, drop the header lines, record
/// the test command's exit status around the first end marker, re-add the header.
pub fn with_exit_code(script: &str) -> String {
    let mut lines: Vec<String> = script
        .trim()
        .split('\n')
        .filter(|l| *l != "#!/bin/bash" && *l != "set -uxo pipefail")
        .map(str::to_owned)
        .collect();
    if let Some(at) = lines.iter().position(|l| l.contains(END_TEST_OUTPUT)) {
        lines.insert(at, "SWEBENCH_TEST_EXIT_CODE=$?".to_owned());
        lines.insert(
            at + 2,
            "echo \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\"".to_owned(),
        );
    }
    format!("#!/bin/bash\nset -uxo pipefail\n{}\n", lines.join("\n"))
}

/// Adds `-p no:cacheprovider` after a pytest test command (hardened runs), so that tests
/// cannot read or write pytest's cache (`--lf`-style state a patch could plant).
pub(crate) fn harden_test_cmd(test_cmd: &str) -> String {
    let is_pytest = test_cmd
        .split_whitespace()
        .any(|w| w == "pytest" || w.ends_with("/pytest") || w == "py.test");
    if is_pytest && !test_cmd.contains("no:cacheprovider") {
        format!("{test_cmd} -p no:cacheprovider")
    } else {
        test_cmd.to_owned()
    }
}

/// A v5 eval script cut into the parts a hardened run executes as separate execs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScriptParts {
    /// Everything before the start-marker line (setup, install, test-patch application).
    pub setup: Vec<String>,
    /// The lines between the start-marker line and `SWEBENCH_TEST_EXIT_CODE=$?`: the test
    /// command(s).
    pub tests: Vec<String>,
    /// The lines after the end-marker line (the exit-code echo and the test-file reset).
    pub teardown: Vec<String>,
}

/// Why a script cannot be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the eval script has no `: '>>>>> Start Test Output'` line, or no `>>>>> End Test Output` line after it; hardened mode runs the test command on its own between them and cannot run this script (use --mode compat)"
)]
pub(crate) struct NoMarkers;

impl ScriptParts {
    /// Splits the output of [`with_exit_code`] at the marker lines.
    pub(crate) fn split(script: &str) -> Result<ScriptParts, NoMarkers> {
        let lines: Vec<&str> = script
            .trim_end_matches('\n')
            .split('\n')
            .skip_while(|l| *l == "#!/bin/bash" || *l == "set -uxo pipefail")
            .collect();
        let start = lines
            .iter()
            .position(|l| l.contains(START_TEST_OUTPUT))
            .ok_or(NoMarkers)?;
        let code = lines
            .iter()
            .skip(start)
            .position(|l| *l == "SWEBENCH_TEST_EXIT_CODE=$?")
            .map(|i| i + start)
            .ok_or(NoMarkers)?;
        let end = code + 1;
        if !lines.get(end).is_some_and(|l| l.contains(END_TEST_OUTPUT)) {
            return Err(NoMarkers);
        }
        let own = |s: &[&str]| s.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
        Ok(ScriptParts {
            setup: own(&lines[..start]),
            tests: own(&lines[start + 1..code]),
            teardown: own(&lines[end + 1..]),
        })
    }

    /// The setup script; it ends by saving the exported environment to `env_file` so that
    /// the test part runs with the same variables (an exec does not inherit them).
    pub(crate) fn setup_script(&self, env_file: &str) -> String {
        script(
            self.setup
                .iter()
                .cloned()
                // The sandbox's per-exec kill token must not travel to the next exec, nor
                // the setup-only `PYTHONDONTWRITEBYTECODE` the host sets for this exec.
                .chain([format!(
                    "export -p | grep -v -e '^declare -x SWERVE_EXEC=' \
                     -e '^declare -x PYTHONDONTWRITEBYTECODE=' > {env_file}"
                )]),
        )
    }

    /// The test script: restore the environment, print the start marker tagged with `nonce`,
    /// run the tests. Its exit status is the test command's.
    ///
    /// pytest's cache plugin is turned off: a generated script carries `-p no:cacheprovider`
    /// in its test command ([`harden_test_cmd`]); a dataset's own script, which runs verbatim,
    /// gets it through `PYTEST_ADDOPTS` instead.
    pub(crate) fn tests_script(&self, env_file: &str, nonce: &str) -> String {
        let no_cache = if self.tests.iter().any(|l| l.contains("no:cacheprovider")) {
            ""
        } else {
            "export PYTEST_ADDOPTS=\"${PYTEST_ADDOPTS:+$PYTEST_ADDOPTS }-p no:cacheprovider\"; "
        };
        script(
            [
                // Untraced: the variables are the setup's, not news for the log.
                format!(
                    "{{ set +x; }} 2>/dev/null; source {env_file} 2>/dev/null; {no_cache}set -x"
                ),
                format!("cd {REPO_DIRECTORY}"),
                format!(": '{START_TEST_OUTPUT} {nonce}'"),
            ]
            .into_iter()
            .chain(self.tests.iter().cloned()),
        )
    }

    /// The teardown script: record `exit_code` (measured by the host), print the end marker
    /// tagged with `nonce`, then the script's own remaining lines.
    pub(crate) fn teardown_script(&self, exit_code: i64, nonce: &str) -> String {
        script(
            [
                format!("cd {REPO_DIRECTORY}"),
                format!("SWEBENCH_TEST_EXIT_CODE={exit_code}"),
                format!(": '{END_TEST_OUTPUT} {nonce}'"),
            ]
            .into_iter()
            .chain(self.teardown.iter().cloned()),
        )
    }
}

fn script(lines: impl Iterator<Item = String>) -> String {
    let mut text = "#!/bin/bash\nset -uxo pipefail\n".to_owned();
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_PATCH: &str = "diff --git a/tests/test_a.py b/tests/test_a.py\nindex 1..2 100644\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+z\ndiff --git a/tests/data.json b/tests/data.json\n--- a/tests/data.json\n+++ b/tests/data.json\n@@ -1 +1 @@\n-1\n+2\n";

    #[test]
    fn files_and_directives() {
        assert_eq!(
            modified_files(TEST_PATCH),
            ["tests/test_a.py", "tests/data.json"]
        );
        assert_eq!(
            test_directives("o/r", TEST_PATCH),
            ["tests/test_a.py", "tests/test_new.py"]
        );
        assert_eq!(
            test_directives(
                "django/django",
                "diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py\n"
            ),
            ["auth_tests.test_validators"]
        );
    }

    #[test]
    fn script_shape_and_exit_code() {
        let inputs = ScriptInputs {
            repo: "o/r",
            base_commit: "abc",
            test_patch: TEST_PATCH,
            eval_commands: &[],
            install: &["python -m pip install -e .".to_owned()],
            test_cmd: "pytest -rA",
        };
        let script = with_exit_code(&make_eval_script(&inputs));
        assert!(script.starts_with("#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\nconda activate testbed\ncd /testbed\ngit config"));
        assert!(script.contains("\n+2\n\nEOF_114329324912\n: '>>>>> Start Test Output'\npytest -rA tests/test_a.py tests/test_new.py\nSWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\"\ngit checkout abc tests/test_a.py tests/data.json\n"));
        let parts = ScriptParts::split(&script).expect("markers");
        assert_eq!(
            parts.tests,
            ["pytest -rA tests/test_a.py tests/test_new.py"]
        );
        assert_eq!(
            parts.setup.last().map(String::as_str),
            Some("EOF_114329324912")
        );
        assert_eq!(parts.teardown.len(), 2);
        assert!(
            parts
                .teardown_script(1, "n0")
                .contains("SWEBENCH_TEST_EXIT_CODE=1\n: '>>>>> End Test Output n0'\necho")
        );
        assert_eq!(ScriptParts::split("#!/bin/bash\necho\n"), Err(NoMarkers));
    }

    /// A verbatim script's tests run with pytest's cache off through `PYTEST_ADDOPTS` (added
    /// to what the setup exported, under `set -u`); a generated hardened one already has it.
    #[test]
    fn pytest_cache_is_off_once() {
        let split = |test: &str| {
            ScriptParts::split(&with_exit_code(&format!(
                "cd /testbed\n: '>>>>> Start Test Output'\n{test}\n: '>>>>> End Test Output'\n"
            )))
            .expect("markers")
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let env_file = dir.path().join("env");
        let probe = |parts: &ScriptParts, exported: &str| {
            std::fs::write(&env_file, exported).expect("env file");
            let script = parts.tests_script(&env_file.display().to_string(), "n");
            let first = script.lines().nth(2).expect("restore line");
            let out = std::process::Command::new("bash")
                .args([
                    "-c",
                    &format!("set -u\n{first}\necho \"[${{PYTEST_ADDOPTS-unset}}]\""),
                ])
                .output()
                .expect("bash runs");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let verbatim = split("pytest -rA tests/test_a.py");
        assert_eq!(probe(&verbatim, ""), "[-p no:cacheprovider]");
        assert_eq!(
            probe(&verbatim, "declare -x PYTEST_ADDOPTS=\"-x\"\n"),
            "[-x -p no:cacheprovider]"
        );
        let generated = split("pytest -rA -p no:cacheprovider tests/test_a.py");
        assert_eq!(probe(&generated, ""), "[unset]");
        assert!(
            ScriptParts::split("#!/bin/bash\necho\n")
                .unwrap_err()
                .to_string()
                .contains("--mode compat")
        );
    }

    #[test]
    fn hardened_test_command() {
        assert_eq!(
            harden_test_cmd("pytest -rA"),
            "pytest -rA -p no:cacheprovider"
        );
        assert_eq!(
            harden_test_cmd("./tests/runtests.py --verbosity 2"),
            "./tests/runtests.py --verbosity 2"
        );
    }

    /// The real v5 row's eval script is what the generator makes from the row and its spec.
    #[test]
    fn reproduces_a_real_dataset_script() {
        let Some(path) = swerve_tests::shared_data(
            "swebench-logs/django__django-14007.gold/instance.json",
            "eval script of a real dataset row",
        ) else {
            return;
        };
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let row: serde_json::Value = serde_json::from_str(&text).expect("json");
        let inputs = ScriptInputs {
            repo: "django/django",
            base_commit: row["base_commit"].as_str().expect("base"),
            test_patch: row["test_patch"].as_str().expect("test patch"),
            eval_commands: &[],
            install: &["python -m pip install -e .".to_owned()],
            test_cmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
        };
        assert_eq!(
            make_eval_script(&inputs),
            row["eval_script"].as_str().expect("script")
        );
    }
}
