//! Where the harness's tests find the third-party SWE-bench logs, which the repository never
//! carries (they are someone else's public evaluation runs).
//!
//! The `data` folder is `$SWERVE_SHARED_DATA` when that variable is set (and then only there, so
//! pointing it at a missing path behaves like a clean clone), else `shared/data` beside the
//! checkout. A test whose logs are absent prints one line saying so and passes.
//!
//! Included with `#[path]` by the integration tests and by the library's unit tests
//! (`run::eval_script::shared_data`), so there is one copy of the lookup.

use std::path::{Path, PathBuf};

/// The variable naming the shared `data` folder.
const VAR: &str = "SWERVE_SHARED_DATA";

/// The shared `data` folder to look in: `$SWERVE_SHARED_DATA` when set, else
/// `<repo>/../shared/data`, with `<repo>` the workspace root (the nearest folder above the
/// including crate that holds `Cargo.lock`). It may not exist.
fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(VAR).filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = manifest_dir
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or(manifest_dir);
    repo.join("../shared/data")
}

/// `name` (a folder or file under the shared `data` folder, e.g. `swebench-logs`) when it
/// exists; otherwise prints `skipped: <what> ...` to stderr and returns None.
pub fn swebench_logs(name: &str, what: &str) -> Option<PathBuf> {
    let path = data_dir().join(name);
    if path.exists() {
        return Some(path);
    }
    eprintln!(
        "skipped: {what}: real SWE-bench logs not found at {} (set {VAR} or place shared/ beside \
         the checkout)",
        path.display()
    );
    None
}
