//! The `curate` binary: parses flags into a [`Config`], runs the library, prints the funnel on
//! stderr. Bad arguments are the only input that stops a run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use swerve_cli::{Exit, Verbosity};
use swerve_curate::{Config, Inputs, Output, Shard};

/// Curate SWE-RL training tasks from GH Archive events and bare git mirrors.
#[derive(Parser)]
#[command(name = "curate", version)]
struct Cli {
    #[command(flatten)]
    verbosity: Verbosity,
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Read events and clones, write tasks.jsonl, rejected.jsonl and funnel.json.
    Run(RunArgs),
    /// Make tasks executable: build their environments, run their tests before and after the fix
    ///
    /// Writes instances.jsonl (SWE-bench 5 rows with FAIL_TO_PASS / PASS_TO_PASS),
    /// environments.json, rejected.jsonl and funnel.json.
    #[cfg(feature = "validate")]
    Validate(ValidateArgs),
    /// Join the output folders of `run --shard K/N` into what one process writes.
    Merge {
        /// Shard output folders.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Output folder.
        #[arg(long)]
        output: PathBuf,
        /// Also write tasks.parquet (the rows of tasks.jsonl).
        #[arg(long)]
        parquet: bool,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// GH Archive hour files (`*.json.gz`) or folders of them.
    #[arg(long, required = true, num_args = 1..)]
    events: Vec<PathBuf>,
    /// Folder of bare mirrors `<owner>/<name>.git`.
    #[arg(long)]
    repos: PathBuf,
    /// Output folder.
    #[arg(long)]
    output: PathBuf,
    /// Also write tasks.parquet (the rows of tasks.jsonl).
    #[arg(long)]
    parquet: bool,
    #[command(flatten)]
    jobs: swerve_cli::Jobs,
    /// TOML settings (thresholds, exclusions, window); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Process only shard K of N (0-based), by a hash of the repository name.
    #[arg(long, value_name = "K/N", conflicts_with = "executor")]
    shard: Option<String>,
    /// Keep PRs whose last event is on or after this date (YYYY-MM-DD).
    #[arg(long)]
    since: Option<String>,
    /// Keep PRs whose last event is on or before this date (YYYY-MM-DD).
    #[arg(long)]
    until: Option<String>,
    /// Exclude a repository by owner/name (repeatable).
    #[arg(long = "exclude-repo")]
    exclude_repo: Vec<String>,
    /// Exclude a repository by GH Archive repo.id (repeatable).
    #[arg(long = "exclude-repo-id")]
    exclude_repo_id: Vec<u64>,
    /// Relevant unmodified files per task (0: off).
    #[arg(long)]
    relevant: Option<usize>,
    /// OpenAI-compatible API base URL of a model that suggests relevant files first
    /// (e.g. http://127.0.0.1:8000/v1); needs --relevant-model.
    #[arg(long, requires = "relevant_model")]
    relevant_endpoint: Option<String>,
    /// The model name to send to --relevant-endpoint.
    #[arg(long, requires = "relevant_endpoint")]
    relevant_model: Option<String>,
    /// Where the work runs: on Slurm, array task K runs shard K/N of this command on its node,
    /// then the shards are merged here (the output folder, the events and the mirrors must be
    /// shared).
    #[command(flatten)]
    placement: swerve_cli::PlacementArgs,
}

#[cfg(feature = "validate")]
#[derive(clap::Args)]
struct ValidateArgs {
    /// Task rows: `curate run`'s tasks.jsonl, or any rows with repo, base_commit, patch and
    /// test_patch.
    #[arg(long)]
    tasks: PathBuf,
    /// Folder of bare mirrors `<owner>/<name>.git`.
    #[arg(long)]
    repos: PathBuf,
    /// Output folder (a rerun resumes from its validate_state.jsonl).
    #[arg(long)]
    output: PathBuf,
    /// Containers at once (on Slurm: in each array task).
    #[command(flatten)]
    max_workers: swerve_cli::MaxWorkers<2>,
    /// Runs of each side (before and after the fix); a test whose status differs between runs
    /// is flaky.
    #[arg(long, default_value_t = 2, value_parser = swerve_cli::count)]
    runs: usize,
    /// The limit of one run's tests.
    #[command(flatten)]
    timeout: swerve_cli::Timeout<1800>,
    /// OpenAI-compatible API base URL of a model asked for an environment recipe where the
    /// repository's files give none or its install failed (at most 3 answers a task, each shown
    /// the failing log); needs --setup-model.
    #[arg(long, requires = "setup_model")]
    setup_endpoint: Option<String>,
    /// The model name to send to --setup-endpoint.
    #[arg(long, requires = "setup_endpoint")]
    setup_model: Option<String>,
    /// Also write the kept rows as a SWE-bench 5 task repository in OUTPUT/task-repo
    /// (`swebench dataset check` accepts it)
    #[arg(long)]
    task_repo: bool,
    /// Where the containers run: on Slurm, the array's tasks validate their share on their
    /// nodes' engines (the tasks file, the mirrors and the output folder must be shared).
    #[command(flatten)]
    placement: swerve_cli::PlacementArgs,
}

impl RunArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut config = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        if let Some(jobs) = self.jobs.jobs {
            config.jobs = jobs;
        }
        if let Some(shard) = &self.shard {
            config.shard = Some(Shard::parse(shard)?);
        }
        if self.since.is_some() {
            config.since.clone_from(&self.since);
        }
        if self.until.is_some() {
            config.until.clone_from(&self.until);
        }
        config
            .exclude_repos
            .extend(self.exclude_repo.iter().cloned());
        config
            .exclude_repo_ids
            .extend(self.exclude_repo_id.iter().copied());
        if let Some(n) = self.relevant {
            config.relevant_files = n;
        }
        if let (Some(url), Some(model)) = (&self.relevant_endpoint, &self.relevant_model) {
            let mut endpoint = swerve_curate::endpoint::EndpointConfig::new(url, model);
            if let Some(old) = config.relevant_endpoint.take() {
                endpoint.api_key_env = old.api_key_env;
                endpoint.timeout_s = old.timeout_s;
                endpoint.max_paths = old.max_paths;
            }
            config.relevant_endpoint = Some(endpoint);
        }
        config.validate()?;
        Ok(config)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    swerve_cli::start(&cli.verbosity);
    swerve_cli::finish(run(cli))
}

