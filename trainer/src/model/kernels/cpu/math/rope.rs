//! Rotary position embeddings, forward and backward.

use rayon::prelude::*;

use super::*;

/// Rotary embedding in place of `x: [rows, row]` (`row = heads·hd`) where row `r` is position
/// `r mod s` of the tables `cos`/`sin: [s, hd]` (`sin` negated on the first half):
/// `y_i = x_i·cos_i + x_{(i+hd/2) mod hd}·sin_i`.
pub fn rope_fwd<F: CpuFloat>(x: &mut [F], row: usize, hd: usize, cos: &[F], sin: &[F]) {
    let s = cos.len() / hd;
    assert!(
        hd.is_multiple_of(2)
            && row.is_multiple_of(hd)
            && x.len().is_multiple_of(row)
            && sin.len() == cos.len(),
        "rope: shapes"
    );
    let half = hd / 2;
    let chunk = rows_per_task(x.len() / row, row);
    x.par_chunks_mut(chunk * row)
        .enumerate()
        .for_each(|(c, xs)| {
            simd(
                #[inline(always)]
                || {
                    for (r, xr) in xs.chunks_exact_mut(row).enumerate() {
                        let p = (c * chunk + r) % s;
                        let (co, si) = (&cos[p * hd..(p + 1) * hd], &sin[p * hd..(p + 1) * hd]);
                        for xh in xr.chunks_exact_mut(hd) {
                            let (lo, hi) = xh.split_at_mut(half);
                            for i in 0..half {
                                let (a, b) = (lo[i], hi[i]);
                                lo[i] = a * co[i] + b * si[i];
                                hi[i] = b * co[i + half] + a * si[i + half];
                            }
                        }
                    }
                },
            )
        });
}

/// Backward of [`rope_fwd`] (its transpose): `dx += Rᵀ dy`.
pub(crate) fn rope_bwd<F: CpuFloat>(
    dy: &[F],
    row: usize,
    hd: usize,
    cos: &[F],
    sin: &[F],
    dx: &mut [F],
) {
    let s = cos.len() / hd;
    let half = hd / 2;
    let chunk = rows_per_task(dy.len() / row, row);
    dx.par_chunks_mut(chunk * row)
        .zip(dy.par_chunks(chunk * row))
        .enumerate()
        .for_each(|(c, (dxs, dys))| {
            simd(
                #[inline(always)]
                || {
                    for (r, (dxr, dyr)) in dxs
                        .chunks_exact_mut(row)
                        .zip(dys.chunks_exact(row))
                        .enumerate()
                    {
                        let p = (c * chunk + r) % s;
                        let (co, si) = (&cos[p * hd..(p + 1) * hd], &sin[p * hd..(p + 1) * hd]);
                        for (dxh, dyh) in dxr.chunks_exact_mut(hd).zip(dyr.chunks_exact(hd)) {
                            let (dlo, dhi) = dxh.split_at_mut(half);
                            let (ylo, yhi) = dyh.split_at(half);
                            for j in 0..half {
                                dlo[j] += ylo[j] * co[j] + yhi[j] * si[j + half];
                                dhi[j] += yhi[j] * co[j + half] + ylo[j] * si[j];
                            }
                        }
                    }
                },
            )
        });
}
