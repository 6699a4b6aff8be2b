//! The submitting side's one loop: submit an array, follow it until every task ended, hand
//! each progress line to the caller as it arrives, and say which tasks ended before finishing
//! their input ([`run_array`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::{ArraySpec, SlurmError, slurm, stderr_of};

/// How long a cancelled array may take to end before the submitter stops waiting.
const CANCEL_WAIT: Duration = Duration::from_secs(120);

/// How much of a lost task's output its [`LostTask`] keeps.
const TAIL_BYTES: usize = 2000;

/// What [`run_array`] reports while the array runs.
#[derive(Debug, Clone, Copy)]
pub enum ArrayEvent<'a> {
    /// The array was submitted as Slurm job `job` with `tasks` tasks.
    Submitted {
        /// Slurm's job id.
        job: &'a str,
        /// The array's size.
        tasks: usize,
    },
    /// Task `task` appended a progress line ([`crate::ArrayTask::record`]): one finished unit of
    /// its input.
    Line {
        /// The task's index.
        task: usize,
        /// The line, without its newline.
        line: &'a str,
    },
}

/// An array task that ended before it finished its input: killed, failed, out of time, or on a
/// node that does not share the round folder. What it recorded before is not lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostTask {
    /// The array's job id.
    pub job: String,
    /// The task's index.
    pub index: usize,
    /// Slurm's last state of the task (`FAILED`, `CANCELLED`, `TIMEOUT`, `NODE_FAIL`, …;
    /// `ENDED` when Slurm no longer lists it).
    pub state: String,
    /// The node it ran on (empty when unknown).
    pub node: String,
    /// The end of its output file (stdout and stderr); empty when it wrote none.
    pub output_tail: String,
    /// The round folder, where its output file should be.
    pub dir: PathBuf,
}

impl std::fmt::Display for LostTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Slurm task {} of job {} ended {}",
            self.index, self.job, self.state
        )?;
        if !self.node.is_empty() {
            write!(f, " on {}", self.node)?;
        }
        write!(
            f,
            " before finishing its share; rerun the same command to complete it."
        )?;
        if self.output_tail.is_empty() {
            write!(
                f,
                " It left no output in {}: is that folder shared with the node?",
                self.dir.display()
            )
        } else {
            write!(f, " Its output ends:\n{}", self.output_tail)
        }
    }
}

/// How an array ended: every task ended, and these did so before finishing their input.
#[derive(Debug, Clone)]
pub struct ArrayEnd {
    /// Slurm's job id of the array.
    pub job: String,
    /// The array's size.
    pub tasks: usize,
    /// The tasks that ended before finishing, in index order.
    pub lost: Vec<LostTask>,
}

/// Submits `spec` as one job array (checked with `sbatch --test-only` first), follows it with
/// `squeue` every `poll` until every task ended, and calls `on_event` when it was submitted and
/// with every progress line a task appends, in the order they arrive. Ctrl-C or SIGTERM of this
/// process meanwhile cancels the array (`scancel`), waits until Slurm reports every task ended,
/// and returns [`SlurmError::Cancelled`].
pub fn run_array(
    spec: &ArraySpec,
    poll: Duration,
    mut on_event: impl FnMut(ArrayEvent<'_>),
) -> Result<ArrayEnd, SlurmError> {
    let mut job = crate::submit(spec)?;
    on_event(ArrayEvent::Submitted {
        job: &job.id,
        tasks: job.tasks,
    });
    // While the array is followed, the first signal cancels it instead of ending the process.
    if let Err(e) = swerve_interrupt::install() {
        tracing::warn!(error = %e, "an interrupted run will not cancel its array");
    }
    let cooperation = swerve_interrupt::cooperate();
    let end = job.follow(poll, &mut |task, line| {
        on_event(ArrayEvent::Line { task, line })
    });
    drop(cooperation);
    let status = match end? {
        Followed::Cancelled(signal) => {
            return Err(SlurmError::Cancelled {
                job: job.id,
                source: swerve_interrupt::Interrupted { signal },
            });
        }
        Followed::Finished(status) => status,
    };
    let lost = (0..job.tasks)
        .filter(|&index| !job.dir.join(format!("task-{index}.done")).is_file())
        .map(|index| {
            let (state, node) = status
                .tasks
                .get(&index)
                .map_or(("ENDED", ""), |t| (t.state.as_str(), t.node.as_str()));
            LostTask {
                job: job.id.clone(),
                index,
                state: state.to_owned(),
                node: node.to_owned(),
                output_tail: job.output_tail(index, TAIL_BYTES),
                dir: job.dir.clone(),
            }
        })
        .collect();
    Ok(ArrayEnd {
        job: job.id,
        tasks: job.tasks,
        lost,
    })
}

/// A submitted job array.
#[derive(Debug)]
pub(crate) struct ArrayJob {
    /// Slurm's job id of the array.
    pub(crate) id: String,
    /// The round folder.
    pub(crate) dir: PathBuf,
    /// Number of array tasks.
    pub(crate) tasks: usize,
    /// Bytes of each task's progress file already returned by [`ArrayJob::new_lines`].
    pub(crate) offsets: Vec<u64>,
}

/// One array task as `squeue` last showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TaskState {
    /// Slurm's state (`PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED`, `TIMEOUT`, `NODE_FAIL`, …).
    state: String,
    /// The node it runs or ran on (empty while pending).
    node: String,
}

