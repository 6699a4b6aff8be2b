//! The forward passes: embedding, RMSNorm, RoPE, grouped-query attention with causal and padding
//! masks, SwiGLU MLP and the LM head.
//!
//! Every function is generic over the dfdx tape `T`, so one code path serves training (an
//! `OwnedTape` started at the embedding matrix) and inference (`NoneTape`).
//!
//! Invariants that keep dfdx 0.13's CPU backward correct (grpo.md §14.2):
//! - no `slice` anywhere: RoPE uses `roll` with a signed sine table, and the completion positions
//!   are picked with `gather`, whose backward accumulates;
//! - no `concat_along` on the training path (the KV cache concatenates, but only without a tape);
//! - a tensor used twice is reused through `retaped`, so each use adds into the same gradient.

use dfdx::prelude::*;

use super::config::ModelConfig;
use super::params::{LayerParams, Linear, Matrix, ModelParams, Vector};
use crate::error::{Error, Result};

type T2<E, D, T> = Tensor<(usize, usize), E, D, T>;
type T3<E, D, T = NoneTape> = Tensor<(usize, usize, usize), E, D, T>;
type T4<E, D, T = NoneTape> = Tensor<(usize, usize, usize, usize), E, D, T>;

/// One layer's cached `(keys, values)`, each `[rows, len, num_kv_heads, head_dim]`.
type KvPair<E, D> = (T4<E, D>, T4<E, D>);

/// The additive mask value for disallowed attention: large enough that `exp` underflows to 0,
/// finite so that a fully masked row (a padding query) stays finite instead of NaN.
const MASKED: f64 = -1e9;

/// A causal language model: a validated config plus its parameters on device `D`.
#[derive(Debug, Clone)]
pub struct CausalLm<E: Dtype, D: Device<E>> {
    /// The model's shape and constants.
    pub config: ModelConfig,
    /// The weights.
    pub params: ModelParams<E, D>,
}

/// A batch of token sequences padded to one length, row-major `[rows, cols]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBatch {
    ids: Vec<u32>,
    mask: Vec<bool>,
    rows: usize,
    cols: usize,
}

impl TokenBatch {
    /// A batch from ids and an attention mask (`true` for real tokens, `false` for padding),
    /// both `rows × cols` row-major. Padding may be on either side of each row.
    pub fn new(ids: Vec<u32>, mask: Vec<bool>, rows: usize, cols: usize) -> Result<Self> {
        if rows == 0 || cols == 0 || ids.len() != rows * cols || mask.len() != rows * cols {
            return Err(Error::Generation {
                reason: format!(
                    "a {rows}×{cols} batch needs {} ids and mask entries, got {} and {}",
                    rows * cols,
                    ids.len(),
                    mask.len()
                ),
            });
        }
        Ok(Self {
            ids,
            mask,
            rows,
            cols,
        })
    }

    /// Left-pads `sequences` with `pad` to the longest one.
    pub fn left_padded(sequences: &[Vec<u32>], pad: u32) -> Result<Self> {
        let cols = sequences.iter().map(Vec::len).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(sequences.len() * cols);
        let mut mask = Vec::with_capacity(sequences.len() * cols);
        for seq in sequences {
            let pad_len = cols - seq.len();
            ids.extend(std::iter::repeat_n(pad, pad_len).chain(seq.iter().copied()));
            mask.extend(
                std::iter::repeat_n(false, pad_len).chain(std::iter::repeat_n(true, seq.len())),
            );
        }
        Self::new(ids, mask, sequences.len(), cols)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Padded length.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Token ids, row-major.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Attention mask, row-major.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }
}

/// Per-token log-probabilities and entropies of a batch's completion tokens (grpo.md §5).
#[derive(Debug)]
pub struct TokenLogps<E: Dtype, D: Device<E>, T> {
    /// `[rows, completion_len]` log-probabilities of the target tokens, on tape `T`.
    pub logps: T2<E, D, T>,
    /// `[rows, completion_len]` entropies of the predictive distributions (no gradient).
    pub entropy: T2<E, D, NoneTape>,
}

