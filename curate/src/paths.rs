//! The one rule that sorts an edited path into test, code or other. The split into `patch` and
//! `test_patch`, the `no_code_change` filter, the oracle and the relevant-file candidates all ask
//! this module, so they can never disagree.
//!
//! Binary files are decided from content (see [`swerve_mirror::is_binary`]) before this rule runs.

/// Directory names that make every path below them a test path.
const TEST_DIRS: [&str; 4] = ["test", "tests", "testing", "e2e"];

/// Extensions of programming-language sources (compared lower-case, without the dot).
const CODE_EXTENSIONS: [&str; 25] = [
    "py", "pyi", "pyx", "pxd", "c", "h", "cc", "cpp", "cxx", "hpp", "rs", "go", "java", "js",
    "jsx", "ts", "tsx", "rb", "php", "cs", "swift", "kt", "scala", "m", "mm",
];

/// What a (text) path is, in the order the rule decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PathClass {
    /// Under a `test`/`tests`/`testing`/`e2e` directory, or `test_*.py`, `*_test.py`,
    /// `conftest.py`. Whatever its extension (`tests/data/x.csv` is a test file).
    Test,
    /// Any other path with a programming-language extension.
    Code,
    /// Docs, CI, configuration, changelogs, lock files, data.
    Other,
}

/// Classifies `path` (`/`-separated, relative to the repository root).
pub(crate) fn classify(path: &str) -> PathClass {
    if is_test(path) {
        PathClass::Test
    } else if is_code(path) {
        PathClass::Code
    } else {
        PathClass::Other
    }
}

/// A directory component is exactly one of [`TEST_DIRS`], or the file name is a pytest name.
/// `src/pkg/testing.py` is not a test file (the component rule applies to directories only).
fn is_test(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop().unwrap_or_default();
    if parts.iter().any(|dir| TEST_DIRS.contains(dir)) {
        return true;
    }
    (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || name == "conftest.py"
}

fn is_code(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => {
            CODE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{PathClass, classify};

    #[test]
    fn classes() {
        let cases = [
            ("src/slugkit/core.py", PathClass::Code),
            ("tests/test_core.py", PathClass::Test),
            ("tests/data/semicolon.csv", PathClass::Test),
            ("src/pkg/testing.py", PathClass::Code),
            ("src/pkg/schema_test.py", PathClass::Test),
            ("conftest.py", PathClass::Test),
            ("pkg/e2e/run.js", PathClass::Test),
            ("test_x.txt", PathClass::Other),
            ("lib/Main.JAVA", PathClass::Code),
            ("poetry.lock", PathClass::Other),
            ("docs/index.md", PathClass::Other),
            (".github/workflows/ci.yml", PathClass::Other),
            ("pyproject.toml", PathClass::Other),
            ("src/trädgård/ö.py", PathClass::Code),
            (".py", PathClass::Other),
            ("Makefile", PathClass::Other),
        ];
        for (path, want) in cases {
            assert_eq!(classify(path), want, "{path}");
        }
    }
}
