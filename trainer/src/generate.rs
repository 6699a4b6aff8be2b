//! Batched sampling with a KV cache: repetition penalty, temperature, top-k, top-p, min-p (in
//! `transformers`' order), EOS and a new-token limit,
//! from seeded generators so that a run is reproducible. Each row draws from a generator of its
//! own, seeded with the config's seed and the row's index in the whole batch
//! ([`SamplingConfig::first_row`] + its place here), so a row's completion does not depend on
//! which other rows share its batch: data-parallel ranks that each sample a share of a batch
//! get the completions one process would.
//!
//! Prompts are left-padded together and run through the model once; each step then feeds one
//! token per row on top of the cache. Rows that have produced an EOS keep receiving a masked
//! padding token until every row is done or the limit is reached.

use dfdx::prelude::Dtype;
use rand::{Rng, SeedableRng, rngs::StdRng};
use rayon::prelude::*;

use crate::error::{Error, GenerationError, Result};
use crate::model::{CausalLm, Kernels, KvCache, TokenBatch};
use crate::train::derive_seed;

/// Sampling settings (defaults follow TRL's `GRPOConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingConfig {
    /// Logits are divided by this; 0 means greedy decoding. Default 1.0.
    pub temperature: f64,
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to at least this.
    /// Default 1.0 (off).
    pub top_p: f64,
    /// Keep only the `top_k` most likely tokens; 0 is off (the default).
    pub top_k: usize,
    /// Min-p sampling: drop tokens less likely than `min_p` times the most likely one (after
    /// top-k and top-p). Default `None` (off).
    pub min_p: Option<f64>,
    /// Repetition penalty over every earlier token of the row (prompt included): a logit `x` of
    /// such a token becomes `x · p` when negative, `x / p` otherwise. Default 1.0 (off).
    pub repetition_penalty: f64,
    /// Most tokens generated per row; default 512 (`max_completion_length`).
    pub max_new_tokens: usize,
    /// Tokens that end a completion (included in it). Default none.
    pub eos_token_ids: Vec<u32>,
    /// Token fed (masked) to finished rows and used to left-pad prompts; default 0.
    pub pad_token_id: u32,
    /// Seed of the sampling generators; default 0.
    pub seed: u64,
    /// The index of the first prompt's row in the whole batch that `seed` serves (its rows'
    /// generators are those of rows `first_row..`); default 0.
    pub first_row: u64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: None,
            repetition_penalty: 1.0,
            max_new_tokens: 512,
            eos_token_ids: Vec::new(),
            pad_token_id: 0,
            seed: 0,
            first_row: 0,
        }
    }
}

impl SamplingConfig {
    fn validate(&self) -> Result<()> {
        let bad = |e| Err(Error::Generation(e));
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad(GenerationError::Temperature(self.temperature));
        }
        if self.top_p.is_nan() || self.top_p <= 0.0 || self.top_p > 1.0 {
            return bad(GenerationError::TopP(self.top_p));
        }
        if let Some(min_p) = self.min_p
            && !(0.0..=1.0).contains(&min_p)
        {
            return bad(GenerationError::MinP(min_p));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(GenerationError::RepetitionPenalty(self.repetition_penalty));
        }
        Ok(())
    }
}

/// Completions of a batch of prompts.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// New tokens per prompt, up to and including the first EOS.
    pub completions: Vec<Vec<u32>>,
    /// Whether each completion ended with an EOS (false: it hit `max_new_tokens`).
    pub finished: Vec<bool>,
    /// Per completion token, its log-probability under the model's own distribution (the log
    /// softmax of the raw logits, before the repetition penalty, temperature and truncation:
    /// what vLLM reports by default); only when [`RowOptions::logprobs`] asks, else empty.
    pub logprobs: Vec<Vec<f64>>,
}

