//! `harness agent`: flags in, a validated [`AgentConfig`] and policy out, the library run, the
//! endings printed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use swerve_cli::{Exit, Verbosity};
use swerve_harness::agent::{
    self, AgentConfig, AgentProgress, EndReason, Endpoint, EpisodeLimits, Policy, Protocol,
    Sampling, Scripted,
};
use swerve_sandbox::Limits;

use crate::commands::DatasetArgs;

/// `harness agent`.
#[derive(Args)]
pub(crate) struct AgentArgs {
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Names the log folder (`<log-dir>/agent/<run_id>/`), the containers and the predictions
    /// file.
    #[arg(long, alias = "run_id")]
    run_id: String,
    /// Folder holding `agent/` (beside `harness run`'s `run_evaluation/`).
    #[arg(long, default_value = "logs")]
    log_dir: PathBuf,
    /// The predictions file to write, SWE-bench JSONL for `harness run -p` (default:
    /// `<model>.<run_id>.jsonl` in the current folder).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// The base URL of an OpenAI-compatible API (vLLM, SGLang, llama.cpp, `trainer serve`, a
    /// hosted API), e.g. `http://127.0.0.1:8000/v1`
    #[arg(long, value_name = "URL", conflicts_with = "script")]
    endpoint: Option<String>,
    /// With --endpoint: the model's name (sent to the endpoint, and the predictions'
    /// `model_name_or_path`). Alone: a swerve checkpoint folder, served by `trainer serve` (the
    /// `trainer` binary beside this one, else on PATH) on --device for the run's length
    #[arg(long, value_name = "NAME|DIR")]
    model: Option<String>,
    /// The device a checkpoint given with --model DIR runs on: cpu, or cuda / cuda:N
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Environment variable holding the API key (sent as a bearer token when set)
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    api_key_env: String,
    /// Replay recorded replies instead of asking a model: JSON lines `{"instance_id": ID,
    /// "replies": [...]}`, each reply a string (text protocol) or `{"content": ...,
    /// "tool_calls": [{"name": ..., "arguments": {...}}]}`
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// How the agent speaks: mini-swe-agent's text protocol (one fenced bash block a reply) or
    /// OpenAI tool calls (bash, str_replace_editor, search, submit)
    #[arg(long, value_enum, default_value = "text")]
    protocol: ProtocolArg,
    /// Sampling temperature (default: the server's).
    #[arg(long, value_parser = fraction_or_more)]
    temperature: Option<f64>,
    /// Nucleus sampling mass, in (0, 1] (default: the server's).
    #[arg(long, value_parser = unit_interval)]
    top_p: Option<f64>,
    /// Most tokens of one reply (default: the server's).
    #[arg(long, value_parser = positive)]
    max_tokens: Option<u64>,
    /// Sampling seed sent with every request.
    #[arg(long)]
    seed: Option<u64>,
    /// Ask for the sampled token ids and log-probs (vLLM's `return_tokens_as_token_ids`), kept
    /// in the trajectories.
    #[arg(long)]
    token_ids: bool,
    /// Most model replies in an episode.
    #[arg(long, default_value_t = 250, value_parser = positive_u32)]
    step_limit: u32,
    /// Wall-clock limit of an episode, in seconds.
    #[arg(long, default_value_t = 3600, value_parser = swerve_cli::seconds)]
    wall_limit: u64,
    /// Limit of one command, in seconds (killed with its process tree; the episode goes on).
    #[arg(long, default_value_t = 60, value_parser = swerve_cli::seconds)]
    command_timeout: u64,
    /// Most tokens in the conversation.
    #[arg(long, default_value_t = 32_768, value_parser = positive)]
    context_tokens: u64,
    /// Most MiB the container may write over its image (checked after each turn).
    #[arg(long, default_value_t = 4096, value_parser = positive)]
    disk_limit_mib: u64,
    /// Largest file, in MiB, a command may write.
    #[arg(long, default_value_t = 1024, value_parser = positive)]
    file_limit_mib: u64,
    /// Seconds to wait for one model reply.
    #[arg(long, default_value_t = 600, value_parser = swerve_cli::seconds)]
    request_timeout: u64,
    /// Episodes at once.
    #[command(flatten)]
    max_workers: swerve_cli::MaxWorkers<2>,
}

/// `--protocol`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ProtocolArg {
    /// mini-swe-agent's: a THOUGHT and one fenced `mswea_bash_command` block a reply.
    Text,
    /// OpenAI tool calls.
    Tools,
}