/// Per-layer keys and values of the tokens seen so far, for incremental decoding.
#[derive(Debug, Clone)]
pub struct KvCache<E: Dtype, D: Device<E>> {
    /// `(keys, values)` per layer, each `[rows, len, num_kv_heads, head_dim]` (keys after RoPE).
    layers: Vec<KvPair<E, D>>,
    /// `[rows, len]` key mask: false for padding.
    key_mask: Vec<bool>,
    rows: usize,
    len: usize,
}

impl<E: Dtype, D: Device<E>> KvCache<E, D> {
    /// An empty cache for a batch of `rows` sequences.
    pub fn new(rows: usize) -> Self {
        Self {
            layers: Vec::new(),
            key_mask: Vec::new(),
            rows,
            len: 0,
        }
    }

    /// Tokens cached per row (padding included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<E: Dtype, D: Device<E>> CausalLm<E, D> {
    /// A model from a config and matching parameters.
    pub fn new(config: ModelConfig, params: ModelParams<E, D>) -> Self {
        Self { config, params }
    }

    fn device(&self) -> D {
        self.params.embed_tokens.device().clone()
    }

    /// Full logits `[rows, cols, vocab]` of every position, without gradients. Meant for tests
    /// and short sequences: training should use [`CausalLm::token_logps`], which never builds
    /// the full logits.
    pub fn logits(&self, batch: &TokenBatch) -> T3<E, D> {
        let hidden = self.hidden_states(self.params.embed_tokens.clone(), batch);
        let (b, s) = (batch.rows, batch.cols);
        self.lm_head(hidden.reshape_like(&(b * s, self.config.hidden_size)))
            .reshape_like(&(b, s, self.config.vocab_size))
    }

    /// Log-probabilities, with gradients, of the tokens at positions `completion_start..cols` of
    /// each row, given everything before them; logits are divided by `temperature` first. The
    /// backward pass accumulates into `grads` (from [`ModelParams::alloc_grads`]).
    pub fn token_logps(
        &self,
        batch: &TokenBatch,
        completion_start: usize,
        temperature: f64,
        grads: Gradients<E, D>,
    ) -> Result<TokenLogps<E, D, OwnedTape<E, D>>> {
        let embed = self.params.embed_tokens.trace(grads);
        self.token_logps_on(embed, batch, completion_start, temperature)
    }

    /// [`CausalLm::token_logps`] without gradients (old and reference policies).
    pub fn token_logps_no_grad(
        &self,
        batch: &TokenBatch,
        completion_start: usize,
        temperature: f64,
    ) -> Result<TokenLogps<E, D, NoneTape>> {
        self.token_logps_on(
            self.params.embed_tokens.clone(),
            batch,
            completion_start,
            temperature,
        )
    }

    fn token_logps_on<T: Tape<E, D>>(
        &self,
        embed: T2<E, D, T>,
        batch: &TokenBatch,
        start: usize,
        temperature: f64,
    ) -> Result<TokenLogps<E, D, T>> {
        let (b, s, d) = (batch.rows, batch.cols, self.config.hidden_size);
        if start == 0 || start >= s {
            return Err(Error::Generation {
                reason: format!("completion_start {start} must be in 1..{s}"),
            });
        }
        if temperature.is_nan() || temperature <= 0.0 {
            return Err(Error::Generation {
                reason: format!("temperature {temperature} must be positive"),
            });
        }
        let c = s - start;
        let dev = self.device();
        let hidden = self.hidden_states(embed, batch).reshape_like(&(b, s, d));
        // Logits at positions start-1 .. s-2 predict the tokens at start .. s-1.
        let positions: Vec<usize> = (0..b).flat_map(|_| start - 1..s - 1).collect();
        let picked: T3<E, D, T> = hidden.gather(dev.tensor_from_vec(positions, (b, c)));
        let logits = self.lm_head(picked.reshape_like(&(b * c, d))) / scalar::<E>(temperature);
        let logp = logits.log_softmax::<Axis<1>>();
        let entropy = {
            let lp = logp.retaped::<NoneTape>();
            (lp.clone().exp() * lp)
                .sum::<(usize,), Axis<1>>()
                .negate()
                .reshape_like(&(b, c))
        };
        let targets: Vec<usize> = (0..b)
            .flat_map(|row| {
                batch.ids[row * s + start..(row + 1) * s]
                    .iter()
                    .map(|&t| t as usize)
            })
            .collect();
        if let Some(&bad) = targets.iter().find(|&&t| t >= self.config.vocab_size) {
            return Err(Error::Generation {
                reason: format!("token id {bad} is outside the vocabulary"),
            });
        }
        let logps = logp
            .select(dev.tensor_from_vec(targets, (b * c,)))
            .reshape_like(&(b, c));
        Ok(TokenLogps { logps, entropy })
    }

