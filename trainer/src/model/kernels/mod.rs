//! The model's building blocks, per device: fused CPU kernels, or dfdx's own operations.
//!
//! [`Kernels`] names the blocks a decoder layer is made of (linear layers, RMSNorm, RoPE,
//! masked grouped-query attention, SwiGLU and the token log-probabilities), the two halves of a
//! layer built from them, and AdamW's passes over the parameters. Its default methods compose
//! each block from dfdx 0.13 operations (`reference`); that is what the CUDA
//! device runs, and what the CPU runs with [`KernelMode::Reference`]. The CPU's
//! [`KernelMode::Fused`] (the default) runs [`cpu`]'s one-pass kernels instead, which record
//! their own backward passes on dfdx's tape. Both give the same values and gradients to
//! rounding: `trainer/tests/it/model_kernels.rs` compares them, and the finite-difference checks and the
//! PyTorch logits fixture run on the fused path.

pub mod cpu;
mod reference;

pub use cpu::math::HostMatrix;

use std::cell::OnceCell;

use dfdx::prelude::*;

use super::params::{LayerParams, Linear, Matrix, ModelParams, Vector};

type T1<E, D, T = NoneTape> = Tensor<(usize,), E, D, T>;
type T2<E, D, T = NoneTape> = Tensor<(usize, usize), E, D, T>;
type T3<E, D, T = NoneTape> = Tensor<(usize, usize, usize), E, D, T>;
type T4<E, D, T = NoneTape> = Tensor<(usize, usize, usize, usize), E, D, T>;

/// One layer's cached `(keys, values)`, each `[rows, len, kv_heads, head_dim]` (keys after
/// RoPE).
pub type KvPair<E, D> = (T4<E, D>, T4<E, D>);

/// The model constants a decoder-layer block needs.
#[derive(Debug, Clone, Copy)]
pub struct BlockShape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub eps: f64,
}

/// Host copies of one decoder layer's weights (Hugging Face layouts, each also transposed, see
/// [`HostMatrix`]), for kernels that read weights from host memory. Each `(weight, bias)` pair
/// is one linear layer.
#[derive(Debug, Clone)]
pub struct HostLayer<E> {
    /// Input RMSNorm weight.
    pub input_norm: Vec<E>,
    /// Query projection.
    pub q: (HostMatrix<E>, Option<Vec<E>>),
    /// Key projection.
    pub k: (HostMatrix<E>, Option<Vec<E>>),
    /// Value projection.
    pub v: (HostMatrix<E>, Option<Vec<E>>),
    /// Output projection.
    pub o: (HostMatrix<E>, Option<Vec<E>>),
    /// Post-attention RMSNorm weight.
    pub post_norm: Vec<E>,
    /// SwiGLU gate projection.
    pub gate: HostMatrix<E>,
    /// SwiGLU up projection.
    pub up: HostMatrix<E>,
    /// SwiGLU down projection.
    pub down: HostMatrix<E>,
}

/// Host copies of a model's weights, made once for a whole generation so that each decoding
/// step does not copy every weight out of dfdx again (see [`Kernels::host_weights`]).
#[derive(Debug, Clone)]
pub struct HostWeights<E> {
    /// Per decoder layer.
    pub layers: Vec<HostLayer<E>>,
    /// The final RMSNorm weight.
    pub norm: Vec<E>,
    /// The LM head (the embedding matrix when tied).
    pub lm_head: HostMatrix<E>,
    /// The embedding matrix when it is not tied to the LM head.
    pub embed: Option<Vec<E>>,
}

/// A generation's keys and values in host memory, written in place: per layer, keys and values
/// `[rows, cap, kv_heads, head_dim]` (keys after RoPE), of which the first `len` positions of
/// each row are filled. The capacity doubles when a step needs more, so a step copies only its
/// own new keys and values (and, rarely, the whole cache once).
#[derive(Debug, Clone, Default)]
pub struct HostKv<E> {
    /// `(keys, values)` per layer.
    pub layers: Vec<(Vec<E>, Vec<E>)>,
    /// Sequences.
    pub rows: usize,
    /// Filled positions per sequence.
    pub len: usize,
    /// Allocated positions per sequence.
    pub cap: usize,
}

impl<E: Copy + Default> HostKv<E> {
    /// An empty cache for `rows` sequences.
    pub fn new(rows: usize) -> Self {
        Self {
            rows,
            ..Self::default()
        }
    }

