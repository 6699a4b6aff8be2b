//! The Docker and dataset subcommands of the binary (`run`, `report`, `clean`, `images build`,
//! `dataset export`): flags in, a validated [`RunConfig`] out, the library called, a summary
//! printed. Flag names mirror SWE-bench's `run_evaluation` (the underscore spellings are
//! accepted as aliases).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use swerve_cli::{Exit, Verbosity};
use swerve_harness::execution::{DatasetSource, ImageTiming, Mode, build_images};
use swerve_harness::run::{self, InstanceResult, OutcomeKind, Resume, RunConfig, RunProgress};
use swerve_harness::{export, harbor, html};
use swerve_sandbox::{Limits, Network, Sandbox, SandboxConfig};
use swerve_swebench::grading::VerdictRule;
use swerve_swebench::predictions::{self, Prediction};

use crate::CacheArgs;

/// Dataset selection shared by `run`, `report` and `images build`.
#[derive(Args)]
pub(crate) struct DatasetArgs {
    /// `swerve-mini` (bundled), a .json/.jsonl/.parquet file, a folder with `<split>.jsonl`, or
    /// a hub dataset (`verified`, `lite`, `full`, `multilingual`, `multimodal`, `pro`,
    /// `swe-rebench-v2` or a Hugging Face id) read from the local Hugging Face cache
    #[arg(
        short = 'd',
        long,
        alias = "dataset_name",
        default_value = "swerve-mini"
    )]
    dataset: String,
    /// Split (picks `<split>.jsonl` in a dataset folder).
    #[arg(short = 's', long, default_value = "test")]
    split: String,
    /// Only these instance ids (space separated, one flag).
    #[arg(short = 'i', long, alias = "instance_ids", num_args = 1..)]
    instance_ids: Vec<String>,
    /// Folder of repository bundles/clones (default: `repos/` beside the rows file).
    #[arg(long, value_name = "DIR")]
    repos: Option<PathBuf>,
    /// A SWE-bench 5 task repository (`sweb.yaml`, `tasks/<id>/...`) to take the rows from
    /// instead of --dataset: the tasks of --split (or those -i names, from any split), each
    /// image built from its task folder's Dockerfile
    #[arg(long, value_name = "DIR")]
    task_repo: Option<PathBuf>,
    /// A checkout of SWE-bench Pro (`run_scripts/`, `dockerfiles/`): the run script, parser
    /// and Dockerfile ENV lines its rows are evaluated with
    #[arg(long, value_name = "DIR")]
    pro_scripts: Option<PathBuf>,
}

impl DatasetArgs {
    pub(crate) fn resolve(&self) -> anyhow::Result<DatasetSource> {
        let mut source = match &self.task_repo {
            Some(dir) => DatasetSource::resolve_task_repo(dir, &self.split, &self.instance_ids)?,
            None => {
                let mut source =
                    DatasetSource::resolve(&self.dataset, &self.split, self.repos.as_deref())?;
                source.filter(&self.instance_ids)?;
                source
            }
        };
        if let Some(dir) = &self.pro_scripts {
            if !dir.join("run_scripts").is_dir() {
                bail!(
                    "--pro-scripts {}: no run_scripts/ folder there (a checkout of SWE-bench Pro has run_scripts/<instance_id>/ and dockerfiles/)",
                    dir.display()
                );
            }
            source.pro_scripts = Some(std::path::absolute(dir)?);
        }
        Ok(source)
    }
}

/// How the run is hardened.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ModeArg {
    /// swerve's defences on (see docs/hardening.md).
    Hardened,
    /// SWE-bench 5 exactly: one eval.sh exec, log graded as upstream.
    Compat,
    /// Hardened, and a patch whose product code reaches into the test runner is not resolved.
    Strict,
}

/// Which earlier results are reused.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ResumeArg {
    /// Same image, patch and eval script.
    Content,
    /// Any report.json (SWE-bench).
    Id,
}

/// The container network.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum NetworkArg {
    /// No network (default).
    None,
    /// Docker's bridge (SWE-bench's setting).
    Bridge,
}

