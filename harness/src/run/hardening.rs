//! The hardened run's defences that live in the container (see `docs/hardening.md`): which
//! files a model patch may not contribute to the test run, the scripts that find and reset
//! them, the process sweep between the execs of a split eval script, and host-side nonces.

use std::collections::BTreeSet;
use std::num::NonZeroU32;

/// Files pytest (or Python) reads as configuration or hooks when the tests start: every name
/// in pytest's own configuration lookup (`pytest.ini`, `.pytest.ini`, `pytest.toml` and
/// `.pytest.toml` from pytest 9, `pyproject.toml`, `tox.ini`, `setup.cfg`), `conftest.py`, and
/// Python's start-up hooks.
const CONFIG_FILES: [&str; 10] = [
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "sitecustomize.py",
    "usercustomize.py",
];

/// Folders whose every file is test infrastructure, in the conventions of the languages
/// SWE-bench grades: Python, Rust, PHP, Java (`tests`, `test`, `testing`), RSpec (`spec`), Jest
/// (`__tests__`, `__mocks__`), Go's fixtures (`testdata`).
const TEST_FOLDERS: [&str; 7] = [
    "tests",
    "test",
    "testing",
    "spec",
    "__tests__",
    "__mocks__",
    "testdata",
];

/// Test runners' configuration and set-up files of the other languages, by name.
const RUNNER_FILES: [&str; 9] = [
    ".rspec",
    "spec_helper.rb",
    "rails_helper.rb",
    "test_helper.rb",
    "phpunit.xml",
    "phpunit.xml.dist",
    "setupTests.js",
    "setupTests.ts",
    ".mocharc",
];

/// Configuration files of JavaScript runners, by stem (`jest.config.js`, `vitest.config.mts`,
/// `.mocharc.yml`, `karma.conf.cjs`, …).
const RUNNER_CONFIG_STEMS: [&str; 6] = [
    "jest.config",
    "jest.setup",
    "vitest.config",
    "vitest.workspace",
    ".mocharc",
    "karma.conf",
];

/// Whether a file name is a test file by its language's naming convention: Python
/// `test_*.py` / `*_test.py` / `*_tests.py`, Go `*_test.go`, JavaScript/TypeScript `*.test.*` /
/// `*.spec.*`, Ruby `*_spec.rb` / `*_test.rb` / `test_*.rb`, PHP `*Test.php`, Java and Kotlin
/// `*Test(s).java|kt`, C/C++ `*_test.c(c|pp)` / `*_unittest.c(c|pp)`. (Curation keeps the
/// narrower, Python-only rule its spec states: `swerve_curate::paths`.)
fn is_test_file_name(name: &str) -> bool {
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    match ext {
        "py" => stem.starts_with("test_") || stem.ends_with("_test") || stem.ends_with("_tests"),
        "go" => stem.ends_with("_test"),
        "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" | "mts" | "cts" => {
            stem.ends_with(".test") || stem.ends_with(".spec")
        }
        "rb" => stem.ends_with("_spec") || stem.ends_with("_test") || stem.starts_with("test_"),
        "php" => stem.ends_with("Test"),
        "java" | "kt" => stem.ends_with("Test") || stem.ends_with("Tests"),
        "c" | "cc" | "cpp" | "cxx" => stem.ends_with("_test") || stem.ends_with("_unittest"),
        _ => false,
    }
}

/// Whether a path is test infrastructure: a file under a test folder (`TEST_FOLDERS`), a test
/// file by its language's convention (`is_test_file_name`), a `conftest.py`, a pytest or
/// Python start-up configuration file, a `.pth` file, or another language's runner
/// configuration. A model patch's additions and changes to these are removed or reset before
/// the tests run: a Go `TestMain` or a Jest set-up file can print any result as surely as a
/// `conftest.py` hook.
pub(crate) fn is_test_infrastructure(path: &str) -> bool {
    let mut parts = path.split('/').collect::<Vec<_>>();
    let name = parts.pop().unwrap_or(path);
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    parts.iter().any(|d| TEST_FOLDERS.contains(d))
        || is_test_file_name(name)
        || CONFIG_FILES.contains(&name)
        || RUNNER_FILES.contains(&name)
        || RUNNER_CONFIG_STEMS.contains(&stem)
        || name.ends_with(".pth")
}

