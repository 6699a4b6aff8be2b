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
    // Big products run as one single-threaded product per band: of rows when they have at
    // least as many rows as columns (the linear layers' forward, their input and weight
    // gradients: on 2 cores up to 2× faster than gemm's own split for the weight-gradient
    // shapes, docs/benchmarks.md), of columns when they have more columns and over 64 rows
    // (a prefill's products; with over 64 rows gemm's depth blocks do not depend on the number
    // of columns, so each output is summed as the whole product sums it). Small products are
    // not worth a second thread.
    let big = threads > 1 && m * n * k >= 1 << 20;
    let by_rows = big && m >= n && m >= 2 * threads;
    if by_rows || (big && n > m && m > 64 && n >= 2 * threads) {
        let (len, band) = if by_rows {
            (m, m.div_ceil(threads))
        } else {
            (n, n.div_ceil(threads).next_multiple_of(16))
        };
        let (dst, a_ptr, b_ptr) = (
            Shared(dst),
            Shared(a.ptr as *mut F),
            Shared(b.ptr as *mut F),
        );
        let (a_rs, a_cs, b_rs, b_cs) = (a.rs, a.cs, b.rs, b.cs);
        (0..threads).into_par_iter().for_each(|t| {
            let lo = (t * band).min(len);
            let hi = ((t + 1) * band).min(len);
            if lo >= hi {
                return;
            }
            // The band's first row of `a` and `dst` (by rows) or column of `b` and `dst` (by
            // columns), and its shape.
            let (a_at, b_at, dst_at, dims) = if by_rows {
                (lo * a_rs, 0, lo * ld, (hi - lo, n, k))
            } else {
                (0, lo * b_cs, lo, (m, hi - lo, k))
            };
            // SAFETY: lo < len, so row lo of the m×k `a` and column lo of the k×n `b` start
            // inside the views the caller guarantees to lie in one allocation (offset 0 is the
            // pointer itself).
            let (a_lo, b_lo) = unsafe { (a_ptr.at(a_at), b_ptr.at(b_at)) };
            let a = View {
                ptr: a_lo as *const F,
                rs: a_rs,
                cs: a_cs,
            };
            let b = View {
                ptr: b_lo as *const F,
                rs: b_rs,
                cs: b_cs,
            };
            // SAFETY: the band's rows (or columns) lo..hi of dst, from dst + lo·ld (or dst +
            // lo), and the matching rows of a (or columns of b) are inside the caller's views,
            // the other operand is the caller's whole view; the bands of dst are disjoint, so
            // no two tasks write the same element, and dst overlaps neither a nor b (caller's
            // contract).
            unsafe { matmul(dims, dst.at(dst_at), ld, accumulate, a, b, scale, 1) };
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
    dims: (usize, usize, usize),
) -> Vec<F> {
    linear_fwd_on(threads(), x, w, bias, init, dims)
}

/// Two independent computations side by side on rayon's threads, each given its share of them
/// (`a` half, `b` the rest; one each on two cores); one after the other, each with the one
/// thread, where there is one. Two products of the same size run faster this way than one
/// after the other with both cores sharing each, as far as the shared split loses: on one Intel
/// Xeon two cores reached 253 GFLOP/s on one shared product and 304 on two independent ones;
/// on a later one of the same model side by side gained 0–13 %; on an Intel Xeon of model 207
/// and on an AVX2 AMD EPYC the two ways are level within the noise (`train_step --products`,
/// docs/benchmarks.md).
pub fn side_by_side<RA: Send, RB: Send>(
    a: impl FnOnce(usize) -> RA + Send,
    b: impl FnOnce(usize) -> RB + Send,
) -> (RA, RB) {
    let t = threads();
    if t < 2 {
        return (a(1), b(1));
    }
    rayon::join(|| a(t / 2), || b(t - t / 2))
}

/// [`linear_fwd`] on `threads` of rayon's threads (for a product run [`side_by_side`] with
/// another).
pub fn linear_fwd_on<F: CpuFloat>(
    threads: usize,
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
            threads,
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
        assert_eq!(
            k * out,
            w.len(),
            "host matrix: {} elements for {out} rows",
            w.len()
        );
        let mut bands = Vec::with_capacity(w.len());
        if k > 0 {
            // One task per band, written front to back: each row of the band gathers one
            // element of each of its 32 weight rows, which stay in L1 across consecutive rows.
            bands.spare_capacity_mut()[..w.len()]
                .par_chunks_mut(FEW_COLS * k)
                .zip(w.par_chunks(FEW_COLS * k))
                .for_each(|(band, rows)| {
                    let width = rows.len() / k;
                    for (kk, dst) in band.chunks_exact_mut(width).enumerate() {
                        for (d, row) in dst.iter_mut().zip(rows.chunks_exact(k)) {
                            d.write(row[kk]);
                        }
                    }
                });
        }
        // SAFETY: the bands cover the capacity's first w.len() elements (each band of
        // FEW_COLS·k elements, the last one narrower, pairs with as many weight elements) and
        // every element of each was written just above (k rows of `width`); with k = 0 the
        // length is 0.
        unsafe { bands.set_len(w.len()) };
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
/// here the weight is streamed once, 32 columns by 4 rows at a time in registers (8 rows with
/// AVX-512, written with intrinsics), where `gemm` would fill a 64-row tile for 4 rows and
/// read its columns six strided streams at a time.
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
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
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
            #[cfg(target_arch = "x86_64")]
            if avx512
                && width == FEW_COLS
                && let (Some(x), Some(panel), Some(o)) =
                    (F::as_f32(x), F::as_f32(panel), F::as_f32_mut(&mut out))
            {
                // SAFETY: the CPU has AVX-512F (`avx512`, checked before the tasks start).
                unsafe { avx512::band(x, panel, (n, k), depth, o, accumulate) };
                return out;
            }
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

/// [`few_rows_fwd`]'s band of `f32` columns written with AVX-512 intrinsics: LLVM compiles
/// [`Tile::run`] to 256- and 128-bit registers (20 fused multiply-adds per depth step for 4
/// rows by 32 columns, where 8 of 512 bits do); with this tile and its prefetch a 16-row
/// decoding step of base-100m took 43 ms on an Intel Xeon where it had taken 61 ms
/// (docs/benchmarks.md). The arithmetic is [`Tile::run`]'s, instruction for
/// instruction: per output one chain of `fma(x, w, acc)` over each block of depth, the block's
/// sum written or added to the output.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::FEW_COLS;

    /// Rows per tile: 8 rows by 32 columns are 16 accumulators of the 32 registers, enough
    /// independent chains to hide the latency of the fused multiply-add.
    const ROWS: usize = 8;

    /// How far ahead in the panel, in elements, [`tile`] prefetches: 64 rows of depth (8 KiB),
    /// the best of 1–16 KiB measured on the Intel variant.
    const PREFETCH: usize = 64 * FEW_COLS;

    /// One band: `out` (`[n, 32]`) gets the product of `x` (`[n, k]`) with `panel`
    /// (`[k, 32]`), summed in blocks of `depth`; it is added to `out` when `accumulate`, else
    /// the first block's sum is written over it.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn band(
        x: &[f32],
        panel: &[f32],
        (n, k): (usize, usize),
        depth: usize,
        out: &mut [f32],
        accumulate: bool,
    ) {
        assert!(
            x.len() == n * k && panel.len() == k * FEW_COLS && out.len() == n * FEW_COLS,
            "few-row band: operand sizes"
        );
        let mut k0 = 0;
        while k0 < k {
            let k1 = (k0 + depth).min(k);
            let write = k0 == 0 && !accumulate;
            let mut r0 = 0;
            while r0 < n {
                let rows = (n - r0).min(ROWS);
                let out = &mut out[r0 * FEW_COLS..(r0 + rows) * FEW_COLS];
                // SAFETY: for each call, rows r0..r0 + R of x, rows k0..k1 of the panel and R
                // rows of out are inside their slices (sizes checked above, r0 + R ≤ n,
                // k1 ≤ k), and the CPU has AVX-512F (this function's contract).
                unsafe {
                    match rows {
                        8 => tile::<8>(x, panel, k, r0, k0..k1, out, write),
                        7 => tile::<7>(x, panel, k, r0, k0..k1, out, write),
                        6 => tile::<6>(x, panel, k, r0, k0..k1, out, write),
                        5 => tile::<5>(x, panel, k, r0, k0..k1, out, write),
                        4 => tile::<4>(x, panel, k, r0, k0..k1, out, write),
                        3 => tile::<3>(x, panel, k, r0, k0..k1, out, write),
                        2 => tile::<2>(x, panel, k, r0, k0..k1, out, write),
                        _ => tile::<1>(x, panel, k, r0, k0..k1, out, write),
                    }
                }
                r0 += rows;
            }
            k0 = k1;
        }
    }

    /// `R` rows from `r0` by the band's 32 columns over `depth`, the sums in 2·`R` registers.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `x` must hold rows `r0..r0 + R` of `k` elements, `panel`
    /// rows `..depth.end` of 32, and `out` `R` rows of 32.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    unsafe fn tile<const R: usize>(
        x: &[f32],
        panel: &[f32],
        k: usize,
        r0: usize,
        depth: std::ops::Range<usize>,
        out: &mut [f32],
        write: bool,
    ) {
        debug_assert!(
            (r0 + R) * k <= x.len() && depth.end * FEW_COLS <= panel.len() && out.len() >= R * 32
        );
        let (xp, wp, op) = (x.as_ptr(), panel.as_ptr(), out.as_mut_ptr());
        let mut lo = [_mm512_setzero_ps(); R];
        let mut hi = [_mm512_setzero_ps(); R];
        for kk in depth {
            // SAFETY: row kk < depth.end of the panel, 32 elements from kk·32 (contract).
            let (w0, w1) = unsafe {
                (
                    _mm512_loadu_ps(wp.add(kk * FEW_COLS)),
                    _mm512_loadu_ps(wp.add(kk * FEW_COLS + 16)),
                )
            };
            // The two lines of the panel PREFETCH elements on, into L2: a decoding step is
            // bound by reading the weights from memory, and the hardware prefetcher alone
            // leaves bandwidth unused (docs/benchmarks.md). A prefetch never faults, so the
            // address may lie past the panel (wrapping_add: no pointer arithmetic contract).
            let ahead = wp.wrapping_add(kk * FEW_COLS + PREFETCH);
            _mm_prefetch::<_MM_HINT_T1>(ahead as *const i8);
            _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(16) as *const i8);
            for r in 0..R {
                // SAFETY: element kk < k of row r0 + r < r0 + R of x (contract).
                let xv = _mm512_set1_ps(unsafe { *xp.add((r0 + r) * k + kk) });
                lo[r] = _mm512_fmadd_ps(xv, w0, lo[r]);
                hi[r] = _mm512_fmadd_ps(xv, w1, hi[r]);
            }
        }
        for r in 0..R {
            // SAFETY: row r < R of out, 32 elements from r·32 (contract).
            unsafe {
                let (o0, o1) = (op.add(r * FEW_COLS), op.add(r * FEW_COLS + 16));
                if write {
                    _mm512_storeu_ps(o0, lo[r]);
                    _mm512_storeu_ps(o1, hi[r]);
                } else {
                    _mm512_storeu_ps(o0, _mm512_add_ps(_mm512_loadu_ps(o0), lo[r]));
                    _mm512_storeu_ps(o1, _mm512_add_ps(_mm512_loadu_ps(o1), hi[r]));
                }
            }
        }
    }
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
    // The input and the weight gradients are independent products of the same arithmetic
    // (2·n·m·k each), so they run side by side.
    side_by_side(
        // SAFETY: dx n×k, dy n×m, w m×k: sizes checked above; dx is borrowed mutably here
        // alone.
        |t| unsafe {
            matmul(
                (n, k, m),
                dx.as_mut_ptr(),
                k,
                true,
                View::rows(dy.as_ptr(), m),
                View::rows(w.as_ptr(), k),
                F::one(),
                t,
            )
        },
        // SAFETY: dw m×k, dy n×m, x n×k: sizes checked above; dw is borrowed mutably here
        // alone.
        |t| unsafe {
            matmul(
                (m, k, n),
                dw.as_mut_ptr(),
                k,
                true,
                View::t(dy.as_ptr(), m),
                View::rows(x.as_ptr(), k),
                F::one(),
                t,
            )
        },
    );
    if let Some(db) = db {
        for row in dy.chunks_exact(m) {
            db.iter_mut().zip(row).for_each(|(d, g)| *d += *g);
        }
    }
}