/// `harness run`.
#[derive(Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Predictions (.jsonl, .json list or dict), or `gold`.
    #[arg(short = 'p', long, alias = "predictions_path")]
    predictions: String,
    /// Instances evaluated at once (on Slurm: in each array task).
    #[command(flatten)]
    max_workers: swerve_cli::MaxWorkers<4>,
    /// The limit of one instance's eval script (SWE-bench's default).
    #[command(flatten)]
    timeout: swerve_cli::Timeout<1800>,
    #[command(flatten)]
    files: RunFiles,
    /// Hardened (default), strict (hardened, and tamper signals unresolve) or
    /// SWE-bench-compatible execution and grading.
    #[arg(long, value_enum, default_value = "hardened")]
    mode: ModeArg,
    /// Which results of an earlier run with this id are reused.
    #[arg(long, value_enum, default_value = "content")]
    resume: ResumeArg,
    /// Container network during the evaluation.
    #[arg(long, value_enum, default_value = "none")]
    network: NetworkArg,
    /// Do not write the run's HTML page (`<model>.<run_id>.html` beside the run report).
    #[arg(long)]
    no_html: bool,
    /// Harbor task folders to evaluate instead of --dataset (one task folder, or a folder of
    /// them): `-p gold` runs each task's solution/solve.sh, a predictions file's patches (by
    /// task folder name) are applied with git apply; tests/test.sh's rewards are reported in
    /// `<model>.<run_id>.harbor.json`
    #[arg(long, value_name = "DIR", conflicts_with = "task_repo")]
    harbor: Option<PathBuf>,
    /// Where the instances run (on Slurm the log folder must be shared).
    #[command(flatten)]
    placement: swerve_cli::PlacementArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

/// Where a run's results live and how its logs are parsed (shared by `run` and `report`).
#[derive(Args)]
pub(crate) struct RunFiles {
    /// Names the log folder, the containers and the run report.
    #[arg(long, alias = "run_id")]
    run_id: String,
    /// Folder of the run report.
    #[arg(long, alias = "report_dir", default_value = ".")]
    report_dir: PathBuf,
    /// Folder holding `run_evaluation/`.
    #[arg(long, default_value = "logs")]
    log_dir: PathBuf,
    /// An evaluator plugin (.wasm) to parse logs (default: bundled swebench-parsers).
    #[arg(long, value_name = "PATH")]
    log_parser: Option<PathBuf>,
    /// How rows of SWE-rebench V2 and SWE-bench Pro are resolved: exact-set (the passing tests
    /// are exactly FAIL_TO_PASS + PASS_TO_PASS, SWE-rebench V2's rule) or subset (every listed
    /// test passes, SWE-bench Pro's); default each one's own, named in every such report.
    /// SWE-bench rows keep SWE-bench's rule
    #[arg(long, value_enum)]
    verdict: Option<VerdictArg>,
}

/// `--verdict`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum VerdictArg {
    ExactSet,
    Subset,
}

impl VerdictArg {
    fn rule(self) -> VerdictRule {
        match self {
            VerdictArg::ExactSet => VerdictRule::ExactSet,
            VerdictArg::Subset => VerdictRule::Subset,
        }
    }
}

/// `harness report`.
#[derive(Args)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    dataset: DatasetArgs,
    /// The predictions the run used, or `gold`.
    #[arg(short = 'p', long, alias = "predictions_path")]
    predictions: String,
    #[command(flatten)]
    files: RunFiles,
    /// Also write the run's HTML page (`<model>.<run_id>.html` beside the run report): summary,
    /// instances, failing tests, patches and test logs in one self-contained file.
    #[arg(long)]
    html: bool,
    #[command(flatten)]
    cache: CacheArgs,
}

/// `harness clean`.
#[derive(Args)]
pub(crate) struct CleanArgs {
    /// Only this run's containers (default: every swerve container).
    #[arg(long, alias = "run_id")]
    run_id: Option<String>,
}

/// `harness images ...`.
#[derive(Subcommand)]
pub(crate) enum ImagesCommand {
    /// Build (or reuse) the base, env and instance images of a dataset.
    Build(ImagesBuildArgs),
    /// Check a prebuilt image (one swerve did not build) for history past its task's base
    /// commit, and with --scrub build a derived image cut at the base
    History(ImagesHistoryArgs),
}

/// `harness images history`.
#[derive(Args)]
pub(crate) struct ImagesHistoryArgs {
    /// The image (present on the engine)
    #[arg(long)]
    image: String,
    /// The task repository's folder in the image (`/testbed` in SWE-bench's images, `/app` in
    /// SWE-bench Pro's)
    #[arg(long, default_value = swerve_sandbox::TESTBED)]
    repo_dir: String,
    /// The task's base commit
    #[arg(long)]
    base: String,
    /// Build a derived image of this name with the repository cut at the base (only `.git`
    /// changes), and check it
    #[arg(long, value_name = "NAME")]
    scrub: Option<String>,
}

