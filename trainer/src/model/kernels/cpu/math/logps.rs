//! Token log-probabilities (and entropies) of logits, forward and backward.

use rayon::prelude::*;

use super::*;

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

/// The gradients [`logps_bwd`] takes: of the log-probabilities, and of the entropies (`None`:
/// nothing used them), with the forward's entropies and log-normalisers.
pub struct LogpsGrads<'a, F> {
    /// `d loss / d logp`, one per row.
    pub dlogp: &'a [F],
    /// `d loss / d H`, one per row, when the entropies are part of the loss.
    pub dentropy: Option<&'a [F]>,
    /// The forward's entropies.
    pub entropy: &'a [F],
    /// The forward's log-normalisers.
    pub lse: &'a [F],
}

/// Backward of [`logps_fwd`], with `z = logit / T`, `p = softmax(z)`:
/// `dlogits_k += [dy·(1[k = target] − p_k) − dH·p_k·(log p_k + H)] / T`.
pub fn logps_bwd<F: CpuFloat>(
    grads: &LogpsGrads<'_, F>,
    logits: &[F],
    vocab: usize,
    targets: &[usize],
    temperature: f64,
    dlogits: &mut [F],
) {
    let inv_t: F = cast(1.0 / temperature);
    dlogits
        .par_chunks_mut(vocab)
        .zip(logits.par_chunks(vocab))
        .enumerate()
        .for_each(|(r, (drow, row))| {
            let g = grads.dlogp[r] * inv_t;
            let h = grads.dentropy.map_or(F::zero(), |d| d[r] * inv_t);
            if g == F::zero() && h == F::zero() {
                return;
            }
            let (l, entropy) = (grads.lse[r], grads.entropy[r]);
            simd(
                #[inline(always)]
                || {
                    if h == F::zero() {
                        for (d, v) in drow.iter_mut().zip(row) {
                            *d -= g * (*v * inv_t - l).vexp();
                        }
                    } else {
                        for (d, v) in drow.iter_mut().zip(row) {
                            let log_p = *v * inv_t - l;
                            *d -= log_p.vexp() * (g + h * (log_p + entropy));
                        }
                    }
                },
            );
            drow[targets[r]] += g;
        });
}
