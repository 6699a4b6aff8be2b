//! The model's blocks composed from dfdx 0.13 operations: what the CUDA device runs, and the
//! reference the fused CPU kernels are tested against.
//!
//! Invariants that keep dfdx 0.13's CPU backward correct (see [`crate::model::forward`]):
//! - no `slice`: RoPE uses `roll` with a signed sine table;
//! - a tensor used twice is reused through `retaped`, so each use adds into the same gradient.

use dfdx::prelude::*;

use super::{AdamScalars, AttentionContext, T1, T2, T4};
use crate::model::params::{Matrix, Vector};

fn scalar<E: Dtype>(x: f64) -> E {
    E::from_f64(x).expect("model constants are finite")
}

/// `x Wᵀ (+ b) (+ residual)` on `[n, in]`.
pub(super) fn linear<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: T2<E, D, T>,
    weight: &Matrix<E, D>,
    bias: Option<&Vector<E, D>>,
    residual: Option<T2<E, D, T>>,
) -> T2<E, D, T> {
    let y = x.matmul(weight.clone().permute::<_, Axes2<1, 0>>());
    let y = match bias {
        Some(b) => {
            let shape = *y.shape();
            y + b.clone().broadcast_like::<_, Axis<0>>(&shape)
        }
        None => y,
    };
    match residual {
        Some(r) => r + y,
        None => y,
    }
}

/// RMSNorm as Hugging Face computes it: `w · x / sqrt(mean(x²) + eps)` over the last axis.
pub(super) fn rms_norm<E: Dtype, D: Device<E>, T: Tape<E, D>>(
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
pub(super) fn rope<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: T4<E, D, T>,
    cos: &T2<E, D>,
    sin: &T2<E, D>,
) -> T4<E, D, T> {
    let shape = *x.shape();
    let cos = cos.clone().broadcast_like::<_, Axes2<0, 2>>(&shape);
    let sin = sin.clone().broadcast_like::<_, Axes2<0, 2>>(&shape);
    let rolled = x.retaped::<T>().roll::<Axis<3>>(shape.3 / 2);
    x * cos + rolled * sin
}

/// Grouped-query attention of `q: [b, s, heads, hd]` over `k`, `v: [b, total, kv_heads, hd]`
/// with the context's additive mask; returns `[b·s, heads·hd]`.
pub(super) fn attention<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    q: T4<E, D, T>,
    k: T4<E, D, T>,
    v: T4<E, D, T>,
    ctx: &AttentionContext<E, D>,
) -> T2<E, D, T> {
    let (b, s, heads, hd) = *q.shape();
    let (_, total, kv_heads, _) = *k.shape();
    let group = heads / kv_heads;
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
    let mask = ctx
        .additive_mask()
        .clone()
        .broadcast_like::<_, Axes2<1, 2>>(&shape5);
    let probs = (scores.reshape_like(&shape5) + mask)
        .softmax::<Axis<4>>()
        .reshape_like(&(b, kv_heads, group * s, total));
    probs
        .matmul(v.permute::<_, Axes4<0, 2, 1, 3>>())
        .reshape_like(&(b, kv_heads, group, s, hd))
        .permute::<_, Axes5<0, 3, 1, 2, 4>>()
        .reshape_like(&(b * s, heads * hd))
}

/// `gate · sigmoid(gate) · up`.
pub(super) fn swiglu<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    gate: T2<E, D, T>,
    up: T2<E, D, T>,
) -> T2<E, D, T> {
    gate.retaped::<T>() * gate.sigmoid() * up
}

/// Log-probabilities of `targets` under `log_softmax(logits / temperature)`, and entropies,
/// both with gradients (the log-probabilities hold the forward's tape; the entropies' own tape
/// holds their few operations and joins it in the loss).
pub(super) fn token_logps<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    logits: T2<E, D, T>,
    targets: &[usize],
    temperature: f64,
) -> (T1<E, D, T>, T1<E, D, T>) {
    let n = logits.shape().0;
    let dev = logits.device().clone();
    let logp = (logits / scalar::<E>(temperature)).log_softmax::<Axis<1>>();
    let entropy = {
        let lp = logp.retaped::<T>();
        (lp.retaped::<T>().exp() * lp)
            .sum::<(usize,), Axis<1>>()
            .negate()
    };
    let logps = logp.select(dev.tensor_from_vec(targets.to_vec(), (n,)));
    (logps, entropy)
}

/// PyTorch's AdamW update for one tensor (`torch.optim.AdamW`, `amsgrad = false`) with the
/// gradient of `p` in `grads` (zeros when it has none), scaled by the clipping factor first.
pub(super) fn adamw_update<S: Shape, E: Dtype, D: Device<E>>(
    p: &mut Tensor<S, E, D>,
    grads: &mut Gradients<E, D>,
    m: &mut Tensor<S, E, D>,
    v: &mut Tensor<S, E, D>,
    h: &AdamScalars,
) {
    let g = grad_of(grads, p) * scalar::<E>(h.clip);
    *m = m.clone() * scalar::<E>(h.beta1) + g.clone() * scalar::<E>(1.0 - h.beta1);
    *v = v.clone() * scalar::<E>(h.beta2) + g.square() * scalar::<E>(1.0 - h.beta2);
    let denom = (v.clone() / scalar::<E>(h.bias2)).sqrt() + scalar::<E>(h.eps);
    let update = m.clone() / scalar::<E>(h.bias1) / denom;
    *p = p.clone() * scalar::<E>(h.decay) - update * scalar::<E>(h.lr);
}

/// `Σ g²` over the gradient of `t` (0 when it has none).
pub(super) fn grad_sq_sum<S: Shape, E: Dtype, D: Device<E>>(
    grads: &mut Gradients<E, D>,
    t: &Tensor<S, E, D>,
) -> f64 {
    let g = grad_of(grads, t);
    let n = g.shape().num_elements();
    // A one-element vector: `as_vec` needs no extra trait bound on the device, unlike `array`.
    let total = g.reshape_like(&(n,)).square().sum::<(), Axis<0>>().as_vec();
    total[0].to_f64().unwrap_or(f64::NAN)
}

/// The gradient of `t`, or zeros when it has none.
fn grad_of<S: Shape, E: Dtype, D: Device<E>>(
    grads: &mut Gradients<E, D>,
    t: &Tensor<S, E, D>,
) -> Tensor<S, E, D> {
    grads.try_alloc_for(t).expect("allocate a zero gradient");
    grads.get(t)
}