    /// Makes room for `len` positions per sequence in each of `layers` layers of `width`
    /// (`kv_heads · head_dim`) elements per position, keeping what is filled.
    pub(crate) fn reserve(&mut self, len: usize, layers: usize, width: usize) {
        if len <= self.cap && self.layers.len() == layers {
            return;
        }
        let cap = len.max(2 * self.cap);
        let (rows, filled, old_cap) = (self.rows, self.len, self.cap);
        let grow = |old: &[E]| {
            let mut new = vec![E::default(); rows * cap * width];
            for r in 0..rows.min(old.len() / (old_cap * width).max(1)) {
                let from = r * old_cap * width;
                new[r * cap * width..][..filled * width]
                    .copy_from_slice(&old[from..from + filled * width]);
            }
            new
        };
        self.layers = (0..layers)
            .map(|i| match self.layers.get(i) {
                Some((k, v)) => (grow(k), grow(v)),
                None => (grow(&[]), grow(&[])),
            })
            .collect();
        self.cap = cap;
    }
}

/// The new tokens of one cached forward on host buffers ([`Kernels::decode`]).
#[derive(Debug)]
pub struct DecodeInput<'a, E> {
    /// `[rows, len]` token ids (ids past the vocabulary read its last row, as the tensor path
    /// does).
    pub ids: &'a [u32],
    /// RoPE tables of the new positions, `[len, head_dim]` each (see [`AttentionContext`]).
    pub cos: &'a [E],
    /// See `cos`.
    pub sin: &'a [E],
    /// Which cached and new keys each new query may attend to.
    pub mask: &'a AttentionMask,
    /// The model's attention shape and RMSNorm epsilon.
    pub shape: BlockShape,
}

/// The scalars of one AdamW step (PyTorch's `torch.optim.AdamW`, `amsgrad = false`).
#[derive(Debug, Clone, Copy)]
pub struct AdamScalars {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Denominator epsilon.
    pub eps: f64,
    /// The weight-decay factor `1 − lr·wd`.
    pub decay: f64,
    /// First-moment bias correction `1 − β₁ᵗ`.
    pub bias1: f64,
    /// Second-moment bias correction `1 − β₂ᵗ`.
    pub bias2: f64,
    /// The gradient-clipping factor (1 when not clipped).
    pub clip: f64,
}

/// The additive mask value for disallowed attention: large enough that `exp` underflows to 0,
/// finite so that a fully masked row (a padding query) stays finite instead of NaN.
pub const MASKED: f64 = -1e9;

/// Which implementation of the blocks a model runs (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KernelMode {
    /// The device's fastest kernels: fused on the CPU, dfdx's operations elsewhere.
    #[default]
    Fused,
    /// dfdx's operations everywhere (the reference the fused kernels are tested against).
    Reference,
}

/// Which keys each query may attend to: causal over `past + len` positions, minus padding.
#[derive(Debug, Clone)]
pub struct AttentionMask {
    /// Sequences in the batch.
    pub rows: usize,
    /// New (query) positions per sequence.
    pub len: usize,
    /// Cached positions before them.
    pub past: usize,
    /// `[rows, past + len]`: false for padding keys.
    pub key_mask: Vec<bool>,
}

impl AttentionMask {
    /// Whether query `q` (0-based among the new positions) of sequence `row` may attend to key
    /// `k`.
    pub fn allows(&self, row: usize, q: usize, k: usize) -> bool {
        k <= self.past + q && self.key_mask[row * (self.past + self.len) + k]
    }

    /// The mask as an additive `[rows, len, past + len]` tensor: 0 where allowed, [`MASKED`]
    /// elsewhere.
    pub fn additive<E: Dtype, D: Device<E>>(&self, dev: &D) -> T3<E, D> {
        let total = self.past + self.len;
        let mut mask = Vec::with_capacity(self.rows * self.len * total);
        for row in 0..self.rows {
            for q in 0..self.len {
                for k in 0..total {
                    let v = if self.allows(row, q, k) { 0.0 } else { MASKED };
                    mask.push(E::from_f64(v).expect("mask values are finite"));
                }
            }
        }
        dev.tensor_from_vec(mask, (self.rows, self.len, total))
    }
}