/// Lists untracked files (ignored ones included), NUL-separated, from `/testbed`.
pub(crate) const UNTRACKED_CMD: [&str; 4] = ["git", "ls-files", "--others", "-z"];

/// Splits NUL-separated git output.
pub(crate) fn nul_list(output: &[u8]) -> BTreeSet<String> {
    output
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// What the model patch contributed to test infrastructure, and so is undone.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Undone {
    /// Tracked files the patch changed or deleted, restored from the base commit.
    pub restored: Vec<String>,
    /// Files the patch added, removed.
    pub removed: Vec<String>,
}

impl Undone {
    /// Computes the files to undo from the untracked files before and after the patch and the
    /// tracked files changed after it.
    pub(crate) fn compute(
        untracked_before: &BTreeSet<String>,
        untracked_after: &BTreeSet<String>,
        changed: &BTreeSet<String>,
    ) -> Undone {
        Undone {
            restored: changed
                .iter()
                .filter(|p| is_test_infrastructure(p))
                .cloned()
                .collect(),
            removed: untracked_after
                .difference(untracked_before)
                .filter(|p| is_test_infrastructure(p))
                .cloned()
                .collect(),
        }
    }

    /// Whether nothing is to be undone.
    pub(crate) fn is_empty(&self) -> bool {
        self.restored.is_empty() && self.removed.is_empty()
    }

    /// The command that undoes it (run in `/testbed`, no shell).
    pub(crate) fn commands(&self, base: &str) -> Vec<Vec<String>> {
        let mut cmds = Vec::new();
        if !self.restored.is_empty() {
            let mut c: Vec<String> = ["git", "checkout", base, "--"].map(str::to_owned).to_vec();
            c.extend(self.restored.iter().cloned());
            cmds.push(c);
        }
        if !self.removed.is_empty() {
            let mut c: Vec<String> = ["rm", "-f", "--"].map(str::to_owned).to_vec();
            c.extend(self.removed.iter().cloned());
            cmds.push(c);
        }
        cmds
    }
}

/// Git hooks off for the whole container: the eval script's `git checkout` would otherwise
/// run a `post-checkout` hook a patch planted under `.git/hooks` (via `patch`).
pub(crate) const NO_HOOKS_CMD: [&str; 5] =
    ["git", "config", "--global", "core.hooksPath", "/dev/null"];

/// Where the container's init lists its children: the idle process is its only child.
const INIT_CHILDREN: &str = "/proc/1/task/1/children";

/// How many tenths of a second [`idle_pid_script`] waits for the idle process: the engine
/// reports a container started once its init runs, which may be before the init has forked the
/// idle process (seen under load: 7 ms to seconds).
const IDLE_WAIT_TENTHS: u32 = 100;

/// Prints the container's idle process: the first child of PID 1 in `children` (its
/// `/proc/.../children` file), waiting up to `tenths` tenths of a second for one to appear;
/// the line is empty when none does. While this runs no process of the patch exists and an
/// exec's processes are children of the exec, so the init's child is the idle process.
fn idle_pid_script(children: &str, tenths: u32) -> String {
    format!(
        "i=0; c=; while [ \"$i\" -lt {tenths} ]; do c=$(cat {children} 2>/dev/null); \
         [ -n \"$c\" ] && break; i=$((i+1)); sleep 0.1; done; \
         printf '%s' \"$c\" | tr ' ' '\\n' | head -n 1"
    )
}

