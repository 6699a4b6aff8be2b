//! The optimiser's passes over every parameter: the squared gradient norm and the AdamW
//! update, each one parallel pass over contiguous memory instead of a dozen dfdx operations
//! with a fresh buffer each.

use dfdx::prelude::*;
use rayon::prelude::*;

use super::math::{CpuFloat, cast, simd};
use super::transient;
use crate::model::kernels::AdamScalars;

const CHUNK: usize = 1 << 16;

/// `Σ g²` (accumulated in f64) over the gradient of `t` (0 when it has none); reads the
/// gradient in place.
pub(crate) fn grad_sq_sum<S: Shape, F: CpuFloat>(
    grads: &mut Gradients<F, Cpu>,
    t: &Tensor<S, F, Cpu>,
) -> f64 {
    let g = grads.get_or_alloc_mut(t).expect("allocate a zero gradient");
    g.par_chunks(CHUNK)
        .map(|c| {
            simd(
                #[inline(always)]
                || {
                    let mut acc = [0.0f64; 8];
                    let chunks = c.chunks_exact(8);
                    let rest = chunks.remainder();
                    for c8 in chunks {
                        for (a, x) in acc.iter_mut().zip(c8) {
                            let x = x.to_f64().unwrap_or(f64::NAN);
                            *a += x * x;
                        }
                    }
                    let tail: f64 = rest
                        .iter()
                        .map(|x| x.to_f64().unwrap_or(f64::NAN).powi(2))
                        .sum();
                    acc.iter().sum::<f64>() + tail
                },
            )
        })
        .collect::<Vec<f64>>()
        .iter()
        // Chunk order, whatever thread summed each chunk: the same norm every run.
        .sum()
}

/// PyTorch's AdamW update of `p` and its moments `m`, `v` (host memory, updated in place;
/// `torch.optim.AdamW`, `amsgrad = false`) from `p`'s gradient in `grads` scaled by the
/// clipping factor, in the reference's order of operations. `p` is written in place when
/// nothing else shares its buffer.
pub fn adamw_update<S: Shape, F: CpuFloat>(
    p: &mut Tensor<S, F, Cpu>,
    grads: &mut Gradients<F, Cpu>,
    ms: &mut [F],
    vs: &mut [F],
    h: &AdamScalars,
) {
    let mut ps = transient(p);
    assert!(
        ms.len() == ps.len() && vs.len() == ps.len(),
        "adamw: moment sizes"
    );
    let g = grads.get_or_alloc_mut(p).expect("allocate a zero gradient");
    let (clip, b1, b2, one_b1, one_b2): (F, F, F, F, F) = (
        cast(h.clip),
        cast(h.beta1),
        cast(h.beta2),
        cast(1.0 - h.beta1),
        cast(1.0 - h.beta2),
    );
    let (bias1, bias2, eps, decay, lr): (F, F, F, F, F) = (
        cast(h.bias1),
        cast(h.bias2),
        cast(h.eps),
        cast(h.decay),
        cast(h.lr),
    );
    ps.par_chunks_mut(CHUNK)
        .zip(ms.par_chunks_mut(CHUNK))
        .zip(vs.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((p, m), v), g)| {
            simd(
                #[inline(always)]
                || {
                    for i in 0..p.len() {
                        let g = g[i] * clip;
                        m[i] = m[i] * b1 + g * one_b1;
                        v[i] = v[i] * b2 + g * g * one_b2;
                        let denom = (v[i] / bias2).sqrt() + eps;
                        p[i] = p[i] * decay - m[i] / bias1 / denom * lr;
                    }
                },
            )
        });
    p.copy_from(&ps);
}
