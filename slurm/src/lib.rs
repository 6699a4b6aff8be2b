//! Placing swerve's work on a Slurm cluster: a command that outgrows one machine submits **one
//! job array** whose tasks run the same swerve binary on the cluster's nodes, follows it with
//! `squeue`, cancels it with `scancel` when the submitting process is interrupted, and learns
//! what each task did from files in a shared folder (`docs/cluster.md`).
//!
//! Two sides share this crate. The submitting side has one loop, [`run_array`], that every
//! swerve command placing work on a cluster uses (`harness run`, execution rewards, `curate
//! run`): it writes a *round folder* (a marker with a fresh token, one input file per task, the
//! batch script), checks the job with `sbatch --test-only` before anything runs, submits it,
//! hands the tasks' progress lines to the caller as they arrive, and ends with the tasks that
//! did not finish their input ([`LostTask`], one message for all callers). The task side
//! ([`ArrayTask::from_env`]) recognises an array task by its environment, proves that it sees the
//! submitter's folder (the marker holds the token the script carries; a node that does not share
//! the folder is a clear error), and appends one line per finished unit of work.
//!
//! What it is not: a scheduler. Slurm places and runs the tasks; this crate neither queues work
//! nor retries it (callers decide what a failed task means), and it knows nothing of instances,
//! containers or curation shards.

mod array;
mod error;
mod task;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use array::{ArrayEnd, ArrayEvent, LostTask, run_array};
pub use error::SlurmError;
pub use task::{ArrayTask, on_terminate};

use array::ArrayJob;

/// The round folder, exported to every task by the batch script.
pub const DIR_ENV: &str = "SWERVE_SLURM_DIR";
/// The round's token, exported to every task; the folder's marker must hold the same.
pub const TOKEN_ENV: &str = "SWERVE_SLURM_TOKEN";
/// The marker file in a round folder.
const MARKER: &str = "submitter.marker";
/// Longest a Slurm client command may take before it counts as unreachable.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What to submit.
#[derive(Debug, Clone)]
pub struct ArraySpec {
    /// The job name (`squeue` shows it).
    pub name: String,
    /// The round folder: created, and must be on a file system every node shares.
    pub dir: PathBuf,
    /// One input text per array task ([`ArrayTask::input`]); their number is the array's size.
    pub inputs: Vec<String>,
    /// The program (an absolute path) and the arguments every task runs.
    pub command: Vec<String>,
    /// The tasks' working folder (relative paths in `command` resolve against it).
    pub chdir: PathBuf,
    /// Extra `sbatch` arguments (`--partition=gpu`, `--time=2:00:00`, `--cpus-per-task=4`, …).
    pub sbatch_args: Vec<String>,
}

/// Where a command's work goes on the cluster: what every array task runs, from which folder,
/// with which `sbatch` arguments, in at most how many tasks. The one type every swerve command
/// that places work takes (`harness run`, execution rewards, `curate run`, `curate validate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Extra `sbatch` arguments (`--slurm-arg`).
    pub sbatch_args: Vec<String>,
    /// Array tasks at most (fewer when there is less work).
    pub tasks: usize,
    /// What every task runs: a binary (an absolute path) and its arguments ([`this_command`]).
    pub command: Vec<String>,
    /// The tasks' working folder (the submitter's), against which relative paths resolve.
    pub chdir: PathBuf,
}

impl Placement {
    /// Checks that Slurm answers and takes these arguments for an array of [`Self::tasks`]
    /// ([`check`]), before anything runs.
    pub fn check(&self) -> Result<(), SlurmError> {
        check(&self.sbatch_args, self.tasks)
    }

    /// The array named `name` of one task per input, its round folder `dir`.
    pub fn array(&self, name: &str, dir: PathBuf, inputs: Vec<String>) -> ArraySpec {
        ArraySpec {
            name: name.to_owned(),
            dir,
            inputs,
            command: self.command.clone(),
            chdir: self.chdir.clone(),
            sbatch_args: self.sbatch_args.clone(),
        }
    }
}

/// Runs a Slurm client command (under `timeout`, so that a hung controller is an error).
fn slurm(program: &str, args: &[String]) -> Result<std::process::Output, SlurmError> {
    let output = Command::new("timeout")
        .arg(COMMAND_TIMEOUT.as_secs().to_string())
        .arg(program)
        .args(args)
        .output()
        .map_err(|source| SlurmError::Spawn {
            program: program.to_owned(),
            source,
        })?;
    // `timeout` answers 127 when the program is missing, 124 when it ran too long.
    match output.status.code() {
        Some(127) => Err(SlurmError::NotInstalled(program.to_owned())),
        Some(124) => Err(SlurmError::Unreachable(format!(
            "`{program}` did not answer within {} s",
            COMMAND_TIMEOUT.as_secs()
        ))),
        _ => Ok(output),
    }
}

fn stderr_of(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr);
    let text = text.trim();
    if text.is_empty() {
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    } else {
        text.to_owned()
    }
}

/// Checks that the controller answers (`scontrol ping`).
pub fn check_controller() -> Result<(), SlurmError> {
    let output = slurm("scontrol", &["ping".to_owned()])?;
    let text = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && text.contains("is UP") {
        Ok(())
    } else {
        Err(SlurmError::Unreachable(
            format!("{} {}", text.trim(), stderr_of(&output))
                .trim()
                .to_owned(),
        ))
    }
}

