//! The `trainer` binary: argument parsing, logging and exit codes over the `swerve_trainer`
//! library.

use std::path::PathBuf;
use std::process::ExitCode;

mod train_args;

use anyhow::Context;
use clap::{Parser, Subcommand};
use swerve_cli::{Exit, Verbosity};
use swerve_trainer::generate::{SamplingConfig, generate};
use swerve_trainer::model::CausalLm;
use swerve_trainer::tokenizer::Tokenizer;

/// swerve's trainer: GRPO for software-engineering agents
#[derive(Debug, Parser)]
#[command(name = "trainer", version)]
struct Cli {
    #[command(flatten)]
    verbosity: Verbosity,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sample completions from a Hugging Face model directory; prints one JSON object per prompt
    Generate(GenerateArgs),
    /// Evaluate a GRPO worked-example case file and print the losses as JSON
    Loss {
        /// The case file (JSON in the layout of the trainer's `grpo::case` module)
        #[arg(long)]
        case: PathBuf,
    },
    /// Train the bundled byte-level BPE tokenizer on the repository's text and write tokenizer.json
    Tokenizer {
        /// Repository root holding harness/datasets/swerve-mini and harness/samples
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// Where to write the tokenizer (`--out` is its older name)
        #[arg(
            long,
            alias = "out",
            default_value = "trainer/assets/tiny/tokenizer.json"
        )]
        output: PathBuf,
    },
    /// Supervised warm-up on prompt/completion pairs (loss on completion tokens only)
    Sft(train_args::SftArgs),
    /// GRPO with reward plugins on a task dataset; metrics, plots and resumable checkpoints
    Grpo(train_args::GrpoArgs),
    /// Write SWE-bench predictions (instance_id, model_name_or_path, model_patch) for a dataset
    Predict(train_args::PredictArgs),
    /// The bundled end-to-end run on swerve-mini: tiny model, SFT, GRPO, plots, predictions
    Demo(train_args::DemoArgs),
    /// Print a run's memory plan (peak memory on the device, item by item) without running it
    Plan(train_args::PlanArgs),
    /// Serve a checkpoint over the OpenAI-compatible HTTP API (chat and text completions) for
    /// agents; prints its URL on stdout once listening
    #[cfg(feature = "serve")]
    Serve(ServeArgs),
    /// A task of a Slurm job array of executions (`grpo --execute --executor slurm`; started by Slurm)
    #[cfg(feature = "execute")]
    #[command(hide = true)]
    ExecuteTask(swerve_cli::ExecuteTaskArgs),
}

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    /// Model directory: config.json, model.safetensors (or a sharded index) and tokenizer.json
    #[arg(long)]
    model: PathBuf,
    /// Prompt text; repeat for a batch
    #[arg(long, required = true)]
    prompt: Vec<String>,
    /// Most new tokens per prompt
    #[arg(long, default_value_t = 64, value_parser = swerve_cli::count)]
    max_new_tokens: usize,
    /// Sampling temperature; 0 for greedy decoding
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
    /// Nucleus sampling threshold (1 is off)
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// Keep only the k most likely tokens (0 is off)
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Seed of the sampler
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    device: train_args::DeviceArgs,
}

#[cfg(feature = "serve")]
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Checkpoint directory: config.json, weights, tokenizer.json, and its chat template
    /// (chat_template.jinja or tokenizer_config.json) for /v1/chat/completions
    #[arg(long)]
    model: PathBuf,
    /// A LoRA adapter to serve on top of --model (not supported by this build yet)
    #[arg(long, value_name = "DIR")]
    adapter: Option<PathBuf>,
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// Port to listen on (0: one the system picks)
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// The model's name in the API (default: the --model path as given)
    #[arg(long, value_name = "NAME")]
    served_model_name: Option<String>,
    /// Most sequences sampled in one batch (requests that sample alike are batched)
    #[arg(long, default_value_t = 16, value_parser = swerve_cli::count)]
    max_batch: usize,
    #[command(flatten)]
    device: train_args::DeviceArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    swerve_cli::start(&cli.verbosity);
    swerve_cli::finish(run(cli))
}

