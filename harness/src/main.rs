//! The `harness` binary: parses arguments, builds validated settings, calls the library and maps
//! the outcome to an exit code. Results go to stdout (or `--output`), progress and summaries to
//! stderr.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use swerve_cli::{Exit, Progress, Verbosity};
use swerve_harness::{scaffold, scoring};
use swerve_host::{FailureClass, Fallbacks, Host, HostConfig, Isolation, PluginSpec, ScorerConfig};
use swerve_swebench::{grading, report};

mod agent_command;
mod commands;

/// swerve's harness: score completions with sandboxed reward plugins, grade SWE-bench logs.
#[derive(Parser)]
#[command(name = "harness", version, about)]
struct Cli {
    #[command(flatten)]
    verbosity: Verbosity,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Score a JSONL file of completions with weighted reward plugins.
    Reward(RewardArgs),
    /// Inspect or create plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Grade one test log without Docker and print its report.json as SWE-bench 5 writes it.
    Grade(GradeArgs),
    /// Evaluate predictions in Docker like SWE-bench's run_evaluation (hardened by default).
    Run(Box<commands::RunArgs>),
    /// Run a model as an agent on dataset rows in hardened sandboxes; its submissions are
    /// predictions for `harness run`.
    Agent(Box<agent_command::AgentArgs>),
    /// Re-grade a run's test_output.txt files without containers and rewrite its reports.
    Report(Box<commands::ReportArgs>),
    /// Remove leftover swerve containers (of one run, or all).
    Clean(commands::CleanArgs),
    /// Build the images of a dataset.
    #[command(subcommand)]
    Images(commands::ImagesCommand),
    /// Dataset files (export as SWE-bench 5 rows).
    #[command(subcommand)]
    Dataset(commands::DatasetCommand),
    /// A task of a Slurm job array of executions (started by Slurm, not by hand).
    #[command(hide = true)]
    ExecuteTask {
        #[command(flatten)]
        args: swerve_cli::ExecuteTaskArgs,
        #[command(flatten)]
        cache: CacheArgs,
    },
}

#[derive(Args)]
struct RewardArgs {
    /// A reward plugin: `NAME|PATH[=WEIGHT][,fuel=N][,memory=SIZE][,timeout=DUR][,stack=SIZE]`,
    /// NAME a bundled plugin (`harness plugin list`). Repeat to combine.
    #[arg(long = "plugin", required = true, value_name = "SPEC")]
    plugins: Vec<PluginSpec>,
    /// JSONL samples (one object per line; see docs/plugins.md).
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Where to write the results (default: stdout).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    jobs: swerve_cli::Jobs,
    /// Samples per plugin store.
    #[arg(long, default_value_t = 16, value_parser = swerve_cli::count)]
    batch_size: usize,
    /// A fresh store for every sample, with its own budgets (default: one store per batch).
    #[arg(long)]
    strict: bool,
    /// Reward given for a failure class instead of "not applicable": `timeout=-1`, `trap=0`...
    #[arg(long = "fallback", value_name = "CLASS=REWARD")]
    fallbacks: Vec<String>,
    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Args)]
struct CacheArgs {
    /// Folder of compiled plugins (default: plugins/ in $SWERVE_CACHE_DIR, else in
    /// ~/.cache/swerve).
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// Compile plugins at every start instead of caching them.
    #[arg(long, global = true, conflicts_with = "cache_dir")]
    no_cache: bool,
}

