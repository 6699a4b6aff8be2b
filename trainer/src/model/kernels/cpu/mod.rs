//! Fused CPU kernels for the model's hot paths, recorded on dfdx's tape as custom operations.
//!
//! dfdx 0.13 composes each layer from many small element-wise operations; on the CPU every one
//! walks its operands element by element through broadcast strides and allocates a fresh
//! buffer, so a transformer step spends most of its time outside the matrix products. Here a
//! whole half of a decoder layer is one operation (`blocks`: RMSNorm → q/k/v → RoPE → masked
//! attention → output projection + residual; RMSNorm → gate/up → SwiGLU → down projection +
//! residual), and the remaining pieces (final norm, LM head, token log-probabilities) are one
//! operation each (`ops`). They run [`math`]'s slice kernels: matrix products from the `gemm`
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
//! The `unsafe` these kernels need lives in [`math`] only.

mod blocks;
pub(crate) mod decode;
pub mod math;
mod ops;
mod optim;

use dfdx::prelude::*;

pub use blocks::{attention_block, mlp_block};
pub use decode::host_weights;
pub use math::{CpuFloat, exp_f32};
pub use ops::{attention, linear, rms_norm, rope, swiglu, token_logps};
pub use optim::adamw_update;
pub(crate) use optim::grad_sq_sum;

type Res = Result<(), CpuError>;

/// A matrix on dfdx's CPU device (a weight `[out, in]`, or activations `[rows, features]`).
type T2<F, T = NoneTape> = Tensor<(usize, usize), F, Cpu, T>;

/// A tensor's elements, copied out of dfdx (row-major; the tensor must be contiguous).
fn host<S: Shape, F: CpuFloat, T>(t: &Tensor<S, F, Cpu, T>) -> Vec<F> {
    let mut v = vec![F::zero(); t.shape().num_elements()];
    t.copy_into(&mut v);
    v
}

/// A copy of a tensor's elements for the span of one kernel (a weight, read by a product),
/// whose buffer goes back to the process's spares when dropped, for the next copy of the same
/// length. dfdx lends no buffers, so every pass copies each weight out; a fresh buffer would be
/// zeroed first (`calloc`), a third of the copy's cost (0.095 of 0.26 s per base-100m step on
/// an Intel Xeon, on one thread while the other waits).
struct Transient<F: CpuFloat>(Vec<F>);

/// Buffers of dropped [`Transient`]s, oldest first, each a `Vec<F>` for the `F` that `Any`
/// tells.
struct Spares(Vec<Box<dyn std::any::Any + Send>>);

impl Spares {
    /// Buffers kept at most: a pass holds up to four weights at once (a block's), and a step
    /// cycles through five lengths (q/o, k/v, the MLP's, the embedding, the norms). For
    /// base-100m they hold about 125 MB between passes.
    const MAX: usize = 12;

    /// A kept buffer of `n` elements, if there is one.
    fn take<F: CpuFloat>(&mut self, n: usize) -> Option<Vec<F>> {
        let at = self
            .0
            .iter()
            .position(|b| b.downcast_ref::<Vec<F>>().is_some_and(|v| v.len() == n))?;
        self.0.remove(at).downcast::<Vec<F>>().ok().map(|b| *b)
    }

    /// Keeps `v`, dropping the oldest buffer when [`Spares::MAX`] are kept.
    fn give<F: CpuFloat>(&mut self, v: Vec<F>) {
        if self.0.len() == Self::MAX {
            self.0.remove(0);
        }
        self.0.push(Box::new(v));
    }
}

/// One list for all threads: copies made on rayon's workers are dropped on the caller.
static SPARES: std::sync::Mutex<Spares> = std::sync::Mutex::new(Spares(Vec::new()));

fn spares() -> std::sync::MutexGuard<'static, Spares> {
    // A panic while the list was held leaves it consistent (pushes and removes only).
    SPARES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<F: CpuFloat> std::ops::Deref for Transient<F> {
    type Target = [F];
    fn deref(&self) -> &[F] {
        &self.0
    }
}