/// Per-forward attention inputs shared by all layers: the RoPE tables and the mask (with its
/// additive form built once, on first use by the reference attention).
#[derive(Debug)]
pub struct AttentionContext<E: Dtype, D: Device<E>> {
    /// `[len, head_dim]` cosines.
    pub cos: T2<E, D>,
    /// `[len, head_dim]` sines, negated on the first half of the head dimension.
    pub sin: T2<E, D>,
    /// Which keys each query may see.
    pub mask: AttentionMask,
    additive: OnceCell<T3<E, D>>,
}

impl<E: Dtype, D: Device<E>> AttentionContext<E, D> {
    /// A context from its tables and mask.
    pub fn new(cos: T2<E, D>, sin: T2<E, D>, mask: AttentionMask) -> Self {
        Self {
            cos,
            sin,
            mask,
            additive: OnceCell::new(),
        }
    }

    /// The additive mask tensor on the tables' device.
    pub(crate) fn additive_mask(&self) -> &T3<E, D> {
        self.additive
            .get_or_init(|| self.mask.additive(self.cos.device()))
    }
}

/// The blocks of the model on one device (see the module documentation). Every method takes
/// the model's [`KernelMode`]; devices without fused kernels ignore it.
pub trait Kernels<E: Dtype>: Device<E> {
    /// `x Wᵀ (+ bias) (+ residual)` on `x: [n, in]`, `W: [out, in]`.
    fn linear<T: Tape<E, Self>>(
        x: T2<E, Self, T>,
        weight: &Matrix<E, Self>,
        bias: Option<&Vector<E, Self>>,
        residual: Option<T2<E, Self, T>>,
        _mode: KernelMode,
    ) -> T2<E, Self, T> {
        reference::linear(x, weight, bias, residual)
    }

    /// RMSNorm over the last axis of `[n, d]`.
    fn rms_norm<T: Tape<E, Self>>(
        x: T2<E, Self, T>,
        weight: &Vector<E, Self>,
        eps: f64,
        _mode: KernelMode,
    ) -> T2<E, Self, T> {
        reference::rms_norm(x, weight, eps)
    }

    /// Rotary embedding of `[rows, len, heads, head_dim]`.
    fn rope<T: Tape<E, Self>>(
        x: T4<E, Self, T>,
        ctx: &AttentionContext<E, Self>,
        _mode: KernelMode,
    ) -> T4<E, Self, T> {
        reference::rope(x, &ctx.cos, &ctx.sin)
    }

    /// Masked grouped-query attention; returns `[rows·len, heads·head_dim]`.
    fn attention<T: Tape<E, Self>>(
        q: T4<E, Self, T>,
        k: T4<E, Self, T>,
        v: T4<E, Self, T>,
        ctx: &AttentionContext<E, Self>,
        _mode: KernelMode,
    ) -> T2<E, Self, T> {
        reference::attention(q, k, v, ctx)
    }

    /// `silu(gate) · up`.
    fn swiglu<T: Tape<E, Self>>(
        gate: T2<E, Self, T>,
        up: T2<E, Self, T>,
        _mode: KernelMode,
    ) -> T2<E, Self, T> {
        reference::swiglu(gate, up)
    }

    /// Log-probabilities of `targets` under `softmax(logits / temperature)` and the entropies
    /// of those distributions, both with gradients. The log-probabilities hold the forward's
    /// tape: a caller that drops the entropies unused loses nothing.
    fn token_logps<T: Tape<E, Self>>(
        logits: T2<E, Self, T>,
        targets: &[usize],
        temperature: f64,
        _mode: KernelMode,
    ) -> (T1<E, Self, T>, T1<E, Self, T>) {
        reference::token_logps(logits, targets, temperature)
    }

    /// `Σ g²` over the gradient of `t` held in `grads` (0 when it has none).
    fn grad_sq_sum<S: Shape>(
        grads: &mut Gradients<E, Self>,
        t: &Tensor<S, E, Self>,
        _mode: KernelMode,
    ) -> f64 {
        reference::grad_sq_sum(grads, t)
    }

    /// One AdamW update of `p` and its moments `m`, `v` from `p`'s gradient in `grads`.
    fn adamw_update<S: Shape>(
        p: &mut Tensor<S, E, Self>,
        grads: &mut Gradients<E, Self>,
        m: &mut Tensor<S, E, Self>,
        v: &mut Tensor<S, E, Self>,
        h: &AdamScalars,
        _mode: KernelMode,
    ) {
        reference::adamw_update(p, grads, m, v, h)
    }

