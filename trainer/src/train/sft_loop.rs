//! Supervised fine-tuning on prompt/completion pairs: the loss is the mean negative log-likelihood
//! of the completion tokens (and the EOS appended to each completion) over all the completion
//! tokens of an optimiser step; prompt tokens carry no loss. AdamW with global-norm clipping,
//! a warm-up and decay schedule and gradient accumulation, as in TRL's `SFTTrainer` with
//! `completion_only_loss`.
//!
//! [`Sft`] is the loop's `Objective`; the training driver (`crate::train::driver`) runs its
//! steps, logs and checkpoints them. Examples are visited epoch by epoch in a seeded order; like
//! GRPO, the run is a function of its seed and resumes exactly from a checkpoint.
//!
//! With data-parallel ranks ([`crate::ranks`]), every micro-batch is the one process's
//! micro-batch of `per_device_train_batch_size × ranks` examples, each rank computing its share
//! with the loss normalised by the completion tokens of the whole step; losses, metric counts
//! and gradients are summed over ranks before clipping and AdamW.

use dfdx::prelude::*;
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};
use serde::{Deserialize, Deserializer};

use crate::checkpoint::RunState;
use crate::data::SftExample;
use crate::error::{Error, Result};
use crate::model::{CausalLm, Kernels};
use crate::ranks::Ranks;
use crate::report::plot;
use crate::tokenizer::Tokenizer;
use crate::train::arguments::{TrainingArguments, check, deserialize_flat};
use crate::train::batch::{pack_to, pad_token};
use crate::train::derive_seed;
use crate::train::driver::{Objective, Resume, RunError, StepContext, Trainer};
use crate::train::plan::PlanInputs;

const STREAM_ORDER: u64 = 11;

/// SFT settings under TRL's `SFTConfig` / `TrainingArguments` names. Unknown keys are rejected.
// `remote = "Self"`: the derived deserializer reads SFT's own keys, as an inherent
// `SftConfig::deserialize`, which the `Deserialize` impl below runs beside the training
// arguments' keys.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct SftConfig {
    /// The settings every loop shares, at the top level of the table. SFT's defaults:
    /// `learning_rate` 2e-5 (TRL's `SFTConfig`) and `gradient_checkpointing` true; the others
    /// are `TrainingArguments`'.
    #[serde(skip)]
    pub training: TrainingArguments,
    /// Longest sequence (prompt + completion + EOS) in tokens; longer examples lose the start
    /// of their prompt, then the end of their completion. Default 1024.
    pub max_length: usize,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            training: TrainingArguments {
                learning_rate: 2e-5,
                gradient_checkpointing: true,
                ..TrainingArguments::default()
            },
            max_length: 1024,
        }
    }
}

impl<'de> Deserialize<'de> for SftConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        // `SftConfig::deserialize` is the derived, inherent one (own keys only).
        let (config, training) =
            deserialize_flat(deserializer, SftConfig::default().training, |own| {
                SftConfig::deserialize(own)
            })?;
        Ok(Self { training, ..config })
    }
}

impl SftConfig {
    /// Parses TOML with the names above and checks the values.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let config = Self::parse_toml(text).map_err(|e| Error::SftConfig(e.into()))?;
        config.validate()?;
        Ok(config)
    }

    /// The settings a TOML text spells (missing keys take their defaults), not yet
    /// [validated](Self::validate): errors are the text's own (syntax, unknown keys, types).
    pub(crate) fn parse_toml(text: &str) -> std::result::Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Checks ranges; every error names the field.
    pub fn validate(&self) -> Result<()> {
        self.training
            .validate()
            .and_then(|()| {
                check("max_length", self.max_length >= 2, || {
                    format!("must be at least 2, got {}", self.max_length)
                })
            })
            .map_err(|e| Error::SftConfig(e.into()))
    }
}

/// A tokenised example: prompt ids and completion ids (EOS included).
type Tokenised = (Vec<u32>, Vec<u32>);

/// Supervised fine-tuning as an `Objective` of the training driver: the examples, tokenised,
/// and the settings.
pub struct Sft {
    config: SftConfig,
    examples: Vec<Tokenised>,
    pad: u32,
    /// Examples per micro-batch over all ranks.
    micro_batch_examples: u64,
}

/// An SFT run in progress.
pub type SftTrainer<D> = Trainer<D, Sft>;

impl<D: Kernels<f32>> SftTrainer<D> {
    /// Prepares an SFT run of `model` on `examples` on `ranks` (this process is one of them;
    /// [`Ranks::single`] alone); `resume` continues from a checkpoint's optimiser and state.
    pub fn new(
        config: SftConfig,
        examples: &[SftExample],
        tokenizer: &Tokenizer,
        model: CausalLm<f32, D>,
        resume: Option<Resume<D>>,
        ranks: Ranks,
    ) -> Result<Self> {
        let objective = Sft::new(config, examples, tokenizer, &model, &ranks)?;
        Trainer::with_objective(objective, model, resume, ranks)
    }
}

