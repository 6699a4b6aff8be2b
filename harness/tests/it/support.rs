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

/// The base image the Docker tests share: Debian 12's, the harness's base for a spec that names
/// no Python (built once with debootstrap).
pub(crate) fn base_image() -> String {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let sandbox = swerve_sandbox::Sandbox::connect(swerve_sandbox::SandboxConfig::default())
            .await
            .expect("Docker engine");
        sandbox
            .ensure_base_image(&swerve_sandbox::BaseRecipe::default())
            .await
            .expect("base image")
            .name
    })
}
