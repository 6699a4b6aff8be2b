//! The trainer library's error type: one variant per operation that can fail, each carrying the
//! file, field or tensor it was about.

use std::path::PathBuf;

/// Everything that can stop the model, tokenizer, generation or checkpoint code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or folder operation failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done.
        op: IoOp,
        /// The file or folder (for a copy or a rename, the one moved from).
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file (config, shard index, optimiser state) did not parse.
    #[error("cannot parse JSON in {path}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A model's `config.json` that is not a supported model (the field error inside).
    #[error("model config {}", path.display())]
    ModelConfig {
        /// The `config.json`.
        path: PathBuf,
        /// Which field is wrong, and why.
        #[source]
        source: Box<Error>,
    },
    /// A `--model` (or checkpoint) path that is not a folder.
    #[error(
        "no model folder {}: a model folder holds config.json, model.safetensors (or a sharded index) and tokenizer.json",
        path.display()
    )]
    ModelDir {
        /// The path given.
        path: PathBuf,
    },
    /// A field of a Hugging Face `config.json` is missing, has the wrong type or an unsupported
    /// value.
    #[error("config field `{field}`: {reason}")]
    Config {
        /// The JSON field name, as Hugging Face spells it.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A safetensors file could not be parsed or serialised.
    #[error("safetensors file {path}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A tensor the model needs is not in the checkpoint.
    #[error("tensor `{name}` is missing from {path}")]
    MissingTensor {
        /// The tensor's Hugging Face name.
        name: String,
        /// The checkpoint directory or file.
        path: PathBuf,
    },
    /// A tensor in the checkpoint has a shape other than the config implies.
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor's Hugging Face name.
        name: String,
        /// The shape the config implies.
        expected: Vec<usize>,
        /// The stored shape.
        found: Vec<usize>,
    },
    /// A tensor is stored in a dtype the loader does not convert (only f32, bf16 and f16 are).
    #[error("tensor `{name}` has unsupported dtype {dtype}")]
    TensorDtype {
        /// The tensor's Hugging Face name.
        name: String,
        /// The stored dtype.
        dtype: String,
    },
    /// A sharded checkpoint's `model.safetensors.index.json` is malformed.
    #[error("shard index {path}: {reason}")]
    ShardIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `tokenizer.json` could not be loaded.
    #[error("cannot load tokenizer {path}")]
    TokenizerLoad {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: tokenizers::Error,
    },
    /// The tokenizer could not be trained or written (the bundled run trains one when the asset
    /// is missing).
    #[error("cannot train the tokenizer into {}", path.display())]
    TokenizerTrain {
        /// The `tokenizer.json` being written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: crate::commands::train_tokenizer::TrainError,
    },
    /// Text could not be encoded or ids decoded.
    #[error("tokenizer failed to {operation}")]
    Tokenize {
        /// `encode` or `decode`.
        operation: &'static str,
        /// The cause.
        #[source]
        source: tokenizers::Error,
    },
    /// Generation was asked for something it cannot do (empty prompt, invalid sampling setting).
    #[error("generation: {0}")]
    Generation(GenerationError),
    /// The model was given input it cannot run, in training or generation.
    #[error("model input: {0}")]
    ModelInput(ModelInputError),
    /// The process-wide CPU thread pool could not be set up (it already exists, or a worker
    /// thread could not be spawned).
    #[error("cannot set up the CPU thread pool")]
    ThreadPool {
        /// The cause.
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
    /// A checkpoint directory is incomplete or inconsistent.
    #[error("checkpoint {}: {problem}", path.display())]
    Checkpoint {
        /// The checkpoint directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: CheckpointProblem,
    },
    /// A task file could not be read as dataset rows.
    #[error("cannot read tasks from {}", path.display())]
    Dataset {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: swerve_swebench::dataset::DatasetError,
    },
    /// `--dataset` names no rows file (a hub dataset not in the Hugging Face cache, a folder
    /// without rows, the bundled dataset not writable).
    #[error("--dataset {}", dataset.display())]
    DatasetName {
        /// What the user passed.
        dataset: PathBuf,
        /// Why it names nothing.
        #[source]
        source: swerve_swebench::names::NameError,
    },
    /// A training data file (prompt/completion pairs) has a line that does not parse.
    #[error("{}, line {line}", path.display())]
    Data {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A metrics log (`metrics.jsonl`) has a line that is not one step's metrics.
    #[error("metrics log {}, line {line}: {problem}", path.display())]
    MetricsLog {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: MetricsLineError,
    },
    /// The GRPO settings are invalid.
    #[error("GRPO settings")]
    GrpoConfig(#[source] crate::grpo::GrpoError),
    /// A generation batch's rewards or completions do not fit together (a reward function
    /// returned the wrong number of scores, a group is incomplete).
    #[error("GRPO generation batch {generation}")]
    GrpoBatch {
        /// The batch's counter (0 for the run's first).
        generation: u64,
        /// The cause.
        #[source]
        source: crate::grpo::GrpoError,
    },
    /// A settings file is not valid TOML, or not valid settings (an unknown key, a value of the
    /// wrong type): the cause points at the file's own line and column.
    #[error("cannot read the settings in {}", path.display())]
    Settings {
        /// The file.
        path: PathBuf,
        /// The parser's error, with the line and column.
        #[source]
        source: SettingsError,
    },
    /// A `--set KEY=VALUE` override that is not a valid setting.
    #[error("--set {item}")]
    Override {
        /// The override as given.
        item: String,
        /// Why it is not valid.
        #[source]
        source: SettingsError,
    },
    /// A settings file and its overrides, each valid alone, are not valid together.
    #[error("the merged settings")]
    MergedSettings(#[source] SettingsError),
    /// The SFT settings are invalid.
    #[error("SFT settings")]
    SftConfig(#[source] SettingsError),
    /// The bundled run's settings (`trainer demo --config`) are invalid.
    #[error("demo config")]
    DemoConfig(#[source] SettingsError),
    /// A training run cannot start or go on.
    #[error("training")]
    Run(#[source] crate::train::driver::RunError),
    /// A worked GRPO case file could not be read or evaluated (`trainer loss`).
    #[error("GRPO case file {}", path.display())]
    GrpoCase {
        /// The case file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: crate::grpo::GrpoError,
    },
    /// The `model` retriever was asked to rank files without a model to localise with.
    #[error("the model retriever needs a model to localise with")]
    NoLocalizer,
    /// The reward plugins do not fit the settings (`reward_weights` of another length).
    #[error("training: {reason}")]
    Training {
        /// What is wrong.
        reason: String,
    },
    /// The data-parallel ranks could not be set up or could not exchange something.
    #[error("ranks: {reason}")]
    Ranks {
        /// What went wrong.
        reason: String,
    },
    /// The reward plugins could not be loaded or run.
    #[error("reward plugins")]
    Reward(#[source] swerve_host::HostError),
    /// The sandbox executor (`--execute`) could not start.
    #[error("execution sandbox for {dataset}")]
    Execute {
        /// The harness dataset it was started for.
        dataset: PathBuf,
        /// The cause.
        #[source]
        source: Box<crate::train::rewards::ExecuteError>,
    },
    /// The run was interrupted (Ctrl-C, SIGTERM) while a batch of executions ran on a cluster:
    /// its job array was cancelled (the harness's error names the job and the signal).
    #[cfg(feature = "execute")]
    #[error("interrupted while executing completions")]
    Interrupted(#[source] Box<swerve_harness::execution::RunError>),
    /// A signal stopped training (every rank alike, at the end of a step).
    #[error("stopped at the end of a step")]
    Signalled(#[source] swerve_interrupt::Interrupted),
    /// A signal stopped training on rank 0, which saved `checkpoint` first.
    #[error("{}", stopped_line(checkpoint, *resume))]
    Stopped {
        /// The signal.
        #[source]
        signal: swerve_interrupt::Interrupted,
        /// The checkpoint the run continues from.
        checkpoint: std::path::PathBuf,
        /// Whether the command continues it with `--resume` (`trainer sft`, `trainer grpo`).
        resume: bool,
    },
    /// A checkpoint's chat template (`tokenizer_config.json` or `chat_template.jinja`) is
    /// malformed, does not compile or failed to render (`raise_exception` in the template), or
    /// the checkpoint has none although the `template` prompt format needs one.
    #[error("chat template in {}: {reason}", path.display())]
    ChatTemplate {
        /// The file the template comes from, or would.
        path: PathBuf,
        /// What is wrong, with the template's own message and line when it failed to render.
        reason: String,
    },
    /// The `template` prompt format was asked to render without a loaded chat template
    /// ([`crate::data::Prompter::for_model`] loads the model's).
    #[error("prompt format `template` needs the model's chat template, and none was loaded")]
    NoChatTemplate,
    /// `trainer serve` could not listen on its address or its server stopped on an error.
    #[error("trainer serve on {address}")]
    Serve {
        /// The address (`host:port`).
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The device `--device` names is not available to this build or could not be opened.
    #[error("device {device}: {reason}")]
    Device {
        /// The device as `--device` names it.
        device: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The memory plan's estimate exceeds what the device has (`--force` runs anyway).
    #[error("{plan}")]
    MemoryPlan {
        /// The plan, with the settings that would fit.
        plan: String,
    },
    /// A plot could not be drawn or written.
    #[error("cannot draw plot {path}: {reason}")]
    Plot {
        /// The PNG file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// What [`Error::Generation`] refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerationError {
    /// A negative or non-finite temperature.
    #[error("temperature {0} must be finite and ≥ 0")]
    Temperature(f64),
    /// `top_p` outside (0, 1].
    #[error("top_p {0} must be in (0, 1]")]
    TopP(f64),
    /// `min_p` outside [0, 1].
    #[error("min_p {0} must be in [0, 1]")]
    MinP(f64),
    /// A repetition penalty that is not finite and positive.
    #[error("repetition_penalty {0} must be finite and > 0")]
    RepetitionPenalty(f64),
    /// No prompts, or an empty one.
    #[error("every prompt needs at least one token")]
    EmptyPrompt,
    /// A prompt and the new tokens asked for past the model's context.
    #[error(
        "prompt {row} has {prompt} tokens: with {new} new tokens its sequence would reach {} \
         tokens, past the model's context of {context} (max_position_embeddings); ask for fewer \
         new tokens or shorten the prompt",
        prompt.saturating_add(*new)
    )]
    PastContext {
        /// The prompt's row (from 0).
        row: usize,
        /// Its tokens.
        prompt: usize,
        /// The new tokens asked for.
        new: usize,
        /// The model's context.
        context: usize,
    },
}

/// What [`Error::ModelInput`] refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelInputError {
    /// Ids or a mask that do not fill the batch's shape.
    #[error("a {rows}×{cols} batch needs {} ids and mask entries, got {ids} and {mask}", rows * cols)]
    BatchShape {
        /// Rows of the batch.
        rows: usize,
        /// Columns of the batch.
        cols: usize,
        /// Ids given.
        ids: usize,
        /// Mask entries given.
        mask: usize,
    },
    /// A completion start outside the sequence.
    #[error("completion_start {start} must be in 1..{len}")]
    CompletionStart {
        /// The start given.
        start: usize,
        /// The sequence length.
        len: usize,
    },
    /// A log-prob temperature that is not positive.
    #[error("temperature {0} must be positive")]
    Temperature(f64),
    /// A token id outside the vocabulary.
    #[error("token id {0} is outside the vocabulary")]
    TokenOutsideVocabulary(usize),
    /// A KV cache of another batch.
    #[error("cache has {cache} rows, batch has {batch}")]
    CacheRows {
        /// The cache's rows.
        cache: usize,
        /// The batch's.
        batch: usize,
    },
}

/// What is wrong with a checkpoint folder ([`Error::Checkpoint`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckpointProblem {
    /// No resume state: a model folder, not a checkpoint of a run.
    #[error(
        "no {} to resume from (a model folder, not a checkpoint of a run)",
        crate::checkpoint::RUN_STATE_FILE
    )]
    NoRunState,
    /// The resume state of an earlier swerve, or the Hugging Face Trainer's.
    #[error(
        "it has {} (an earlier swerve's, or the Hugging Face Trainer's) and no {} of this \
         version: its model loads as a model folder (--model), not as a run to --resume",
        crate::checkpoint::EARLIER_STATE_FILE,
        crate::checkpoint::RUN_STATE_FILE
    )]
    EarlierRunState,
    /// The optimiser state lacks a parameter's moments.
    #[error("optimiser state lacks `{0}`")]
    MissingMoments(String),
    /// `sync_ref_model` needs the synced reference, and the checkpoint has none.
    #[error(
        "`sync_ref_model = true` needs the synced reference weights, and the checkpoint has no \
         {}/ folder (it comes from a run without sync_ref_model)",
        crate::checkpoint::REFERENCE_DIR
    )]
    NoSyncedReference,
}

/// Why a line of a metrics log is not one step's metrics ([`Error::MetricsLog`]).
#[derive(Debug, thiserror::Error)]
pub enum MetricsLineError {
    /// Not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// JSON, not an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// An object without an integer `step`.
    #[error("no integer `step`")]
    NoStep,
}

/// The file or folder operation an [`Error::Io`] was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Reading a file.
    Read,
    /// Writing a file whole.
    Write,
    /// Appending to a file.
    Append,
    /// Creating a folder and its parents.
    CreateDir,
    /// Listing a folder.
    ListDir,
    /// Removing a file or a folder.
    Remove,
    /// Copying a file.
    Copy,
    /// Renaming a file or folder.
    Rename,
}

impl std::fmt::Display for IoOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Append => "append to",
            Self::CreateDir => "create the folder",
            Self::ListDir => "list the folder",
            Self::Remove => "remove",
            Self::Copy => "copy",
            Self::Rename => "rename",
        })
    }
}