/// The run's stages drawn on stderr, one [`swerve_cli::Progress`] per stage.
struct Stages {
    verbosity: Verbosity,
    current: Mutex<Option<swerve_cli::Progress>>,
}

impl Stages {
    fn with(&self, f: impl FnOnce(&swerve_cli::Progress)) {
        let current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(progress) = current.as_ref() {
            f(progress);
        }
    }
}

impl swerve_curate::progress::StageProgress for Stages {
    fn stage(&self, name: &'static str, unit: &'static str, total: u64) {
        let progress = swerve_cli::Progress::new(name, unit, &self.verbosity).unwrap_or_else(|e| {
            tracing::warn!("{e:#}");
            swerve_cli::Progress::hidden()
        });
        progress.set_total(total);
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(progress);
    }

    fn grow(&self, more: u64) {
        self.with(|p| p.add_to_total(more));
    }

    fn advance(&self) {
        self.with(|p| p.inc(1));
    }

    fn end(&self) {
        self.with(|p| p.clear());
    }
}

/// Where task `index` of a Slurm run writes its shard.
fn shard_dir(output: &std::path::Path, index: usize) -> PathBuf {
    output.join(".slurm").join(format!("shard-{index}"))
}

/// `curate run --executor slurm`: one array task per shard (each runs this command), followed
/// until every task ended, then the shards merged into `output` as one process writes it; `None`
/// when a shard was lost (nothing is merged: exit 3, a rerun redoes the run).
fn submit(args: &RunArgs, output: &Output) -> anyhow::Result<Option<swerve_curate::Funnel>> {
    let placement = args.placement.placement()?;
    placement.check()?;
    let round = output.dir.join(".slurm");
    // Shards of an earlier attempt are redone: a shard is one task's whole output.
    let _ = fs_err::remove_dir_all(&round);
    let spec = placement.array(
        "swerve-curate",
        round.clone(),
        vec![String::new(); args.placement.slurm_tasks],
    );
    let end = swerve_slurm::run_array(
        &spec,
        std::time::Duration::from_secs(1),
        |event| match event {
            swerve_slurm::ArrayEvent::Submitted { job, tasks } => {
                eprintln!("Submitted Slurm job {job} ({tasks} shards)");
            }
            swerve_slurm::ArrayEvent::Line { line, .. } => eprintln!("{line}"),
        },
    )?;
    // A shard is one task's whole output: the merge needs every one. The shards that finished
    // stay in the round folder; a rerun redoes the run.
    if !end.lost.is_empty() {
        for lost in &end.lost {
            eprintln!("{lost}");
        }
        eprintln!(
            "{} of {} shards were lost: nothing was merged into {}; rerun the same command",
            end.lost.len(),
            end.tasks,
            output.dir.display()
        );
        return Ok(None);
    }
    let shards: Vec<PathBuf> = (0..end.tasks)
        .map(|index| shard_dir(&output.dir, index))
        .collect();
    let funnel = swerve_curate::merge::merge(&shards, output)
        .with_context(|| format!("curate merge into {}", output.dir.display()))?;
    fs_err::remove_dir_all(&round)?;
    Ok(Some(funnel))
}