#[derive(Subcommand)]
enum PluginCommand {
    /// List the bundled plugins (one name a line; `*` marks those not built into this binary).
    List,
    /// Show a plugin's world, info, imports, exports and budgets.
    Inspect {
        /// The component (or a bundled plugin's name).
        plugin: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Create a new plugin project that builds and passes its own test.
    New {
        /// The plugin's name (lower-case letters, digits, `-`).
        name: String,
        /// Its language.
        #[arg(long, value_enum)]
        lang: Lang,
        /// Folder to create the project in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// A plugin kit crate for Rust projects to depend on by path (default: a copy of the kit
        /// carried by this binary, written into the project).
        #[arg(long)]
        kit: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Lang {
    Rust,
    Python,
}

#[derive(Args)]
struct GradeArgs {
    /// The dataset row (one JSON object).
    #[arg(long, value_name = "ROW.json")]
    instance: PathBuf,
    /// The instance's test_output.txt (for a SWE-bench Pro row, the output.json its parser.py
    /// wrote); rows of SWE-rebench V2 and SWE-bench Pro are graded by their own rules.
    #[arg(long, value_name = "FILE")]
    log: PathBuf,
    /// The model patch; absent: taken as present and non-empty. A file holding `null` grades as
    /// a null patch.
    #[arg(long, value_name = "FILE")]
    patch: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    swerve_cli::start(&cli.verbosity);
    swerve_cli::finish(run(cli))
}

fn run(cli: Cli) -> anyhow::Result<Exit> {
    let verbosity = cli.verbosity;
    match cli.command {
        Command::Reward(args) => reward(args, &verbosity),
        Command::Plugin(PluginCommand::List) => {
            list_plugins();
            Ok(Exit::Success)
        }
        Command::Plugin(PluginCommand::Inspect {
            plugin,
            json,
            cache,
        }) => inspect(&plugin, json, &cache),
        Command::Plugin(PluginCommand::New {
            name,
            lang,
            dir,
            kit,
        }) => new_plugin(name, lang, dir, kit),
        Command::Grade(args) => grade(args),
        Command::Run(args) => commands::run(*args, &verbosity),
        Command::Agent(args) => agent_command::agent(*args, &verbosity),
        Command::Report(args) => commands::report(*args),
        Command::Clean(args) => commands::clean(args),
        Command::Images(commands::ImagesCommand::Build(args)) => commands::images_build(args),
        Command::Images(commands::ImagesCommand::History(args)) => commands::images_history(args),
        Command::Dataset(commands::DatasetCommand::Export(args)) => commands::dataset_export(args),
        Command::ExecuteTask { args, cache } => {
            let evaluator = host(&cache)?.load_evaluator(
                &swerve_host::bundled::require("swebench-parsers")?,
                &Default::default(),
            )?;
            let config = swerve_harness::execution::ExecuteConfig {
                workers: args.workers.get(),
                timeout: args.timeout.get(),
                work_dir: args.work_dir,
                ..Default::default()
            };
            swerve_harness::execution::serve_from_env(&args.dataset, config, evaluator)?;
            Ok(Exit::Success)
        }
    }
}

fn host(cache: &CacheArgs) -> anyhow::Result<Host> {
    let cache_dir = if cache.no_cache {
        None
    } else {
        Some(
            cache
                .cache_dir
                .clone()
                .unwrap_or_else(swerve_host::default_precompile_dir),
        )
    };
    Ok(Host::new(HostConfig {
        cache_dir,
        ..HostConfig::default()
    })?)
}

fn parse_fallbacks(args: &[String]) -> Result<Fallbacks, swerve_cli::UsageError> {
    let usage = |arg: &str, reason: String| swerve_cli::UsageError::new("--fallback", arg, reason);
    let mut fallbacks = Fallbacks::default();
    for arg in args {
        let (class, value) = arg
            .split_once('=')
            .ok_or_else(|| usage(arg, "expected CLASS=REWARD".to_owned()))?;
        let Some(class) = FailureClass::parse(class) else {
            let names: Vec<&str> = FailureClass::ALL.iter().map(|c| c.as_str()).collect();
            return Err(usage(
                arg,
                format!("unknown class `{class}` (one of {})", names.join(", ")),
            ));
        };
        let reward = match value {
            "none" | "null" => None,
            v => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|r| r.is_finite())
                    .ok_or_else(|| {
                        usage(arg, format!("`{v}` is not a finite number (or `none`)"))
                    })?,
            ),
        };
        fallbacks.set(class, reward);
    }
    Ok(fallbacks)
}

fn reward(args: RewardArgs, verbosity: &Verbosity) -> anyhow::Result<Exit> {
    let scorer = ScorerConfig {
        // The default (one per CPU) only when asked for: finding the CPU count reads the
        // cgroup's quota files, a noticeable part of a small run's start.
        jobs: args
            .jobs
            .jobs
            .unwrap_or_else(|| ScorerConfig::default().jobs),
        batch_size: args.batch_size,
        isolation: if args.strict {
            Isolation::Strict
        } else {
            Isolation::Batch
        },
        fallbacks: parse_fallbacks(&args.fallbacks)?,
    };
    let run = scoring::RewardRun {
        input: args.input,
        output: args.output,
        plugins: args.plugins,
        scorer,
    };
    let host = host(&args.cache)?;
    // The input is streamed: the count grows as samples are scored, with no total read first.
    let progress = Progress::new("reward", "samples", verbosity)?;
    progress.open_ended();
    let summary = scoring::run(&host, &run, &|n| progress.inc(n as u64))?;
    progress.clear();
    if !verbosity.quiet {
        eprintln!("{}", summary.render());
    }
    Ok(Exit::Success)
}

fn list_plugins() {
    for name in swerve_host::bundled::names() {
        let built = swerve_host::bundled::is_built(name);
        println!("{name}{}", if built { "" } else { " *" });
    }
}

fn inspect(plugin: &str, json: bool, cache: &CacheArgs) -> anyhow::Result<Exit> {
    let path = swerve_host::bundled::resolve(plugin)?.ok_or_else(|| {
        let names: Vec<&str> = swerve_host::bundled::names().collect();
        swerve_cli::UsageError::new(
            "<PLUGIN>",
            plugin,
            format!(
                "no such file or bundled plugin (bundled: {})",
                names.join(", ")
            ),
        )
    })?;
    let report = host(cache)?.inspect(&path, &Default::default())?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(Exit::Success);
    }
    let b = &report.budgets;
    println!("plugin      {}", report.path.display());
    println!("world       swerve:plugin/{}@0.1.0", report.world.as_str());
    println!("name        {} {}", report.info.name, report.info.version);
    println!("about       {}", report.info.description);
    println!("sha256      {}", report.sha256);
    println!("size        {} bytes", report.size);
    println!("exports     {}", report.exports.join(", "));
    println!(
        "imports     {}",
        if report.imports.is_empty() {
            "none".into()
        } else {
            report.imports.len().to_string()
        }
    );
    for i in &report.imports {
        println!("  {i}");
    }
    println!(
        "budgets     fuel {} per sample, wall clock {:?}, memory {} MiB, wasm stack {} KiB, output {} KiB",
        b.fuel,
        b.wall_clock,
        b.memory_bytes >> 20,
        b.wasm_stack_bytes >> 10,
        b.output_bytes >> 10
    );
    Ok(Exit::Success)
}

