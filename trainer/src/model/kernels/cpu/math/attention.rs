//! Masked multi-head attention with grouped keys and values, forward and backward, in blocks of
//! query rows.

use rayon::prelude::*;

use super::super::super::{AttentionMask, MASKED};
use super::linear::matmul;
use super::*;

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
pub(crate) fn attn_bwd<F: CpuFloat>(
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
