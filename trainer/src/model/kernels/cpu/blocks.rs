//! The two halves of a decoder layer, each as one dfdx operation on the residual stream:
//!
//! - [`attention_block`]: `x + o_proj(attention(rope(q_proj(h)), rope(k_proj(h)), v_proj(h)))`
//!   with `h = rms_norm(x)`;
//! - [`mlp_block`]: `x + down_proj(silu(gate_proj(h)) · up_proj(h))` with `h = rms_norm(x)`.
//!
//! The intermediates live in the backward closure as plain buffers; only the residual stream
//! crosses into dfdx, so each half copies one `[n, hidden]` tensor in and hands one out.

use dfdx::prelude::*;

use super::math::{self, AttnShape};
use super::{CpuFloat, Res, T2, host, linear_grads, put_grad, take_grad, transients};

use crate::model::kernels::{AttentionContext, BlockShape, KvPair};
use crate::model::params::{LayerParams, Linear};

/// Backward of one linear layer of the block (`w`: its weight's elements): `dx += dy W`, and
/// the weight (and bias) gradients in the store.
fn layer_grads<F: CpuFloat>(
    grads: &mut Gradients<F, Cpu>,
    (l, w): (&Linear<F, Cpu>, &[F]),
    dy: &[F],
    x: &[F],
    dims: (usize, usize, usize),
    dx: &mut [F],
) -> Res
where
    Cpu: Device<F>,
{
    linear_grads(grads, (&l.weight, w), l.bias.as_ref(), dy, x, dims, dx)
}

/// Appends the new rows of each sequence to its cached ones: `[b, past, row] ++ [b, s, row]`.
fn concat_rows<F: CpuFloat>(past: &[F], new: &[F], b: usize, row: usize) -> Vec<F> {
    let (p, s) = (past.len() / (b * row), new.len() / (b * row));
    let mut out = Vec::with_capacity(past.len() + new.len());
    for bi in 0..b {
        out.extend_from_slice(&past[bi * p * row..(bi + 1) * p * row]);
        out.extend_from_slice(&new[bi * s * row..(bi + 1) * s * row]);
    }
    out
}

/// The attention half of a decoder layer on `x: [rows·len, hidden]` (see the module
/// documentation), over `past` cached keys and values if any. Returns the new residual stream
/// and, with `keep_kv`, this layer's full keys and values for the cache. A cache is for
/// generation: with a tape, `past` must be `None`.
#[allow(clippy::too_many_arguments)]
pub fn attention_block<F: CpuFloat, T: Tape<F, Cpu>>(
    x: T2<F, T>,
    layer: &LayerParams<F, Cpu>,
    ctx: &AttentionContext<F, Cpu>,
    past: Option<&KvPair<F, Cpu>>,
    keep_kv: bool,
    shape: BlockShape,
) -> (T2<F, T>, Option<KvPair<F, Cpu>>)
where
    Cpu: Device<F>,
{
    assert!(
        past.is_none() || !T::OWNS_TAPE,
        "attention_block: a KV cache is for generation only"
    );
    let (n, d) = *x.shape();
    let (b, s, p) = (ctx.mask.rows, ctx.mask.len, ctx.mask.past);
    let BlockShape {
        heads,
        kv_heads,
        head_dim: hd,
        eps,
    } = shape;
    assert_eq!(n, b * s, "attention_block: rows");
    let (qw, kw) = (heads * hd, kv_heads * hd);
    let sh = AttnShape {
        b,
        s,
        total: p + s,
        heads,
        kv_heads,
        hd,
    };
    let dev = x.device().clone();
    let (x, mut tape) = x.split_tape();
    let (cos, sin) = (host(&ctx.cos), host(&ctx.sin));
    let xs = host(&x);
    let ln = host(&layer.input_layernorm);
    let (h, inv) = math::rms_fwd(&xs, &ln, eps);
    let [wq, wk, wv, wo] = transients([
        &layer.q_proj.weight,
        &layer.k_proj.weight,
        &layer.v_proj.weight,
        &layer.o_proj.weight,
    ]);
    let project = |l: &Linear<F, Cpu>, w: &[F], width: usize| {
        let bias = l.bias.as_ref().map(host);
        math::linear_fwd(&h, w, bias.as_deref(), None, (n, d, width))
    };
    // One after the other, each on every thread: q's product and k's and v's together differ
    // in size (3:2 in base-100m), so beside each other one core would idle for longer than
    // sharing each product costs.
    let mut q = project(&layer.q_proj, &wq, qw);
    let mut k = project(&layer.k_proj, &wk, kw);
    let v = project(&layer.v_proj, &wv, kw);
    drop((wq, wk, wv));
    math::rope_fwd(&mut q, qw, hd, &cos, &sin);
    math::rope_fwd(&mut k, kw, hd, &cos, &sin);
    let (k, v) = match past {
        Some((pk, pv)) => (
            concat_rows(&host(pk), &k, b, kw),
            concat_rows(&host(pv), &v, b, kw),
        ),
        None => (k, v),
    };
    let (a, probs) = math::attn_fwd(&q, &k, &v, sh, &ctx.mask, T::OWNS_TAPE);
    let o = &layer.o_proj;
    let bo = o.bias.as_ref().map(host);
    let y = math::linear_fwd(&a, &wo, bo.as_deref(), Some(xs), (n, qw, d));
    drop((bo, ln, wo));
    let out = dev.tensor_from_vec(y, (n, d));
    let kv_shape = (b, p + s, kv_heads, hd);
    // Without a tape nothing else needs k and v, so the cache takes them as they are.
    let (kv, saved) = if T::OWNS_TAPE {
        let kv = keep_kv.then(|| {
            (
                dev.tensor_from_vec(k.clone(), kv_shape),
                dev.tensor_from_vec(v.clone(), kv_shape),
            )
        });
        (kv, Some((k, v)))
    } else {
        let kv = keep_kv.then(|| {
            (
                dev.tensor_from_vec(k, kv_shape),
                dev.tensor_from_vec(v, kv_shape),
            )
        });
        (kv, None)
    };
    if let (Some(probs), Some((k, v))) = (probs, saved) {
        let out_key = out.clone();
        let layer = layer.clone();
        let mask = ctx.mask.clone();
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            let [wq, wk, wv, wo] = transients([
                &layer.q_proj.weight,
                &layer.k_proj.weight,
                &layer.v_proj.weight,
                &layer.o_proj.weight,
            ]);
            let mut da = vec![F::zero(); n * qw];
            layer_grads(grads, (&layer.o_proj, &wo), &dy, &a, (n, qw, d), &mut da)?;
            drop(wo);
            drop(a);
            let (mut dq, mut dk, mut dv) = (
                vec![F::zero(); q.len()],
                vec![F::zero(); k.len()],
                vec![F::zero(); v.len()],
            );
            math::attn_bwd(
                &da,
                &q,
                &k,
                &v,
                &probs,
                sh,
                &mask,
                (&mut dq, &mut dk, &mut dv),
            );
            drop((probs, da));
            let mut dq_pre = vec![F::zero(); dq.len()];
            math::rope_bwd(&dq, qw, hd, &cos, &sin, &mut dq_pre);
            let mut dk_pre = vec![F::zero(); dk.len()];
            math::rope_bwd(&dk, kw, hd, &cos, &sin, &mut dk_pre);
            let mut dh = vec![F::zero(); n * d];
            let inputs = [
                (&layer.q_proj, &*wq, &*dq_pre, qw),
                (&layer.k_proj, &*wk, &*dk_pre, kw),
                (&layer.v_proj, &*wv, &*dv, kw),
            ];
            for (l, w, dy, width) in inputs {
                layer_grads(grads, (l, w), dy, &h, (n, d, width), &mut dh)?;
            }
            drop((wq, wk, wv));
            let xs = host(&x);
            let ln = host(&layer.input_layernorm);
            let mut dln = take_grad(grads, &layer.input_layernorm)?;
            let mut dx = take_grad(grads, &x)?;
            math::add_into(&mut dx, &dy);
            math::rms_bwd(&dh, &xs, &ln, &inv, &mut dx, &mut dln);
            put_grad(grads, &x, dx)?;
            put_grad(grads, &layer.input_layernorm, dln)
        });
    }
    (out.put_tape(tape), kv)
}