impl TaskState {
    /// The task will not run (any more).
    fn is_terminal(&self) -> bool {
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
struct ArrayStatus {
    /// Listed tasks.
    tasks: BTreeMap<usize, TaskState>,
}

impl ArrayStatus {
    /// Every task of `0..count` ended (terminal, or no longer listed).
    fn finished(&self, count: usize) -> bool {
        (0..count).all(|i| self.tasks.get(&i).is_none_or(TaskState::is_terminal))
    }

    /// Parses `squeue -h -r -o '%K|%T|%N'` lines (array index, state, node).
    fn parse(text: &str) -> ArrayStatus {
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
enum Followed {
    /// Every task ended; their last states.
    Finished(ArrayStatus),
    /// The submitting process received this signal; the array was cancelled and has ended (or
    /// did not within [`CANCEL_WAIT`]).
    Cancelled(swerve_interrupt::Signal),
}

impl ArrayJob {
    /// The array's tasks as `squeue` shows them now (finished ones too, while Slurm keeps them).
    fn status(&self) -> Result<ArrayStatus, SlurmError> {
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
    fn cancel(&self) -> Result<(), SlurmError> {
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
    pub(crate) fn new_lines(&mut self) -> Result<Vec<(usize, String)>, SlurmError> {
        let mut lines = Vec::new();
        for (i, offset) in self.offsets.iter_mut().enumerate() {
            let path = self.dir.join(format!("task-{i}.progress"));
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(SlurmError::round("read", path)(e)),
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

    /// The last `max` bytes of task `index`'s output file (stdout and stderr).
    fn output_tail(&self, index: usize, max: usize) -> String {
        let text = std::fs::read(self.dir.join(format!("task-{index}.out"))).unwrap_or_default();
        let start = text.len().saturating_sub(max);
        String::from_utf8_lossy(&text[start..]).trim().to_owned()
    }

    /// Follows the array until every task ended, handing new progress lines to `on_line` every
    /// `poll`. A signal of this process (see [`swerve_interrupt::received`]) cancels the array
    /// and waits (up to [`CANCEL_WAIT`]) until Slurm reports every task ended.
    fn follow(
        &mut self,
        poll: Duration,
        on_line: &mut dyn FnMut(usize, &str),
    ) -> Result<Followed, SlurmError> {
        let mut deliver = |job: &mut ArrayJob| -> Result<(), SlurmError> {
            for (task, line) in job.new_lines()? {
                on_line(task, &line);
            }
            Ok(())
        };
        loop {
            if let Some(signal) = swerve_interrupt::received() {
                self.cancel()?;
                let deadline = Instant::now() + CANCEL_WAIT;
                loop {
                    let status = self.status()?;
                    deliver(self)?;
                    if status.finished(self.tasks) || Instant::now() > deadline {
                        return Ok(Followed::Cancelled(signal));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            let status = self.status()?;
            deliver(self)?;
            if status.finished(self.tasks) {
                // Lines written between the read and the task's end.
                deliver(self)?;
                return Ok(Followed::Finished(status));
            }
            // Sleep in short steps so that an interrupt is seen at once.
            let until = Instant::now() + poll;
            while Instant::now() < until && swerve_interrupt::received().is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_parse_and_finish() {
        let status = ArrayStatus::parse("0|COMPLETED|vm\n1|RUNNING|vm\n2|PENDING|\n");
        assert_eq!(status.tasks.len(), 3);
        assert_eq!(status.tasks[&1].state, "RUNNING");
        assert_eq!(status.tasks[&2].node, "");
        assert!(!status.finished(3));
        let done = ArrayStatus::parse("0|COMPLETED|vm\n1|CANCELLED|vm\n");
        assert!(done.finished(3), "a task no longer listed has ended");
        assert!(ArrayStatus::parse("").finished(4));
        assert!(!ArrayStatus::parse("0|COMPLETING|vm").finished(1));
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
        std::fs::write(dir.path().join("task-1.progress"), "a\nb\npart").unwrap();
        assert_eq!(
            job.new_lines().unwrap(),
            vec![(1, "a".to_owned()), (1, "b".to_owned())]
        );
        std::fs::write(dir.path().join("task-1.progress"), "a\nb\npartial\n").unwrap();
        assert_eq!(job.new_lines().unwrap(), vec![(1, "partial".to_owned())]);
        assert!(job.new_lines().unwrap().is_empty());
    }

    #[test]
    fn a_lost_task_says_what_happened_and_what_to_do() {
        let lost = LostTask {
            job: "42".into(),
            index: 1,
            state: "NODE_FAIL".into(),
            node: "node7".into(),
            output_tail: "killed".into(),
            dir: "/shared/round".into(),
        };
        assert_eq!(
            lost.to_string(),
            "Slurm task 1 of job 42 ended NODE_FAIL on node7 before finishing its share; rerun \
             the same command to complete it. Its output ends:\nkilled"
        );
        let silent = LostTask {
            node: String::new(),
            output_tail: String::new(),
            state: "ENDED".into(),
            ..lost
        };
        assert!(
            silent.to_string().ends_with(
                "It left no output in /shared/round: is that folder shared with the node?"
            ),
            "{silent}"
        );
    }
}
