//! Slice-level forward and backward kernels: row-major buffers in, buffers out, no dfdx types.
//! `ops.rs` wraps them as dfdx operations; `blocks.rs` chains them into whole decoder-layer
//! halves. Backward functions add into their gradient buffers (`+=`), as dfdx's do.
//!
//! By what they compute: matrix products and linear layers (`linear`, on `gemm`, with
//! decoding's few-row products), RMSNorm (`norm`), rotary embeddings (`rope`), masked
//! attention (`attention`), SwiGLU (`swiglu`) and token log-probabilities (`logps`); this
//! module holds what they share: the float trait, vector-width loops and lane reductions, and
//! the pointer types rayon tasks write disjoint regions through.
//!
//! `unsafe` is allowed in this module (of the model's code, only here; ARCHITECTURE.md lists
//! the other places): `gemm` takes raw strided pointers, and the parallel products and
//! attention passes hand each rayon task a disjoint region of one buffer. Every block says, in
//! its `// SAFETY:` comment, why its pointers are in bounds and unshared.
#![allow(unsafe_code)]

use rayon::prelude::*;

mod attention;
mod linear;
mod logps;
mod norm;
mod rope;
mod swiglu;

pub(crate) use attention::attn_bwd;
pub use attention::{AttnShape, attn_fwd, attn_fwd_strided};
pub use linear::{
    FEW_COLS, FEW_ROWS, HostMatrix, few_rows_fwd, linear_bwd, linear_fwd, linear_fwd_host,
    linear_fwd_on, side_by_side,
};
pub use logps::{LogpsGrads, logps_bwd, logps_fwd};
pub(crate) use norm::rms_bwd;
pub use norm::rms_fwd;
pub(crate) use rope::rope_bwd;
pub use rope::rope_fwd;
pub(crate) use swiglu::swiglu_bwd;
pub use swiglu::swiglu_fwd;

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

    /// `s` as `f32`s when `Self` is `f32` (for kernels written for `f32` alone).
    fn as_f32(s: &[Self]) -> Option<&[f32]>;

    /// `s` as `f32`s when `Self` is `f32`.
    fn as_f32_mut(s: &mut [Self]) -> Option<&mut [f32]>;
}

impl CpuFloat for f32 {
    const FEW_ROWS: bool = true;

    fn as_f32(s: &[Self]) -> Option<&[f32]> {
        Some(s)
    }

    fn as_f32_mut(s: &mut [Self]) -> Option<&mut [f32]> {
        Some(s)
    }

    #[inline(always)]
    fn vexp(self) -> Self {
        exp_f32(self)
    }
}

impl CpuFloat for f64 {
    const FEW_ROWS: bool = false;

    fn as_f32(_: &[Self]) -> Option<&[f32]> {
        None
    }

    fn as_f32_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }

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

/// The compiled variant [`simd`] runs on this CPU: the widest vector instructions the
/// element-wise kernels use here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimdLevel {
    /// AVX-512 (F, VL, BW, DQ) with AVX2 and FMA.
    Avx512,
    /// AVX2 and FMA.
    Avx2Fma,
    /// Baseline x86-64, or another architecture.
    Baseline,
}

impl SimdLevel {
    /// This CPU's level (the standard library caches the CPUID checks).
    #[inline(always)]
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Self::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Self::Avx2Fma;
            }
        }
        Self::Baseline
    }

    /// The level as benchmark output names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512 => "AVX-512",
            Self::Avx2Fma => "AVX2 and FMA",
            Self::Baseline => "no AVX2",
        }
    }
}

/// Runs `f` in a function compiled for AVX-512 (or AVX2 + FMA) when the CPU has it
/// ([`SimdLevel::detect`]), so that the element-wise loops `f` inlines vectorise for the
/// machine they run on; the binary itself targets baseline x86-64. Pass an `#[inline(always)]`
/// closure so that it is compiled inside.
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
        match SimdLevel::detect() {
            // SAFETY: the CPU has every feature v4 is compiled for (SimdLevel::detect checked
            // each).
            SimdLevel::Avx512 => return unsafe { v4(f) },
            // SAFETY: as above, for v3's features.
            SimdLevel::Avx2Fma => return unsafe { v3(f) },
            SimdLevel::Baseline => {}
        }
    }
    f()
}

/// Independent partial sums per reduction, so that reductions vectorise without reassociating
/// a single running sum (which the compiler may not do for floats).
const LANES: usize = 16;

/// `Σ f(i)` over `0..n` with `LANES` (16) partial sums.
#[inline(always)]
pub(crate) fn lane_sum<F: CpuFloat>(n: usize, f: impl Fn(usize) -> F) -> F {
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
pub(crate) fn lane_max<F: CpuFloat>(xs: &[F]) -> F {
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
pub(crate) fn cast<F: CpuFloat>(x: f64) -> F {
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

fn threads() -> usize {
    rayon::current_num_threads()
}

/// Rows per rayon task so that each thread gets a few tasks of `row_len` elements each.
pub(crate) fn rows_per_task(rows: usize, row_len: usize) -> usize {
    let by_threads = rows.div_ceil(4 * threads()).max(1);
    // Keep tasks above ~16k elements so that scheduling stays negligible.
    by_threads
        .max(16_384usize.div_ceil(row_len.max(1)))
        .min(rows.max(1))
}

/// `a += b`, element-wise, in parallel.
pub(crate) fn add_into<F: CpuFloat>(a: &mut [F], b: &[F]) {
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
