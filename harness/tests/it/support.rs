//! What several test modules share: running the `harness` binary.

use std::path::Path;
use std::process::{Command, Output};

/// The `harness` binary of this build.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_harness");

/// Runs `harness args...` in `dir` and returns its output; a failure fails the test with both
/// output streams.
pub(crate) fn harness(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("harness runs");
    assert!(
        out.status.success(),
        "harness {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
