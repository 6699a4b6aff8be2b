//! Slice-level forward and backward kernels: row-major buffers in, buffers out, no dfdx types.
//! `ops.rs` wraps them as dfdx operations; `blocks.rs` chains them into whole decoder-layer
//! halves. Backward functions add into their gradient buffers (`+=`), as dfdx's do.

use gemm::Parallelism;
use rayon::prelude::*;

use super::super::{AttentionMask, MASKED};

/// The floating-point types the fused kernels run on: `f32` for use, `f64` for gradient checks.
pub trait CpuFloat:
    dfdx::prelude::Dtype + num_traits::Float + std::iter::Sum + std::fmt::Debug + Send + Sync + 'static
{
    /// `eˣ`, written so that loops over it vectorise (see [`exp_f32`]); `f64` uses the libm
    /// function, so the finite-difference checks see the exact exponential.
    fn vexp(self) -> Self;

    /// Whether [`few_rows_fwd`] may stand in for `gemm` on this type (it knows gemm's block
    /// geometry for `f32` only).
    const FEW_ROWS: bool;
}

impl CpuFloat for f32 {
    const FEW_ROWS: bool = true;

    #[inline(always)]
    fn vexp(self) -> Self {
        exp_f32(self)
    }
}

impl CpuFloat for f64 {
    const FEW_ROWS: bool = false;

    #[inline(always)]
    fn vexp(self) -> Self {
        self.exp()
    }
}

/// `eˣ` for f32 without a libm call, so that the compiler vectorises the loops that use it:
/// `x = n·ln2 + r` with `|r| ≤ ln2/2` (Cody–Waite, two-part ln2), `eʳ` by its degree-7 Taylor
/// polynomial (truncation below 6e-9 relative, under half an f32 ulp), and `2ⁿ` assembled in
/// the exponent bits. Below −87.3 the result is 0 (where `expf` gives subnormals or 0); above
/// 88.7, +∞. NaN propagates.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5·2²³ rounds to the nearest integer without a rounding instruction.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(-87.3, 88.7);
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    let y = p * scale;
    if x < -87.3 {
        0.0
    } else if x > 88.7 {
        f32::INFINITY
    } else if x.is_nan() {
        x
    } else {
        y
    }
}

/// Runs `f` in a function compiled for AVX-512 (or AVX2 + FMA) when the CPU has it, so that
/// the element-wise loops `f` inlines vectorise for the machine they run on; the binary itself
/// targets baseline x86-64. Pass an `#[inline(always)]` closure so that it is compiled inside.
#[inline(always)]
pub fn simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
        fn v4<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        fn v3<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has every feature v4 is compiled for (checked just above).
            return unsafe { v4(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: as above, for v3's features.
            return unsafe { v3(f) };
        }
    }
    f()
}

/// Independent partial sums per reduction, so that reductions vectorise without reassociating
/// a single running sum (which the compiler may not do for floats).
const LANES: usize = 16;

/// `Σ f(i)` over `0..n` with `LANES` (16) partial sums.
#[inline(always)]
pub fn lane_sum<F: CpuFloat>(n: usize, f: impl Fn(usize) -> F) -> F {
    let mut acc = [F::zero(); LANES];
    let full = n - n % LANES;
    let mut i = 0;
    while i < full {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += f(i + l);
        }
        i += LANES;
    }
    let mut total = F::zero();
    for j in full..n {
        total += f(j);
    }
    acc.iter().fold(total, |t, a| t + *a)
}

/// The largest element (−∞ for an empty slice; NaNs are skipped, as `f32::max` does).
#[inline(always)]
pub fn lane_max<F: CpuFloat>(xs: &[F]) -> F {
    let mut acc = [F::neg_infinity(); LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a = a.max(*x);
        }
    }
    let m = rest.iter().fold(F::neg_infinity(), |m, x| m.max(*x));
    acc.iter().fold(m, |m, a| m.max(*a))
}

