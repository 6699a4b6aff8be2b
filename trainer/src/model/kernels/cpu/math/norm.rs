//! RMSNorm, forward and backward.

use rayon::prelude::*;

use super::*;

/// RMSNorm of `x: [n, d]`: returns `y = w · x · inv` and `inv = 1 / sqrt(mean(x²) + eps)` per row.
pub fn rms_fwd<F: CpuFloat>(x: &[F], w: &[F], eps: f64) -> (Vec<F>, Vec<F>) {
    let d = w.len();
    let n = x.len() / d;
    let eps: F = cast(eps);
    let df: F = cast(d as f64);
    let mut y = vec![F::zero(); n * d];
    let mut inv = vec![F::zero(); n];
    let chunk = rows_per_task(n, d);
    y.par_chunks_mut(chunk * d)
        .zip(inv.par_chunks_mut(chunk))
        .zip(x.par_chunks(chunk * d))
        .for_each(|((ys, invs), xs)| {
            simd(
                #[inline(always)]
                || {
                    for ((yr, r), xr) in ys
                        .chunks_exact_mut(d)
                        .zip(invs.iter_mut())
                        .zip(xs.chunks_exact(d))
                    {
                        let ms = lane_sum(d, |j| xr[j] * xr[j]) / df;
                        *r = (ms + eps).sqrt().recip();
                        let rv = *r;
                        for ((y, x), w) in yr.iter_mut().zip(xr).zip(w) {
                            *y = *x * rv * *w;
                        }
                    }
                },
            )
        });
    (y, inv)
}

/// Backward of [`rms_fwd`]: `dx += inv·(dy⊙w) − inv³·x·⟨dy⊙w, x⟩/d`, `dw += Σ_rows dy⊙x·inv`
/// (summed in a fixed order, so that runs are reproducible).
pub(crate) fn rms_bwd<F: CpuFloat>(
    dy: &[F],
    x: &[F],
    w: &[F],
    inv: &[F],
    dx: &mut [F],
    dw: &mut [F],
) {
    let d = w.len();
    let n = x.len() / d;
    let df: F = cast(d as f64);
    let chunk = rows_per_task(n, d);
    let part: Vec<F> = dx
        .par_chunks_mut(chunk * d)
        .zip(dy.par_chunks(chunk * d))
        .zip(x.par_chunks(chunk * d))
        .zip(inv.par_chunks(chunk))
        .map(|(((dxs, dys), xs), invs)| {
            simd(
                #[inline(always)]
                || {
                    let mut dw = vec![F::zero(); d];
                    for (((dxr, dyr), xr), r) in dxs
                        .chunks_exact_mut(d)
                        .zip(dys.chunks_exact(d))
                        .zip(xs.chunks_exact(d))
                        .zip(invs)
                    {
                        let r = *r;
                        let dot = lane_sum(d, |j| dyr[j] * w[j] * xr[j]);
                        let c = r * r * r * dot / df;
                        for j in 0..d {
                            dxr[j] += r * dyr[j] * w[j] - c * xr[j];
                            dw[j] += dyr[j] * xr[j] * r;
                        }
                    }
                    dw
                },
            )
        })
        .collect::<Vec<Vec<F>>>()
        .into_iter()
        // Partials in chunk order, whatever thread made them: the same sums every run.
        .fold(vec![F::zero(); d], |mut a, b| {
            a.iter_mut().zip(&b).for_each(|(a, b)| *a += *b);
            a
        });
    dw.iter_mut().zip(&part).for_each(|(a, b)| *a += *b);
}
