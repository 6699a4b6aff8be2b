//! The execution phase of one GRPO step with `--execute`, on this machine's engine and through
//! Slurm, side by side: a batch of swerve-mini gold patches (one per instance, as a step's
//! completions would be) executed by a fresh local [`PatchExecutor`] with 2 containers at once,
//! then by a fresh [`SlurmExecutions`] with 2 array tasks of 1 container each, `ROUNDS` times
//! (default 3). Needs the swerve-mini images and a Slurm controller (`scripts/slurm-local.sh up`).
//!
//! ```sh
//! cargo build --release -p swerve-harness && \
//!     cargo run --release -p swerve-harness --example execute_latency -- [ROUNDS] [BATCH]
//! ```

use std::time::Instant;

use swerve_cli::ExecuteTaskArgs;
use swerve_harness::execution::{
    DatasetSource, ExecuteConfig, PatchExecutor, RemoteConfig, SlurmExecutions,
};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let batch: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let harness = std::env::current_exe()?
        .parent()
        .and_then(|examples| examples.parent())
        .map(|dir| dir.join("harness"))
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "build the harness binary first (cargo build --release -p swerve-harness)"
            )
        })?;
    let source = DatasetSource::resolve("swerve-mini", "test", None)?;
    let pairs: Vec<(String, String)> = source
        .rows
        .iter()
        .take(batch)
        .map(|r| (r.instance_id.clone(), r.patch.clone().unwrap_or_default()))
        .collect();
    let host = swerve_host::Host::new(swerve_host::HostConfig::default())?;
    let evaluator = host.load_evaluator(
        &swerve_host::bundled::require("swebench-parsers").unwrap(),
        &Default::default(),
    )?;
    let work = tempfile::tempdir()?;
    println!(
        "{} executions per step; local: 2 containers; slurm: 2 array tasks x 1 container",
        pairs.len()
    );
    let (mut local_s, mut slurm_s) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let config = ExecuteConfig {
            run_id: format!("latency-{round}"),
            work_dir: work.path().join(format!("local-{round}")),
            workers: 2,
            ..ExecuteConfig::default()
        };
        let start = Instant::now();
        let local = PatchExecutor::new(source.clone(), evaluator.clone(), config)?;
        let pending: Vec<_> = pairs.iter().map(|(id, p)| local.submit(id, p)).collect();
        let here: Vec<_> = pending.into_iter().map(|p| p.wait()).collect();
        local_s.push(start.elapsed().as_secs_f64());

        let task = ExecuteTaskArgs {
            dataset: "swerve-mini".into(),
            workers: swerve_cli::MaxWorkers { max_workers: 1 },
            timeout: swerve_cli::Timeout { seconds: 300 },
            work_dir: work.path().join(format!("remote-{round}")),
        };
        let mut command = vec![harness.display().to_string()];
        command.extend(task.to_args());
        let start = Instant::now();
        let remote = SlurmExecutions::new(RemoteConfig {
            placement: swerve_slurm::Placement {
                sbatch_args: Vec::new(),
                tasks: 2,
                command,
                chdir: work.path().to_owned(),
            },
            dir: work.path().join(format!("batches-{round}")),
        })?;
        let there = remote.execute(&pairs)?;
        slurm_s.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(here == there, "round {round}: results differ");
        println!(
            "round {round}: local {:.2} s, slurm {:.2} s ({} resolved, results identical)",
            local_s[round],
            slurm_s[round],
            here.iter().filter(|e| e.resolved()).count()
        );
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (l, s) = (median(&mut local_s), median(&mut slurm_s));
    println!(
        "median execution phase per step: local {l:.2} s, slurm {s:.2} s, extra {:.2} s per step",
        s - l
    );
    Ok(())
}
