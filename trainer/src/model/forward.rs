//! The forward passes: embedding, RMSNorm, RoPE, grouped-query attention with causal and padding
//! masks, SwiGLU MLP and the LM head.
//!
//! Every function is generic over the dfdx tape `T`, so one code path serves training (an
//! `OwnedTape` started at the embedding matrix) and inference (`NoneTape`). The blocks
//! themselves come from the device's [`Kernels`]: fused one-pass kernels on the CPU, dfdx's
//! operations elsewhere (or on the CPU with [`KernelMode::Reference`]).
//!
//! Invariants that keep dfdx 0.13's CPU backward correct (its CPU `slice` backward assigns the
//! gradient instead of adding it, losing what other uses accumulated, and a `concat_along` of a
//! tensor with itself panics in backward):
//! - no `slice` anywhere: RoPE uses `roll` with a signed sine table, and the completion positions
//!   are picked with `gather`, whose backward accumulates;
//! - no `concat_along` on the training path (the KV cache concatenates, but only without a tape);
//! - a tensor used twice is reused through `retaped`, so each use adds into the same gradient.

use std::rc::Rc;
use std::sync::Arc;

use dfdx::prelude::*;

use super::config::ModelConfig;
use super::kernels::{
    AttentionContext, AttentionMask, BlockShape, DecodeInput, HostKv, HostWeights, KernelMode,
    Kernels, KvPair,
};
use super::params::{LayerParams, Matrix, ModelParams, Param, ParamRef};
use super::recompute::{self, Recompute, RowBlock};
use crate::error::{Error, ModelInputError, Result};

type T2<E, D, T = NoneTape> = Tensor<(usize, usize), E, D, T>;
type T3<E, D, T = NoneTape> = Tensor<(usize, usize, usize), E, D, T>;
type T4<E, D, T = NoneTape> = Tensor<(usize, usize, usize, usize), E, D, T>;

/// A causal language model: a validated config plus its parameters on device `D`.
#[derive(Debug, Clone)]
pub struct CausalLm<E: Dtype, D: Device<E>> {
    /// The model's shape and constants.
    pub config: ModelConfig,
    /// The weights.
    pub params: ModelParams<E, D>,
    /// Which implementation of the blocks runs ([`KernelMode::Fused`] unless a test asks for
    /// the reference).
    pub kernels: KernelMode,
    /// Recompute each decoder layer in the backward pass instead of keeping its activations
    /// (TRL's `gradient_checkpointing`; `recompute::checkpoint`).
    pub gradient_checkpointing: bool,
    /// Rows of the LM head and log-softmax computed at once with gradients (each chunk
    /// recomputed in the backward pass, `recompute::chunked`); 0 chooses
    /// [`LOGITS_CHUNK_ELEMENTS`]` / vocab`, and a batch that fits one chunk runs unchunked.
    pub logits_chunk_rows: usize,
}

/// Logits held at once by the chunked LM head when [`CausalLm::logits_chunk_rows`] is 0:
/// 2²⁴ (64 MiB in f32).
pub const LOGITS_CHUNK_ELEMENTS: usize = 1 << 24;

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
            return Err(Error::ModelInput(ModelInputError::BatchShape {
                rows,
                cols,
                ids: ids.len(),
                mask: mask.len(),
            }));
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

/// Per-token log-probabilities and entropies of a batch's completion tokens (the GRPO loss's
/// `logp`, TRL's entropy metric, mask and bonus).
#[derive(Debug)]
pub struct TokenLogps<E: Dtype, D: Device<E>, T> {
    /// `[rows, completion_len]` log-probabilities of the target tokens, on tape `T` (the
    /// forward's).
    pub logps: T2<E, D, T>,
    /// `[rows, completion_len]` entropies of the predictive distributions, with gradients when
    /// used in the loss together with `logps` (their own tape holds only their last steps, so
    /// dropping them unused costs nothing).
    pub entropy: T2<E, D, T>,
}

/// Per-layer keys and values of the tokens seen so far, for incremental decoding.
#[derive(Debug, Clone)]
pub struct KvCache<E: Dtype, D: Device<E>> {
    /// `(keys, values)` per layer, each `[rows, len, num_kv_heads, head_dim]` (keys after RoPE),
    /// where the device's blocks run the cached forward (see [`Kernels::host_weights`]).
    layers: Vec<KvPair<E, D>>,
    /// The weights copied once for the whole generation and the keys and values in host
    /// memory, where the device runs the cached forward on host buffers ([`Kernels::decode`]).
    host: Option<(Arc<HostWeights<E>>, HostKv<E>)>,
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
            host: None,
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
    /// A model from a config and matching parameters, on the device's fastest kernels.
    pub fn new(config: ModelConfig, params: ModelParams<E, D>) -> Self {
        Self {
            config,
            params,
            kernels: KernelMode::Fused,
            gradient_checkpointing: false,
            logits_chunk_rows: 0,
        }
    }
}