impl Sft {
    /// Tokenises `examples` for `model` (with its EOS after each completion) and checks the
    /// settings.
    pub fn new<D: Kernels<f32>>(
        config: SftConfig,
        examples: &[SftExample],
        tokenizer: &Tokenizer,
        model: &CausalLm<f32, D>,
        ranks: &Ranks,
    ) -> Result<Self> {
        config.validate()?;
        if examples.is_empty() {
            return Err(Error::Run(RunError::NoExamples));
        }
        let eos = *model
            .config
            .eos_token_ids
            .first()
            .ok_or(Error::Run(RunError::NoEosToken))?;
        let context = model.config.max_position_embeddings;
        let examples = examples
            .iter()
            .enumerate()
            .map(|(row, e)| {
                // A prompt rendered through a chat template already starts with the BOS.
                let mut prompt = tokenizer.encode(&e.prompt, e.add_special_tokens)?;
                let mut completion = tokenizer.encode(&e.completion, false)?;
                completion.push(eos);
                let max = config.max_length;
                if prompt.len() + completion.len() > max {
                    let keep_prompt = prompt
                        .len()
                        .min(max.saturating_sub(completion.len()))
                        .max(1);
                    prompt.drain(..prompt.len() - keep_prompt);
                    completion.truncate(max - keep_prompt);
                }
                let tokens = prompt.len() + completion.len();
                if tokens > context {
                    return Err(Error::Run(RunError::PastContext {
                        row,
                        tokens,
                        context,
                    }));
                }
                Ok((prompt, completion))
            })
            .collect::<Result<Vec<_>>>()?;
        let micro_batch_examples =
            (config.training.per_device_train_batch_size * ranks.world_size()) as u64;
        Ok(Self {
            pad: pad_token(model),
            config,
            examples,
            micro_batch_examples,
        })
    }

    /// The example at position `k` of the run's stream: epoch by epoch, each in seeded order.
    fn example_at(&self, k: u64) -> usize {
        let n = self.examples.len() as u64;
        let mut order: Vec<usize> = (0..n as usize).collect();
        let seed = derive_seed(self.config.training.seed, STREAM_ORDER, k / n);
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        order[(k % n) as usize]
    }
}