/// Why settings (a TOML file, a `--set` override, a table of the demo's config) are not valid.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A `--set` item without `=`.
    #[error("not KEY=VALUE")]
    NotKeyValue,
    /// Not TOML, or not these settings (an unknown key, a value of the wrong type).
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// Not valid GRPO settings.
    #[error(transparent)]
    Grpo(#[from] crate::grpo::GrpoError),
    /// A value out of range.
    #[error(transparent)]
    Invalid(#[from] crate::train::arguments::InvalidSetting),
    /// A key that is no setting of this command.
    #[error("unknown setting `{key}`{}", suggestion.as_ref().map_or_else(String::new, |s| format!(" (did you mean `{s}`?)")))]
    Unknown {
        /// The key.
        key: String,
        /// The setting whose name is closest, when one is close.
        suggestion: Option<String>,
    },
    /// A value of the wrong type for its setting.
    #[error("`{key}`: {message}")]
    Value {
        /// The setting.
        key: String,
        /// What the parser expected and found.
        message: String,
    },
}

impl SettingsError {
    /// For one `--set` override: an unknown key named with the closest setting (not the list of
    /// every setting twice), a wrong value named with its key (not as an "invalid key").
    pub(crate) fn explained(self, key: &str) -> SettingsError {
        let toml_error = match &self {
            SettingsError::Toml(e) => Some(e),
            SettingsError::Grpo(crate::grpo::GrpoError::ConfigParse { source, .. }) => {
                Some(source.as_ref())
            }
            _ => None,
        };
        let Some(error) = toml_error else {
            return self;
        };
        let message = error.message();
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let expected = rest.split_once('`').map_or("", |(_, expected)| expected);
            let suggestion = expected
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|name| (strsim::jaro_winkler(key, name), name))
                .filter(|(score, _)| *score >= 0.85)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, name)| name.to_owned());
            return SettingsError::Unknown {
                key: key.to_owned(),
                suggestion,
            };
        }
        SettingsError::Value {
            key: key.to_owned(),
            message: message.trim().to_owned(),
        }
    }
}

/// What [`Error::Stopped`] says (and the resume hint a second signal prints): the checkpoint, and
/// the `--resume` that continues it where the command has one.
pub(crate) fn stopped_line(checkpoint: &std::path::Path, resume: bool) -> String {
    if resume {
        format!(
            "{} is saved: add `--resume {}` to the same command to continue",
            checkpoint.display(),
            checkpoint.display()
        )
    } else {
        format!("{} is saved", checkpoint.display())
    }
}

impl Error {
    /// Wraps an I/O error from `fs_err`, which already names the path in its message, keeping the
    /// operation and the path as fields too.
    pub(crate) fn io(op: IoOp, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// The trainer library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