/// `row ← softmax(row)` over the whole slice.
#[inline(always)]
fn softmax_in_place<F: CpuFloat>(row: &mut [F]) {
    let max = lane_max(row);
    for v in row.iter_mut() {
        *v = (*v - max).vexp();
    }
    let inv = lane_sum(row.len(), |i| row[i]).recip();
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// `x` as the kernel float type (for constants, which are always representable).
pub fn cast<F: CpuFloat>(x: f64) -> F {
    F::from_f64(x).expect("kernel constants are finite")
}

/// A raw pointer that rayon tasks may share; each task writes a region no other task touches.
#[derive(Clone, Copy)]
struct Shared<F>(*mut F);
// SAFETY: a `Shared` is only a pointer value; every dereference goes through `unsafe` code
// whose contract makes the regions that different threads write disjoint (see each use), and
// the buffer outlives the parallel loop that shares it (rayon joins before the owner resumes).
unsafe impl<F> Send for Shared<F> {}
// SAFETY: as for `Send`: sharing the pointer value itself races on nothing.
unsafe impl<F> Sync for Shared<F> {}

impl<F> Shared<F> {
    /// The pointer `offset` elements further on.
    ///
    /// # Safety
    /// As for [`pointer::add`]: the result must stay inside (or one past the end of) the
    /// allocation the pointer came from. Writing through it is the caller's business: no other
    /// thread may touch the same elements meanwhile.
    unsafe fn at(self, offset: usize) -> *mut F {
        // SAFETY: the caller's contract is `add`'s.
        unsafe { self.0.add(offset) }
    }
}

/// A strided matrix view: element `(i, j)` at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy)]
struct View<F> {
    ptr: *const F,
    rs: usize,
    cs: usize,
}

impl<F> View<F> {
    /// Row-major with `ld` elements per row.
    fn rows(ptr: *const F, ld: usize) -> Self {
        Self { ptr, rs: ld, cs: 1 }
    }
    /// The transpose of a row-major matrix with `ld` elements per row.
    fn t(ptr: *const F, ld: usize) -> Self {
        Self { ptr, rs: 1, cs: ld }
    }
}

/// `dst ← (accumulate ? dst : 0) + scale · a · b` for `a` m×k, `b` k×n and a row-major `dst`
/// with `ld` elements per row.
///
/// # Safety
/// Every view must cover its whole matrix inside one live allocation (`dst` may be
/// uninitialised when `accumulate` is false), and `dst` must not overlap `a` or `b` nor be
/// written by another thread meanwhile.
#[allow(clippy::too_many_arguments)]
unsafe fn matmul<F: CpuFloat>(
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

fn threads() -> usize {
    rayon::current_num_threads()
}

/// Rows per rayon task so that each thread gets a few tasks of `row_len` elements each.
pub fn rows_per_task(rows: usize, row_len: usize) -> usize {
    let by_threads = rows.div_ceil(4 * threads()).max(1);
    // Keep tasks above ~16k elements so that scheduling stays negligible.
    by_threads
        .max(16_384usize.div_ceil(row_len.max(1)))
        .min(rows.max(1))
}

// ---------------------------------------------------------------------------------------------
// Linear layers

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
/// bit for bit (tests/model_kernels.rs). A decoding step's product is a pass over the weight:
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

/// `a += b`, element-wise, in parallel.
pub fn add_into<F: CpuFloat>(a: &mut [F], b: &[F]) {
    const CHUNK: usize = 16_384;
    a.par_chunks_mut(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .for_each(|(a, b)| {
            simd(
                #[inline(always)]
                || a.iter_mut().zip(b).for_each(|(a, b)| *a += *b),
            )
        });
}

// ---------------------------------------------------------------------------------------------
// RMSNorm

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
pub fn rms_bwd<F: CpuFloat>(dy: &[F], x: &[F], w: &[F], inv: &[F], dx: &mut [F], dw: &mut [F]) {
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

// ---------------------------------------------------------------------------------------------
// RoPE

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
pub fn rope_bwd<F: CpuFloat>(dy: &[F], row: usize, hd: usize, cos: &[F], sin: &[F], dx: &mut [F]) {
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

// ---------------------------------------------------------------------------------------------
// Attention

/// Query rows per block: each block only looks at the keys some row of it may attend to.
const QUERY_BLOCK: usize = 64;

/// The sizes of one attention call: `q: [b, s, heads, hd]`, `k`/`v: [b, total, kv_heads, hd]`.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    /// Sequences.
    pub b: usize,
    /// New (query) positions per sequence.
    pub s: usize,
    /// Key positions per sequence (cached + new).
    pub total: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head dimension.
    pub hd: usize,
}

/// One block of query rows of one sequence and the key range its rows may attend to.
#[derive(Clone, Copy, Debug)]
struct Block {
    q0: usize,
    q1: usize,
    k0: usize,
    k1: usize,
    /// No key in `k0..k1` is padding.
    dense: bool,
}

/// The query blocks of sequence `row`. A query row with no allowed key at all (left padding)
/// attends, as the reference's additive mask makes it, to every key with equal mask weight, so
/// a block holding one spans all keys.
fn blocks(mask: &AttentionMask, row: usize) -> Vec<Block> {
    let (s, total, past) = (mask.len, mask.past + mask.len, mask.past);
    let keys = &mask.key_mask[row * total..(row + 1) * total];
    let first = keys.iter().position(|&k| k).unwrap_or(total);
    (0..s)
        .step_by(QUERY_BLOCK)
        .map(|q0| {
            let q1 = (q0 + QUERY_BLOCK).min(s);
            let (k0, k1) = if first > past + q0 {
                (0, total)
            } else {
                (first, (past + q1).min(total))
            };
            let dense = keys[k0..k1].iter().all(|&k| k);
            Block {
                q0,
                q1,
                k0,
                k1,
                dense,
            }
        })
        .collect()
}

/// Softmax of one row of scaled scores `p[k0..k1]` in place under the mask; entries outside
/// the allowed keys become 0. A row with no allowed key gets the reference's softmax of
/// `score + MASKED` over all keys.
#[inline(always)]
fn masked_softmax<F: CpuFloat>(p: &mut [F], blk: Block, q: usize, past: usize, keys: &[bool]) {
    let row = &mut p[blk.k0..blk.k1];
    let keys = &keys[blk.k0..blk.k1];
    // Allowed keys are k ≤ past + q (causal), i.e. within the first `end` entries of the range.
    let end = (past + q + 1).saturating_sub(blk.k0).min(row.len());
    if blk.dense {
        let (live, dead) = row.split_at_mut(end);
        softmax_in_place(live);
        dead.fill(F::zero());
        return;
    }
    if keys[..end].iter().any(|&k| k) {
        let masked = F::neg_infinity();
        for (j, (v, &k)) in row.iter_mut().zip(keys).enumerate() {
            if j >= end || !k {
                *v = masked;
            }
        }
        // exp(−∞ − max) is exactly 0 for the masked entries.
        let max = lane_max(&row[..end]);
        for v in row.iter_mut() {
            *v = if *v == masked {
                F::zero()
            } else {
                (*v - max).vexp()
            };
        }
        let inv = lane_sum(row.len(), |i| row[i]).recip();
        row.iter_mut().for_each(|v| *v *= inv);
    } else {
        let masked: F = cast(MASKED);
        row.iter_mut().for_each(|v| *v += masked);
        softmax_in_place(row);
    }
}

/// Grouped-query attention with the causal and key-padding mask; returns `[b·s, heads·hd]` and,
/// with `keep_probs`, the softmax probabilities `[b, heads, s, total]` for the backward pass.
/// Scores are `q·k / sqrt(hd)`; query head `h` uses kv head `h / (heads / kv_heads)`.
pub fn attn_fwd<F: CpuFloat>(
    q: &[F],
    k: &[F],
    v: &[F],
    sh: AttnShape,
    mask: &AttentionMask,
    keep_probs: bool,
) -> (Vec<F>, Option<Vec<F>>) {
    attn_fwd_strided(q, k, v, sh.total, sh, mask, keep_probs)
}

/// [`attn_fwd`] over keys and values laid out `[b, kv_stride, kv_heads, hd]` with
/// `kv_stride ≥ total`, of which each sequence's first `total` positions are read: a KV cache
/// with room to grow is attended to in place. The arithmetic is [`attn_fwd`]'s, value for value.
#[allow(clippy::too_many_arguments)]
pub fn attn_fwd_strided<F: CpuFloat>(
    q: &[F],
    k: &[F],
    v: &[F],
    kv_stride: usize,
    sh: AttnShape,
    mask: &AttentionMask,
    keep_probs: bool,
) -> (Vec<F>, Option<Vec<F>>) {
    let AttnShape {
        b,
        s,
        total,
        heads,
        kv_heads: kvh,
        hd,
    } = sh;
    assert!(kvh > 0 && heads % kvh == 0, "attention: heads per kv head");
    assert!(
        q.len() == b * s * heads * hd
            && kv_stride >= total
            && k.len() == b * kv_stride * kvh * hd
            && v.len() == k.len(),
        "attention: q/k/v sizes"
    );
    assert!(
        mask.rows == b && mask.len == s && mask.past + s == total,
        "attention: mask shape"
    );
    let group = heads / kvh;
    let scale: F = cast(1.0 / (hd as f64).sqrt());
    let plans: Vec<Vec<Block>> = (0..b).map(|row| blocks(mask, row)).collect();
    let past = mask.past;
    let mut out: Vec<F> = Vec::with_capacity(b * s * heads * hd);
    let out_ptr = Shared(out.as_mut_ptr());
    let (qld, kld) = (heads * hd, kvh * hd);
    let head_fwd = |task: usize, p: &mut [F]| {
        let (bi, h) = (task / heads, task % heads);
        let kv = h / group;
        let keys = &mask.key_mask[bi * total..(bi + 1) * total];
        let qbase = (bi * s * heads + h) * hd;
        let kbase = (bi * kv_stride * kvh + kv) * hd;
        for &blk in &plans[bi] {
            let (qn, kn) = (blk.q1 - blk.q0, blk.k1 - blk.k0);
            let pblk = &mut p[blk.q0 * total..blk.q1 * total];
            // SAFETY: the views stay inside q/k/v; pblk is this task's own buffer; the output
            // rows of head h (every row, all hd columns, written by the second product) belong
            // to this task only.
            unsafe {
                matmul(
                    (qn, kn, hd),
                    pblk.as_mut_ptr().add(blk.k0),
                    total,
                    false,
                    View::rows(q.as_ptr().add(qbase + blk.q0 * qld), qld),
                    View::t(k.as_ptr().add(kbase + blk.k0 * kld), kld),
                    scale,
                    1,
                );
            }
            simd(
                #[inline(always)]
                || {
                    for (i, prow) in pblk.chunks_exact_mut(total).enumerate() {
                        masked_softmax(prow, blk, blk.q0 + i, past, keys);
                    }
                },
            );
            // SAFETY: `out` has capacity b·s·heads·hd; rows q0..q1 (< s) of head h of sequence
            // bi, hd columns each at stride qld, lie inside it and only this (sequence, head)
            // task writes them. pblk's rows q0..q1 of `total` columns are this task's buffer
            // and hold columns k0..k1 (≤ total) of the probabilities; rows k0..k1 (≤ total) of
            // kv head kv are inside v, which no one writes.
            unsafe {
                matmul(
                    (qn, hd, kn),
                    out_ptr.at(qbase + blk.q0 * qld),
                    qld,
                    false,
                    View {
                        ptr: pblk.as_ptr().add(blk.k0),
                        rs: total,
                        cs: 1,
                    },
                    View::rows(v.as_ptr().add(kbase + blk.k0 * kld), kld),
                    F::one(),
                    1,
                );
            }
        }
    };
    let probs = if keep_probs {
        let mut probs = vec![F::zero(); b * heads * s * total];
        probs
            .par_chunks_mut(s * total)
            .enumerate()
            .for_each(|(task, p)| head_fwd(task, p));
        Some(probs)
    } else {
        (0..b * heads)
            .into_par_iter()
            .for_each_init(|| vec![F::zero(); s * total], |p, task| head_fwd(task, p));
        None
    };
    // SAFETY: the blocks of every sequence cover all s query rows, and each (sequence, head)
    // task wrote all hd columns of its head in each of them: all elements are written.
    unsafe { out.set_len(b * s * heads * hd) };
    (out, probs)
}

/// Backward of [`attn_fwd`]: adds into `dq`, `dk` and `dv`.
#[allow(clippy::too_many_arguments)]
pub fn attn_bwd<F: CpuFloat>(
    dout: &[F],
    q: &[F],
    k: &[F],
    v: &[F],
    probs: &[F],
    sh: AttnShape,
    mask: &AttentionMask,
    (dq, dk, dv): (&mut [F], &mut [F], &mut [F]),
) {
    let AttnShape {
        b,
        s,
        total,
        heads,
        kv_heads: kvh,
        hd,
    } = sh;
    assert!(
        dout.len() == q.len() && dq.len() == q.len() && dk.len() == k.len() && dv.len() == v.len(),
        "attention backward: sizes"
    );
    assert_eq!(
        probs.len(),
        b * heads * s * total,
        "attention backward: probs size"
    );
    let group = heads / kvh;
    let scale: F = cast(1.0 / (hd as f64).sqrt());
    let plans: Vec<Vec<Block>> = (0..b).map(|row| blocks(mask, row)).collect();
    let (qld, kld) = (heads * hd, kvh * hd);
    let (dq, dk, dv) = (
        Shared(dq.as_mut_ptr()),
        Shared(dk.as_mut_ptr()),
        Shared(dv.as_mut_ptr()),
    );
    // One task per (sequence, kv head): it owns dk/dv of that kv head and dq of the group's
    // query heads, so no two tasks write the same element.
    (0..b * kvh).into_par_iter().for_each_init(
        || vec![F::zero(); QUERY_BLOCK * total],
        |ds, task| {
            let (bi, kv) = (task / kvh, task % kvh);
            let kbase = (bi * total * kvh + kv) * hd;
            for h in kv * group..(kv + 1) * group {
                let qbase = (bi * s * heads + h) * hd;
                let pbase = (bi * heads + h) * s * total;
                for &blk in &plans[bi] {
                    let (qn, kn) = (blk.q1 - blk.q0, blk.k1 - blk.k0);
                    let p = &probs[pbase + blk.q0 * total + blk.k0..];
                    let d_o = View::rows(dout[qbase + blk.q0 * qld..].as_ptr(), qld);
                    // SAFETY: p and d_o are slices of probs and dout, read as qn×kn and qn×hd
                    // views at strides total and qld that stay inside them; rows k0..k1 (≤
                    // total) of kv head kv lie inside dv and v (sizes checked above), and only
                    // this (sequence, kv head) task writes them; ds (task-local) holds
                    // QUERY_BLOCK·total ≥ qn·kn elements.
                    unsafe {
                        // dV[k0..k1] += Pᵀ dO
                        matmul(
                            (kn, hd, qn),
                            dv.at(kbase + blk.k0 * kld),
                            kld,
                            true,
                            View {
                                ptr: p.as_ptr(),
                                rs: 1,
                                cs: total,
                            },
                            d_o,
                            F::one(),
                            1,
                        );
                        // dP = dO V[k0..k1]ᵀ
                        matmul(
                            (qn, kn, hd),
                            ds.as_mut_ptr(),
                            kn,
                            false,
                            d_o,
                            View::t(v.as_ptr().add(kbase + blk.k0 * kld), kld),
                            F::one(),
                            1,
                        );
                    }
                    // dS = P ⊙ (dP − Σ_k P dP), the softmax backward.
                    simd(
                        #[inline(always)]
                        || {
                            for i in 0..qn {
                                let prow = &p[i * total..i * total + kn];
                                let drow = &mut ds[i * kn..(i + 1) * kn];
                                let dot = lane_sum(kn, |j| prow[j] * drow[j]);
                                for (d, p) in drow.iter_mut().zip(prow) {
                                    *d = *p * (*d - dot);
                                }
                            }
                        },
                    );
                    // SAFETY: ds (task-local) holds qn×kn elements; rows q0..q1 of query head
                    // h (of this task's kv group) in dq and rows k0..k1 of kv head kv in dk lie
                    // inside dq and dk (sizes checked above) and only this (sequence, kv head)
                    // task writes them; k and q are read only.
                    unsafe {
                        // dQ += scale · dS K[k0..k1]
                        matmul(
                            (qn, hd, kn),
                            dq.at(qbase + blk.q0 * qld),
                            qld,
                            true,
                            View::rows(ds.as_ptr(), kn),
                            View::rows(k.as_ptr().add(kbase + blk.k0 * kld), kld),
                            scale,
                            1,
                        );
                        // dK[k0..k1] += scale · dSᵀ Q
                        matmul(
                            (kn, hd, qn),
                            dk.at(kbase + blk.k0 * kld),
                            kld,
                            true,
                            View::t(ds.as_ptr(), kn),
                            View::rows(q.as_ptr().add(qbase + blk.q0 * qld), qld),
                            scale,
                            1,
                        );
                    }
                }
            }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// SwiGLU

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
pub fn swiglu_bwd<F: CpuFloat>(dy: &[F], g: &[F], u: &[F], dg: &mut [F], du: &mut [F]) {
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

// ---------------------------------------------------------------------------------------------
// Token log-probabilities

/// For `logits: [n, vocab]`, the log-probabilities of `targets` under
/// `softmax(logits / temperature)`, the entropies of those distributions, and their
/// log-normalisers (for the backward pass).
pub fn logps_fwd<F: CpuFloat>(
    logits: &[F],
    vocab: usize,
    targets: &[usize],
    temperature: f64,
) -> (Vec<F>, Vec<F>, Vec<F>) {
    let n = targets.len();
    assert_eq!(logits.len(), n * vocab, "token log-probs: sizes");
    let inv_t: F = cast(1.0 / temperature);
    let mut logp = vec![F::zero(); n];
    let mut entropy = vec![F::zero(); n];
    let mut lse = vec![F::zero(); n];
    logp.par_iter_mut()
        .zip(entropy.par_iter_mut())
        .zip(lse.par_iter_mut())
        .zip(logits.par_chunks(vocab))
        .zip(targets.par_iter())
        .for_each_init(
            || vec![F::zero(); vocab],
            |e, ((((lp, ent), lse), row), &t)| {
                simd(
                    #[inline(always)]
                    || {
                        // z = logit / T; with T > 0, max z = max(logit) / T.
                        let max = lane_max(row) * inv_t;
                        for (e, v) in e.iter_mut().zip(row) {
                            *e = (*v * inv_t - max).vexp();
                        }
                        let sum = lane_sum(vocab, |k| e[k]);
                        let l = max + sum.ln();
                        // H = −Σ p (z − l) = l − Σ e·z / Σ e.
                        let ez = lane_sum(vocab, |k| e[k] * row[k] * inv_t);
                        *lse = l;
                        *lp = row[t] * inv_t - l;
                        *ent = l - ez / sum;
                    },
                )
            },
        );
    (logp, entropy, lse)
}

/// Backward of [`logps_fwd`]: `dlogits_k += dy·(1[k = target] − p_k) / T`.
pub fn logps_bwd<F: CpuFloat>(
    dy: &[F],
    logits: &[F],
    vocab: usize,
    targets: &[usize],
    lse: &[F],
    temperature: f64,
    dlogits: &mut [F],
) {
    let inv_t: F = cast(1.0 / temperature);
    dlogits
        .par_chunks_mut(vocab)
        .zip(logits.par_chunks(vocab))
        .enumerate()
        .for_each(|(r, (drow, row))| {
            let g = dy[r] * inv_t;
            if g == F::zero() {
                return;
            }
            let l = lse[r];
            simd(
                #[inline(always)]
                || {
                    for (d, v) in drow.iter_mut().zip(row) {
                        *d -= g * (*v * inv_t - l).vexp();
                    }
                },
            );
            drow[targets[r]] += g;
        });
}