/// `harness images build`.
#[derive(Args)]
pub(crate) struct ImagesBuildArgs {
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Images built at once.
    #[command(flatten)]
    max_workers: swerve_cli::MaxWorkers<2>,
}

/// `harness dataset ...`.
#[derive(Subcommand)]
pub(crate) enum DatasetCommand {
    /// Write a dataset's rows as SWE-bench 5 rows (image, eval_script, log_parser, eval_type
    /// filled in from environment specs where missing), for SWE-bench's own run_evaluation.
    Export(DatasetExportArgs),
}

/// `harness dataset export`.
#[derive(Args)]
pub(crate) struct DatasetExportArgs {
    /// `swerve-mini` (bundled), a .json/.jsonl/.parquet file, a folder with `<split>.jsonl`, or
    /// a hub dataset (`verified`, `lite`, `full`, `multilingual`, `multimodal`, `pro`,
    /// `swe-rebench-v2` or a Hugging Face id) read from the local Hugging Face cache
    dataset: String,
    /// Split (picks `<split>.jsonl` in a dataset folder).
    #[arg(short = 's', long, default_value = "test")]
    split: String,
    /// Only these instance ids (space separated, one flag).
    #[arg(short = 'i', long, alias = "instance_ids", num_args = 1..)]
    instance_ids: Vec<String>,
    /// The JSONL file to write.
    #[arg(
        short = 'o',
        long,
        value_name = "FILE.jsonl",
        required_unless_present_any = ["task_repo", "harbor"],
        conflicts_with_all = ["task_repo", "harbor"]
    )]
    output: Option<PathBuf>,
    /// Write a SWE-bench 5 task repository in this folder instead (what `swebench dataset
    /// check` and `swebench eval --task-repo` read): each task's Dockerfile starts from the
    /// image `harness images build` makes for its row, so build those first
    #[arg(long, value_name = "DIR", conflicts_with = "harbor")]
    task_repo: Option<PathBuf>,
    /// Write Harbor task folders in this folder instead (what SkyRL and TRL read), one per row:
    /// instruction, task.toml, environment/Dockerfile from the image `harness images build`
    /// makes, solution/solve.sh with the gold patch, tests/test.sh that grades as swerve grades
    #[arg(long, value_name = "DIR")]
    harbor: Option<PathBuf>,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn load_predictions(arg: &str, source: &DatasetSource) -> anyhow::Result<Vec<Prediction>> {
    if arg == "gold" {
        return Ok(predictions::gold(&source.rows));
    }
    Ok(predictions::read_predictions(&PathBuf::from(arg))?)
}

fn evaluator(
    path: Option<&PathBuf>,
    cache: &CacheArgs,
) -> anyhow::Result<swerve_host::EvaluatorPlugin> {
    let path = match path {
        Some(path) => path.clone(),
        None => swerve_host::bundled::require("swebench-parsers")?,
    };
    crate::host(cache)?
        .load_evaluator(&path, &Default::default())
        .with_context(|| format!("cannot load the log parser {}", path.display()))
}

/// The run's progress: done/total, resolved so far, ETA.
struct Bar {
    progress: swerve_cli::Progress,
    resolved: AtomicUsize,
}

impl RunProgress for Bar {
    fn message(&self, text: &str) {
        self.progress.println(text);
    }

    fn start(&self, total: usize, _reused: usize) {
        self.progress.set_total(total as u64);
        self.progress.set(0, Some("resolved 0".into()));
    }

    fn done(&self, result: &InstanceResult) {
        if result.outcome == OutcomeKind::Resolved {
            let n = self.resolved.fetch_add(1, Ordering::Relaxed) + 1;
            self.progress.set_message(format!("resolved {n}"));
        }
        if result.outcome.is_infra() {
            self.message(&format!(
                "Error in evaluation for {}: {} (see its run_instance.log)",
                result.instance_id,
                result.outcome.as_str()
            ));
        }
        self.progress.inc(1);
    }
}