impl<E: Dtype, D: Kernels<E>> CausalLm<E, D> {
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
            return Err(Error::ModelInput(ModelInputError::CompletionStart {
                start,
                len: s,
            }));
        }
        if temperature.is_nan() || temperature <= 0.0 {
            return Err(Error::ModelInput(ModelInputError::Temperature(temperature)));
        }
        let c = s - start;
        let dev = self.device();
        let hidden = self.hidden_states(embed, batch).reshape_like(&(b, s, d));
        // Logits at positions start-1 .. s-2 predict the tokens at start .. s-1.
        let positions: Vec<usize> = (0..b).flat_map(|_| start - 1..s - 1).collect();
        let picked: T3<E, D, T> = hidden.gather(dev.tensor_from_vec(positions, (b, c)));
        let picked = picked.reshape_like(&(b * c, d));
        let targets: Vec<usize> = (0..b)
            .flat_map(|row| {
                batch.ids[row * s + start..(row + 1) * s]
                    .iter()
                    .map(|&t| t as usize)
            })
            .collect();
        if let Some(&bad) = targets.iter().find(|&&t| t >= self.config.vocab_size) {
            return Err(Error::ModelInput(ModelInputError::TokenOutsideVocabulary(
                bad,
            )));
        }
        let chunk = self.logits_chunk_rows();
        if b * c <= chunk {
            let logits = self.lm_head(picked);
            let (logps, entropy) = D::token_logps(logits, &targets, temperature, self.kernels);
            return Ok(TokenLogps {
                logps: logps.reshape_like(&(b, c)),
                entropy: entropy.reshape_like(&(b, c)),
            });
        }
        let block = HeadLogps {
            head: self.head_weight().clone(),
            targets: Rc::new(targets),
            range: (0, b * c),
            temperature,
            mode: self.kernels,
        };
        // Each row's log-prob and entropy, side by side, recomputed chunk by chunk in the
        // backward pass; the log-probs keep the tape.
        let (both, _) = recompute::chunked(picked, chunk, block, 2);
        let column = |k: usize| dev.tensor_from_vec(vec![k; b * c], (b * c,));
        let entropy = both.retaped::<T>().select(column(1));
        let logps = both.select(column(0));
        Ok(TokenLogps {
            logps: logps.reshape_like(&(b, c)),
            entropy: entropy.reshape_like(&(b, c)),
        })
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
            return Err(Error::ModelInput(ModelInputError::CacheRows {
                cache: cache.rows,
                batch: b,
            }));
        }
        let past = cache.len;
        let total = past + s;
        let mut key_mask = Vec::with_capacity(b * total);
        for row in 0..b {
            key_mask.extend_from_slice(&cache.key_mask[row * past..(row + 1) * past]);
            key_mask.extend_from_slice(&batch.mask[row * s..(row + 1) * s]);
        }
        if cache.is_empty() && cache.host.is_none() {
            cache.host =
                D::host_weights(&self.params, self.kernels).map(|w| (Arc::new(w), HostKv::new(b)));
        }
        let shape = self.block_shape();
        if let Some((weights, kv)) = &mut cache.host {
            let (cos, sin) = self.rope_tables(past, s);
            let mask = AttentionMask {
                rows: b,
                len: s,
                past,
                key_mask,
            };
            let input = DecodeInput {
                ids: &batch.ids,
                cos: &cos,
                sin: &sin,
                mask: &mask,
                shape,
            };
            let logits = D::decode(weights, kv, input);
            cache.key_mask = mask.key_mask;
            cache.len = total;
            let vocab = self.config.vocab_size;
            return Ok(self.device().tensor_from_vec(logits, (b, vocab)));
        }
        let ctx = self.context(b, s, past, &key_mask);
        let mut x = self.embed(self.params.embed_tokens.clone(), batch);
        let mut new_layers = Vec::with_capacity(self.config.num_layers);
        for (i, layer) in self.params.layers.iter().enumerate() {
            let past_kv = cache.layers.get(i);
            let (y, kv) = self.layer(x, layer, &ctx, past_kv, true);
            x = y;
            new_layers.push(kv.expect("keep_kv returns the keys and values"));
        }
        cache.layers = new_layers;
        cache.key_mask = key_mask;
        cache.len = total;
        let d = self.config.hidden_size;
        let hidden = D::rms_norm(x, &self.params.norm, self.config.rms_norm_eps, self.kernels)
            .reshape_like(&(b, s, d));
        let last = self.device().tensor_from_vec(vec![s - 1; b], (b,));
        let last_hidden: T2<E, D, NoneTape> = hidden.select(last);
        Ok(self.lm_head(last_hidden))
    }

    /// The rows the LM head computes at once with gradients (see
    /// [`CausalLm::logits_chunk_rows`]).
    pub fn logits_chunk_rows(&self) -> usize {
        match self.logits_chunk_rows {
            0 => (LOGITS_CHUNK_ELEMENTS / self.config.vocab_size).max(1),
            n => n,
        }
    }

    /// Embeds the batch and runs all layers and the final norm: `[rows·cols, hidden]`.
    fn hidden_states<T: Tape<E, D>>(&self, embed: T2<E, D, T>, batch: &TokenBatch) -> T2<E, D, T> {
        let ctx = self.context(batch.rows, batch.cols, 0, &batch.mask);
        let mut x = self.embed(embed, batch);
        if T::OWNS_TAPE && self.gradient_checkpointing {
            let ctx = Rc::new(ctx);
            for layer in &self.params.layers {
                let block = DecoderLayer {
                    layer: layer.clone(),
                    ctx: Rc::clone(&ctx),
                    shape: self.block_shape(),
                    mode: self.kernels,
                };
                x = recompute::checkpoint(x, block);
            }
        } else {
            for layer in &self.params.layers {
                x = self.layer(x, layer, &ctx, None, false).0;
            }
        }
        D::rms_norm(x, &self.params.norm, self.config.rms_norm_eps, self.kernels)
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
        D::linear(hidden, self.head_weight(), None, None, self.kernels)
    }

    /// The LM head's weight: its own, or the embedding matrix when tied.
    fn head_weight(&self) -> &Tensor<(usize, usize), E, D> {
        self.params
            .lm_head
            .as_ref()
            .unwrap_or(&self.params.embed_tokens)
    }

    /// RoPE tables `[s, head_dim]` of positions `past..past + s`: cosines, and sines negated on
    /// the first half of the head dimension.
    fn rope_tables(&self, past: usize, s: usize) -> (Vec<E>, Vec<E>) {
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
        (cos, sin)
    }

    /// RoPE tables and the attention mask for `b` rows of `s` new tokens after `past` cached
    /// ones; `key_mask` is `[b, past + s]`, false for padding.
    pub fn context(
        &self,
        b: usize,
        s: usize,
        past: usize,
        key_mask: &[bool],
    ) -> AttentionContext<E, D> {
        let dev = self.device();
        let hd = self.config.head_dim;
        let (cos, sin) = self.rope_tables(past, s);
        AttentionContext::new(
            dev.tensor_from_vec(cos, (s, hd)),
            dev.tensor_from_vec(sin, (s, hd)),
            AttentionMask {
                rows: b,
                len: s,
                past,
                key_mask: key_mask.to_vec(),
            },
        )
    }

    /// The attention shape and RMSNorm epsilon the blocks need.
    fn block_shape(&self) -> BlockShape {
        let cfg = &self.config;
        BlockShape {
            heads: cfg.num_heads,
            kv_heads: cfg.num_kv_heads,
            head_dim: cfg.head_dim,
            eps: cfg.rms_norm_eps,
        }
    }

    /// One decoder layer on `[rows·len, hidden]`; with `keep_kv`, also this layer's full keys
    /// and values (past and new) for the cache.
    fn layer<T: Tape<E, D>>(
        &self,
        x: T2<E, D, T>,
        layer: &LayerParams<E, D>,
        ctx: &AttentionContext<E, D>,
        past: Option<&KvPair<E, D>>,
        keep_kv: bool,
    ) -> (T2<E, D, T>, Option<KvPair<E, D>>) {
        let (shape, mode) = (self.block_shape(), self.kernels);
        let (x, kv) = D::attention_block(x, layer, ctx, past, keep_kv, shape, mode);
        (D::mlp_block(x, layer, shape.eps, mode), kv)
    }
}