    /// Runs `batch` (new tokens only) through the model on top of `cache`, extends the cache,
    /// and returns the logits of each row's last position `[rows, vocab]`. `batch`'s mask marks
    /// padding among the new tokens.
    pub fn forward_cached(
        &self,
        batch: &TokenBatch,
        cache: &mut KvCache<E, D>,
    ) -> Result<T2<E, D, NoneTape>> {
        let (b, s) = (batch.rows, batch.cols);
        if cache.rows != b {
            return Err(Error::Generation {
                reason: format!("cache has {} rows, batch has {b}", cache.rows),
            });
        }
        let past = cache.len;
        let total = past + s;
        let mut key_mask = Vec::with_capacity(b * total);
        for row in 0..b {
            key_mask.extend_from_slice(&cache.key_mask[row * past..(row + 1) * past]);
            key_mask.extend_from_slice(&batch.mask[row * s..(row + 1) * s]);
        }
        let ctx = self.context(b, s, past, &key_mask);
        let mut x = self.embed(self.params.embed_tokens.clone(), batch);
        let mut new_layers = Vec::with_capacity(self.config.num_layers);
        for (i, layer) in self.params.layers.iter().enumerate() {
            let past_kv = cache.layers.get(i);
            let (y, kv) = self.layer(x, layer, &ctx, past_kv);
            x = y;
            new_layers.push(kv);
        }
        cache.layers = new_layers;
        cache.key_mask = key_mask;
        cache.len = total;
        let d = self.config.hidden_size;
        let hidden =
            rms_norm(x, &self.params.norm, self.config.rms_norm_eps).reshape_like(&(b, s, d));
        let last = self.device().tensor_from_vec(vec![s - 1; b], (b,));
        let last_hidden: T2<E, D, NoneTape> = hidden.select(last);
        Ok(self.lm_head(last_hidden))
    }

    /// Embeds the batch and runs all layers and the final norm: `[rows·cols, hidden]`.
    fn hidden_states<T: Tape<E, D>>(&self, embed: T2<E, D, T>, batch: &TokenBatch) -> T2<E, D, T> {
        let ctx = self.context(batch.rows, batch.cols, 0, &batch.mask);
        let mut x = self.embed(embed, batch);
        for layer in &self.params.layers {
            x = self.layer(x, layer, &ctx, None).0;
        }
        rms_norm(x, &self.params.norm, self.config.rms_norm_eps)
    }

    fn embed<T: Tape<E, D>>(&self, embed: T2<E, D, T>, batch: &TokenBatch) -> T2<E, D, T> {
        let ids: Vec<usize> = batch
            .ids
            .iter()
            .map(|&t| (t as usize).min(self.config.vocab_size - 1))
            .collect();
        let n = ids.len();
        embed.gather(self.device().tensor_from_vec(ids, (n,)))
    }

    fn lm_head<T: Tape<E, D>>(&self, hidden: T2<E, D, T>) -> T2<E, D, T> {
        let head = self
            .params
            .lm_head
            .as_ref()
            .unwrap_or(&self.params.embed_tokens);
        hidden.matmul(head.clone().permute::<_, Axes2<1, 0>>())
    }