/// `harness run`.
pub(crate) fn run(args: RunArgs, verbosity: &Verbosity) -> anyhow::Result<Exit> {
    if args.files.run_id.is_empty() {
        bail!("--run-id must be non-empty");
    }
    args.placement.check_local()?;
    let limits = Limits {
        network: match args.network {
            NetworkArg::None => Network::None,
            NetworkArg::Bridge => Network::Bridge,
        },
        ..Limits::default()
    };
    if let Some(dir) = &args.harbor {
        return run_harbor_tasks(&args, dir, limits, verbosity);
    }
    let source = args.dataset.resolve()?;
    let predictions = load_predictions(&args.predictions, &source)?;
    let config = RunConfig {
        run_id: args.files.run_id.clone(),
        source,
        instance_ids: args.dataset.instance_ids.clone(),
        predictions,
        max_workers: args.max_workers.get(),
        timeout: args.timeout.get(),
        log_root: args.files.log_dir.clone(),
        report_dir: args.files.report_dir.clone(),
        mode: match args.mode {
            ModeArg::Hardened => Mode::Hardened,
            ModeArg::Compat => Mode::Compat,
            ModeArg::Strict => Mode::Strict,
        },
        resume: match args.resume {
            ResumeArg::Content => Resume::Content,
            ResumeArg::Id => Resume::Id,
        },
        limits,
        verdict: args.files.verdict.map(VerdictArg::rule),
    };
    let plugin = evaluator(args.files.log_parser.as_ref(), &args.cache)?;
    let progress = Bar {
        progress: swerve_cli::Progress::new("evaluation", "instances", verbosity)?,
        resolved: AtomicUsize::new(0),
    };
    let split = &args.dataset.split;
    let summary = if args.placement.on_slurm() {
        // This process is one of the array's tasks: evaluate its instances and stop.
        if let Some(task) = swerve_slurm::ArrayTask::from_env()? {
            runtime()?.block_on(run::run_task(&config, plugin, &task))?;
            return Ok(Exit::Success);
        }
        let options = args.placement.placement()?;
        runtime()?.block_on(run::submit(&config, split, &progress, &options))?
    } else {
        runtime()?.block_on(run::run(&config, split, plugin, &progress))?
    };
    progress.progress.clear();
    if !args.no_html {
        let page = html::write_run_page(&config, &summary.results, &summary.report_file)?;
        eprintln!("HTML report written to {}", page.display());
    }
    print!(
        "{}",
        summary
            .results
            .summary(&summary.report_file.display().to_string())
    );
    let infra = summary.infra_errors();
    if !infra.is_empty() {
        eprintln!(
            "Instances with swerve infrastructure errors (not the model's): {}",
            infra.join(" ")
        );
    }
    if !summary.unfinished.is_empty() {
        eprintln!(
            "Instances not evaluated (their Slurm task ended early; rerun the same command): {}",
            summary.unfinished.join(" ")
        );
        return Ok(Exit::Incomplete);
    }
    Ok(Exit::Success)
}

/// `harness run --harbor DIR`.
fn run_harbor_tasks(
    args: &RunArgs,
    dir: &std::path::Path,
    limits: Limits,
    verbosity: &Verbosity,
) -> anyhow::Result<Exit> {
    if args.placement.on_slurm() {
        bail!("--harbor runs here only (not with --executor slurm)");
    }
    let tasks = harbor::read_tasks(dir)?;
    let predictions = match args.predictions.as_str() {
        "gold" => None,
        path => Some(predictions::read_predictions(&PathBuf::from(path))?),
    };
    let config = harbor::HarborRunConfig {
        tasks,
        tasks_dir: dir.to_owned(),
        predictions,
        run_id: args.files.run_id.clone(),
        log_root: args.files.log_dir.clone(),
        report_dir: args.files.report_dir.clone(),
        max_workers: args.max_workers.get(),
        limits,
    };
    let progress = swerve_cli::Progress::new("evaluation", "tasks", verbosity)?;
    let total = match &config.predictions {
        None => config.tasks.len(),
        Some(predictions) => predictions.iter().filter(|p| !p.is_empty_patch()).count(),
    };
    progress.set_total(total as u64);
    let done = |result: &harbor::HarborResult| {
        progress.set_message(format!(
            "{}: {}{}",
            result.task,
            match result.outcome.reward() {
                Some(reward) => format!("reward {reward}"),
                None => "no reward".to_owned(),
            },
            if result.reused { " (reused)" } else { "" }
        ));
        progress.inc(1);
    };
    let summary = runtime()?.block_on(harbor::run_harbor(&config, &done))?;
    progress.clear();
    let report = &summary.report;
    println!("Total tasks: {}", report.total_tasks);
    println!("Tasks with a reward: {}", report.rewarded_tasks);
    match report.mean_reward {
        Some(mean) => println!("Mean reward: {mean}"),
        None => println!("Mean reward: none"),
    }
    println!("Tasks with reward 1: {}", report.full_reward_ids.len());
    println!("Tasks without a reward: {}", report.error_ids.len());
    println!("Report written to {}", summary.report_file.display());
    for result in &summary.results {
        if let harbor::HarborOutcome::InfraError { error }
        | harbor::HarborOutcome::NoReward { problem: error } = &result.outcome
        {
            eprintln!("{}: {error}", result.task);
        }
    }
    Ok(Exit::Success)
}

