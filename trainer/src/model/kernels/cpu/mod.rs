//! Fused CPU kernels for the model's hot paths, recorded on dfdx's tape as custom operations.
//!
//! dfdx 0.13 composes each layer from many small element-wise operations; on the CPU every one
//! walks its operands element by element through broadcast strides and allocates a fresh
//! buffer, so a transformer step spends most of its time outside the matrix products. Here a
//! whole half of a decoder layer is one operation ([`blocks`]: RMSNorm → q/k/v → RoPE → masked
//! attention → output projection + residual; RMSNorm → gate/up → SwiGLU → down projection +
//! residual), and the remaining pieces (final norm, LM head, token log-probabilities) are one
//! operation each ([`ops`]). They run [`math`]'s slice kernels: matrix products from the `gemm`
//! crate (AVX-512 micro-kernels where the CPU has them), element-wise loops compiled for the
//! CPU's vector width, rows spread over rayon's threads. Each forward adds one backward closure
//! to the tape that computes the gradients dfdx would (checked against the reference
//! composition in `reference.rs` and by finite differences in `trainer/tests/it/model_gradcheck.rs`).
//!
//! How a custom operation talks to dfdx through its public API only:
//! - inputs are read with `copy_into` (dfdx does not lend its buffers), once per operation;
//!   a block's intermediates never become dfdx tensors, so they are never copied;
//! - backward closures keep what they need (the block's intermediates, the input tensors as
//!   the keys of their gradients: cheap `Arc` clones) and re-read weights when they run;
//! - outputs are built with `tensor_from_vec`, which takes the buffer without copying;
//! - a closure takes its output's gradient out of the store (`mem::take`): every consumer of
//!   the output has already added to it when the closure runs, and no one reads it afterwards.
//!   It adds into its inputs' and weights' gradients through `Gradients::get_or_alloc_mut`.
//!
//! Every input must be contiguous in row-major order (they are all outputs of these kernels,
//! of `gather`/`reshape`, or parameters); `copy_into` copies physical memory.
//!
//! `unsafe` is allowed in this module (of the model's code, only here; ARCHITECTURE.md lists
//! the other places): `gemm` takes raw strided pointers, and the parallel products and
//! attention passes hand each rayon task a disjoint region of one buffer. Every block says, in
//! its `// SAFETY:` comment, why its pointers are in bounds and unshared.
#![allow(unsafe_code)]

pub mod blocks;
pub mod decode;
pub mod math;
pub mod ops;
pub mod optim;

use dfdx::prelude::*;

pub use blocks::{attention_block, mlp_block};
pub use decode::host_weights;
pub use math::{CpuFloat, exp_f32};
pub use ops::{attention, linear, rms_norm, rope, swiglu, token_logps};
pub use optim::{adamw_update, grad_sq_sum};

type Res = Result<(), CpuError>;

/// A tensor's elements, copied out of dfdx (row-major; the tensor must be contiguous).
fn host<S: Shape, F: CpuFloat, T>(t: &Tensor<S, F, Cpu, T>) -> Vec<F> {
    let mut v = vec![F::zero(); t.shape().num_elements()];
    t.copy_into(&mut v);
    v
}

/// Takes `t`'s gradient buffer out of the store (zeros when nothing reached `t` yet). For an
/// operation's own output the gradient is complete and no one reads it afterwards; an input's
/// or weight's buffer goes back with [`put_grad`] once added to. Taking buffers out lets
/// several of them be written at once.
fn take_grad<S: Shape, F: CpuFloat>(
    grads: &mut Gradients<F, Cpu>,
    t: &Tensor<S, F, Cpu>,
) -> Result<Vec<F>, CpuError> {
    Ok(std::mem::take(&mut **grads.get_or_alloc_mut(t)?))
}

/// Puts back a buffer taken with [`take_grad`].
fn put_grad<S: Shape, F: CpuFloat>(
    grads: &mut Gradients<F, Cpu>,
    t: &Tensor<S, F, Cpu>,
    v: Vec<F>,
) -> Res {
    **grads.get_or_alloc_mut(t)? = v;
    Ok(())
}

/// Backward of a linear layer `x Wᵀ (+ b)` into `dx` and the store: `dx += dy W`, and the
/// weight (and bias) gradients.
#[allow(clippy::too_many_arguments)]
fn linear_grads<F: CpuFloat>(
    grads: &mut Gradients<F, Cpu>,
    weight: &Tensor<(usize, usize), F, Cpu>,
    bias: Option<&Tensor<(usize,), F, Cpu>>,
    dy: &[F],
    x: &[F],
    dims: (usize, usize, usize),
    dx: &mut [F],
) -> Res {
    let w = host(weight);
    let mut dw = take_grad(grads, weight)?;
    let mut db = bias.map(|b| take_grad(grads, b)).transpose()?;
    math::linear_bwd(dy, x, &w, dims, dx, &mut dw, db.as_deref_mut());
    put_grad(grads, weight, dw)?;
    if let (Some(b), Some(db)) = (bias, db) {
        put_grad(grads, b, db)?;
    }
    Ok(())
}