/// Where each row's generator comes from in [`generate_rows`]: a seed and a row index of its own
/// (a server's requests each with their seed, batched together), and how many of the most
/// likely tokens to report per step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowOptions {
    /// `(seed, row)` per prompt: its generator is the one [`row_rng`] gives row `row` of a
    /// call seeded `seed` with `first_row` 0. Empty: every row's as [`generate`] makes it.
    pub seeds: Vec<(u64, u64)>,
    /// Compute each sampled token's log-probability ([`Generation::logprobs`], left empty
    /// otherwise: a log softmax over the vocabulary per row and step).
    pub logprobs: bool,
    /// The most likely tokens reported per step with their log-probabilities (0: none).
    pub top_logprobs: usize,
}

/// Per completion token, the most likely tokens and their log-probabilities, most likely first.
pub type TopLogprobs = Vec<Vec<Vec<(u32, f64)>>>;

/// [`generate`] with per-row generators and the top log-probabilities per step.
pub fn generate_rows<E: Dtype, D: Kernels<E>>(
    model: &CausalLm<E, D>,
    prompts: &[Vec<u32>],
    config: &SamplingConfig,
    options: &RowOptions,
) -> Result<(Generation, TopLogprobs)> {
    sample_rows(model, prompts, config, options, &mut |_, _| {})
}

/// Samples a completion for every prompt.
pub fn generate<E: Dtype, D: Kernels<E>>(
    model: &CausalLm<E, D>,
    prompts: &[Vec<u32>],
    config: &SamplingConfig,
) -> Result<Generation> {
    generate_streaming(model, prompts, config, &mut |_, _| {})
}

/// [`generate`], calling `on_done(row, completion)` as soon as each row's completion is final
/// (at its EOS, or when the limit ends every row still running), so that the caller can start
/// working on it while the other rows are still being sampled. The result is the same as
/// [`generate`]'s.
pub(crate) fn generate_streaming<E: Dtype, D: Kernels<E>>(
    model: &CausalLm<E, D>,
    prompts: &[Vec<u32>],
    config: &SamplingConfig,
    on_done: &mut dyn FnMut(usize, &[u32]),
) -> Result<Generation> {
    let (generation, _) = sample_rows(model, prompts, config, &RowOptions::default(), on_done)?;
    for (row, completion) in generation.completions.iter().enumerate() {
        if !generation.finished[row] {
            on_done(row, completion);
        }
    }
    Ok(generation)
}

/// The generator of the `row`-th prompt of a [`generate`] call.
pub fn row_rng(config: &SamplingConfig, row: usize) -> StdRng {
    StdRng::seed_from_u64(derive_seed(config.seed, 0, config.first_row + row as u64))
}

