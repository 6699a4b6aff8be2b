//! SWE-bench 5's patch-application chain (as its `run_instance` applies a prediction; listed in
//! `docs/harness.md`, "Procedure per instance"): four commands tried in order with a reset
//! between attempts, then a reverse check that accepts an already-applied patch.

use swerve_sandbox::{Container, ExecRequest};

use super::eval_script::REPO_DIRECTORY;

/// Where the patch is copied in the container (SWE-bench's `CONTAINER_PATCH_FILE`).
pub(super) const CONTAINER_PATCH_FILE: &str = "/tmp/patch.diff";

/// The v5 commands, each followed by the patch file path.
pub(super) const APPLY_COMMANDS: [&[&str]; 4] = [
    &["git", "apply", "--verbose"],
    &["git", "apply", "--verbose", "--3way"],
    &["git", "apply", "--verbose", "--reject"],
    &["patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i"],
];

/// The reset run before every retry.
pub(super) const RESET_SCRIPT: &str = "git checkout -- . ; git clean -fd";

/// How applying went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ApplyOutcome {
    /// A command exited 0; its output.
    Applied {
        /// The command line.
        command: String,
        /// Its output.
        output: String,
    },
    /// Every command failed, but `git apply --check --reverse` says it is already applied.
    AlreadyApplied,
    /// Every command failed; the last one's output.
    Failed {
        /// Output of the last attempt.
        output: String,
    },
}

/// Runs the chain in `container` with working directory `/testbed`, as root.
pub(super) async fn apply_patch(
    container: &Container,
    timeout: std::time::Duration,
) -> swerve_sandbox::Result<ApplyOutcome> {
    let run = |cmd: Vec<String>| {
        let request = ExecRequest::new(cmd)
            .with_timeout(timeout)
            .with_workdir(REPO_DIRECTORY);
        async move { container.exec(&request).await }
    };
    let mut last = String::new();
    for (attempt, command) in APPLY_COMMANDS.iter().enumerate() {
        if attempt > 0 {
            run(vec!["bash".into(), "-c".into(), RESET_SCRIPT.into()]).await?;
        }
        let mut cmd: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        cmd.push(CONTAINER_PATCH_FILE.to_owned());
        let out = run(cmd.clone()).await?;
        if out.success() {
            return Ok(ApplyOutcome::Applied {
                command: cmd.join(" "),
                output: out.text(),
            });
        }
        last = out.text();
    }
    let check = ["git", "apply", "--check", "--reverse", CONTAINER_PATCH_FILE]
        .map(str::to_owned)
        .to_vec();
    if run(check).await?.success() {
        return Ok(ApplyOutcome::AlreadyApplied);
    }
    Ok(ApplyOutcome::Failed { output: last })
}
