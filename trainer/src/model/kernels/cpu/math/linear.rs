//! Matrix products on `gemm` and the linear layers built on them: forward and backward of
//! `x Wᵀ (+ bias) (+ residual)`, and decoding's few-row products summed in `gemm`'s order.

use gemm::Parallelism;
use rayon::prelude::*;

use super::*;

/// `dst ← (accumulate ? dst : 0) + scale · a · b` for `a` m×k, `b` k×n and a row-major `dst`
/// with `ld` elements per row.
///
/// # Safety
/// Every view must cover its whole matrix inside one live allocation (`dst` may be
/// uninitialised when `accumulate` is false), and `dst` must not overlap `a` or `b` nor be
/// written by another thread meanwhile.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn matmul<F: CpuFloat>(
    (m, n, k): (usize, usize, usize),
    dst: *mut F,
    ld: usize,
    accumulate: bool,
    a: View<F>,
    b: View<F>,
    scale: F,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: element (i, j) of dst is inside its allocation (caller's contract).
                    unsafe { dst.add(i * ld + j).write(F::zero()) };
                }
            }
        }
        return;
    }
    // Big products with at least as many rows as columns (the linear layers' forward, their
    // input and weight gradients) run as one single-threaded product per band of rows: on 2
    // cores that measured up to 2× faster than gemm's own split for the weight-gradient shapes
    // (docs/benchmarks.md). Small products are not worth a second thread.
    if threads > 1 && m >= n && m >= 2 * threads && m * n * k >= 1 << 20 {
        let band = m.div_ceil(threads);
        let (dst, a_ptr, b_ptr) = (
            Shared(dst),
            Shared(a.ptr as *mut F),
            Shared(b.ptr as *mut F),
        );
        let (a_rs, a_cs, b_rs, b_cs) = (a.rs, a.cs, b.rs, b.cs);
        (0..threads).into_par_iter().for_each(|t| {
            let lo = (t * band).min(m);
            let hi = ((t + 1) * band).min(m);
            if lo < hi {
                // SAFETY: lo < m, so row lo of `a` starts inside the m×k view the caller
                // guarantees to lie in one allocation.
                let a_lo = unsafe { a_ptr.at(lo * a_rs) };
                let a = View {
                    ptr: a_lo as *const F,
                    rs: a_rs,
                    cs: a_cs,
                };
                // SAFETY: offset 0 is the pointer itself.
                let b_all = unsafe { b_ptr.at(0) };
                let b = View {
                    ptr: b_all as *const F,
                    rs: b_rs,
                    cs: b_cs,
                };
                // SAFETY: rows lo..hi of dst (row lo at dst + lo·ld, inside dst's m rows) and of
                // a are inside the caller's views; b is the caller's whole view; the bands of
                // dst are disjoint, so no two tasks write the same element, and dst overlaps
                // neither a nor b (caller's contract).
                unsafe {
                    matmul(
                        (hi - lo, n, k),
                        dst.at(lo * ld),
                        ld,
                        accumulate,
                        a,
                        b,
                        scale,
                        1,
                    )
                };
            }
        });
        return;
    }
    let parallelism = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // SAFETY: forwarded from the caller's contract; strides fit in isize for any real buffer.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            ld as isize,
            accumulate,
            a.ptr,
            a.cs as isize,
            a.rs as isize,
            b.ptr,
            b.cs as isize,
            b.rs as isize,
            F::one(),
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `x Wᵀ (+ bias)` for `x: [n, k]`, `W: [m, k]`; `init` (if any) is added (a residual).
pub fn linear_fwd<F: CpuFloat>(
    x: &[F],
    w: &[F],
    bias: Option<&[F]>,
    init: Option<Vec<F>>,
    (n, k, m): (usize, usize, usize),
) -> Vec<F> {
    assert!(
        x.len() == n * k && w.len() == m * k,
        "linear: operand sizes"
    );
    let start = linear_start(bias, init, n, m);
    let accumulate = start.is_some();
    let mut y = start.unwrap_or_else(|| Vec::with_capacity(n * m));
    // SAFETY: y has room for n×m elements (initialised when accumulating), x is n×k and w m×k;
    // without accumulation the product writes all n×m elements before set_len exposes them.
    unsafe {
        matmul(
            (n, m, k),
            y.as_mut_ptr(),
            m,
            accumulate,
            View::rows(x.as_ptr(), k),
            View::t(w.as_ptr(), k),
            F::one(),
            threads(),
        );
        y.set_len(n * m);
    }
    y
}