fn run(cli: Cli) -> anyhow::Result<Exit> {
    swerve_trainer::runtime::init()?;
    let verbosity = &cli.verbosity;
    match cli.command {
        Command::Generate(args) => run_generate(&args)?,
        Command::Loss { case } => println!("{}", swerve_trainer::commands::loss::run(&case)?),
        Command::Tokenizer { root, output } => {
            let spec = swerve_trainer::commands::train_tokenizer::TokenizerSpec::bundled(&root);
            let vocab = swerve_trainer::commands::train_tokenizer::run(&spec, &output)?;
            eprintln!("wrote {} ({vocab} tokens)", output.display());
        }
        Command::Sft(args) => train_args::run_sft(&args, verbosity)?,
        Command::Grpo(args) => train_args::run_grpo(&args, verbosity)?,
        Command::Predict(args) => train_args::run_predict(&args, verbosity)?,
        Command::Demo(args) => train_args::run_demo(&args, verbosity)?,
        Command::Plan(args) => train_args::run_plan(&args)?,
        #[cfg(feature = "serve")]
        Command::Serve(args) => run_serve(&args)?,
        #[cfg(feature = "execute")]
        Command::ExecuteTask(args) => train_args::run_execute_task(&args)?,
    }
    Ok(Exit::Success)
}

#[cfg(feature = "serve")]
fn run_serve(args: &ServeArgs) -> anyhow::Result<()> {
    if let Some(adapter) = &args.adapter {
        anyhow::bail!(
            "--adapter {}: this build cannot load LoRA adapters yet; serve a merged checkpoint",
            adapter.display()
        );
    }
    let config = swerve_trainer::serve::ServeConfig {
        model: args.model.clone(),
        served_name: args
            .served_model_name
            .clone()
            .unwrap_or_else(|| args.model.display().to_string()),
        address: std::net::SocketAddr::new(args.host, args.port),
        max_batch: args.max_batch,
        device: args.device.device,
    };
    swerve_trainer::serve::serve(&config)?;
    Ok(())
}

fn run_generate(args: &GenerateArgs) -> anyhow::Result<()> {
    // The outer result is opening the device, the inner one the generation.
    let run = || -> swerve_trainer::error::Result<anyhow::Result<()>> {
        swerve_trainer::on_device!(args.device.device, |dev| Ok(generate_on(args, dev)))
    };
    run()?
}

fn generate_on<D: swerve_trainer::model::Kernels<f32>>(
    args: &GenerateArgs,
    dev: &D,
) -> anyhow::Result<()> {
    let tokenizer_path = swerve_trainer::commands::model_dir(&args.model)?.join("tokenizer.json");
    let tokenizer = Tokenizer::from_file(&tokenizer_path)?;
    let model = CausalLm::<f32, D>::load(&args.model, dev)
        .with_context(|| format!("cannot load model from {}", args.model.display()))?;
    let prompts = args
        .prompt
        .iter()
        .map(|p| tokenizer.encode(p, true))
        .collect::<Result<Vec<_>, _>>()?;
    let eos = model.config.eos_token_ids.clone();
    let config = SamplingConfig {
        temperature: args.temperature,
        top_p: args.top_p,
        top_k: args.top_k,
        max_new_tokens: args.max_new_tokens,
        pad_token_id: eos.first().copied().unwrap_or(0),
        eos_token_ids: eos,
        seed: args.seed,
        first_row: 0,
        ..SamplingConfig::default()
    };
    tracing::info!(prompts = prompts.len(), "generating");
    let out = generate(&model, &prompts, &config)?;
    for ((prompt, tokens), finished) in args.prompt.iter().zip(&out.completions).zip(&out.finished)
    {
        let line = serde_json::json!({
            "prompt": prompt,
            "completion": tokenizer.decode(tokens, true)?,
            "tokens": tokens.len(),
            "finished": finished,
        });
        println!("{line}");
    }
    Ok(())
}