fn positive(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn positive_u32(text: &str) -> Result<u32, String> {
    let n = positive(text)?;
    u32::try_from(n).map_err(|_| format!("must be at most {}", u32::MAX))
}

fn fraction_or_more(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t.is_finite() && (0.0..=2.0).contains(&t) => Ok(t),
        Ok(_) => Err("must be in [0, 2]".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

fn unit_interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 1.0 => Ok(p),
        Ok(_) => Err("must be in (0, 1]".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// Episodes done out of all, with the submissions so far.
struct Bar {
    progress: swerve_cli::Progress,
    submitted: std::sync::atomic::AtomicUsize,
}

impl AgentProgress for Bar {
    fn message(&self, text: &str) {
        self.progress.println(text);
    }

    fn start(&self, total: usize, _reused: usize) {
        self.progress.set_total(total as u64);
        self.progress.set(0, Some("submitted 0".into()));
    }

    fn done(&self, _instance_id: &str, reason: EndReason) {
        if reason == EndReason::Submitted {
            let n = self
                .submitted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            self.progress.set_message(format!("submitted {n}"));
        }
        self.progress.inc(1);
    }
}

/// `harness agent`.
pub(crate) fn agent(args: AgentArgs, verbosity: &Verbosity) -> anyhow::Result<Exit> {
    if args.run_id.is_empty() {
        bail!("--run-id must be non-empty");
    }
    // A checkpoint's server lives as long as the run (dropped at the end of this function).
    let mut local: Option<LocalServer> = None;
    let policy: Arc<dyn Policy> = match (&args.endpoint, &args.script) {
        (Some(url), None) => {
            let Some(model) = &args.model else {
                bail!("--endpoint needs --model NAME (the model the server serves)");
            };
            let sampling = Sampling {
                temperature: args.temperature,
                top_p: args.top_p,
                max_tokens: args.max_tokens,
                seed: args.seed,
                token_ids: args.token_ids,
            };
            let key = std::env::var(&args.api_key_env)
                .ok()
                .filter(|k| !k.is_empty());
            Arc::new(Endpoint::new(
                url,
                model,
                key,
                sampling,
                Duration::from_secs(args.request_timeout),
            ))
        }
        (None, Some(path)) => {
            let name = args.model.clone().unwrap_or_else(|| "scripted".to_owned());
            Arc::new(
                Scripted::read(path, &name)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("--script {}", path.display()))?,
            )
        }
        (None, None) => match args.model.as_deref().map(PathBuf::from) {
            Some(dir) if dir.join("config.json").is_file() => {
                let server = LocalServer::start(&dir, &args.device)?;
                let name = server.name.clone();
                let sampling = Sampling {
                    temperature: args.temperature,
                    top_p: args.top_p,
                    max_tokens: args.max_tokens,
                    seed: args.seed,
                    // The server is swerve's own: the sampled ids always come back.
                    token_ids: true,
                };
                let url = server.url.clone();
                local = Some(server);
                Arc::new(Endpoint::new(
                    &url,
                    &name,
                    None,
                    sampling,
                    Duration::from_secs(args.request_timeout),
                ))
            }
            Some(dir) => bail!(
                "--model {}: not a checkpoint folder (no config.json); give --endpoint URL with \
                 --model NAME for a model behind a server",
                dir.display()
            ),
            None => {
                bail!("give --endpoint URL --model NAME, --model CHECKPOINT_DIR, or --script FILE")
            }
        },
        (Some(_), Some(_)) => unreachable!("clap refuses --endpoint with --script"),
    };
    let source = args.dataset.resolve()?;
    let model = policy.model_name();
    let predictions = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "{}.{}.jsonl",
            model.replace('/', "__"),
            args.run_id
        ))
    });
    let config = AgentConfig {
        run_id: args.run_id.clone(),
        source,
        protocol: match args.protocol {
            ProtocolArg::Text => Protocol::Text,
            ProtocolArg::Tools => Protocol::Tools,
        },
        limits: EpisodeLimits {
            steps: args.step_limit,
            wall: Duration::from_secs(args.wall_limit),
            command_timeout: Duration::from_secs(args.command_timeout),
            context_tokens: args.context_tokens,
            file_bytes: args.file_limit_mib << 20,
            disk_bytes: args.disk_limit_mib << 20,
        },
        container: Limits::default(),
        max_workers: args.max_workers.get(),
        log_root: args.log_dir.clone(),
        predictions,
    };
    let progress = Bar {
        progress: swerve_cli::Progress::new("agent", "episodes", verbosity)?,
        submitted: Default::default(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let summary = runtime.block_on(agent::run(&config, policy, &progress))?;
    progress.progress.clear();
    if !verbosity.quiet {
        let endings: Vec<String> = summary
            .by_reason()
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        eprintln!(
            "{} episodes ({} reused): {}",
            summary.episodes.len(),
            summary.episodes.iter().filter(|e| e.reused).count(),
            endings.join(", ")
        );
        eprintln!(
            "Trajectories and summary in {}",
            summary
                .summary_file
                .parent()
                .map_or_else(String::new, |p| p.display().to_string())
        );
        eprintln!("HTML page written to {}", summary.page_file.display());
    }
    println!("{}", summary.predictions.display());
    drop(local);
    Ok(Exit::Success)
}

/// `trainer serve` on a checkpoint for the run's length, stopped on drop.
struct LocalServer {
    child: std::process::Child,
    url: String,
    name: String,
}

impl LocalServer {
    fn start(dir: &std::path::Path, device: &str) -> anyhow::Result<LocalServer> {
        use std::io::BufRead as _;
        let beside = std::env::current_exe()
            .ok()
            .map(|exe| exe.with_file_name("trainer"))
            .filter(|p| p.is_file());
        let trainer = beside.unwrap_or_else(|| PathBuf::from("trainer"));
        let name = dir
            .file_name()
            .map_or_else(|| "model".to_owned(), |n| n.to_string_lossy().into_owned());
        let mut child = std::process::Command::new(&trainer)
            .args(["serve", "--port", "0", "-q", "--served-model-name", &name])
            .args(["--device", device, "--model"])
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start `{} serve` for --model {}",
                    trainer.display(),
                    dir.display()
                )
            })?;
        let mut line = String::new();
        let read =
            std::io::BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line);
        if read.is_err() || !line.starts_with("http://") {
            let _ = child.kill();
            let status = child.wait().ok();
            bail!(
                "`trainer serve --model {}` did not start (exit {status:?}); its error is above",
                dir.display()
            );
        }
        tracing::info!(url = %line.trim(), "serving the checkpoint");
        Ok(LocalServer {
            child,
            url: line.trim().to_owned(),
            name,
        })
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