fn run(cli: Cli) -> anyhow::Result<Exit> {
    let funnel = match cli.command {
        Command::Run(args) => {
            let mut config = args.config()?;
            let inputs = Inputs {
                events: args.events.clone(),
                repos: args.repos.clone(),
            };
            let mut output = Output {
                dir: args.output.clone(),
                parquet: args.parquet,
            };
            let stages = Stages {
                verbosity: cli.verbosity,
                current: Mutex::new(None),
            };
            args.placement.check_local()?;
            if args.placement.on_slurm() {
                match swerve_slurm::ArrayTask::from_env()? {
                    // An array task: its shard of the run, into the round folder.
                    Some(task) => {
                        config.shard =
                            Some(Shard::parse(&format!("{}/{}", task.index, task.count))?);
                        output = Output {
                            dir: shard_dir(&args.output, task.index),
                            parquet: false,
                        };
                        let funnel = swerve_curate::run(&inputs, &config, &output, &stages)
                            .with_context(|| format!("curate run into {}", output.dir.display()))?;
                        task.record(&format!(
                            "shard {} of {}: {} tasks",
                            task.index, task.count, funnel.tasks
                        ))?;
                        task.finish(&task.node)?;
                        if !cli.verbosity.quiet {
                            eprintln!("{}", funnel.summary());
                        }
                        return Ok(Exit::Success);
                    }
                    None => match submit(&args, &output)? {
                        Some(funnel) => funnel,
                        None => return Ok(Exit::Incomplete),
                    },
                }
            } else {
                // The output files are each replaced whole, at the end: a stopped run leaves
                // whole files (its spill folder is removed by the next run).
                swerve_interrupt::set_resume_hint(Some(format!(
                    "every file in {} is whole (the previous run's, or this one's where it was \
                     written); run the same command again to start over",
                    output.dir.display()
                )));
                swerve_curate::run(&inputs, &config, &output, &stages)
                    .with_context(|| format!("curate run into {}", output.dir.display()))?
            }
        }
        #[cfg(feature = "validate")]
        Command::Validate(args) => return validate(&args, &cli.verbosity),
        Command::Merge {
            shards,
            output,
            parquet,
        } => {
            let output = Output {
                dir: output,
                parquet,
            };
            swerve_curate::merge::merge(&shards, &output)
                .with_context(|| format!("curate merge into {}", output.dir.display()))?
        }
    };
    if !cli.verbosity.quiet {
        eprintln!("{}", funnel.summary());
    }
    Ok(Exit::Success)
}

#[cfg(feature = "validate")]
/// `curate validate`: the funnel on stderr; exit 3 (unfinished work) when a task ended in an
/// infrastructure error, which a rerun retries.
fn validate(args: &ValidateArgs, verbosity: &Verbosity) -> anyhow::Result<Exit> {
    let config = swerve_curate::validate::ValidateConfig {
        tasks: args.tasks.clone(),
        repos: args.repos.clone(),
        output: args.output.clone(),
        jobs: args.max_workers.get(),
        runs: args.runs,
        timeout: args.timeout.get(),
        setup: args
            .setup_endpoint
            .as_deref()
            .zip(args.setup_model.as_deref())
            .map(|(url, model)| swerve_curate::endpoint::EndpointConfig::new(url, model)),
        task_repo: args.task_repo,
    };
    let host = swerve_host::Host::new(swerve_host::HostConfig {
        cache_dir: Some(swerve_host::default_precompile_dir()),
        ..swerve_host::HostConfig::default()
    })?;
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers")?,
            &Default::default(),
        )
        .context("cannot load the swebench-parsers log parser")?;
    let quiet = verbosity.quiet;
    let progress = |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let context = || format!("curate validate into {}", args.output.display());
    args.placement.check_local()?;
    let funnel = if args.placement.on_slurm() {
        use swerve_curate::validate::cluster;
        // An array task: its share of the tasks, into the round folder.
        if let Some(task) = swerve_slurm::ArrayTask::from_env()? {
            cluster::serve_task(&config, &task, &evaluator, &progress).with_context(context)?;
            return Ok(Exit::Success);
        }
        let placement = args.placement.placement()?;
        cluster::submit(&config, &placement, &progress).with_context(context)?
    } else {
        swerve_interrupt::set_resume_hint(Some(format!(
            "each task finished so far is recorded in {}; run the same command again to \
             continue with the others",
            args.output
                .join(swerve_curate::validate::STATE_FILE)
                .display()
        )));
        swerve_curate::validate::validate(&config, evaluator, &progress).with_context(context)?
    };
    if !quiet {
        eprintln!("{}", funnel.summary());
    }
    let infra = funnel.rejected.get("infra_error").copied().unwrap_or(0);
    if infra + funnel.unfinished > 0 {
        eprintln!(
            "{} tasks ended in an infrastructure error or were not run; rerun the same command to retry them",
            infra + funnel.unfinished
        );
        return Ok(Exit::Incomplete);
    }
    Ok(Exit::Success)
}