    /// RoPE tables and the attention mask for `s` new tokens after `past` cached ones.
    fn context(&self, b: usize, s: usize, past: usize, key_mask: &[bool]) -> Context<E, D> {
        let dev = self.device();
        let hd = self.config.head_dim;
        let half = hd / 2;
        let mut cos = Vec::with_capacity(s * hd);
        let mut sin = Vec::with_capacity(s * hd);
        for pos in past..past + s {
            for i in 0..hd {
                // Hugging Face: inv_freq = theta^(-2j/hd) for j < hd/2, repeated for both halves.
                let j = i % half;
                let inv_freq = 1.0 / self.config.rope_theta.powf((2 * j) as f64 / hd as f64);
                let angle = pos as f64 * inv_freq;
                cos.push(scalar::<E>(angle.cos()));
                // rotate_half(x) = roll(x, hd/2) · (−1 on the first half, +1 on the second).
                let sign = if i < half { -1.0 } else { 1.0 };
                sin.push(scalar::<E>(sign * angle.sin()));
            }
        }
        let total = past + s;
        let mut mask = Vec::with_capacity(b * s * total);
        for row in 0..b {
            for q in 0..s {
                for k in 0..total {
                    let allowed = k <= past + q && key_mask[row * total + k];
                    mask.push(scalar::<E>(if allowed { 0.0 } else { MASKED }));
                }
            }
        }
        Context {
            rows: b,
            len: s,
            cos: dev.tensor_from_vec(cos, (s, hd)),
            sin: dev.tensor_from_vec(sin, (s, hd)),
            mask: dev.tensor_from_vec(mask, (b, s, total)),
        }
    }

    /// One decoder layer on `[rows·len, hidden]`; returns the output and this layer's full keys
    /// and values (past and new) for the cache.
    fn layer<T: Tape<E, D>>(
        &self,
        x: T2<E, D, T>,
        layer: &LayerParams<E, D>,
        ctx: &Context<E, D>,
        past: Option<&KvPair<E, D>>,
    ) -> (T2<E, D, T>, KvPair<E, D>) {
        let eps = self.config.rms_norm_eps;
        let h = rms_norm(x.retaped::<T>(), &layer.input_layernorm, eps);
        let (attn, kv) = self.attention(h, layer, ctx, past);
        let x = x + attn;
        let h = rms_norm(x.retaped::<T>(), &layer.post_attention_layernorm, eps);
        let gate = linear(h.retaped::<T>(), &layer.gate_proj, None);
        let up = linear(h, &layer.up_proj, None);
        let act = gate.retaped::<T>() * gate.sigmoid() * up;
        (x + linear(act, &layer.down_proj, None), kv)
    }

    fn attention<T: Tape<E, D>>(
        &self,
        h: T2<E, D, T>,
        layer: &LayerParams<E, D>,
        ctx: &Context<E, D>,
        past: Option<&KvPair<E, D>>,
    ) -> (T2<E, D, T>, KvPair<E, D>) {
        let cfg = &self.config;
        let (b, s, hd) = (ctx.rows, ctx.len, cfg.head_dim);
        let (heads, kv_heads, group) = (cfg.num_heads, cfg.num_kv_heads, cfg.group_size());
        let q = proj(h.retaped::<T>(), &layer.q_proj).reshape_like(&(b, s, heads, hd));
        let k = proj(h.retaped::<T>(), &layer.k_proj).reshape_like(&(b, s, kv_heads, hd));
        let v = proj(h, &layer.v_proj).reshape_like(&(b, s, kv_heads, hd));
        let q = rope(q, ctx);
        let k = rope(k, ctx);
        // With a cache the new keys and values are appended; without a tape, so the
        // concatenation's backward (grpo.md §14.2) never runs.
        let (k, v) = match past {
            Some((pk, pv)) => (
                (pk.clone().retaped::<T>(), k).concat_along(Axis::<1>),
                (pv.clone().retaped::<T>(), v).concat_along(Axis::<1>),
            ),
            None => (k, v),
        };
        let total = k.shape().1;
        let kv_out = (k.retaped::<NoneTape>(), v.retaped::<NoneTape>());
        // Grouped-query attention without repeating keys: query head h = kv·group + g uses kv
        // head kv (Hugging Face's repeat_kv), so the queries of a group are stacked along the
        // row axis and multiplied by that kv head's keys in one batched matmul.
        let q = q
            .reshape_like(&(b, s, kv_heads, group, hd))
            .permute::<_, Axes5<0, 2, 3, 1, 4>>()
            .reshape_like(&(b, kv_heads, group * s, hd));
        let kt = k.permute::<_, Axes4<0, 2, 3, 1>>();
        let scores = q.matmul(kt) * scalar::<E>(1.0 / (hd as f64).sqrt());
        let shape5 = (b, kv_heads, group, s, total);
        let mask = ctx.mask.clone().broadcast_like::<_, Axes2<1, 2>>(&shape5);
        let probs = (scores.reshape_like(&shape5) + mask)
            .softmax::<Axis<4>>()
            .reshape_like(&(b, kv_heads, group * s, total));
        let out = probs
            .matmul(v.permute::<_, Axes4<0, 2, 1, 3>>())
            .reshape_like(&(b, kv_heads, group, s, hd))
            .permute::<_, Axes5<0, 3, 1, 2, 4>>()
            .reshape_like(&(b * s, heads * hd));
        (proj(out, &layer.o_proj), kv_out)
    }
}