/// The one exec before the patch is applied: git hooks off ([`NO_HOOKS_CMD`]), then the idle
/// process's PID on a line of its own ([`idle_pid_script`], the line empty if there is none),
/// then the untracked files, NUL-separated ([`UNTRACKED_CMD`]). Read with [`parse_prepare`].
pub(crate) fn prepare_script() -> String {
    format!(
        "{} >/dev/null 2>&1; printf '%s\\n' \"$({})\"; {} 2>/dev/null",
        NO_HOOKS_CMD.join(" "),
        idle_pid_script(INIT_CHILDREN, IDLE_WAIT_TENTHS),
        UNTRACKED_CMD.join(" ")
    )
}

/// The idle PID (`None` when the container showed none: the container cannot be hardened, and
/// a PID of 0 would make [`kill_all_script`] kill the idle process and stop the container) and
/// the untracked files, from [`prepare_script`]'s output.
pub(crate) fn parse_prepare(output: &[u8]) -> (Option<NonZeroU32>, BTreeSet<String>) {
    let line_end = output
        .iter()
        .position(|b| *b == b'\n')
        .unwrap_or(output.len());
    let pid = String::from_utf8_lossy(&output[..line_end])
        .trim()
        .parse()
        .ok();
    (pid, nul_list(output.get(line_end + 1..).unwrap_or(&[])))
}

/// The one exec after the patch is applied, run as `sh -c SCRIPT sh BASE`: the untracked files,
/// then the tracked files changed since `BASE`, each list NUL-terminated per name and closed by
/// one more NUL, then `git diff` (SWE-bench's "Git diff before"). Names are never empty, so the
/// extra NULs cannot be forged by a file name. Read with [`parse_inspect`].
pub(crate) const INSPECT_SCRIPT: &str = "git ls-files --others -z 2>/dev/null; printf '\\0'; \
     git -c core.fileMode=false diff --name-only -z \"$1\" 2>/dev/null; printf '\\0'; \
     git -c core.fileMode=false diff";

/// What [`INSPECT_SCRIPT`] printed: untracked files, changed tracked files, the diff text.
pub(crate) fn parse_inspect(output: &[u8]) -> (BTreeSet<String>, BTreeSet<String>, String) {
    let mut rest = output;
    let mut lists: [BTreeSet<String>; 2] = Default::default();
    for list in &mut lists {
        loop {
            let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
            let name = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or(&[]);
            if name.is_empty() {
                break;
            }
            list.insert(String::from_utf8_lossy(name).into_owned());
        }
    }
    let [untracked, changed] = lists;
    (
        untracked,
        changed,
        String::from_utf8_lossy(rest).into_owned(),
    )
}

/// Kills every process in the container except PID 1 (Docker's init), the idle process that
/// keeps the container alive, and this script and its parent (the exec's `timeout`). Only
/// shell built-ins run inside the loop, so the script forks nothing it would have to spare.
pub(crate) fn kill_all_script(idle_pid: NonZeroU32) -> String {
    format!(
        "keep=\" 1 {idle_pid} $$ $PPID \"; for p in /proc/[0-9]*; do pid=${{p#/proc/}}; \
         case \"$keep\" in *\" $pid \"*) continue;; esac; kill -9 \"$pid\" 2>/dev/null; done; true"
    )
}

