//! swerve's own model as an agent's policy, in-process (feature `execute`): a checkpoint answers
//! the turns of `harness agent`'s episodes (`swerve_harness::agent`) without a server. Each turn
//! renders the conversation with the checkpoint's chat template (tools shown where the template
//! reads them), samples with the trainer's sampler, and gives back the text, the Hermes-format
//! tool calls, and the sampled token ids with their log-probabilities — the ids are the ones
//! sampled, never re-encoded. The agentic trainer drives episodes through the same trait.
//!
//! A turn's generator is seeded from the policy's seed, the task and the turn's index, so an
//! episode replays the same on every run and whatever else runs beside it.

use sha2::Digest as _;
use std::path::Path;

use serde_json::Value;
use swerve_harness::agent::trajectory::{Message, Reply, ToolCall};
use swerve_harness::agent::{Policy, PolicyError, PolicyRequest};

use crate::error::{Error, Result};
use crate::generate::{RowOptions, SamplingConfig, generate_rows};
use crate::model::{CausalLm, Kernels};
use crate::prompt::chat_template::ChatTemplate;
use crate::tokenizer::Tokenizer;

/// A checkpoint answering agent turns.
pub struct ModelPolicy<D: Kernels<f32>> {
    model: CausalLm<f32, D>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    name: String,
    sampling: SamplingConfig,
}

impl<D: Kernels<f32>> ModelPolicy<D> {
    /// The checkpoint in `dir` on `dev`, named `name`, sampling as `sampling` says (its EOS and
    /// pad tokens are the checkpoint's: the config's and the template's end-of-turn token).
    /// Fails when the checkpoint has no chat template.
    pub fn load(dir: &Path, dev: &D, name: &str, mut sampling: SamplingConfig) -> Result<Self> {
        let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json"))?;
        let template = ChatTemplate::from_checkpoint(dir)?.ok_or(Error::NoChatTemplate)?;
        let model = CausalLm::<f32, D>::load(dir, dev)?;
        let mut eos = model.config.eos_token_ids.clone();
        eos.extend(template.eos_token().and_then(|t| tokenizer.token_id(t)));
        eos.dedup();
        sampling.pad_token_id = eos.first().copied().unwrap_or(0);
        sampling.eos_token_ids = eos;
        Ok(ModelPolicy {
            model,
            tokenizer,
            template,
            name: name.to_owned(),
            sampling,
        })
    }
}

/// A task's share of its turns' seeds: the first 8 bytes of its id's SHA-256.
fn task_seed(instance_id: &str) -> u64 {
    let digest = sha2::Sha256::digest(instance_id.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl<D: Kernels<f32>> Policy for ModelPolicy<D>
where
    CausalLm<f32, D>: Send + Sync,
{
    fn fingerprint(&self, _instance_id: &str) -> String {
        let s = &self.sampling;
        format!(
            "in-process {} parameters {} sampling t={} top_p={} top_k={} min_p={:?} rep={} max={} seed={}",
            self.name,
            self.model.params.num_parameters(),
            s.temperature,
            s.top_p,
            s.top_k,
            s.min_p,
            s.repetition_penalty,
            s.max_new_tokens,
            s.seed
        )
    }

    fn model_name(&self) -> String {
        self.name.clone()
    }

    fn reply(&self, request: &PolicyRequest<'_>) -> std::result::Result<Reply, PolicyError> {
        let failed = |e: &dyn std::fmt::Display| PolicyError::Failed(e.to_string());
        let messages: Vec<Value> = request.messages.iter().map(Message::openai_json).collect();
        let text = self
            .template
            .render_chat(&messages, request.tools, true)
            .map_err(|e| failed(&e))?;
        let prompt = self
            .tokenizer
            .encode(&text, false)
            .map_err(|e| failed(&e))?;
        let context = self.model.config.max_position_embeddings;
        let room = context.saturating_sub(prompt.len());
        if room == 0 {
            return Err(PolicyError::Context(format!(
                "the prompt holds {} tokens; the model's context is {context}",
                prompt.len()
            )));
        }
        let mut config = self.sampling.clone();
        config.max_new_tokens = config.max_new_tokens.min(room);
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == "assistant")
            .count() as u64;
        let options = RowOptions {
            seeds: vec![(self.sampling.seed ^ task_seed(request.instance_id), turn)],
            logprobs: true,
            top_logprobs: 0,
        };
        let (generation, _) = generate_rows(
            &self.model,
            std::slice::from_ref(&prompt),
            &config,
            &options,
        )
        .map_err(|e| failed(&e))?;
        let ids = generation.completions[0].clone();
        let content = self.tokenizer.decode(&ids, true).map_err(|e| failed(&e))?;
        let (content, calls) = match request.tools {
            Some(_) => crate::prompt::tool_calls::parse(&content),
            None => (content, Vec::new()),
        };
        let tool_calls: Vec<ToolCall> = calls
            .iter()
            .map(|c| ToolCall {
                id: c["id"].as_str().unwrap_or_default().to_owned(),
                name: c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                arguments: c["function"]["arguments"]
                    .as_str()
                    .unwrap_or("{}")
                    .to_owned(),
            })
            .collect();
        let finish_reason = if !tool_calls.is_empty() {
            "tool_calls"
        } else if generation.finished[0] {
            "stop"
        } else {
            "length"
        };
        Ok(Reply {
            content,
            tool_calls,
            completion_tokens: Some(ids.len() as u64),
            prompt_tokens: Some(prompt.len() as u64),
            logprobs: Some(generation.logprobs[0].clone()),
            token_ids: Some(ids),
            finish_reason: Some(finish_reason.to_owned()),
        })
    }
}