fn new_plugin(
    name: String,
    lang: Lang,
    dir: PathBuf,
    kit: Option<PathBuf>,
) -> anyhow::Result<Exit> {
    if !scaffold::valid_name(&name) {
        return Err(swerve_cli::UsageError::new(
            "<NAME>",
            name,
            "not a plugin name: use lower-case letters, digits and `-`, starting with a letter",
        )
        .into());
    }
    let language = match lang {
        Lang::Rust => scaffold::Language::Rust,
        Lang::Python => scaffold::Language::Python,
    };
    let root = scaffold::create(&scaffold::Scaffold {
        name,
        language,
        dir,
        kit,
    })?;
    eprintln!("created {} (see its README.md)", root.display());
    println!("{}", root.display());
    Ok(Exit::Success)
}

fn grade(args: GradeArgs) -> anyhow::Result<Exit> {
    let row = fs_err::read_to_string(&args.instance)?;
    let instance = swerve_swebench::dataset::Instance::from_json(&row)
        .and_then(|instance| {
            let value = serde_json::from_str(&row).unwrap_or_default();
            swerve_swebench::dataset::check_test_list_keys(&value).map(|()| instance)
        })
        .and_then(|row| row.check_evaluable().map(|()| row))
        .with_context(|| format!("{}: not a dataset row", args.instance.display()))?;
    let log = fs_err::read_to_string(&args.log)?;
    let patch = match &args.patch {
        None => grading::PatchState::Present,
        Some(p) if fs_err::read_to_string(p)?.trim() == "null" => grading::PatchState::Null,
        Some(_) => grading::PatchState::Present,
    };
    let graded = grading::grade(&instance, &log, patch)?;
    println!(
        "{}",
        report::render_instance_report(&instance.instance_id, &graded.report)
    );
    Ok(Exit::Success)
}