/// A weight matrix `[out, in]` in host memory, and its transpose packed for the few-row
/// products of decoding steps ([`linear_fwd_host`]).
#[derive(Debug, Clone)]
pub struct HostMatrix<F> {
    /// Row-major `[out, in]` (Hugging Face's layout).
    pub w: Vec<F>,
    /// The transpose `[in, out]` in bands of [`FEW_COLS`] columns, each band contiguous
    /// (`[in, width]` row-major, the last band narrower), so that a task streams its band
    /// front to back; empty where [`few_rows_fwd`] does not run (no FMA, or `f64`).
    pub bands: Vec<F>,
    /// Output features.
    pub out: usize,
}

impl<F: CpuFloat> HostMatrix<F> {
    /// A matrix from its row-major `[out, in]` elements.
    pub fn new(w: Vec<F>, out: usize) -> Self {
        if few_rows_geometry::<F>().is_none() {
            return Self {
                w,
                bands: Vec::new(),
                out,
            };
        }
        let k = w.len().checked_div(out).unwrap_or(0);
        let mut bands = Vec::with_capacity(w.len());
        for c0 in (0..out).step_by(FEW_COLS) {
            let rows = &w[c0 * k..(c0 + FEW_COLS).min(out) * k];
            for kk in 0..k {
                bands.extend(rows.chunks_exact(k).map(|row| row[kk]));
            }
        }
        Self { w, bands, out }
    }
}

/// Rows at most for which [`linear_fwd_host`] runs [`few_rows_fwd`] (a decoding step's batch).
pub const FEW_ROWS: usize = 16;

/// The micro-kernel geometry `(mr, nr)` of the `f32` product `gemm` dispatches to on this CPU,
/// where its kernel sums each output as one chain of fused multiply-adds per block of depth;
/// `None` elsewhere.
fn gemm_f32_geometry() -> Option<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        // gemm 0.19 with `x86-v4`: 4×16 rows by 6 columns on AVX-512, 2×8 by 6 on AVX2 + FMA.
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some((64, 6));
        }
        if std::arch::is_x86_feature_detected!("fma") {
            return Some((16, 6));
        }
    }
    None
}

/// [`gemm_f32_geometry`] where [`few_rows_fwd`] runs on `F`.
fn few_rows_geometry<F: CpuFloat>() -> Option<(usize, usize)> {
    gemm_f32_geometry().filter(|_| F::FEW_ROWS)
}

/// The depth of `gemm`'s blocks for an `m×k · k×n` product whose kernel is `(mr, nr)`
/// (`gemm_common`'s own rule: it depends on `k` and the L1 cache, not on `m` or `n`, except
/// that products of at most 64×64 use blocks of 512).
fn gemm_block_depth(m: usize, n: usize, k: usize, (mr, nr): (usize, usize)) -> usize {
    if m <= 64 && n <= 64 {
        k.min(512)
    } else {
        gemm_common::cache::kernel_params(m, n, k, mr, nr, 4).kc
    }
}

/// `x Wᵀ (+ bias)` with `init` added, as [`linear_fwd`], reading the weight from `w`: a product
/// of 2 to [`FEW_ROWS`] rows runs [`few_rows_fwd`] on the transposed weight where it computes
/// what `gemm` computes; anything else runs [`linear_fwd`].
pub fn linear_fwd_host<F: CpuFloat>(
    x: &[F],
    w: &HostMatrix<F>,
    bias: Option<&[F]>,
    init: Option<Vec<F>>,
    (n, k, m): (usize, usize, usize),
) -> Vec<F> {
    assert_eq!(w.out, m, "linear: weight shape");
    // gemm sums other shapes differently: one row is a matrix-vector product, at most 256
    // outputs a horizontal kernel, a depth of 2 or less an outer product.
    match few_rows_geometry::<F>() {
        Some(g) if (2..=FEW_ROWS).contains(&n) && n * m > 256 && k > 2 => few_rows_fwd(
            x,
            &w.bands,
            bias,
            init,
            (n, k, m),
            gemm_block_depth(n, m, k, g),
        ),
        _ => linear_fwd(x, &w.w, bias, init, (n, k, m)),
    }
}

