//! Single blocks as dfdx operations: a linear layer, RMSNorm, RoPE, masked attention, SwiGLU
//! and the token log-probabilities. The model uses the first, second and last (final norm, LM
//! head, log-probabilities); all of them back the fused path of [`Kernels`]'s per-block
//! methods, which the gradient checks exercise one by one.
//!
//! [`Kernels`]: crate::model::Kernels

use dfdx::prelude::*;

use super::math::{self, AttnShape};
use super::{CpuFloat, Res, T2, host, linear_grads, put_grad, take_grad, transient};
use crate::model::kernels::AttentionMask;

type T1<F, T = NoneTape> = Tensor<(usize,), F, Cpu, T>;
type T4<F, T = NoneTape> = Tensor<(usize, usize, usize, usize), F, Cpu, T>;

/// `y = x Wᵀ (+ bias) (+ residual)` on `x: [n, in]`, `W: [out, in]`.
pub fn linear<F: CpuFloat, T: Tape<F, Cpu>>(
    x: T2<F, T>,
    weight: &T2<F>,
    bias: Option<&T1<F>>,
    residual: Option<T2<F, T>>,
) -> T2<F, T> {
    let (n, k) = *x.shape();
    let m = weight.shape().0;
    let ws = transient(weight);
    let dev = x.device().clone();
    let (x, mut tape) = x.split_tape();
    let residual = residual.map(|r| {
        let (r, t) = r.split_tape();
        tape = std::mem::take(&mut tape).merge(t);
        r
    });
    let y = math::linear_fwd(
        &host(&x),
        &ws,
        bias.map(host).as_deref(),
        residual.as_ref().map(host),
        (n, k, m),
    );
    drop(ws);
    let out = dev.tensor_from_vec(y, (n, m));
    if T::OWNS_TAPE {
        let (out_key, w_key, b_key) = (out.clone(), weight.clone(), bias.cloned());
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            if let Some(r) = &residual {
                math::add_into(grads.get_or_alloc_mut(r)?, &dy);
            }
            let (xs, ws) = (host(&x), transient(&w_key));
            let mut dx = take_grad(grads, &x)?;
            let w = (&w_key, &*ws);
            linear_grads(grads, w, b_key.as_ref(), &dy, &xs, (n, k, m), &mut dx)?;
            put_grad(grads, &x, dx)
        });
    }
    out.put_tape(tape)
}

/// `w · x / sqrt(mean(x²) + eps)` over the last axis of `x: [n, d]`.
pub fn rms_norm<F: CpuFloat, T: Tape<F, Cpu>>(x: T2<F, T>, weight: &T1<F>, eps: f64) -> T2<F, T> {
    let shape = *x.shape();
    assert_eq!(weight.shape().0, shape.1, "rms_norm: weight length");
    let dev = x.device().clone();
    let (x, mut tape) = x.split_tape();
    let (y, inv) = math::rms_fwd(&host(&x), &host(weight), eps);
    let out = dev.tensor_from_vec(y, shape);
    if T::OWNS_TAPE {
        let (out_key, w_key) = (out.clone(), weight.clone());
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            let (xs, ws) = (host(&x), host(&w_key));
            let mut dw = take_grad(grads, &w_key)?;
            math::rms_bwd(&dy, &xs, &ws, &inv, grads.get_or_alloc_mut(&x)?, &mut dw);
            put_grad(grads, &w_key, dw)
        });
    }
    out.put_tape(tape)
}

/// Rotary embedding of `x: [rows, len, heads, head_dim]` with `cos`/`sin: [len, head_dim]`
/// (`sin` negated on the first half): `y_i = x_i·cos_i + x_{(i+hd/2) mod hd}·sin_i`.
pub fn rope<F: CpuFloat, T: Tape<F, Cpu>>(x: T4<F, T>, cos: &T2<F>, sin: &T2<F>) -> T4<F, T> {
    let shape = *x.shape();
    let (_, s, h, hd) = shape;
    assert_eq!(*cos.shape(), (s, hd), "rope: table shape");
    let dev = x.device().clone();
    let (x, mut tape) = x.split_tape();
    let (cs, sn) = (host(cos), host(sin));
    let mut y = host(&x);
    math::rope_fwd(&mut y, h * hd, hd, &cs, &sn);
    let out = dev.tensor_from_vec(y, shape);
    if T::OWNS_TAPE {
        let out_key = out.clone();
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            math::rope_bwd(&dy, h * hd, hd, &cs, &sn, grads.get_or_alloc_mut(&x)?);
            Ok(())
        });
    }
    out.put_tape(tape)
}