impl<F: CpuFloat> std::ops::DerefMut for Transient<F> {
    fn deref_mut(&mut self) -> &mut [F] {
        &mut self.0
    }
}

impl<F: CpuFloat> Drop for Transient<F> {
    fn drop(&mut self) {
        spares().give(std::mem::take(&mut self.0));
    }
}

/// [`host`] into a [`Transient`]: a spare buffer of the right length when there is one (its
/// stale elements are all overwritten), a fresh one otherwise.
fn transient<S: Shape, F: CpuFloat, T>(t: &Tensor<S, F, Cpu, T>) -> Transient<F> {
    let n = t.shape().num_elements();
    let spare = spares().take(n);
    let mut v = spare.unwrap_or_else(|| vec![F::zero(); n]);
    t.copy_into(&mut v);
    Transient(v)
}

/// [`transient`] copies of a block's weights, made side by side on rayon's threads: a copy is
/// one `memcpy` on one core, and the two cores copy a base-100m step's 0.6 GB of block weights
/// at 12 GB/s where one copies 8.7 GB/s (Intel Xeon).
fn transients<F: CpuFloat, const N: usize>(ts: [&T2<F>; N]) -> [Transient<F>; N] {
    use rayon::prelude::*;
    let copies: Vec<Transient<F>> = ts.par_iter().map(|t| transient(*t)).collect();
    match copies.try_into() {
        Ok(copies) => copies,
        Err(_) => unreachable!("one copy per tensor"),
    }
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
/// weight (and bias) gradients; `w` holds the weight tensor's elements.
#[allow(clippy::too_many_arguments)]
fn linear_grads<F: CpuFloat>(
    grads: &mut Gradients<F, Cpu>,
    (weight, w): (&T2<F>, &[F]),
    bias: Option<&Tensor<(usize,), F, Cpu>>,
    dy: &[F],
    x: &[F],
    dims: (usize, usize, usize),
    dx: &mut [F],
) -> Res {
    let mut dw = take_grad(grads, weight)?;
    let mut db = bias.map(|b| take_grad(grads, b)).transpose()?;
    math::linear_bwd(dy, x, w, dims, dx, &mut dw, db.as_deref_mut());
    put_grad(grads, weight, dw)?;
    if let (Some(b), Some(db)) = (bias, db) {
        put_grad(grads, b, db)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_hand_back_a_buffer_of_the_length_and_type_asked_and_drop_the_oldest() {
        let mut spares = Spares(Vec::new());
        let a = vec![1.0f32; 3];
        let at = a.as_ptr();
        spares.give(a);
        spares.give(vec![2.0f64; 3]);
        assert!(spares.take::<f32>(4).is_none(), "no buffer of 4");
        let back = spares.take::<f32>(3).expect("the f32 buffer of 3");
        assert_eq!(back.as_ptr(), at, "the same allocation");
        assert!(spares.take::<f32>(3).is_none(), "taken once");
        assert_eq!(spares.take::<f64>(3), Some(vec![2.0; 3]));
        for i in 0..=Spares::MAX {
            spares.give(vec![0.0f32; 10 + i]);
        }
        assert_eq!(spares.0.len(), Spares::MAX);
        assert!(spares.take::<f32>(10).is_none(), "the oldest went first");
        assert!(spares.take::<f32>(11).is_some());
    }

    #[test]
    fn a_transient_copy_holds_its_tensors_elements_in_a_reused_buffer() {
        let dev = Cpu::default();
        let n = 4099;
        let first: T2<f32> = dev.tensor_from_vec((0..n).map(|i| i as f32).collect(), (1, n));
        let second: T2<f32> = dev.tensor_from_vec((0..n).map(|i| -(i as f32)).collect(), (1, n));
        drop(transient(&first));
        // Whether or not the buffer just dropped is the one reused, every element is the new
        // tensor's.
        let [copy] = transients([&second]);
        assert!(copy.iter().enumerate().all(|(i, x)| *x == -(i as f32)));
    }
}
