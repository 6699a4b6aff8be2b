//! `harness run --executor slurm` on a real Slurm cluster (`scripts/slurm-local.sh up`: one node,
//! this machine's Docker engine): the same run report as a local run, byte for byte; a task
//! killed by Slurm loses only its unfinished instances and a rerun completes them; Ctrl-C of the
//! submitting process cancels the array and leaves no job and no container; options sbatch
//! refuses fail before any work starts.
//!
//! Without a Slurm controller the tests say so in one line and pass, unless
//! `SWERVE_NO_SKIP` is set (CI sets it): then they fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_harness");

/// One test at a time: the one-node cluster runs two tasks at once, and the tests that kill
/// tasks need theirs running, not queued behind another test's.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn slurm_up() -> bool {
    swerve_tests::slurm_up("harness run --executor slurm")
}

struct Ctx {
    dir: tempfile::TempDir,
    run_id: String,
}

impl Ctx {
    fn new(name: &str) -> Ctx {
        Ctx {
            dir: tempfile::tempdir().expect("temp dir"),
            run_id: format!("s-{name}-{}", std::process::id()),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `harness run` on swerve-mini gold in `sub` (its own log and report folders).
    fn command(&self, sub: &str, extra: &[&str]) -> Command {
        let folder = self.path().join(sub);
        std::fs::create_dir_all(&folder).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.current_dir(&folder)
            .args(["run", "-d", "swerve-mini", "-p", "gold", "-q", "--no-html"])
            .args(["--run-id", &self.run_id])
            .args(extra);
        cmd
    }

    fn report(&self, sub: &str) -> String {
        let path = self
            .path()
            .join(sub)
            .join(format!("gold.{}.json", self.run_id));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn instance_report(&self, sub: &str, id: &str) -> PathBuf {
        self.path()
            .join(sub)
            .join("logs/run_evaluation")
            .join(&self.run_id)
            .join("gold")
            .join(id)
            .join("report.json")
    }

    fn containers(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label=swerve.run-id={}", self.run_id))
            .output()
            .expect("docker ps");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn check(out: &Output) {
    assert!(
        out.status.success(),
        "harness failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Tasks of `job` that Slurm has not finished.
fn live_tasks(job: &str) -> Vec<String> {
    let out = Command::new("squeue")
        .args(["-h", "-r", "-j", job, "-o", "%K|%T"])
        .output()
        .expect("squeue");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A submitting process whose stderr is read line by line.
struct Submitter {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Submitter {
    fn spawn(mut cmd: Command) -> Submitter {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("harness starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Submitter {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The job id, once the submitter says it submitted.
    fn job_id(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(600);
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
                self.seen.push(line.clone());
                if let Some(rest) = line.strip_prefix("Submitted Slurm job ") {
                    return rest.split_whitespace().next().unwrap().to_owned();
                }
            }
        }
        panic!("no job submitted:\n{}", self.seen.join("\n"));
    }

    fn wait(mut self) -> (ExitStatus, String) {
        let status = self.child.wait().expect("wait");
        self.seen.extend(self.lines.iter());
        (status, self.seen.join("\n"))
    }
}

/// Waits until task `index` of `job` runs and has started a container for this run.
fn wait_running(ctx: &Ctx, job: &str, index: &str) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        let running = live_tasks(job)
            .iter()
            .any(|l| l == &format!("{index}|RUNNING"));
        if running && !ctx.containers().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("task {index} of job {job} never ran a container");
}

#[test]
fn slurm_run_writes_the_local_runs_report() {
    let _serial = serial();
    if !slurm_up() {
        return;
    }
    let ctx = Ctx::new("same");
    check(
        &ctx.command("local", &["--max-workers", "2"])
            .output()
            .unwrap(),
    );
    let out = ctx
        .command(
            "slurm",
            &[
                "--executor",
                "slurm",
                "--slurm-tasks",
                "2",
                "--max-workers",
                "1",
            ],
        )
        .output()
        .unwrap();
    check(&out);
    let local = ctx.report("local");
    assert_eq!(local, ctx.report("slurm"), "run reports differ");
    let report: serde_json::Value = serde_json::from_str(&local).unwrap();
    assert_eq!(report["resolved_instances"], 13, "{local}");
    for id in report["completed_ids"].as_array().unwrap() {
        let id = id.as_str().unwrap();
        let a = std::fs::read(ctx.instance_report("local", id)).unwrap();
        let b = std::fs::read(ctx.instance_report("slurm", id)).unwrap();
        assert_eq!(a, b, "{id}: report.json differs");
    }
    assert!(ctx.containers().is_empty());
}

#[test]
fn a_task_killed_by_slurm_loses_only_its_instances_and_a_rerun_completes_them() {
    let _serial = serial();
    if !slurm_up() {
        return;
    }
    let ctx = Ctx::new("kill");
    let ids = [
        "swerve__inicfg-3",
        "swerve__inicfg-7",
        "swerve__textkit-4",
        "swerve__textkit-6",
    ];
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "--executor",
            "slurm",
            "--slurm-tasks",
            "2",
            "--max-workers",
            "1",
            "-i",
        ];
        a.extend(ids);
        a.extend(extra);
        a
    };
    let mut submitter = Submitter::spawn(ctx.command("run", &args(&[])));
    let job = submitter.job_id();
    wait_running(&ctx, &job, "1");
    let cancel = Command::new("scancel")
        .arg(format!("{job}_1"))
        .status()
        .unwrap();
    assert!(cancel.success());
    let (status, stderr) = submitter.wait();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("Slurm task 1 of job {job} ended CANCELLED")),
        "{stderr}"
    );
    // Task 0's instances were all evaluated; task 1's first was not.
    for id in [ids[0], ids[2]] {
        assert!(ctx.instance_report("run", id).is_file(), "{id}: {stderr}");
    }
    assert!(!ctx.instance_report("run", ids[1]).is_file(), "{stderr}");
    assert!(
        ctx.containers().is_empty(),
        "a killed task's containers are swept"
    );

    // The rerun reuses what finished and submits only the rest.
    let out = ctx.command("run", &args(&[])).output().unwrap();
    check(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("instances already run, skipping"),
        "{stderr}"
    );
    for id in ids {
        assert!(ctx.instance_report("run", id).is_file(), "{id}");
    }
    let report: serde_json::Value = serde_json::from_str(&ctx.report("run")).unwrap();
    assert_eq!(report["resolved_instances"], 4);
    assert!(ctx.containers().is_empty());
}

#[test]
fn ctrl_c_cancels_the_array_and_leaves_nothing_behind() {
    let _serial = serial();
    if !slurm_up() {
        return;
    }
    let ctx = Ctx::new("int");
    let mut submitter = Submitter::spawn(ctx.command(
        "run",
        &[
            "--executor",
            "slurm",
            "--slurm-tasks",
            "2",
            "--max-workers",
            "1",
        ],
    ));
    let job = submitter.job_id();
    wait_running(&ctx, &job, "0");
    let pid = submitter.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (status, stderr) = submitter.wait();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cancelled Slurm job {job}")),
        "{stderr}"
    );
    assert!(live_tasks(&job).is_empty(), "{:?}", live_tasks(&job));
    assert!(ctx.containers().is_empty(), "{:?}", ctx.containers());
}

#[test]
fn options_sbatch_refuses_fail_before_any_work() {
    let _serial = serial();
    if !slurm_up() {
        return;
    }
    let ctx = Ctx::new("bad");
    let out = ctx
        .command(
            "run",
            &[
                "--executor",
                "slurm",
                "--slurm-arg=--partition=no-such-partition",
            ],
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sbatch refused"), "{stderr}");
    assert!(stderr.contains("partition"), "{stderr}");
    let run_dir = ctx.path().join("run/logs/run_evaluation").join(&ctx.run_id);
    assert!(!run_dir.exists(), "nothing is written before the check");
}

#[test]
fn executions_on_the_cluster_match_local_ones() {
    use swerve_cli::ExecuteTaskArgs;
    use swerve_harness::execution::{
        DatasetSource, ExecuteConfig, ExecutionOutcome, PatchExecutor, RemoteConfig,
        SlurmExecutions,
    };

    let _serial = serial();
    if !slurm_up() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = DatasetSource::resolve("swerve-mini", "test", None).unwrap();
    let row = |id: &str| source.rows.iter().find(|r| r.instance_id == id).unwrap();
    let gold = |id: &str| row(id).patch.clone().unwrap();
    // Gold patches, the same pair twice, a patch that does not apply, an empty patch.
    let pairs: Vec<(String, String)> = [
        ("swerve__inicfg-7", gold("swerve__inicfg-7")),
        ("swerve__textkit-4", gold("swerve__textkit-4")),
        ("swerve__inicfg-7", gold("swerve__inicfg-7")),
        (
            "swerve__spans-2",
            "--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n".into(),
        ),
        ("swerve__spans-5", String::new()),
    ]
    .into_iter()
    .map(|(id, patch)| (id.to_owned(), patch))
    .collect();

    let task = ExecuteTaskArgs {
        dataset: "swerve-mini".into(),
        workers: swerve_cli::MaxWorkers { max_workers: 1 },
        timeout: swerve_cli::Timeout { seconds: 300 },
        work_dir: dir.path().join("remote-logs"),
    };
    let mut command = vec![BIN.to_owned()];
    command.extend(task.to_args());
    let remote = SlurmExecutions::new(RemoteConfig {
        placement: swerve_slurm::Placement {
            sbatch_args: Vec::new(),
            tasks: 2,
            command,
            chdir: dir.path().to_owned(),
        },
        dir: dir.path().join("batches"),
    })
    .unwrap();
    let on_cluster = remote.execute(&pairs).unwrap();

    let host = swerve_host::Host::new(swerve_host::HostConfig::default()).unwrap();
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers").unwrap(),
            &Default::default(),
        )
        .unwrap();
    let config = ExecuteConfig {
        work_dir: dir.path().join("local-logs"),
        run_id: format!("local-{}", std::process::id()),
        ..ExecuteConfig::default()
    };
    let local = PatchExecutor::new(source.clone(), evaluator, config).unwrap();
    let here: Vec<_> = pairs.iter().map(|(id, p)| local.execute(id, p)).collect();
    assert_eq!(on_cluster, here);
    assert!(on_cluster[0].resolved() && on_cluster[1].resolved());
    assert_eq!(on_cluster[3], ExecutionOutcome::NotApplied);

    // The second batch is served from the cache: no array is submitted.
    let again = remote.execute(&pairs[..2]).unwrap();
    assert_eq!(again, on_cluster[..2]);
    assert!(!dir.path().join("batches/batch-1").exists());
}
