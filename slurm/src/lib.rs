//! Placing swerve's work on a Slurm cluster: a command that outgrows one machine submits **one
//! job array** whose tasks run the same swerve binary on the cluster's nodes, follows it with
//! `squeue`, cancels it with `scancel` when the submitting process is interrupted, and learns
//! what each task did from files in a shared folder (`docs/cluster.md`).
//!
//! Two sides share this crate. The submitting side ([`submit`], [`ArrayJob`]) writes a *round
//! folder* (a marker with a fresh token, one input file per task, the batch script), checks the
//! job with `sbatch --test-only` before anything runs, submits it, and reads the tasks' progress
//! lines and end markers. The task side ([`Task::from_env`]) recognises an array task by its
//! environment, proves that it sees the submitter's folder (the marker holds the token the
//! script carries; a node that does not share the folder is a clear error), and appends one line
//! per finished unit of work.
//!
//! What it is not: a scheduler. Slurm places and runs the tasks; this crate neither queues work
//! nor retries it (callers decide what a failed task means), and it knows nothing of instances,
//! containers or curation shards.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The round folder, exported to every task by the batch script.
pub const DIR_ENV: &str = "SWERVE_SLURM_DIR";
/// The round's token, exported to every task; the folder's marker must hold the same.
pub const TOKEN_ENV: &str = "SWERVE_SLURM_TOKEN";
/// The marker file in a round folder.
const MARKER: &str = "submitter.marker";
/// Longest a Slurm client command may take before it counts as unreachable.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Why Slurm could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A client command is not installed.
    #[error(
        "`{0}` not found on PATH: --executor slurm needs Slurm's client commands (sbatch, squeue, scancel, scontrol) where the command is submitted"
    )]
    NotInstalled(String),
    /// The controller does not answer.
    #[error("the Slurm controller cannot be reached (`scontrol ping`): {0}")]
    Unreachable(String),
    /// `sbatch` refused the job (a partition that does not exist, a bad option, a limit).
    #[error("sbatch refused the job array: {0}")]
    Refused(String),
    /// A client command failed.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output.
        detail: String,
    },
    /// An array task does not see the submitter's folder.
    #[error(
        "array task {index} on node {node} cannot see the submitter's marker {}: the run folder is not shared with this node; put it on a file system every node mounts at the same path",
        path.display()
    )]
    NotShared {
        /// The task index.
        index: usize,
        /// The node the task ran on.
        node: String,
        /// The marker it looked for.
        path: PathBuf,
    },
    /// An array task's environment lacks what the batch script and Slurm set.
    #[error("invalid environment for a swerve array task: {0}")]
    TaskEnv(String),
    /// A file of the round folder could not be read or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What to submit.
#[derive(Debug, Clone)]
pub struct ArraySpec {
    /// The job name (`squeue` shows it).
    pub name: String,
    /// The round folder: created, and must be on a file system every node shares.
    pub dir: PathBuf,
    /// One input text per array task ([`Task::input`]); their number is the array's size.
    pub inputs: Vec<String>,
    /// The program (an absolute path) and the arguments every task runs.
    pub command: Vec<String>,
    /// The tasks' working folder (relative paths in `command` resolve against it).
    pub chdir: PathBuf,
    /// Extra `sbatch` arguments (`--partition=gpu`, `--time=2:00:00`, `--cpus-per-task=4`, …).
    pub sbatch_args: Vec<String>,
}

/// A submitted job array.
#[derive(Debug)]
pub struct ArrayJob {
    /// Slurm's job id of the array.
    pub id: String,
    /// The round folder.
    pub dir: PathBuf,
    /// Number of array tasks.
    pub tasks: usize,
    /// Bytes of each task's progress file already returned by [`ArrayJob::new_lines`].
    offsets: Vec<u64>,
}

/// One array task as `squeue` last showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    /// Slurm's state (`PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED`, `TIMEOUT`, `NODE_FAIL`, …).
    pub state: String,
    /// The node it runs or ran on (empty while pending).
    pub node: String,
}

impl TaskState {
    /// The task will not run (any more).
    pub fn is_terminal(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "REQUEUED"
                | "RESIZING"
                | "SUSPENDED"
                | "STAGE_OUT"
                | "SIGNALING"
                | "REQUEUE_HOLD"
                | "REQUEUE_FED"
                | "RESV_DEL_HOLD"
                | "STOPPED"
        )
    }
}

/// The array as `squeue` shows it: tasks by index. A task Slurm no longer lists has ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayStatus {
    /// Listed tasks.
    pub tasks: BTreeMap<usize, TaskState>,
}

impl ArrayStatus {
    /// Every task of `0..count` ended (terminal, or no longer listed).
    pub fn finished(&self, count: usize) -> bool {
        (0..count).all(|i| self.tasks.get(&i).is_none_or(TaskState::is_terminal))
    }

