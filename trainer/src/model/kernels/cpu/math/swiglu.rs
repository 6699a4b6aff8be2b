//! SwiGLU, `silu(g) · u`, forward and backward.

use rayon::prelude::*;

use super::*;

const CHUNK: usize = 16_384;

/// `silu(g) · u` element-wise, where `silu(g) = g · sigmoid(g)`.
pub fn swiglu_fwd<F: CpuFloat>(g: &[F], u: &[F]) -> Vec<F> {
    assert_eq!(g.len(), u.len(), "swiglu: sizes");
    let mut y = vec![F::zero(); g.len()];
    y.par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(u.par_chunks(CHUNK))
        .for_each(|((y, g), u)| {
            simd(
                #[inline(always)]
                || {
                    for ((y, g), u) in y.iter_mut().zip(g).zip(u) {
                        let sig = (F::one() + (-*g).vexp()).recip();
                        *y = *g * sig * *u;
                    }
                },
            )
        });
    y
}

/// Backward of [`swiglu_fwd`]: `dg += dy·u·σ(g)(1 + g(1 − σ(g)))`, `du += dy·silu(g)`.
pub(crate) fn swiglu_bwd<F: CpuFloat>(dy: &[F], g: &[F], u: &[F], dg: &mut [F], du: &mut [F]) {
    assert!(
        dy.len() == g.len() && u.len() == g.len() && dg.len() == g.len() && du.len() == g.len(),
        "swiglu backward: sizes"
    );
    dg.par_chunks_mut(CHUNK)
        .zip(du.par_chunks_mut(CHUNK))
        .zip(
            dy.par_chunks(CHUNK)
                .zip(g.par_chunks(CHUNK))
                .zip(u.par_chunks(CHUNK)),
        )
        .for_each(|((dg, du), ((dy, g), u))| {
            simd(
                #[inline(always)]
                || {
                    for i in 0..dg.len() {
                        let (gi, ui, d) = (g[i], u[i], dy[i]);
                        let sig = (F::one() + (-gi).vexp()).recip();
                        du[i] += d * gi * sig;
                        dg[i] += d * ui * sig * (F::one() + gi * (F::one() - sig));
                    }
                },
            )
        });
}