/// Checks, before any work starts, that the controller answers and that `sbatch` would accept
/// an array of `tasks` tasks with `sbatch_args` (`sbatch --test-only`: a partition that does
/// not exist, a bad option or a limit is refused here).
pub fn check(sbatch_args: &[String], tasks: usize) -> Result<(), SlurmError> {
    check_controller()?;
    let mut args = vec![
        "--test-only".to_owned(),
        format!("--array=0-{}", tasks.max(1) - 1),
    ];
    args.extend(sbatch_args.iter().cloned());
    args.push("--wrap=true".to_owned());
    let output = slurm("sbatch", &args)?;
    if output.status.success() {
        Ok(())
    } else {
        Err(SlurmError::Refused(stderr_of(&output)))
    }
}

/// Quotes `word` for a POSIX shell.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A token no other round has: the submitting process, the time, and a counter.
fn fresh_token() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes the round folder and submits the array: `sbatch --test-only` first, so that a bad
/// partition or option fails before any task runs, then `sbatch --parsable`.
fn submit(spec: &ArraySpec) -> Result<ArrayJob, SlurmError> {
    if spec.inputs.is_empty() {
        return Err(SlurmError::Refused(
            "an array needs one task at least".into(),
        ));
    }
    check_controller()?;
    std::fs::create_dir_all(&spec.dir).map_err(SlurmError::round("create", &spec.dir))?;
    let dir = std::fs::canonicalize(&spec.dir).map_err(SlurmError::round("resolve", &spec.dir))?;
    let write = |path: PathBuf, text: &str| {
        std::fs::write(&path, text).map_err(SlurmError::round("write", path))
    };
    let token = fresh_token();
    write(dir.join(MARKER), &token)?;
    for (i, input) in spec.inputs.iter().enumerate() {
        write(dir.join(format!("task-{i}.input")), input)?;
    }
    let script = dir.join("job.sh");
    let command: Vec<String> = spec.command.iter().map(|w| shell_quote(w)).collect();
    write(
        script.clone(),
        &format!(
            "#!/bin/sh\n# A swerve array task: runs the submitting command on this node.\nexport {DIR_ENV}={}\nexport {TOKEN_ENV}={}\nexec {}\n",
            shell_quote(&dir.to_string_lossy()),
            shell_quote(&token),
            command.join(" ")
        ),
    )?;
    let mut args = vec![
        format!("--array=0-{}", spec.inputs.len() - 1),
        format!("--job-name={}", spec.name),
        format!("--output={}", dir.join("task-%a.out").display()),
        format!("--chdir={}", spec.chdir.display()),
    ];
    args.extend(spec.sbatch_args.iter().cloned());
    args.push(script.display().to_string());

    let mut test = vec!["--test-only".to_owned()];
    test.extend(args.iter().cloned());
    let output = slurm("sbatch", &test)?;
    if !output.status.success() {
        return Err(SlurmError::Refused(stderr_of(&output)));
    }
    let mut real = vec!["--parsable".to_owned()];
    real.extend(args);
    let output = slurm("sbatch", &real)?;
    if !output.status.success() {
        return Err(SlurmError::Refused(stderr_of(&output)));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    // `--parsable` prints `<id>` or `<id>;<cluster>`.
    let id = stdout.trim().split(';').next().unwrap_or("").to_owned();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SlurmError::Command {
            command: "sbatch --parsable".into(),
            detail: format!("unexpected output `{}`", stdout.trim()),
        });
    }
    tracing::info!(job = %id, tasks = spec.inputs.len(), dir = %dir.display(), "submitted job array");
    Ok(ArrayJob {
        id,
        dir,
        tasks: spec.inputs.len(),
        offsets: vec![0; spec.inputs.len()],
    })
}

/// What an array task runs to repeat this process: its binary by absolute path and the
/// arguments it was given.
pub fn this_command() -> Result<Vec<String>, SlurmError> {
    let exe = std::env::current_exe().map_err(SlurmError::CurrentExe)?;
    let mut command = vec![exe.display().to_string()];
    for arg in std::env::args_os().skip(1) {
        command.push(
            arg.into_string()
                .map_err(|a| SlurmError::TaskEnv(format!("argument {a:?} is not UTF-8")))?,
        );
    }
    Ok(command)
}

/// Splits `items` into at most `tasks` shards, round-robin (shard `i` gets items `i`, `i + n`,
/// …), dropping empty shards.
pub fn deal<T: Clone>(items: &[T], tasks: usize) -> Vec<Vec<T>> {
    let n = tasks.clamp(1, items.len().max(1));
    let mut shards = vec![Vec::new(); n];
    for (i, item) in items.iter().enumerate() {
        shards[i % n].push(item.clone());
    }
    shards.retain(|s| !s.is_empty());
    shards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dealing_is_round_robin_without_empty_shards() {
        let items: Vec<u32> = (0..5).collect();
        assert_eq!(deal(&items, 2), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(deal(&items, 9).len(), 5);
        assert!(deal::<u32>(&[], 3).is_empty());
    }

    #[test]
    fn quoting_survives_the_shell() {
        let word = "it's a \"path\" with $HOME and `x`";
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", shell_quote(word)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), word);
    }
}