    /// Tasks in `state`.
    pub fn count(&self, state: &str) -> usize {
        self.tasks.values().filter(|t| t.state == state).count()
    }

    /// Parses `squeue -h -r -o '%K|%T|%N'` lines (array index, state, node).
    pub fn parse(text: &str) -> ArrayStatus {
        let tasks = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.trim().splitn(3, '|');
                let index = parts.next()?.parse().ok()?;
                let state = parts.next()?.trim().to_owned();
                let node = parts.next().unwrap_or("").trim().to_owned();
                Some((index, TaskState { state, node }))
            })
            .collect();
        ArrayStatus { tasks }
    }
}

/// How following an array ended.
#[derive(Debug)]
pub enum FollowEnd {
    /// Every task ended; their last states.
    Finished(ArrayStatus),
    /// The submitting process was interrupted (Ctrl-C, SIGTERM); the array was cancelled and
    /// every task has ended.
    Cancelled,
}

/// Runs a Slurm client command (under `timeout`, so that a hung controller is an error).
fn slurm(program: &str, args: &[String]) -> Result<std::process::Output, SlurmError> {
    let output = Command::new("timeout")
        .arg(COMMAND_TIMEOUT.as_secs().to_string())
        .arg(program)
        .args(args)
        .output()?;
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
pub fn submit(spec: &ArraySpec) -> Result<ArrayJob, SlurmError> {
    if spec.inputs.is_empty() {
        return Err(SlurmError::Refused(
            "an array needs one task at least".into(),
        ));
    }
    check_controller()?;
    fs_err::create_dir_all(&spec.dir)?;
    let dir = fs_err::canonicalize(&spec.dir)?;
    let token = fresh_token();
    fs_err::write(dir.join(MARKER), &token)?;
    for (i, input) in spec.inputs.iter().enumerate() {
        fs_err::write(dir.join(format!("task-{i}.input")), input)?;
    }
    let script = dir.join("job.sh");
    let command: Vec<String> = spec.command.iter().map(|w| shell_quote(w)).collect();
    fs_err::write(
        &script,
        format!(
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

/// Whether an array is being followed now: an interrupt then cancels it first.
static FOLLOWING: AtomicBool = AtomicBool::new(false);

/// What an array task runs to repeat this process: its binary by absolute path and the
/// arguments it was given.
pub fn this_command() -> Result<Vec<String>, SlurmError> {
    let exe = std::env::current_exe()?;
    let mut command = vec![exe.display().to_string()];
    for arg in std::env::args_os().skip(1) {
        command.push(
            arg.into_string()
                .map_err(|a| SlurmError::TaskEnv(format!("argument {a:?} is not UTF-8")))?,
        );
    }
    Ok(command)
}

/// Set by the first Ctrl-C or SIGTERM while an array is followed. Outside [`ArrayJob::follow`]
/// (a trainer between two batches) an interrupt ends the process at once, as without the
/// handler.
fn interrupted() -> &'static AtomicBool {
    static FLAG: OnceLock<&'static AtomicBool> = OnceLock::new();
    FLAG.get_or_init(|| {
        static INTERRUPTED: AtomicBool = AtomicBool::new(false);
        let installed = ctrlc::set_handler(|| {
            // A second interrupt does not wait for the cancellation.
            if !FOLLOWING.load(Ordering::SeqCst) || INTERRUPTED.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
        if let Err(e) = installed {
            tracing::warn!(error = %e, "cannot catch Ctrl-C: an interrupted run will not cancel its array");
        }
        &INTERRUPTED
    })
}

impl ArrayJob {
    /// The array's tasks as `squeue` shows them now (finished ones too, while Slurm keeps them).
    pub fn status(&self) -> Result<ArrayStatus, SlurmError> {
        let args =
            ["-h", "-r", "--states=all", "-j", &self.id, "-o", "%K|%T|%N"].map(str::to_owned);
        let output = slurm("squeue", &args)?;
        if !output.status.success() {
            let detail = stderr_of(&output);
            // A job Slurm has forgotten has ended.
            if detail.contains("Invalid job id") {
                return Ok(ArrayStatus::default());
            }
            return Err(SlurmError::Command {
                command: format!("squeue -j {}", self.id),
                detail,
            });
        }
        Ok(ArrayStatus::parse(&String::from_utf8_lossy(&output.stdout)))
    }

    /// Cancels every task (`scancel`): Slurm sends them SIGTERM, then SIGKILL after its
    /// `KillWait`.
    pub fn cancel(&self) -> Result<(), SlurmError> {
        let output = slurm("scancel", std::slice::from_ref(&self.id))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(SlurmError::Command {
                command: format!("scancel {}", self.id),
                detail: stderr_of(&output),
            })
        }
    }

    /// Complete lines the tasks appended to their progress files since the last call, with the
    /// task index.
    pub fn new_lines(&mut self) -> Result<Vec<(usize, String)>, SlurmError> {
        let mut lines = Vec::new();
        for (i, offset) in self.offsets.iter_mut().enumerate() {
            let path = self.dir.join(format!("task-{i}.progress"));
            let bytes = match fs_err::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let start = (*offset as usize).min(bytes.len());
            let Some(end) = bytes[start..].iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let chunk = &bytes[start..start + end + 1];
            lines.extend(
                String::from_utf8_lossy(chunk)
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(|l| (i, l.to_owned())),
            );
            *offset = (start + end + 1) as u64;
        }
        Ok(lines)
    }

    /// What task `index` wrote when it finished its input ([`Task::finish`]); `None` when it
    /// did not (still running, killed, failed).
    pub fn finished_note(&self, index: usize) -> Option<String> {
        fs_err::read_to_string(self.dir.join(format!("task-{index}.done"))).ok()
    }

    /// The last `max` bytes of task `index`'s output file (stdout and stderr).
    pub fn output_tail(&self, index: usize, max: usize) -> String {
        let text = fs_err::read(self.dir.join(format!("task-{index}.out"))).unwrap_or_default();
        let start = text.len().saturating_sub(max);
        String::from_utf8_lossy(&text[start..]).trim().to_owned()
    }

    /// Follows the array until every task ended, calling `tick` with its status and the new
    /// progress lines every `interval`. Ctrl-C or SIGTERM of this process cancels the array and
    /// waits (up to `cancel_wait`) until Slurm reports every task ended.
    pub fn follow(
        &mut self,
        interval: Duration,
        cancel_wait: Duration,
        mut tick: impl FnMut(&ArrayStatus, Vec<(usize, String)>),
    ) -> Result<FollowEnd, SlurmError> {
        let flag = interrupted();
        FOLLOWING.store(true, Ordering::SeqCst);
        let end = self.follow_until_done(flag, interval, cancel_wait, &mut tick);
        FOLLOWING.store(false, Ordering::SeqCst);
        end
    }

    fn follow_until_done(
        &mut self,
        flag: &AtomicBool,
        interval: Duration,
        cancel_wait: Duration,
        tick: &mut impl FnMut(&ArrayStatus, Vec<(usize, String)>),
    ) -> Result<FollowEnd, SlurmError> {
        loop {
            if flag.load(Ordering::SeqCst) {
                self.cancel()?;
                let deadline = Instant::now() + cancel_wait;
                loop {
                    let status = self.status()?;
                    let lines = self.new_lines()?;
                    tick(&status, lines);
                    if status.finished(self.tasks) || Instant::now() > deadline {
                        return Ok(FollowEnd::Cancelled);
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            let status = self.status()?;
            let lines = self.new_lines()?;
            tick(&status, lines);
            if status.finished(self.tasks) {
                // Lines written between the read and the task's end.
                let lines = self.new_lines()?;
                if !lines.is_empty() {
                    tick(&status, lines);
                }
                return Ok(FollowEnd::Finished(status));
            }
            // Sleep in short steps so that an interrupt is seen at once.
            let until = Instant::now() + interval;
            while Instant::now() < until && !flag.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// For an array task: on SIGTERM (`scancel`, a time limit) or SIGINT, run `cleanup` (remove the
/// task's containers) and exit with status 143. Replaces the default handlers; call once, and
/// not in a process that follows an array.
pub fn on_terminate(cleanup: impl Fn() + Send + 'static) {
    let installed = ctrlc::set_handler(move || {
        cleanup();
        std::process::exit(143);
    });
    if let Err(e) = installed {
        tracing::warn!(error = %e, "cannot catch SIGTERM: a stopped task may leave containers");
    }
}

/// This process as a task of a swerve job array.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its index in the array (`SLURM_ARRAY_TASK_ID`).
    pub index: usize,
    /// The array's size (`SLURM_ARRAY_TASK_COUNT`).
    pub count: usize,
    /// The round folder.
    pub dir: PathBuf,
    /// The node it runs on.
    pub node: String,
}

impl Task {
    /// `None` when this process is not a swerve array task; an error when it is one but does not
    /// see the submitter's round folder (a folder that is not shared) or lacks Slurm's variables.
    pub fn from_env() -> Result<Option<Task>, SlurmError> {
        Task::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Task::from_env`] with the variables `get` returns.
    fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Task>, SlurmError> {
        let Some(dir) = get(DIR_ENV) else {
            return Ok(None);
        };
        let var =
            |name: &str| get(name).ok_or_else(|| SlurmError::TaskEnv(format!("{name} is not set")));
        let number = |name: &str| -> Result<usize, SlurmError> {
            var(name)?
                .parse()
                .map_err(|_| SlurmError::TaskEnv(format!("{name} is not a number")))
        };
        let token = var(TOKEN_ENV)?;
        let index = number("SLURM_ARRAY_TASK_ID")?;
        let count = number("SLURM_ARRAY_TASK_COUNT")?;
        let node = get("SLURMD_NODENAME").unwrap_or_else(hostname);
        let dir = PathBuf::from(dir);
        let marker = dir.join(MARKER);
        match fs_err::read_to_string(&marker) {
            Ok(found) if found == token => Ok(Some(Task {
                index,
                count,
                dir,
                node,
            })),
            _ => Err(SlurmError::NotShared {
                index,
                node,
                path: marker,
            }),
        }
    }

    fn file(&self, kind: &str) -> PathBuf {
        self.dir.join(format!("task-{}.{kind}", self.index))
    }

    /// The input text the submitter wrote for this task.
    pub fn input(&self) -> Result<String, SlurmError> {
        Ok(fs_err::read_to_string(self.file("input"))?)
    }

    /// Appends one progress line (one finished unit of work) and syncs it, so that the
    /// submitter sees it and a task killed next loses nothing it reported.
    pub fn record(&self, line: &str) -> Result<(), SlurmError> {
        debug_assert!(!line.contains('\n'));
        let mut file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.file("progress"))?;
        file.write_all(format!("{line}\n").as_bytes())?;
        file.sync_data()?;
        Ok(())
    }

    /// Says that the task finished its whole input (`note`: anything the submitter should
    /// read, e.g. the node name).
    pub fn finish(&self, note: &str) -> Result<(), SlurmError> {
        fs_err::write(self.file("done"), note)?;
        Ok(())
    }
}

/// This machine's host name.
fn hostname() -> String {
    fs_err::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
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
    fn squeue_lines_parse_and_finish() {
        let status = ArrayStatus::parse("0|COMPLETED|vm\n1|RUNNING|vm\n2|PENDING|\n");
        assert_eq!(status.tasks.len(), 3);
        assert_eq!(status.count("RUNNING"), 1);
        assert_eq!(status.tasks[&2].node, "");
        assert!(!status.finished(3));
        let done = ArrayStatus::parse("0|COMPLETED|vm\n1|CANCELLED|vm\n");
        assert!(done.finished(3), "a task no longer listed has ended");
        assert!(ArrayStatus::parse("").finished(4));
        assert!(!ArrayStatus::parse("0|COMPLETING|vm").finished(1));
    }

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

    #[test]
    fn a_task_proves_it_sees_the_round_folder() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join(MARKER), "tok-1").unwrap();
        let vars = |token: &'static str| {
            let dir = dir.path().display().to_string();
            move |name: &str| match name {
                DIR_ENV => Some(dir.clone()),
                TOKEN_ENV => Some(token.to_owned()),
                "SLURM_ARRAY_TASK_ID" => Some("1".to_owned()),
                "SLURM_ARRAY_TASK_COUNT" => Some("2".to_owned()),
                "SLURMD_NODENAME" => Some("node7".to_owned()),
                _ => None,
            }
        };
        let task = Task::from_vars(vars("tok-1")).unwrap().expect("a task");
        assert_eq!(
            (task.index, task.count, task.node.as_str()),
            (1, 2, "node7")
        );
        task.record("one").unwrap();
        task.record("two").unwrap();
        assert_eq!(
            fs_err::read_to_string(dir.path().join("task-1.progress")).unwrap(),
            "one\ntwo\n"
        );
        // A marker of another round, or none (a folder this node does not share).
        let err = Task::from_vars(vars("tok-2")).unwrap_err();
        assert!(
            matches!(err, SlurmError::NotShared { index: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("node7"), "{err}");
        assert!(Task::from_vars(|_| None).unwrap().is_none());
        let missing = Task::from_vars(|name| (name == DIR_ENV).then(|| "/x".to_owned()));
        assert!(matches!(missing, Err(SlurmError::TaskEnv(_))));
    }

    #[test]
    fn new_lines_returns_complete_lines_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = ArrayJob {
            id: "1".into(),
            dir: dir.path().to_owned(),
            tasks: 2,
            offsets: vec![0, 0],
        };
        assert!(job.new_lines().unwrap().is_empty());
        fs_err::write(dir.path().join("task-1.progress"), "a\nb\npart").unwrap();
        assert_eq!(
            job.new_lines().unwrap(),
            vec![(1, "a".to_owned()), (1, "b".to_owned())]
        );
        fs_err::write(dir.path().join("task-1.progress"), "a\nb\npartial\n").unwrap();
        assert_eq!(job.new_lines().unwrap(), vec![(1, "partial".to_owned())]);
        assert!(job.new_lines().unwrap().is_empty());
    }
}
