//! Activation recomputation on dfdx's tape ("gradient checkpointing"): a block runs forward
//! without recording, keeping only its input; its backward pass runs it again with a tape of
//! its own and back-propagates through that.
//!
//! dfdx 0.13 has no checkpointing of its own, and its tape keeps every operation's saved
//! inputs until the whole backward pass has run. [`checkpoint`] records one backward operation
//! for a whole block instead: when it runs, the block's input and parameter gradients are
//! moved out of the outer gradient store into a fresh one, the block is recomputed on the input
//! traced into that store, the recomputed output is seeded with the output's gradient
//! (`Σ y·dy`, whose backward gives `y` exactly `dy`), and the gradients are moved back. The
//! fresh store, with every intermediate gradient of the block, is dropped right after: one
//! block's activations and gradients are alive at a time, whichever kernels the block runs.
//! Because the recomputation runs the same kernels on the same input, and the gradients
//! accumulate onto the same buffers in the same order, the gradients equal those of the run
//! without recomputation (bit for bit on the CPU; `trainer/tests/it/model_memory.rs`).
//!
//! [`chunked`] is the same with the input cut into row blocks recomputed one after another: the
//! LM head and log-softmax over `rows × vocab` logits never exist at once for more than one
//! block (forward or backward).

use dfdx::prelude::*;

use super::kernels::Kernels;
use super::params::{Param, ParamRef, move_grad};

type T2<E, D, T = NoneTape> = Tensor<(usize, usize), E, D, T>;

/// A block that can be run again: a pure function of its input `[rows, width]` and of the
/// parameters it lists, on any tape.
pub(super) trait Recompute<E: Dtype, D: Kernels<E>>: 'static {
    /// The block's forward pass.
    fn forward<T: Tape<E, D>>(&self, x: T2<E, D, T>) -> T2<E, D, T>;
    /// Every parameter whose gradient the block's backward pass adds to.
    fn params(&self) -> Vec<ParamRef<'_, E, D>>;
}

/// `block.forward(x)`, keeping only `x` for the backward pass (see the module documentation).
/// Without a tape this is just the forward pass.
pub(super) fn checkpoint<E, D, T, B>(x: T2<E, D, T>, block: B) -> T2<E, D, T>
where
    E: Dtype,
    D: Kernels<E>,
    T: Tape<E, D>,
    B: Recompute<E, D>,
{
    if !T::OWNS_TAPE {
        return block.forward(x);
    }
    let (x, mut tape) = x.split_tape();
    let y = block.forward(x.clone());
    let y_key = y.clone();
    tape.add_backward_op(move |grads| {
        let dy = take_grad_tensor(grads, &y_key);
        drop(y_key);
        backprop_recomputed(grads, &x, &block, |xt| block.forward(xt), dy);
        Ok(())
    });
    y.put_tape(tape)
}

