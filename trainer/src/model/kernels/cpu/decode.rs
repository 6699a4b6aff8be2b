//! The cached forward pass of generation on host buffers: no tape, no dfdx tensor between the
//! embedding lookup and the logits.
//!
//! The weights are copied out of dfdx once per generation ([`host_weights`]), each also
//! transposed, and the keys and values live in a [`HostKv`] written in place, so a decoding step
//! copies only its own new keys and values and attends to the cache where it lies
//! ([`math::attn_fwd_strided`]). A step's products have a handful of rows, so each is one pass
//! over a weight: [`math::few_rows_fwd`] streams the transposed weight once where `gemm` would
//! fill a 64-row tile for 4 rows. Every value is computed as the fused blocks compute it
//! ([`super::blocks`]): the same kernels on the same shapes, and the few-row products summed in
//! `gemm`'s order, so a generation samples the same tokens either way (`trainer/tests/it/model_kernels.rs`
//! checks both, bit for bit).

use dfdx::prelude::*;
use rayon::prelude::*;

use super::math::{self, AttnShape};
use super::{CpuFloat, host};
use crate::model::kernels::{BlockShape, DecodeInput, HostKv, HostLayer, HostMatrix, HostWeights};
use crate::model::params::{Linear, ModelParams};

/// A weight matrix as a host buffer, with its transpose.
fn host_matrix<F: CpuFloat>(t: &Tensor<(usize, usize), F, Cpu>) -> HostMatrix<F>
where
    Cpu: Device<F>,
{
    HostMatrix::new(host(t), t.shape().0)
}

/// A linear layer's weight and bias as host buffers.
fn host_linear<F: CpuFloat>(l: &Linear<F, Cpu>) -> (HostMatrix<F>, Option<Vec<F>>)
where
    Cpu: Device<F>,
{
    (host_matrix(&l.weight), l.bias.as_ref().map(host))
}

/// Host copies of every weight the cached forward reads.
pub fn host_weights<F: CpuFloat>(params: &ModelParams<F, Cpu>) -> HostWeights<F>
where
    Cpu: Device<F>,
{
    let layers = params
        .layers
        .par_iter()
        .map(|l| HostLayer {
            input_norm: host(&l.input_layernorm),
            q: host_linear(&l.q_proj),
            k: host_linear(&l.k_proj),
            v: host_linear(&l.v_proj),
            o: host_linear(&l.o_proj),
            post_norm: host(&l.post_attention_layernorm),
            gate: host_matrix(&l.gate_proj),
            up: host_matrix(&l.up_proj),
            down: host_matrix(&l.down_proj),
        })
        .collect();
    HostWeights {
        layers,
        norm: host(&params.norm),
        lm_head: host_matrix(params.lm_head.as_ref().unwrap_or(&params.embed_tokens)),
        embed: params.lm_head.as_ref().map(|_| host(&params.embed_tokens)),
    }
}

/// Runs the new tokens through the model on top of `cache`, appends their keys and values to
/// it, and returns the logits of each sequence's last new position, `[rows, vocab]`.
pub(crate) fn forward<F: CpuFloat>(
    w: &HostWeights<F>,
    cache: &mut HostKv<F>,
    input: DecodeInput<'_, F>,
) -> Vec<F> {
    let DecodeInput {
        ids,
        cos,
        sin,
        mask,
        shape,
    } = input;
    let BlockShape {
        heads,
        kv_heads,
        head_dim: hd,
        eps,
    } = shape;
    let (b, s, past) = (mask.rows, mask.len, mask.past);
    assert!(
        ids.len() == b * s && cache.len == past && cache.rows == b,
        "cached forward: batch and cache disagree"
    );
    let d = w.norm.len();
    let vocab = w.lm_head.out;
    let (qw, kw) = (heads * hd, kv_heads * hd);
    let n = b * s;
    let table = w.embed.as_deref().unwrap_or(&w.lm_head.w);
    let mut x = Vec::with_capacity(n * d);
    for &id in ids {
        let id = (id as usize).min(vocab - 1);
        x.extend_from_slice(&table[id * d..(id + 1) * d]);
    }
    cache.reserve(past + s, w.layers.len(), kw);
    let cap = cache.cap;
    let sh = AttnShape {
        b,
        s,
        total: past + s,
        heads,
        kv_heads,
        hd,
    };
    let project = |h: &[F], (weight, bias): &(HostMatrix<F>, Option<Vec<F>>), width: usize| {
        math::linear_fwd_host(h, weight, bias.as_deref(), None, (n, d, width))
    };
    for (layer, (ck, cv)) in w.layers.iter().zip(cache.layers.iter_mut()) {
        let (h, _) = math::rms_fwd(&x, &layer.input_norm, eps);
        let mut q = project(&h, &layer.q, qw);
        let mut k = project(&h, &layer.k, kw);
        let v = project(&h, &layer.v, kw);
        math::rope_fwd(&mut q, qw, hd, cos, sin);
        math::rope_fwd(&mut k, kw, hd, cos, sin);
        for bi in 0..b {
            let at = (bi * cap + past) * kw;
            let new = bi * s * kw..(bi + 1) * s * kw;
            ck[at..at + s * kw].copy_from_slice(&k[new.clone()]);
            cv[at..at + s * kw].copy_from_slice(&v[new]);
        }
        let (a, _) = math::attn_fwd_strided(&q, ck, cv, cap, sh, mask, false);
        let (o_w, o_b) = &layer.o;
        x = math::linear_fwd_host(&a, o_w, o_b.as_deref(), Some(x), (n, qw, d));
        let (h, _) = math::rms_fwd(&x, &layer.post_norm, eps);
        let f = layer.gate.out;
        let g = math::linear_fwd_host(&h, &layer.gate, None, None, (n, d, f));
        let u = math::linear_fwd_host(&h, &layer.up, None, None, (n, d, f));
        let act = math::swiglu_fwd(&g, &u);
        x = math::linear_fwd_host(&act, &layer.down, None, Some(x), (n, f, d));
    }
    cache.len = past + s;
    // RMSNorm is row by row, so normalising only the last positions gives their values.
    let last: Vec<F> = (0..b)
        .flat_map(|bi| &x[((bi + 1) * s - 1) * d..(bi + 1) * s * d])
        .copied()
        .collect();
    let (h, _) = math::rms_fwd(&last, &w.norm, eps);
    math::linear_fwd_host(&h, &w.lm_head, None, None, (b, d, vocab))
}