fn scalar<E: Dtype>(x: f64) -> E {
    E::from_f64(x).expect("model constants are finite")
}

/// One decoder layer as a block that [`recompute::checkpoint`] can run again.
struct DecoderLayer<E: Dtype, D: Device<E>> {
    layer: LayerParams<E, D>,
    ctx: Rc<AttentionContext<E, D>>,
    shape: BlockShape,
    mode: KernelMode,
}

impl<E: Dtype, D: Kernels<E>> Recompute<E, D> for DecoderLayer<E, D> {
    fn forward<T: Tape<E, D>>(&self, x: T2<E, D, T>) -> T2<E, D, T> {
        let (layer, shape, mode) = (&self.layer, self.shape, self.mode);
        let (x, _) = D::attention_block(x, layer, &self.ctx, None, false, shape, mode);
        D::mlp_block(x, layer, shape.eps, mode)
    }

    fn params(&self) -> Vec<ParamRef<'_, E, D>> {
        let l = &self.layer;
        let mut out = vec![
            Param::Vector(&l.input_layernorm),
            Param::Vector(&l.post_attention_layernorm),
            Param::Matrix(&l.gate_proj),
            Param::Matrix(&l.up_proj),
            Param::Matrix(&l.down_proj),
        ];
        for lin in [&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj] {
            out.push(Param::Matrix(&lin.weight));
            out.extend(lin.bias.as_ref().map(Param::Vector));
        }
        out
    }
}