/// Output columns per task of [`few_rows_fwd`].
pub const FEW_COLS: usize = 32;

/// `x Wᵀ (+ bias)` with `init` added for a few rows of `x: [n, k]`, reading the transposed
/// weight packed in bands (`wt`, see [`HostMatrix::bands`]), summed as `gemm`'s kernel sums
/// it: per output, one chain of fused multiply-adds over each block of `depth` inputs, each block's sum added to the output in
/// turn (the first block's written, when nothing is to be added to), so the result is `gemm`'s
/// bit for bit (trainer/tests/it/model_kernels.rs). A decoding step's product is a pass over the weight:
/// here the weight is streamed once, 32 columns by 4 rows at a time in registers, where `gemm`
/// would fill a 64-row tile for 4 rows and read its columns six strided streams at a time.
pub fn few_rows_fwd<F: CpuFloat>(
    x: &[F],
    wt: &[F],
    bias: Option<&[F]>,
    init: Option<Vec<F>>,
    (n, k, m): (usize, usize, usize),
    depth: usize,
) -> Vec<F> {
    assert!(
        x.len() == n * k && wt.len() == k * m && depth > 0,
        "few-row product: operand sizes"
    );
    let start = linear_start(bias, init, n, m);
    let accumulate = start.is_some();
    let start = start.unwrap_or_else(|| vec![F::zero(); n * m]);
    // Each task owns columns c0..c0+width of every row: its own buffer, `[n, width]`.
    let bands: Vec<Vec<F>> = (0..m.div_ceil(FEW_COLS))
        .into_par_iter()
        .map(|band| {
            let c0 = band * FEW_COLS;
            let width = FEW_COLS.min(m - c0);
            let panel = &wt[c0 * k..(c0 + width) * k];
            let mut out: Vec<F> = (0..n)
                .flat_map(|r| &start[r * m + c0..r * m + c0 + width])
                .copied()
                .collect();
            simd(
                #[inline(always)]
                || {
                    let mut k0 = 0;
                    while k0 < k {
                        let k1 = (k0 + depth).min(k);
                        let write = k0 == 0 && !accumulate;
                        let mut r0 = 0;
                        while r0 < n {
                            let tile = Tile {
                                x,
                                panel,
                                k,
                                r0,
                                depth: k0..k1,
                            };
                            let rows = (n - r0).min(4);
                            let out = &mut out[r0 * width..(r0 + rows) * width];
                            match (rows, width == FEW_COLS) {
                                (4, true) => tile.run::<4, FEW_COLS>(out, width, write),
                                (3, true) => tile.run::<3, FEW_COLS>(out, width, write),
                                (2, true) => tile.run::<2, FEW_COLS>(out, width, write),
                                (1, true) => tile.run::<1, FEW_COLS>(out, width, write),
                                _ => tile.run_narrow(out, rows, width, write),
                            }
                            r0 += rows;
                        }
                        k0 = k1;
                    }
                },
            );
            out
        })
        .collect();
    let mut y = Vec::with_capacity(n * m);
    for r in 0..n {
        for (band, part) in bands.iter().enumerate() {
            let width = FEW_COLS.min(m - band * FEW_COLS);
            y.extend_from_slice(&part[r * width..(r + 1) * width]);
        }
    }
    y
}

/// One block of depth of [`few_rows_fwd`] for up to 4 rows from `r0` and one band of columns.
struct Tile<'a, F> {
    x: &'a [F],
    /// The band of the transposed weight, `[k, width]`.
    panel: &'a [F],
    k: usize,
    r0: usize,
    depth: std::ops::Range<usize>,
}