    /// Sums `t`'s gradient in `grads` over all `ranks`, in place (data-parallel training).
    fn all_reduce_grad<S: Shape>(
        grads: &mut Gradients<E, Self>,
        t: &Tensor<S, E, Self>,
        ranks: &crate::ranks::Ranks,
    ) -> crate::error::Result<()>;

    /// Frees the buffer of `t`'s gradient in `grads` where the device can (the CPU), once no one
    /// reads it again; elsewhere the buffer stays until the store is dropped.
    fn release_grad<S: Shape>(_grads: &mut Gradients<E, Self>, _t: &Tensor<S, E, Self>) {}

    /// Host copies of the weights for a generation, when this device runs generation's cached
    /// forward on host buffers ([`Self::decode`]: the fused CPU kernels); `None` elsewhere.
    fn host_weights(_params: &ModelParams<E, Self>, _mode: KernelMode) -> Option<HostWeights<E>> {
        None
    }

    /// The cached forward of generation on host buffers: runs `input`'s new tokens through the
    /// model on top of `cache`, appends their keys and values to it, and returns the logits of
    /// each row's last new position, `[rows, vocab]`. Only called where
    /// [`Self::host_weights`] gave the weights.
    fn decode(_w: &HostWeights<E>, _cache: &mut HostKv<E>, _input: DecodeInput<'_, E>) -> Vec<E> {
        unreachable!("host_weights is None on this device")
    }

    /// Whether [`Self::adamw_update_host`] runs here, so that AdamW keeps its moments in
    /// host memory.
    fn host_moments(_mode: KernelMode) -> bool {
        false
    }

    /// [`Self::adamw_update`] with the moments in host memory, updated in place; only called
    /// where [`Self::host_moments`] is true.
    fn adamw_update_host<S: Shape>(
        _p: &mut Tensor<S, E, Self>,
        _grads: &mut Gradients<E, Self>,
        _m: &mut [E],
        _v: &mut [E],
        _h: &AdamScalars,
        _mode: KernelMode,
    ) {
        unreachable!("host_moments is false on this device")
    }

    /// The attention half of a decoder layer: `x + o_proj(attention(rms_norm(x)))`, over
    /// `past` cached keys and values if any; with `keep_kv`, also this layer's full keys and
    /// values for the cache.
    #[allow(clippy::too_many_arguments)]
    fn attention_block<T: Tape<E, Self>>(
        x: T2<E, Self, T>,
        layer: &LayerParams<E, Self>,
        ctx: &AttentionContext<E, Self>,
        past: Option<&KvPair<E, Self>>,
        keep_kv: bool,
        shape: BlockShape,
        mode: KernelMode,
    ) -> (T2<E, Self, T>, Option<KvPair<E, Self>>) {
        composed_attention_block(x, layer, ctx, past, keep_kv, shape, mode)
    }

    /// The MLP half of a decoder layer: `x + down_proj(silu(gate_proj(h)) · up_proj(h))` with
    /// `h = rms_norm(x)`.
    fn mlp_block<T: Tape<E, Self>>(
        x: T2<E, Self, T>,
        layer: &LayerParams<E, Self>,
        eps: f64,
        mode: KernelMode,
    ) -> T2<E, Self, T> {
        composed_mlp_block(x, layer, eps, mode)
    }
}

/// [`Kernels::attention_block`] from the device's single-block kernels.
#[allow(clippy::too_many_arguments)]
fn composed_attention_block<E: Dtype, D: Kernels<E>, T: Tape<E, D>>(
    x: T2<E, D, T>,
    layer: &LayerParams<E, D>,
    ctx: &AttentionContext<E, D>,
    past: Option<&KvPair<E, D>>,
    keep_kv: bool,
    shape: BlockShape,
    mode: KernelMode,
) -> (T2<E, D, T>, Option<KvPair<E, D>>) {
    let (b, s, hd) = (ctx.mask.rows, ctx.mask.len, shape.head_dim);
    let h = D::rms_norm(x.retaped::<T>(), &layer.input_layernorm, shape.eps, mode);
    let proj = |x: T2<E, D, T>, lin: &Linear<E, D>| {
        D::linear(x, &lin.weight, lin.bias.as_ref(), None, mode)
    };
    let q = proj(h.retaped::<T>(), &layer.q_proj).reshape_like(&(b, s, shape.heads, hd));
    let k = proj(h.retaped::<T>(), &layer.k_proj).reshape_like(&(b, s, shape.kv_heads, hd));
    let v = proj(h, &layer.v_proj).reshape_like(&(b, s, shape.kv_heads, hd));
    let q = D::rope(q, ctx, mode);
    let k = D::rope(k, ctx, mode);
    // With a cache the new keys and values are appended; without a tape, so the
    // concatenation's backward never runs (no `concat_along` on the training path, see
    // `model::forward`).
    let (k, v) = match past {
        Some((pk, pv)) => (
            (pk.clone().retaped::<T>(), k).concat_along(Axis::<1>),
            (pv.clone().retaped::<T>(), v).concat_along(Axis::<1>),
        ),
        None => (k, v),
    };
    let kv = keep_kv.then(|| (k.retaped::<NoneTape>(), v.retaped::<NoneTape>()));
    let attn = D::attention(q, k, v, ctx, mode);
    let o = &layer.o_proj;
    (
        D::linear(attn, &o.weight, o.bias.as_ref(), Some(x), mode),
        kv,
    )
}