/// The LM head and the log-probabilities of the target tokens of rows `range` of the
/// completion positions, as a row block of [`recompute::chunked`].
struct HeadLogps<E: Dtype, D: Device<E>> {
    head: Matrix<E, D>,
    /// The target of every row of the whole input.
    targets: Rc<Vec<usize>>,
    range: (usize, usize),
    temperature: f64,
    mode: KernelMode,
}

impl<E: Dtype, D: Kernels<E>> HeadLogps<E, D> {
    /// `[rows, 2]`: each row's log-prob and entropy.
    fn run<T: Tape<E, D>>(&self, x: T2<E, D, T>) -> T2<E, D, T> {
        let (start, end) = self.range;
        let logits = D::linear(x, &self.head, None, None, self.mode);
        let targets = &self.targets[start..end];
        let (logps, entropy) = D::token_logps(logits, targets, self.temperature, self.mode);
        let rows = end - start;
        (
            logps.reshape_like(&(rows, 1)),
            entropy.reshape_like(&(rows, 1)),
        )
            .concat_along(Axis::<1>)
    }
}

impl<E: Dtype, D: Kernels<E>> Recompute<E, D> for HeadLogps<E, D> {
    fn forward<T: Tape<E, D>>(&self, x: T2<E, D, T>) -> T2<E, D, T> {
        self.run(x)
    }

    fn params(&self) -> Vec<ParamRef<'_, E, D>> {
        vec![Param::Matrix(&self.head)]
    }
}

impl<E: Dtype, D: Kernels<E>> RowBlock<E, D> for HeadLogps<E, D> {
    fn with_range(&self, start: usize, end: usize) -> Self {
        Self {
            head: self.head.clone(),
            targets: Rc::clone(&self.targets),
            range: (start, end),
            temperature: self.temperature,
            mode: self.mode,
        }
    }

    fn forward_aux(&self, x: T2<E, D>) -> (T2<E, D>, Vec<E>) {
        (self.run(x), Vec::new())
    }
}

/// Op-level building blocks exposed for gradient tests.
pub mod ops {
    use super::*;

    /// RoPE on `[rows, len, heads, head_dim]` for positions `offset..offset+len`, with the same
    /// tables and kernels the model uses.
    pub fn rope_at<E: Dtype, D: Kernels<E>, T: Tape<E, D>>(
        model: &CausalLm<E, D>,
        x: T4<E, D, T>,
        offset: usize,
    ) -> T4<E, D, T> {
        let (b, s) = (x.shape().0, x.shape().1);
        let ctx = model.context(b, s, offset, &vec![true; b * (offset + s)]);
        D::rope(x, &ctx, model.kernels)
    }

    /// RMSNorm of `[n, d]` with the model's kernels.
    pub fn rms_norm<E: Dtype, D: Kernels<E>, T: Tape<E, D>>(
        model: &CausalLm<E, D>,
        x: T2<E, D, T>,
        weight: &Tensor<(usize,), E, D>,
        eps: f64,
    ) -> T2<E, D, T> {
        D::rms_norm(x, weight, eps, model.kernels)
    }
}