/// Grouped-query attention of `q: [b, s, heads, hd]` over `k`, `v: [b, past + s, kv_heads, hd]`
/// (keys after RoPE) with the causal and key-padding mask; returns `[b·s, heads·hd]`. `q`, `k`
/// and `v` must be three different tensors (their gradients are taken out of the store at
/// once).
pub fn attention<F: CpuFloat, T: Tape<F, Cpu>>(
    q: T4<F, T>,
    k: T4<F, T>,
    v: T4<F, T>,
    mask: &AttentionMask,
) -> T2<F, T> {
    let (b, s, heads, hd) = *q.shape();
    let (_, total, kv_heads, _) = *k.shape();
    assert_eq!(*v.shape(), *k.shape(), "attention: k/v shapes");
    let sh = AttnShape {
        b,
        s,
        total,
        heads,
        kv_heads,
        hd,
    };
    let dev = q.device().clone();
    let (q, tq) = q.split_tape();
    let (k, tk) = k.split_tape();
    let (v, tv) = v.split_tape();
    let mut tape = tq.merge(tk).merge(tv);
    let (qs, ks, vs) = (host(&q), host(&k), host(&v));
    let (out, probs) = math::attn_fwd(&qs, &ks, &vs, sh, mask, T::OWNS_TAPE);
    let out = dev.tensor_from_vec(out, (b * s, heads * hd));
    if let Some(probs) = probs {
        let out_key = out.clone();
        let mask = mask.clone();
        tape.add_backward_op(move |grads| -> Res {
            let dout = take_grad(grads, &out_key)?;
            let mut dq = take_grad(grads, &q)?;
            let mut dk = take_grad(grads, &k)?;
            let mut dv = take_grad(grads, &v)?;
            math::attn_bwd(
                &dout,
                &qs,
                &ks,
                &vs,
                &probs,
                sh,
                &mask,
                (&mut dq, &mut dk, &mut dv),
            );
            put_grad(grads, &q, dq)?;
            put_grad(grads, &k, dk)?;
            put_grad(grads, &v, dv)
        });
    }
    out.put_tape(tape)
}

/// `silu(gate) · up` element-wise, where `silu(g) = g · sigmoid(g)`.
pub fn swiglu<F: CpuFloat, T: Tape<F, Cpu>>(gate: T2<F, T>, up: T2<F, T>) -> T2<F, T> {
    let shape = *gate.shape();
    assert_eq!(shape, *up.shape(), "swiglu: gate and up shapes");
    let dev = gate.device().clone();
    let (gate, tg) = gate.split_tape();
    let (up, tu) = up.split_tape();
    let mut tape = tg.merge(tu);
    let (gs, us) = (host(&gate), host(&up));
    let out = dev.tensor_from_vec(math::swiglu_fwd(&gs, &us), shape);
    if T::OWNS_TAPE {
        let out_key = out.clone();
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            let mut dg = take_grad(grads, &gate)?;
            math::swiglu_bwd(&dy, &gs, &us, &mut dg, grads.get_or_alloc_mut(&up)?);
            put_grad(grads, &gate, dg)
        });
    }
    out.put_tape(tape)
}

/// Log-probabilities of `targets` under `softmax(logits / temperature)` for `logits: [n, vocab]`,
/// and the entropies of those distributions, both with gradients: the logits' gradient is
/// computed once, in one pass over the vocabulary, from both (the entropies' tape is empty;
/// the backward step on the log-probabilities' tape reads their gradient, zero when unused).
pub fn token_logps<F: CpuFloat, T: Tape<F, Cpu>>(
    logits: T2<F, T>,
    targets: &[usize],
    temperature: f64,
) -> (T1<F, T>, T1<F, T>) {
    let (n, vocab) = *logits.shape();
    assert_eq!(targets.len(), n, "token_logps: one target per row");
    let dev = logits.device().clone();
    let (logits, mut tape) = logits.split_tape();
    let ls = host(&logits);
    let (logp, entropy, lse) = math::logps_fwd(&ls, vocab, targets, temperature);
    let out = dev.tensor_from_vec(logp, (n,));
    let entropy = dev.tensor_from_vec(entropy, (n,));
    if T::OWNS_TAPE {
        let out_key = out.clone();
        let entropy_key = entropy.clone();
        let targets = targets.to_vec();
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            let dh = take_grad(grads, &entropy_key)?;
            let used = dh.iter().any(|g| *g != F::zero());
            let entropy = entropy_key.as_vec();
            let step = math::LogpsGrads {
                dlogp: &dy,
                dentropy: used.then_some(dh.as_slice()),
                entropy: &entropy,
                lse: &lse,
            };
            let dl = grads.get_or_alloc_mut(&logits)?;
            math::logps_bwd(&step, &ls, vocab, &targets, temperature, dl);
            Ok(())
        });
    }
    (out.put_tape(tape), entropy.put_tape(T::default()))
}