/// `harness report`.
pub(crate) fn report(args: ReportArgs) -> anyhow::Result<Exit> {
    let source = args.dataset.resolve()?;
    let predictions = load_predictions(&args.predictions, &source)?;
    let config = RunConfig {
        run_id: args.files.run_id.clone(),
        source,
        instance_ids: args.dataset.instance_ids.clone(),
        predictions,
        max_workers: 1,
        timeout: Duration::from_secs(1800),
        log_root: args.files.log_dir.clone(),
        report_dir: args.files.report_dir.clone(),
        mode: Mode::Hardened,
        resume: Resume::Content,
        limits: Limits::default(),
        verdict: args.files.verdict.map(VerdictArg::rule),
    };
    let plugin = evaluator(args.files.log_parser.as_ref(), &args.cache)?;
    let (results, file) = run::rewrite_reports(&config, &plugin)?;
    print!("{}", results.summary(&file.display().to_string()));
    if args.html {
        let page = html::write_run_page(&config, &results, &file)?;
        eprintln!("HTML report written to {}", page.display());
    }
    Ok(Exit::Success)
}

/// `harness clean`.
pub(crate) fn clean(args: CleanArgs) -> anyhow::Result<Exit> {
    let removed = runtime()?.block_on(async {
        let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
        sandbox.sweep(args.run_id.as_deref()).await
    })?;
    eprintln!("Removed {} containers", removed.len());
    for id in removed {
        println!("{id}");
    }
    Ok(Exit::Success)
}

/// `harness images build`: one line per image on stdout (`layer origin seconds bytes name`);
/// every built instance image also gets its stable name (a `tag` line): the row's `image`, else
/// `swerve/sweb.eval.<arch>.<id>:latest`.
pub(crate) fn images_build(args: ImagesBuildArgs) -> anyhow::Result<Exit> {
    let source = args.dataset.resolve()?;
    runtime()?.block_on(async {
        let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
        build_images(&sandbox, &source, args.max_workers.get(), print_timing).await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Success)
}

/// `harness images history`: what the image's repository holds past the base, as JSON on
/// stdout (`"clean": true` when nothing), then with `--scrub` the derived image's name and its
/// own (clean) check.
pub(crate) fn images_history(args: ImagesHistoryArgs) -> anyhow::Result<Exit> {
    runtime()?.block_on(async {
        let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
        let leaks = sandbox
            .history_leaks(&args.image, &args.repo_dir, &args.base)
            .await?;
        let mut out = serde_json::json!({
            "image": args.image,
            "clean": leaks.is_clean(),
            "found": leaks.summary(),
            "leaks": leaks,
        });
        if let Some(name) = &args.scrub {
            let (info, after) = sandbox
                .scrubbed_image(&args.image, &args.repo_dir, &args.base, name)
                .await?;
            out["scrubbed"] = serde_json::json!({"image": info.name, "leaks": after});
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Success)
}

fn print_timing(t: &ImageTiming) {
    println!(
        "{}\t{:?}\t{:.1}\t{}\t{}",
        t.layer,
        t.info.origin,
        t.elapsed.as_secs_f64(),
        t.info.size_bytes,
        t.info.name
    );
}

/// `harness dataset export`: the rows as SWE-bench 5 JSONL; the file name on stdout.
pub(crate) fn dataset_export(args: DatasetExportArgs) -> anyhow::Result<Exit> {
    let mut source = DatasetSource::resolve(&args.dataset, &args.split, None)?;
    source.filter(&args.instance_ids)?;
    let (summary, written) = match (&args.output, &args.task_repo, &args.harbor) {
        (_, _, Some(dir)) => (harbor::export_harbor(&source, dir)?, dir),
        (_, Some(dir), None) => (export::export_task_repo(&source, dir)?, dir),
        (Some(file), None, None) => (export::export(&source, file)?, file),
        (None, None, None) => bail!("give --output FILE.jsonl, --task-repo DIR or --harbor DIR"),
    };
    eprintln!(
        "Wrote {} rows to {} ({} v5 fields filled in from environment specs)",
        summary.rows,
        written.display(),
        summary.filled
    );
    println!("{}", written.display());
    Ok(Exit::Success)
}