/// [`Kernels::mlp_block`] from the device's single-block kernels.
fn composed_mlp_block<E: Dtype, D: Kernels<E>, T: Tape<E, D>>(
    x: T2<E, D, T>,
    layer: &LayerParams<E, D>,
    eps: f64,
    mode: KernelMode,
) -> T2<E, D, T> {
    let h = D::rms_norm(x.retaped::<T>(), &layer.post_attention_layernorm, eps, mode);
    let gate = D::linear(h.retaped::<T>(), &layer.gate_proj, None, None, mode);
    let up = D::linear(h, &layer.up_proj, None, None, mode);
    let act = D::swiglu(gate, up, mode);
    D::linear(act, &layer.down_proj, None, Some(x), mode)
}

/// The CPU: fused kernels unless the mode asks for the reference.
macro_rules! cpu_kernels {
    ($($f:ty),*) => {$(
        impl Kernels<$f> for Cpu {
            fn linear<T: Tape<$f, Self>>(
                x: T2<$f, Self, T>,
                weight: &Matrix<$f, Self>,
                bias: Option<&Vector<$f, Self>>,
                residual: Option<T2<$f, Self, T>>,
                mode: KernelMode,
            ) -> T2<$f, Self, T> {
                match mode {
                    KernelMode::Fused => cpu::linear(x, weight, bias, residual),
                    KernelMode::Reference => reference::linear(x, weight, bias, residual),
                }
            }

            fn rms_norm<T: Tape<$f, Self>>(
                x: T2<$f, Self, T>,
                weight: &Vector<$f, Self>,
                eps: f64,
                mode: KernelMode,
            ) -> T2<$f, Self, T> {
                match mode {
                    KernelMode::Fused => cpu::rms_norm(x, weight, eps),
                    KernelMode::Reference => reference::rms_norm(x, weight, eps),
                }
            }

            fn rope<T: Tape<$f, Self>>(
                x: T4<$f, Self, T>,
                ctx: &AttentionContext<$f, Self>,
                mode: KernelMode,
            ) -> T4<$f, Self, T> {
                match mode {
                    KernelMode::Fused => cpu::rope(x, &ctx.cos, &ctx.sin),
                    KernelMode::Reference => reference::rope(x, &ctx.cos, &ctx.sin),
                }
            }

            fn attention<T: Tape<$f, Self>>(
                q: T4<$f, Self, T>,
                k: T4<$f, Self, T>,
                v: T4<$f, Self, T>,
                ctx: &AttentionContext<$f, Self>,
                mode: KernelMode,
            ) -> T2<$f, Self, T> {
                match mode {
                    KernelMode::Fused => cpu::attention(q, k, v, &ctx.mask),
                    KernelMode::Reference => reference::attention(q, k, v, ctx),
                }
            }

            fn swiglu<T: Tape<$f, Self>>(
                gate: T2<$f, Self, T>,
                up: T2<$f, Self, T>,
                mode: KernelMode,
            ) -> T2<$f, Self, T> {
                match mode {
                    KernelMode::Fused => cpu::swiglu(gate, up),
                    KernelMode::Reference => reference::swiglu(gate, up),
                }
            }

            fn token_logps<T: Tape<$f, Self>>(
                logits: T2<$f, Self, T>,
                targets: &[usize],
                temperature: f64,
                mode: KernelMode,
            ) -> (T1<$f, Self, T>, T1<$f, Self, T>) {
                match mode {
                    KernelMode::Fused => cpu::token_logps(logits, targets, temperature),
                    KernelMode::Reference => reference::token_logps(logits, targets, temperature),
                }
            }

            fn release_grad<S: Shape>(grads: &mut Gradients<$f, Self>, t: &Tensor<S, $f, Self>) {
                if let Ok(g) = grads.get_or_alloc_mut(t) {
                    drop(std::mem::take(&mut **g));
                }
            }

            fn host_weights(
                params: &ModelParams<$f, Self>,
                mode: KernelMode,
            ) -> Option<HostWeights<$f>> {
                (mode == KernelMode::Fused).then(|| cpu::host_weights(params))
            }

            fn decode(
                w: &HostWeights<$f>,
                cache: &mut HostKv<$f>,
                input: DecodeInput<'_, $f>,
            ) -> Vec<$f> {
                cpu::decode::forward(w, cache, input)
            }

            fn attention_block<T: Tape<$f, Self>>(
                x: T2<$f, Self, T>,
                layer: &LayerParams<$f, Self>,
                ctx: &AttentionContext<$f, Self>,
                past: Option<&KvPair<$f, Self>>,
                keep_kv: bool,
                shape: BlockShape,
                mode: KernelMode,
            ) -> (T2<$f, Self, T>, Option<KvPair<$f, Self>>) {
                match mode {
                    KernelMode::Fused => {
                        cpu::attention_block(x, layer, ctx, past, keep_kv, shape)
                    }
                    KernelMode::Reference => {
                        composed_attention_block(x, layer, ctx, past, keep_kv, shape, mode)
                    }
                }
            }

            fn mlp_block<T: Tape<$f, Self>>(
                x: T2<$f, Self, T>,
                layer: &LayerParams<$f, Self>,
                eps: f64,
                mode: KernelMode,
            ) -> T2<$f, Self, T> {
                match mode {
                    KernelMode::Fused => cpu::mlp_block(x, layer, eps),
                    KernelMode::Reference => composed_mlp_block(x, layer, eps, mode),
                }
            }

            fn all_reduce_grad<S: Shape>(
                grads: &mut Gradients<$f, Self>,
                t: &Tensor<S, $f, Self>,
                ranks: &crate::ranks::Ranks,
            ) -> crate::error::Result<()> {
                crate::ranks::all_reduce_cpu_grad(grads, t, ranks)
            }

            fn grad_sq_sum<S: Shape>(
                grads: &mut Gradients<$f, Self>,
                t: &Tensor<S, $f, Self>,
                mode: KernelMode,
            ) -> f64 {
                match mode {
                    KernelMode::Fused => cpu::grad_sq_sum(grads, t),
                    KernelMode::Reference => reference::grad_sq_sum(grads, t),
                }
            }

            fn adamw_update<S: Shape>(
                p: &mut Tensor<S, $f, Self>,
                grads: &mut Gradients<$f, Self>,
                m: &mut Tensor<S, $f, Self>,
                v: &mut Tensor<S, $f, Self>,
                h: &AdamScalars,
                _mode: KernelMode,
            ) {
                // The fused path keeps its moments in host memory (adamw_update_host).
                reference::adamw_update(p, grads, m, v, h)
            }

            fn host_moments(mode: KernelMode) -> bool {
                mode == KernelMode::Fused
            }

            fn adamw_update_host<S: Shape>(
                p: &mut Tensor<S, $f, Self>,
                grads: &mut Gradients<$f, Self>,
                m: &mut [$f],
                v: &mut [$f],
                h: &AdamScalars,
                _mode: KernelMode,
            ) {
                cpu::adamw_update(p, grads, m, v, h)
            }
        }
    )*};
}

cpu_kernels!(f32, f64);

// CUDA runs dfdx's own operations (the trait's default methods); gradients are summed over
// ranks by NCCL or through the host (crate::ranks).
#[cfg(feature = "cuda")]
macro_rules! cuda_kernels {
    ($($f:ty),*) => {$(
        impl Kernels<$f> for Cuda {
            fn all_reduce_grad<S: Shape>(
                grads: &mut Gradients<$f, Self>,
                t: &Tensor<S, $f, Self>,
                ranks: &crate::ranks::Ranks,
            ) -> crate::error::Result<()> {
                crate::ranks::all_reduce_cuda_grad(grads, t, ranks)
            }
        }
    )*};
}
#[cfg(feature = "cuda")]
cuda_kernels!(f32, f64);