fn sample_rows<E: Dtype, D: Kernels<E>>(
    model: &CausalLm<E, D>,
    prompts: &[Vec<u32>],
    config: &SamplingConfig,
    options: &RowOptions,
    on_done: &mut dyn FnMut(usize, &[u32]),
) -> Result<(Generation, TopLogprobs)> {
    config.validate()?;
    if prompts.is_empty() || prompts.iter().any(Vec::is_empty) {
        return Err(Error::Generation(GenerationError::EmptyPrompt));
    }
    // Checked before any work: a sequence past the model's context is refused, not sampled for
    // minutes into positions the model never saw.
    let context = model.config.max_position_embeddings;
    if let Some((row, prompt)) = prompts
        .iter()
        .enumerate()
        .find(|(_, p)| p.len().saturating_add(config.max_new_tokens) > context)
    {
        return Err(Error::Generation(GenerationError::PastContext {
            row,
            prompt: prompt.len(),
            new: config.max_new_tokens,
            context,
        }));
    }
    let rows = prompts.len();
    let mut rngs: Vec<StdRng> = match options.seeds.as_slice() {
        [] => (0..rows).map(|r| row_rng(config, r)).collect(),
        seeds => {
            assert_eq!(seeds.len(), rows, "one seed per prompt");
            seeds
                .iter()
                .map(|&(seed, row)| StdRng::seed_from_u64(derive_seed(seed, 0, row)))
                .collect()
        }
    };
    let mut completions = vec![Vec::new(); rows];
    let mut finished = vec![false; rows];
    let mut logprobs = vec![Vec::new(); rows];
    let mut top: TopLogprobs = vec![Vec::new(); rows];
    if config.max_new_tokens == 0 {
        return Ok((
            Generation {
                completions,
                finished,
                logprobs,
            },
            top,
        ));
    }
    let batch = TokenBatch::left_padded(prompts, config.pad_token_id)?;
    let mut cache = KvCache::new(rows);
    let mut logits = model.forward_cached(&batch, &mut cache)?;
    let vocab = model.config.vocab_size;
    for step in 0..config.max_new_tokens {
        let host: Vec<f64> = logits
            .as_vec()
            .into_iter()
            .map(|x| x.to_f64().unwrap_or(f64::NAN))
            .collect();
        // One draw per running row from the row's own generator; then the rows are sampled in
        // parallel.
        let draws: Vec<Option<f64>> = finished
            .iter()
            .zip(&mut rngs)
            .map(|(&done, rng)| (!done && config.temperature != 0.0).then(|| rng.r#gen::<f64>()))
            .collect();
        // Per running row: the token, its log-probability and the most likely tokens.
        type Sampled = Option<(u32, f64, Vec<(u32, f64)>)>;
        let sampled: Vec<Sampled> = (0..rows)
            .into_par_iter()
            .map(|row| {
                let logits = &host[row * vocab..(row + 1) * vocab];
                (!finished[row]).then(|| {
                    let token = if config.repetition_penalty == 1.0 {
                        sample_with(logits, config, draws[row])
                    } else {
                        let earlier = prompts[row].iter().chain(&completions[row]);
                        let penalised = repetition_penalty(logits, earlier, config);
                        sample_with(&penalised, config, draws[row])
                    };
                    let (logprob, best) = if options.logprobs || options.top_logprobs > 0 {
                        raw_logprobs(logits, token, options.top_logprobs)
                    } else {
                        (f64::NAN, Vec::new())
                    };
                    (token, logprob, best)
                })
            })
            .collect();
        let mut next = vec![config.pad_token_id; rows];
        let mut live = vec![false; rows];
        for (row, token) in sampled.into_iter().enumerate() {
            let Some((token, logprob, best)) = token else {
                continue;
            };
            if options.logprobs {
                logprobs[row].push(logprob);
            }
            if options.top_logprobs > 0 {
                top[row].push(best);
            }
            completions[row].push(token);
            finished[row] = config.eos_token_ids.contains(&token);
            if finished[row] {
                on_done(row, &completions[row]);
            }
            next[row] = token;
            live[row] = true;
        }
        if finished.iter().all(|&f| f) || step + 1 == config.max_new_tokens {
            break;
        }
        let batch = TokenBatch::new(next, live, rows, 1)?;
        logits = model.forward_cached(&batch, &mut cache)?;
    }
    Ok((
        Generation {
            completions,
            finished,
            logprobs,
        },
        top,
    ))
}

/// The log-probability of `token` under the log softmax of `logits`, and the `top` most likely
/// tokens with theirs (most likely first).
fn raw_logprobs(logits: &[f64], token: u32, top: usize) -> (f64, Vec<(u32, f64)>) {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_total = max + logits.iter().map(|&x| (x - max).exp()).sum::<f64>().ln();
    let best = if top == 0 {
        Vec::new()
    } else {
        descending(logits)
            .into_iter()
            .take(top)
            .map(|i| (i, logits[i as usize] - log_total))
            .collect()
    };
    (logits[token as usize] - log_total, best)
}

/// `logits` with `transformers`' `RepetitionPenaltyLogitsProcessor` applied: the logit `x` of
/// every distinct token of `earlier` becomes `x · p` when `x < 0`, else `x / p`.
pub fn repetition_penalty<'a>(
    logits: &[f64],
    earlier: impl IntoIterator<Item = &'a u32>,
    config: &SamplingConfig,
) -> Vec<f64> {
    let mut out = logits.to_vec();
    let penalty = config.repetition_penalty;
    let mut seen = vec![false; logits.len()];
    for &token in earlier {
        let Some(done) = seen.get_mut(token as usize) else {
            continue;
        };
        if !std::mem::replace(done, true) {
            let x = logits[token as usize];
            out[token as usize] = if x < 0.0 { x * penalty } else { x / penalty };
        }
    }
    out
}

/// Draws one token from `logits` after temperature, top-k, top-p and min-p (in that order, as
/// Hugging Face applies them; the repetition penalty, which needs the row's earlier tokens,
/// comes before, see [`repetition_penalty`]). Greedy decoding (temperature 0) draws nothing
/// from `rng`.
pub fn sample(logits: &[f64], config: &SamplingConfig, rng: &mut impl Rng) -> u32 {
    let draw = (config.temperature != 0.0).then(|| rng.r#gen::<f64>());
    sample_with(logits, config, draw)
}

/// The scores `generate` samples from, as `transformers`' warpers leave them: `logit / T` for
/// the tokens that temperature, top-k, top-p and min-p keep, −∞ for the others (apply
/// [`repetition_penalty`] to `logits` first).
pub fn processed_logits(logits: &[f64], config: &SamplingConfig) -> Vec<f64> {
    let temperature = if config.temperature == 0.0 {
        1.0
    } else {
        config.temperature
    };
    let mut out = vec![f64::NEG_INFINITY; logits.len()];
    let (order, _) = kept_tokens(logits, config, temperature);
    for i in order {
        out[i as usize] = logits[i as usize] / temperature;
    }
    out
}

/// The tokens temperature `temperature`, top-k, top-p and min-p keep, most likely first, with
/// their probabilities renormalised over the tokens top-k and top-p keep.
fn kept_tokens(logits: &[f64], config: &SamplingConfig, temperature: f64) -> (Vec<u32>, Vec<f64>) {
    let mut order = descending(logits);
    if config.top_k > 0 {
        order.truncate(config.top_k);
    }
    let max = logits[order[0] as usize] / temperature;
    let mut probs: Vec<f64> = order
        .iter()
        .map(|&i| (logits[i as usize] / temperature - max).exp())
        .collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    if config.top_p < 1.0 {
        // Keep the smallest prefix whose mass reaches top_p (always at least one token).
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .position(|&p| {
                mass += p;
                mass >= config.top_p
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(keep);
        order.truncate(keep);
    }
    if let Some(min_p) = config.min_p {
        // Relative to the most likely token, so the renormalisation above does not matter.
        let floor = min_p * probs[0];
        let keep = probs.iter().take_while(|&&p| p >= floor).count().max(1);
        probs.truncate(keep);
        order.truncate(keep);
    }
    (order, probs)
}

/// [`sample`] with its uniform draw in `[0, 1)` taken beforehand (`None` when greedy).
fn sample_with(logits: &[f64], config: &SamplingConfig, draw: Option<f64>) -> u32 {
    let Some(draw) = draw.filter(|_| config.temperature != 0.0) else {
        return logits
            .iter()
            .enumerate()
            .fold((0, f64::NEG_INFINITY), |best, (i, &x)| {
                if x > best.1 { (i, x) } else { best }
            })
            .0 as u32;
    };
    let (order, probs) = kept_tokens(logits, config, config.temperature);
    let total: f64 = probs.iter().sum();
    let mut u = draw * total;
    for (&i, &p) in order.iter().zip(&probs) {
        if u < p {
            return i;
        }
        u -= p;
    }
    order[probs.len() - 1]
}

/// The indices of `logits` from the largest value to the smallest in `f64::total_cmp`'s order,
/// equal values in index order (what a stable sort gives), by a least-significant-digit radix
/// sort of the values' order-preserving bit patterns: a vocabulary of 150k sorts in well under
/// a millisecond, several times faster than a comparison sort, which sampling paid per row per
/// token.
fn descending(logits: &[f64]) -> Vec<u32> {
    // Ascending keys are descending values: the total order's bit pattern, inverted.
    let keys: Vec<u64> = logits
        .iter()
        .map(|&x| {
            let bits = x.to_bits();
            let ascending = if bits >> 63 == 1 {
                !bits
            } else {
                bits | 1 << 63
            };
            !ascending
        })
        .collect();
    let n = keys.len();
    let mut counts = vec![[0usize; 256]; 8];
    for &k in &keys {
        for (byte, count) in counts.iter_mut().enumerate() {
            count[(k >> (8 * byte)) as usize & 0xff] += 1;
        }
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut scratch = vec![0u32; n];
    for (byte, count) in counts.iter().enumerate() {
        // A byte every key shares orders nothing (the low bytes of f32 values widened to f64).
        if count.contains(&n) {
            continue;
        }
        let mut next = [0usize; 256];
        let mut at = 0;
        for (slot, &c) in next.iter_mut().zip(count) {
            *slot = at;
            at += c;
        }
        // Stable: within one byte value, the earlier order is kept.
        for &i in &order {
            let b = (keys[i as usize] >> (8 * byte)) as usize & 0xff;
            scratch[next[b]] = i;
            next[b] += 1;
        }
        std::mem::swap(&mut order, &mut scratch);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(temperature: f64, top_k: usize, top_p: f64) -> SamplingConfig {
        SamplingConfig {
            temperature,
            top_k,
            top_p,
            ..SamplingConfig::default()
        }
    }

    fn histogram(logits: &[f64], config: &SamplingConfig) -> Vec<usize> {
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = vec![0; logits.len()];
        for _ in 0..4000 {
            counts[sample(logits, config, &mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn filters_keep_the_expected_tokens() {
        let logits = [2.0, 1.0, 0.5, 3.0];
        // (config, tokens that may appear)
        let cases = [
            (config(0.0, 0, 1.0), vec![3]),
            (config(1.0, 2, 1.0), vec![0, 3]),
            // probabilities ≈ [0.23, 0.08, 0.05, 0.63]: top_p 0.8 keeps tokens 3 and 0.
            (config(1.0, 0, 0.8), vec![0, 3]),
            (config(1.0, 0, 0.5), vec![3]),
            (config(1.0, 0, 1.0), vec![0, 1, 2, 3]),
        ];
        for (cfg, allowed) in cases {
            let counts = histogram(&logits, &cfg);
            let seen: Vec<usize> = (0..4).filter(|&i| counts[i] > 0).collect();
            assert_eq!(seen, allowed, "{cfg:?}");
        }
    }

    /// What the sampler used to do: a stable comparison sort, largest first.
    fn sorted_descending(logits: &[f64]) -> Vec<u32> {
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        order
    }

    #[test]
    fn radix_order_is_the_stable_sort_order() {
        let mut rng = StdRng::seed_from_u64(3);
        let wide: Vec<f64> = (0..50_000)
            .map(|_| rng.r#gen::<f64>() * 40.0 - 20.0)
            .collect();
        // f32 values widened (constant low bytes) with many ties, and the special values.
        let narrow: Vec<f64> = (0..40_000)
            .map(|_| f64::from((rng.r#gen::<f32>() * 64.0).round() / 8.0 - 4.0))
            .collect();
        let special = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            1e-310,
            -1e-310,
            f64::MAX,
            f64::MIN,
            0.0,
            1.0,
        ];
        for logits in [wide, narrow, special, vec![2.5], vec![1.0; 300]] {
            assert_eq!(descending(&logits), sorted_descending(&logits));
        }
    }

    #[test]
    fn temperature_sharpens() {
        let logits = [0.0, 1.0];
        let hot = histogram(&logits, &config(2.0, 0, 1.0))[1];
        let cold = histogram(&logits, &config(0.5, 0, 1.0))[1];
        // p(1) = σ(0.5) ≈ 0.62 hot, σ(2) ≈ 0.88 cold.
        assert!((2300..2700).contains(&hot), "{hot}");
        assert!((3400..3650).contains(&cold), "{cold}");
    }
}