/// A block applied to row blocks of `x` (`rows_per_chunk` rows each, the last one shorter)
/// whose outputs are stacked: `f(x)` for a row-wise `f` such as the LM head and the token
/// log-probabilities. Forward and backward each hold one row block's intermediates at a time.
/// `block.forward` receives the chunk's rows (`[chunk, width]`) and must return one output row
/// per input row, `width_out` wide. Also returns what [`RowBlock::forward_aux`] computes
/// alongside the forward pass (entropies), chunk after chunk.
pub(super) fn chunked<E, D, T, B>(
    x: T2<E, D, T>,
    rows_per_chunk: usize,
    block: B,
    width_out: usize,
) -> (T2<E, D, T>, Vec<E>)
where
    E: Dtype,
    D: Kernels<E>,
    T: Tape<E, D>,
    B: RowBlock<E, D>,
{
    let (rows, _) = *x.shape();
    let step = rows_per_chunk.max(1);
    let (x, mut tape) = x.split_tape();
    let dev = x.device().clone();
    let ranges: Vec<(usize, usize)> = (0..rows)
        .step_by(step)
        .map(|start| (start, (start + step).min(rows)))
        .collect();
    let mut out = Vec::with_capacity(rows * width_out);
    let mut aux = Vec::new();
    for &(start, end) in &ranges {
        let (part, part_aux) =
            block
                .with_range(start, end)
                .forward_aux(pick_rows(x.clone(), start, end));
        out.extend(part.as_vec());
        aux.extend(part_aux);
    }
    let y = dev.tensor_from_vec(out, (rows, width_out));
    if T::OWNS_TAPE {
        let y_key = y.clone();
        tape.add_backward_op(move |grads| {
            let dy = take_grad_tensor(grads, &y_key).as_vec();
            drop(y_key);
            for (start, end) in ranges {
                let part = block.with_range(start, end);
                let dy_part = dev.tensor_from_vec(
                    dy[start * width_out..end * width_out].to_vec(),
                    (end - start, width_out),
                );
                let forward =
                    |xt: T2<E, D, OwnedTape<E, D>>| part.forward(pick_rows(xt, start, end));
                backprop_recomputed(grads, &x, &part, forward, dy_part);
            }
            Ok(())
        });
    }
    (y.put_tape(tape), aux)
}

/// A row-wise block for [`chunked`]: it knows which rows of the whole input a chunk covers
/// (their targets, say).
pub(super) trait RowBlock<E: Dtype, D: Kernels<E>>: Recompute<E, D> + Sized {
    /// The block restricted to rows `start..end`.
    fn with_range(&self, start: usize, end: usize) -> Self;
    /// The forward pass without a tape, with values computed alongside (one per row).
    fn forward_aux(&self, x: T2<E, D>) -> (T2<E, D>, Vec<E>);
}

/// Rows `start..end` of `x` through `gather` (whose backward adds into `x`'s gradient; dfdx
/// 0.13's CPU `slice` backward would overwrite it). Takes `x` with its tape, which holds the
/// gradient store a recomputation accumulates into.
fn pick_rows<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: T2<E, D, T>,
    start: usize,
    end: usize,
) -> T2<E, D, T> {
    let idx = x
        .device()
        .tensor_from_vec((start..end).collect::<Vec<usize>>(), (end - start,));
    x.gather(idx)
}

/// Moves the gradients of `x` and of the block's parameters into a fresh store, back-propagates
/// `dy` through `forward` recomputed on `x` traced into it, and moves them back.
fn backprop_recomputed<E, D, B>(
    grads: &mut Gradients<E, D>,
    x: &T2<E, D>,
    block: &B,
    forward: impl FnOnce(T2<E, D, OwnedTape<E, D>>) -> T2<E, D, OwnedTape<E, D>>,
    dy: T2<E, D>,
) where
    E: Dtype,
    D: Kernels<E>,
    B: Recompute<E, D>,
{
    let mut inner = Gradients::leaky();
    move_param_grads(grads, &mut inner, block, x);
    let y = forward(x.clone().traced(inner));
    let mut inner = (y * dy).sum::<(), _>().backward();
    move_param_grads(&mut inner, grads, block, x);
}

fn move_param_grads<E: Dtype, D: Kernels<E>, B: Recompute<E, D>>(
    from: &mut Gradients<E, D>,
    to: &mut Gradients<E, D>,
    block: &B,
    x: &T2<E, D>,
) {
    for p in block.params() {
        match p {
            Param::Vector(t) => move_grad(from, to, t),
            Param::Matrix(t) => move_grad(from, to, t),
        }
    }
    move_grad(from, to, x);
}

/// `t`'s gradient as a tensor, its buffer in the store released where the device can
/// ([`Kernels::release_grad`]).
fn take_grad_tensor<E: Dtype, D: Kernels<E>>(
    grads: &mut Gradients<E, D>,
    t: &T2<E, D>,
) -> T2<E, D> {
    grads.try_alloc_for(t).expect("allocate gradient");
    let g = grads.get(t);
    D::release_grad(grads, t);
    g
}