/// A fresh random tag (32 hex digits) from the host's `/dev/urandom`.
pub(crate) fn nonce() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    fs_err::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_exec_outputs_split_where_names_cannot_reach() {
        let (pid, untracked) = parse_prepare(b"42\nnew.txt\0dir/conftest.py\0");
        assert_eq!(pid, NonZeroU32::new(42));
        assert_eq!(untracked.len(), 2);
        assert!(untracked.contains("dir/conftest.py"));
        // No idle process seen (or a PID of 0): none, never "0", which the kill would not spare.
        assert_eq!(parse_prepare(b"\n").0, None);
        assert_eq!(parse_prepare(b"0\n").0, None);
        assert!(parse_prepare(b"").1.is_empty());

        let out = b"a\0b c\0\0conftest.py\0\0diff --git a/x b/x\n\0odd\n";
        let (untracked, changed, diff) = parse_inspect(out);
        assert_eq!(untracked.into_iter().collect::<Vec<_>>(), ["a", "b c"]);
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["conftest.py"]);
        assert_eq!(diff, "diff --git a/x b/x\n\0odd\n");
        let (untracked, changed, diff) = parse_inspect(b"\0\0");
        assert!(untracked.is_empty() && changed.is_empty() && diff.is_empty());
    }

    #[test]
    fn test_infrastructure_paths() {
        for p in [
            "tests/conftest.py",
            "conftest.py",
            "pkg/sub/conftest.py",
            "tests/test_x.py",
            "pkg/test_x.py",
            "x_test.py",
            "pytest.ini",
            ".pytest.ini",
            "pytest.toml",
            "sub/.pytest.toml",
            "pyproject.toml",
            "evil.pth",
            "testing/helpers.py",
            // the other languages SWE-bench grades
            "calc/zz_main_test.go",
            "internal/testdata/golden.bin",
            "src/__tests__/a.js",
            "src/a.test.ts",
            "src/a.spec.jsx",
            "jest.config.js",
            "vitest.config.mts",
            ".mocharc.yml",
            "karma.conf.cjs",
            "spec/models/user_spec.rb",
            "lib/user_test.rb",
            ".rspec",
            "app/CalcTest.php",
            "phpunit.xml.dist",
            "src/main/java/a/CalcTest.java",
            "src/a_unittest.cc",
            "crates/x/tests/it.rs",
        ] {
            assert!(is_test_infrastructure(p), "{p}");
        }
        for p in [
            "spans/interval.py",
            "README.md",
            "pkg/testutil.py",
            "contest.py",
            "calc.go",
            "src/latest.js",
            "src/contest.ts",
            "lib/testimony.rb",
            "src/Attest.java",
            "package.json",
            "Cargo.toml",
            "src/lib.rs",
        ] {
            assert!(!is_test_infrastructure(p), "{p}");
        }
    }

    #[test]
    fn undo_only_model_additions() {
        let set = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let undone = Undone::compute(
            &set(&["build/x.pyc"]),
            &set(&["build/x.pyc", "tests/conftest.py", "pkg/new.py"]),
            &set(&["tests/test_a.py", "pkg/a.py"]),
        );
        assert_eq!(undone.removed, ["tests/conftest.py"]);
        assert_eq!(undone.restored, ["tests/test_a.py"]);
        assert_eq!(undone.commands("b").len(), 2);
        assert_eq!(nul_list(b"a\0b c\0"), set(&["a", "b c"]));
        assert!(
            kill_all_script(NonZeroU32::new(7).expect("non-zero"))
                .contains("keep=\" 1 7 $$ $PPID \"")
        );
        assert_eq!(nonce().unwrap().len(), 32);
    }

    /// The cause of a flake under load (a container stopped mid-run, an `infra_error`): the
    /// engine had reported the container started before its init forked the idle process, the
    /// script read no child, and the kill spared PID "0" instead. The script now waits for the
    /// child to appear.
    #[test]
    fn the_idle_process_is_waited_for_until_the_init_has_forked_it() {
        let dir = tempfile::tempdir().unwrap();
        let children = dir.path().join("children");
        std::fs::write(&children, "").unwrap();
        let script = idle_pid_script(&children.display().to_string(), 50);
        let run = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::write(&children, "4242 77 ").unwrap();
        let out = run.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "4242");
        // An init that never forks: an empty line after the wait, parsed as no idle process.
        std::fs::write(&children, "").unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &idle_pid_script(&children.display().to_string(), 2)])
            .output()
            .unwrap();
        assert_eq!(
            parse_prepare(&[out.stdout, b"\n".to_vec()].concat()).0,
            None
        );
    }
}