/// Per-forward constants shared by all layers.
struct Context<E: Dtype, D: Device<E>> {
    rows: usize,
    len: usize,
    /// `[len, head_dim]` cosines.
    cos: T2<E, D, NoneTape>,
    /// `[len, head_dim]` sines, negated on the first half of the head dimension.
    sin: T2<E, D, NoneTape>,
    /// `[rows, len, past + len]` additive mask: 0 where attention is allowed.
    mask: T3<E, D>,
}

fn scalar<E: Dtype>(x: f64) -> E {
    E::from_f64(x).expect("model constants are finite")
}

/// `x Wᵀ (+ b)` on `[n, in]`.
fn linear<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: T2<E, D, T>,
    weight: &Matrix<E, D>,
    bias: Option<&Vector<E, D>>,
) -> T2<E, D, T> {
    let y = x.matmul(weight.clone().permute::<_, Axes2<1, 0>>());
    match bias {
        Some(b) => {
            let shape = *y.shape();
            y + b.clone().broadcast_like::<_, Axis<0>>(&shape)
        }
        None => y,
    }
}

fn proj<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: T2<E, D, T>, lin: &Linear<E, D>) -> T2<E, D, T> {
    linear(x, &lin.weight, lin.bias.as_ref())
}

/// RMSNorm as Hugging Face computes it: `w · x / sqrt(mean(x²) + eps)` over the last axis.
pub fn rms_norm<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: T2<E, D, T>,
    weight: &Vector<E, D>,
    eps: f64,
) -> T2<E, D, T> {
    let shape = *x.shape();
    let inv = (x.retaped::<T>().square().mean::<(usize,), Axis<1>>() + scalar::<E>(eps))
        .sqrt()
        .recip();
    x * inv.broadcast_like::<_, Axis<1>>(&shape)
        * weight.clone().broadcast_like::<_, Axis<0>>(&shape)
}

/// Rotary embedding of `[rows, len, heads, head_dim]` without `slice`:
/// `x·cos + roll(x, head_dim/2)·sin_signed` equals Hugging Face's `x·cos + rotate_half(x)·sin`.
fn rope<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: T4<E, D, T>, ctx: &Context<E, D>) -> T4<E, D, T> {
    let shape = *x.shape();
    let cos = ctx.cos.clone().broadcast_like::<_, Axes2<0, 2>>(&shape);
    let sin = ctx.sin.clone().broadcast_like::<_, Axes2<0, 2>>(&shape);
    let rolled = x.retaped::<T>().roll::<Axis<3>>(shape.3 / 2);
    x * cos + rolled * sin
}

/// Op-level building blocks exposed for gradient tests.
pub mod ops {
    pub use super::rms_norm;

    use super::*;

    /// RoPE on `[rows, len, heads, head_dim]` for positions `offset..offset+len`, with the same
    /// tables the model uses.
    pub fn rope_at<E: Dtype, D: Device<E>, T: Tape<E, D>>(
        model: &CausalLm<E, D>,
        x: T4<E, D, T>,
        offset: usize,
    ) -> T4<E, D, T> {
        let (b, s) = (x.shape().0, x.shape().1);
        let ctx = model.context(b, s, offset, &vec![true; b * (offset + s)]);
        rope(x, &ctx)
    }
}