impl<D: Kernels<f32>> Objective<D> for Sft {
    const KIND: &'static str = "sft";
    const PLOTS: &'static [&'static str] = &plot::SFT_PLOTS;

    fn arguments(&self) -> &TrainingArguments {
        &self.config.training
    }

    fn total_steps(&self, world_size: usize) -> u64 {
        let args = &self.config.training;
        let per_step =
            args.per_device_train_batch_size * args.gradient_accumulation_steps * world_size;
        args.total_steps(|epochs| epochs * self.examples.len() as f64 / per_step as f64)
    }

    /// The mean negative log-likelihood of the step's completion tokens, over
    /// `gradient_accumulation_steps` micro-batches.
    fn accumulate(
        &mut self,
        cx: StepContext<'_, D>,
        mut grads: Gradients<f32, D>,
    ) -> Result<(f64, Gradients<f32, D>)> {
        let bs = self.micro_batch_examples;
        let micro: Vec<Vec<usize>> = (0..self.config.training.gradient_accumulation_steps as u64)
            .map(|m| {
                let first = (cx.state.micro_step + m) * bs;
                (first..first + bs).map(|k| self.example_at(k)).collect()
            })
            .collect();
        let total_tokens: usize = micro
            .iter()
            .flatten()
            .map(|&i| self.examples[i].1.len())
            .sum();
        let seen: u64 = micro
            .iter()
            .flatten()
            .map(|&i| (self.examples[i].0.len() + self.examples[i].1.len()) as u64)
            .sum();
        let mut loss_sum = 0.0;
        for rows in &micro {
            // Packed as wide as the whole micro-batch (over all ranks).
            let width = (
                rows.iter()
                    .map(|&i| self.examples[i].0.len())
                    .max()
                    .unwrap_or(0),
                rows.iter()
                    .map(|&i| self.examples[i].1.len())
                    .max()
                    .unwrap_or(0),
            );
            let rows = &rows[cx.ranks.share(rows.len())];
            let pairs: Vec<(&[u32], &[u32])> = rows
                .iter()
                .map(|&i| (self.examples[i].0.as_slice(), self.examples[i].1.as_slice()))
                .collect();
            let packed = pack_to(&pairs, self.pad, width)?;
            let out = cx
                .model
                .token_logps(&packed.batch, packed.completion_start, 1.0, grads)?;
            let (rows_n, cols) = *out.logps.shape();
            let weights: Vec<f32> = packed
                .completion_mask
                .iter()
                .map(|&m| (-m / total_tokens as f64) as f32)
                .collect();
            let entropy = out.entropy.as_vec();
            let tokens: f64 = packed.completion_mask.iter().sum();
            let entropy_sum: f64 = entropy
                .iter()
                .zip(&packed.completion_mask)
                .map(|(&e, &m)| f64::from(e) * m)
                .sum();
            // The whole micro-batch's mean, over all ranks.
            let mut totals = [entropy_sum, tokens];
            cx.ranks.sum(&mut totals)?;
            let [entropy_sum, tokens] = totals;
            cx.metrics.record("entropy", entropy_sum / tokens.max(1.0));
            let dev = out.logps.device().clone();
            let loss = (out.logps * dev.tensor_from_vec(weights, (rows_n, cols))).sum::<(), _>();
            loss_sum += f64::from(loss.as_vec()[0]);
            grads = cx.model.params.keep_param_grads(loss.backward());
        }
        cx.state.micro_step += micro.len() as u64;
        cx.state.num_tokens += seen;
        Ok((loss_sum, grads))
    }

    fn epoch(&self, state: &RunState) -> f64 {
        (state.micro_step * self.micro_batch_examples) as f64 / self.examples.len() as f64
    }

    /// Micro-batches of the longest example, all of it counted as completion (the worst case).
    fn plan_inputs(&self, model: PlanInputs, _ranks: &Ranks) -> PlanInputs {
        let longest = self
            .examples
            .iter()
            .map(|(p, c)| p.len() + c.len())
            .max()
            .unwrap_or(0);
        PlanInputs {
            rows: self.config.training.per_device_train_batch_size,
            seq: longest,
            completion: longest.saturating_sub(1),
            ..model
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use serde_json::json;
    use swerve_swebench::Instance;

    use super::*;
    use crate::data::{PromptStyle, Prompter, gold_examples};
    use crate::prompt::PromptFormat;

    const BOS: u32 = 3;

    /// A chat template writes the BOS itself; the tokenizer's post-processor must not add a
    /// second one (Llama 3's `{{ bos_token }}` with its `TemplateProcessing`).
    #[test]
    fn a_chat_template_prompt_starts_with_one_bos() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
        let dir = tempfile::tempdir().unwrap();
        // The fixture's word-level tokenizer with `w0` (id 3) as a BOS its post-processor adds.
        let mut tokenizer: serde_json::Value =
            serde_json::from_str(&fs_err::read_to_string(fixture.join("tokenizer.json")).unwrap())
                .unwrap();
        let bos = json!({"SpecialToken": {"id": "w0", "type_id": 0}});
        tokenizer["post_processor"] = json!({
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"w0": {"id": "w0", "ids": [BOS], "tokens": ["w0"]}},
        });
        fs_err::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
        let config = json!({
            "chat_template": "{{ bos_token }}{% for m in messages %} {{ m.content }}{% endfor %}",
            "bos_token": "w0",
            "eos_token": "<eos>",
        });
        fs_err::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
        let tokenizer = Tokenizer::from_file(&dir.path().join("tokenizer.json")).unwrap();
        assert_eq!(tokenizer.encode("w5", true).unwrap(), [BOS, 8]);

        let task = Instance {
            instance_id: "o__r-1".into(),
            problem_statement: Some("w5 w6".into()),
            code_context: BTreeMap::from([("m.py".to_owned(), "w7\n".to_owned())]),
            oracle_new_content: BTreeMap::from([("m.py".to_owned(), "w8\n".to_owned())]),
            ..Instance::default()
        };
        let style = PromptStyle {
            format: PromptFormat::Template,
            focus: None,
        };
        let prompter = Prompter::for_model(style, dir.path()).unwrap();
        let mut examples = gold_examples(&[task], &prompter).unwrap();
        assert!(
            examples[0].prompt.starts_with("w0 "),
            "{}",
            examples[0].prompt
        );
        // A plain prompt/completion pair still gets the tokenizer's BOS.
        examples.push(SftExample {
            prompt: "w5 w6".into(),
            completion: "w9".into(),
            add_special_tokens: true,
        });
        let mut model = CausalLm::<f32, Cpu>::load(&fixture, &Cpu::default()).unwrap();
        // The templated prompt is longer than the fixture's 128 positions: a model of a longer
        // context takes it whole (what is checked here is its first tokens).
        model.config.max_position_embeddings = 4096;
        let sft = Sft::new(
            SftConfig::default(),
            &examples,
            &tokenizer,
            &model,
            &Ranks::single(),
        )
        .unwrap();
        let templated = &sft.examples[0].0;
        assert_eq!(templated[0], BOS);
        assert_ne!(templated[1], BOS, "two BOS tokens: {templated:?}");
        assert_eq!(sft.examples[1].0, [BOS, 8, 9]);
        // In the fixture's own 128 positions the templated example does not fit max_length's
        // 1024: refused, naming it.
        model.config.max_position_embeddings = 128;
        let refused = Sft::new(
            SftConfig::default(),
            &examples,
            &tokenizer,
            &model,
            &Ranks::single(),
        )
        .err()
        .expect("an example past the context is refused");
        assert!(
            matches!(
                refused,
                Error::Run(RunError::PastContext {
                    row: 0,
                    context: 128,
                    ..
                })
            ),
            "{refused:?}"
        );
    }
}
