//! The model's thread: it owns the model, takes the requests waiting when it is free, runs those
//! that sample alike as one batch (each row with its own generator, so an answer does not depend
//! on what it was batched with), and answers each with its choices: text cut at the first stop
//! string, tokens, log-probabilities and why each ended.

use std::collections::VecDeque;
use std::sync::mpsc::Receiver;

use dfdx::prelude::Dtype;

use super::params::Params;
use crate::generate::{RowOptions, SamplingConfig, generate_rows};
use crate::model::{CausalLm, Kernels};
use crate::tokenizer::Tokenizer;

/// One request for the model.
pub(crate) struct Job {
    /// The prompt's tokens.
    pub prompt: Vec<u32>,
    /// Its sampling parameters.
    pub params: Params,
    /// Most new tokens (the request's `max_tokens`, or what the context leaves).
    pub max_new_tokens: usize,
    /// The seed of its rows' generators.
    pub seed: u64,
    /// Where the answer goes.
    pub reply: tokio::sync::oneshot::Sender<Result<Vec<Choice>, String>>,
}

/// One completion of a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Choice {
    /// The text (special tokens left out, cut before a stop string).
    pub text: String,
    /// The sampled tokens (up to the one that completed a stop string).
    pub tokens: Vec<u32>,
    /// Their log-probabilities (when asked).
    pub logprobs: Vec<f64>,
    /// The most likely tokens per step (when asked).
    pub top: Vec<Vec<(u32, f64)>>,
    /// `stop` (an end-of-sequence token or a stop string) or `length`.
    pub finish_reason: &'static str,
}

/// What the worker needs besides the model.
pub(crate) struct Worker<'m, E: Dtype, D: Kernels<E>> {
    pub model: &'m CausalLm<E, D>,
    pub tokenizer: &'m Tokenizer,
    pub eos: Vec<u32>,
    pub pad: u32,
    pub max_batch: usize,
}

/// Requests that may share a batch: every sampling setting but the seed equal.
fn batch_key(job: &Job) -> (u64, u64, usize, Option<u64>, u64, usize, bool, usize) {
    let p = &job.params;
    (
        p.temperature.to_bits(),
        p.top_p.to_bits(),
        p.top_k,
        p.min_p.map(f64::to_bits),
        p.repetition_penalty.to_bits(),
        job.max_new_tokens,
        p.logprobs,
        p.top_logprobs,
    )
}

impl<E: Dtype, D: Kernels<E>> Worker<'_, E, D> {
    /// Serves jobs until every sender is gone.
    pub(crate) fn run(&self, jobs: &Receiver<Job>) {
        let mut waiting: VecDeque<Job> = VecDeque::new();
        loop {
            let first = match waiting.pop_front() {
                Some(job) => job,
                None => match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                },
            };
            // Everything that came meanwhile either joins this batch or waits for the next.
            while let Ok(job) = jobs.try_recv() {
                waiting.push_back(job);
            }
            let key = batch_key(&first);
            let mut rows = first.params.n;
            let mut batch = vec![first];
            let mut rest = VecDeque::new();
            for job in waiting.drain(..) {
                if batch_key(&job) == key && rows + job.params.n <= self.max_batch {
                    rows += job.params.n;
                    batch.push(job);
                } else {
                    rest.push_back(job);
                }
            }
            waiting = rest;
            self.answer(batch);
        }
    }

    fn answer(&self, batch: Vec<Job>) {
        let first = &batch[0];
        let p = &first.params;
        let config = SamplingConfig {
            temperature: p.temperature,
            top_p: p.top_p,
            top_k: p.top_k,
            min_p: p.min_p,
            repetition_penalty: p.repetition_penalty,
            max_new_tokens: first.max_new_tokens,
            eos_token_ids: self.eos.clone(),
            pad_token_id: self.pad,
            seed: 0,
            first_row: 0,
        };
        let mut prompts = Vec::new();
        let mut seeds = Vec::new();
        for job in &batch {
            for row in 0..job.params.n {
                prompts.push(job.prompt.clone());
                seeds.push((job.seed, row as u64));
            }
        }
        let options = RowOptions {
            seeds,
            logprobs: p.logprobs,
            top_logprobs: p.top_logprobs,
        };
        tracing::debug!(
            requests = batch.len(),
            rows = prompts.len(),
            "sampling a batch"
        );
        let generated = generate_rows(self.model, &prompts, &config, &options);
        let (generation, mut top) = match generated {
            Ok(done) => done,
            Err(e) => {
                let message = e.to_string();
                for job in batch {
                    let _ = job.reply.send(Err(message.clone()));
                }
                return;
            }
        };
        let mut row = 0;
        for job in batch {
            let mut choices = Vec::new();
            for _ in 0..job.params.n {
                let tokens = generation.completions[row].clone();
                let logprobs = generation.logprobs[row].clone();
                let top = std::mem::take(&mut top[row]);
                let finished = generation.finished[row];
                choices.push(self.choice(tokens, logprobs, top, finished, &job.params.stop));
                row += 1;
            }
            let _ = job.reply.send(choices.into_iter().collect());
        }
    }

    /// A completion's text, cut at its first stop string.
    fn choice(
        &self,
        mut tokens: Vec<u32>,
        mut logprobs: Vec<f64>,
        mut top: Vec<Vec<(u32, f64)>>,
        finished: bool,
        stop: &[String],
    ) -> Result<Choice, String> {
        let decode = |ids: &[u32]| self.tokenizer.decode(ids, true).map_err(|e| e.to_string());
        let text = decode(&tokens)?;
        let first_stop = stop.iter().filter_map(|s| text.find(s.as_str())).min();
        let Some(at) = first_stop else {
            return Ok(Choice {
                text,
                tokens,
                logprobs,
                top,
                finish_reason: if finished { "stop" } else { "length" },
            });
        };
        // The fewest tokens whose text holds a stop string (more tokens only add text).
        let holds_stop = |k: usize| -> Result<bool, String> {
            let t = decode(&tokens[..k])?;
            Ok(stop.iter().any(|s| t.contains(s.as_str())))
        };
        let (mut lo, mut hi) = (1, tokens.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if holds_stop(mid)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        tokens.truncate(lo);
        logprobs.truncate(lo.min(logprobs.len()));
        top.truncate(lo.min(top.len()));
        Ok(Choice {
            text: text[..at].to_owned(),
            tokens,
            logprobs,
            top,
            finish_reason: "stop",
        })
    }
}