impl<F: CpuFloat> Tile<'_, F> {
    /// `R` rows by `W` columns with the sums in registers; `out` is `[R, width]`.
    #[inline(always)]
    fn run<const R: usize, const W: usize>(&self, out: &mut [F], width: usize, write: bool) {
        let mut acc = [[F::zero(); W]; R];
        for kk in self.depth.clone() {
            let w: &[F; W] = self.panel[kk * W..][..W].try_into().expect("a full band");
            for (r, acc) in acc.iter_mut().enumerate() {
                let xv = self.x[(self.r0 + r) * self.k + kk];
                for (a, &wv) in acc.iter_mut().zip(w) {
                    *a = xv.mul_add(wv, *a);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (o, &a) in out[r * width..][..W].iter_mut().zip(acc) {
                *o = if write { a } else { *o + a };
            }
        }
    }

    /// The last, narrower band (or rows not in a multiple of 4) with sums in memory: the same
    /// arithmetic, without the registers.
    #[inline(always)]
    fn run_narrow(&self, out: &mut [F], rows: usize, width: usize, write: bool) {
        let mut acc = vec![F::zero(); rows * width];
        for kk in self.depth.clone() {
            let w = &self.panel[kk * width..][..width];
            for (r, acc) in acc.chunks_exact_mut(width).enumerate() {
                let xv = self.x[(self.r0 + r) * self.k + kk];
                for (a, &wv) in acc.iter_mut().zip(w) {
                    *a = xv.mul_add(wv, *a);
                }
            }
        }
        for (o, &a) in out.iter_mut().zip(&acc) {
            *o = if write { a } else { *o + a };
        }
    }
}

/// What a linear layer's product adds to: the residual `init` plus the bias on every row, the
/// bias rows alone, or nothing (`None`: the product is written, not added).
fn linear_start<F: CpuFloat>(
    bias: Option<&[F]>,
    init: Option<Vec<F>>,
    n: usize,
    m: usize,
) -> Option<Vec<F>> {
    if let Some(b) = bias {
        assert_eq!(b.len(), m, "linear: bias size");
    }
    match (init, bias) {
        (Some(mut y), b) => {
            assert_eq!(y.len(), n * m, "linear: residual size");
            if let Some(b) = b {
                y.par_chunks_mut(m)
                    .for_each(|row| row.iter_mut().zip(b).for_each(|(y, b)| *y += *b));
            }
            Some(y)
        }
        (None, Some(b)) => Some(b.repeat(n)),
        (None, None) => None,
    }
}

/// Backward of [`linear_fwd`]: `dx += dy W`, `dW += dyᵀ x`, `db += Σ_rows dy`.
pub fn linear_bwd<F: CpuFloat>(
    dy: &[F],
    x: &[F],
    w: &[F],
    (n, k, m): (usize, usize, usize),
    dx: &mut [F],
    dw: &mut [F],
    db: Option<&mut [F]>,
) {
    assert!(
        dy.len() == n * m && x.len() == n * k && w.len() == m * k,
        "linear backward: operand sizes"
    );
    assert!(
        dx.len() == n * k && dw.len() == m * k,
        "linear backward: gradient sizes"
    );
    // SAFETY: dx n×k, dy n×m, w m×k, dw m×k, x n×k: all sizes checked above.
    unsafe {
        matmul(
            (n, k, m),
            dx.as_mut_ptr(),
            k,
            true,
            View::rows(dy.as_ptr(), m),
            View::rows(w.as_ptr(), k),
            F::one(),
            threads(),
        );
        matmul(
            (m, k, n),
            dw.as_mut_ptr(),
            k,
            true,
            View::t(dy.as_ptr(), m),
            View::rows(x.as_ptr(), k),
            F::one(),
            threads(),
        );
    }
    if let Some(db) = db {
        for row in dy.chunks_exact(m) {
            db.iter_mut().zip(row).for_each(|(d, g)| *d += *g);
        }
    }
}