/// The MLP half of a decoder layer on `x: [n, hidden]` (see the module documentation).
pub fn mlp_block<F: CpuFloat, T: Tape<F, Cpu>>(
    x: T2<F, T>,
    layer: &LayerParams<F, Cpu>,
    eps: f64,
) -> T2<F, T>
where
    Cpu: Device<F>,
{
    let (n, d) = *x.shape();
    let f = layer.gate_proj.shape().0;
    let dev = x.device().clone();
    let (x, mut tape) = x.split_tape();
    let xs = host(&x);
    let ln = host(&layer.post_attention_layernorm);
    let (h, inv) = math::rms_fwd(&xs, &ln, eps);
    let [wg, wu, wd] = transients([&layer.gate_proj, &layer.up_proj, &layer.down_proj]);
    // The gate and up products are the same size: one beside the other.
    let (g, u) = math::side_by_side(
        |t| math::linear_fwd_on(t, &h, &wg, None, None, (n, d, f)),
        |t| math::linear_fwd_on(t, &h, &wu, None, None, (n, d, f)),
    );
    let act = math::swiglu_fwd(&g, &u);
    let y = math::linear_fwd(&act, &wd, None, Some(xs), (n, f, d));
    drop((ln, wg, wu, wd));
    let out = dev.tensor_from_vec(y, (n, d));
    if T::OWNS_TAPE {
        let out_key = out.clone();
        let (ln_key, gate, up, down) = (
            layer.post_attention_layernorm.clone(),
            layer.gate_proj.clone(),
            layer.up_proj.clone(),
            layer.down_proj.clone(),
        );
        tape.add_backward_op(move |grads| -> Res {
            let dy = take_grad(grads, &out_key)?;
            let [wg, wu, wd] = transients([&gate, &up, &down]);
            let mut dact = vec![F::zero(); n * f];
            linear_grads(grads, (&down, &wd), None, &dy, &act, (n, f, d), &mut dact)?;
            drop(wd);
            drop(act);
            let (mut dg, mut du) = (vec![F::zero(); n * f], vec![F::zero(); n * f]);
            math::swiglu_bwd(&dact, &g, &u, &mut dg, &mut du);
            drop((dact, g, u));
            let mut dh = vec![F::zero(); n * d];
            linear_grads(grads, (&gate, &wg), None, &dg, &h, (n, d, f), &mut dh)?;
            linear_grads(grads, (&up, &wu), None, &du, &h, (n, d, f), &mut dh)?;
            drop((wg, wu));
            let xs = host(&x);
            let ln = host(&ln_key);
            let mut dln = take_grad(grads, &ln_key)?;
            let mut dx = take_grad(grads, &x)?;
            math::add_into(&mut dx, &dy);
            math::rms_bwd(&dh, &xs, &ln, &inv, &mut dx, &mut dln);
            put_grad(grads, &x, dx)?;
            put_grad(grads, &ln_key, dln)
        });
    }
    out.put_tape(tape)
}
