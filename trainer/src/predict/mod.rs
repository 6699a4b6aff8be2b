//! SWE-bench predictions from a model: one completion per task (prompted as in training),
//! turned into a unified diff (`patch::completion_patch`). Rows without a code context get one
//! from their repository first ([`retrieval`]: files ranked by `ranking`, added within the
//! prompt's token budget).

pub(crate) mod patch;
mod ranking;
pub mod retrieval;

use crate::model::Kernels;

use crate::data::Prompter;
use crate::error::Result;
use crate::generate::{SamplingConfig, generate};
use crate::model::CausalLm;
use crate::predict::patch::completion_patch;
use crate::tokenizer::Tokenizer;
use swerve_swebench::Instance;
use swerve_swebench::Prediction;

/// One task's prediction and the completion it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    /// The predictions-file line.
    pub prediction: Prediction,
    /// The model's completion.
    pub completion: String,
    /// The SWE-RL reward of the completion against the task's oracle (−1 for a format error).
    pub swe_rl_reward: f64,
}

/// What [`predict`] calls after each batch: the batch's predictions, then the tasks done and
/// the total; an error it returns ends the run.
pub type OnBatch<'a> = dyn FnMut(&[Predicted], usize, usize) -> Result<()> + 'a;

/// How predictions are made.
#[derive(Debug, Clone, Copy)]
pub struct PredictSettings<'a> {
    /// Prompt rendering (as in training).
    pub prompter: &'a Prompter,
    /// Sampling; `seed` is offset per batch.
    pub sampling: &'a SamplingConfig,
    /// Tasks per generation batch.
    pub batch: usize,
    /// The predictions' `model_name_or_path`.
    pub model_name: &'a str,
    /// The place of `tasks`' first row among every row the run predicts (a continued run's
    /// first row after the kept ones): rows sample as their place says, wherever a run starts.
    pub first_row: usize,
}

/// Generates one completion per task, `settings.batch` tasks at a time, and converts each to a
/// prediction. `on_batch` sees each batch's predictions, then the tasks done and the total; an
/// error it returns ends the run.
pub fn predict<D: Kernels<f32>>(
    model: &CausalLm<f32, D>,
    tokenizer: &Tokenizer,
    tasks: &[Instance],
    settings: PredictSettings<'_>,
    on_batch: &mut OnBatch<'_>,
) -> Result<Vec<Predicted>> {
    let PredictSettings {
        prompter,
        sampling,
        batch,
        model_name,
        first_row,
    } = settings;
    let mut out = Vec::with_capacity(tasks.len());
    for (b, chunk) in tasks.chunks(batch.max(1)).enumerate() {
        let prompts = chunk
            .iter()
            .map(|t| tokenizer.encode(&prompter.render(t)?, prompter.add_special_tokens()))
            .collect::<Result<Vec<_>>>()?;
        // Rows are numbered across batches, so a task's sample does not depend on `batch`.
        let config = SamplingConfig {
            first_row: (first_row + b * batch.max(1)) as u64,
            ..sampling.clone()
        };
        let generation = generate(model, &prompts, &config)?;
        for (task, tokens) in chunk.iter().zip(&generation.completions) {
            let completion = tokenizer.decode(tokens, true)?;
            let reward = swerve_swe_rl::search_replace_reward(
                &task.code_context,
                &task.oracle_new_content,
                &completion,
            )
            .reward;
            out.push(Predicted {
                prediction: Prediction {
                    instance_id: task.instance_id.clone(),
                    model_name_or_path: Some(model_name.to_owned()),
                    model_patch: Some(completion_patch(task, &completion).unwrap_or_default()),
                },
                completion,
                swe_rl_reward: reward,
            });
        }
        on_batch(&out[b * batch.max(1)..], out.len(), tasks.len())?;
    }
    Ok(out)
}
