//! Packing prompt/completion pairs into one [`TokenBatch`]: prompts left-padded to the longest
//! prompt, completions right-padded to the longest completion, so that every completion starts
//! at the same column (`completion_start`) and [`crate::model::CausalLm::token_logps`] returns
//! one `[rows, completion_len]` matrix.

use crate::error::{Error, Result};
use crate::model::{CausalLm, Kernels, TokenBatch};
use crate::train::driver::RunError;

/// The padding id: the config's `pad_token_id`, else its first EOS id, else 0. Padding is
/// always masked, so the choice only has to be a valid id.
pub(crate) fn pad_token<D: Kernels<f32>>(model: &CausalLm<f32, D>) -> u32 {
    model
        .config
        .raw
        .get("pad_token_id")
        .and_then(serde_json::Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .or(model.config.eos_token_ids.first().copied())
        .unwrap_or(0)
}

/// A packed batch.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    /// Token ids and attention mask.
    pub batch: TokenBatch,
    /// The column where completions start (the longest prompt's length).
    pub completion_start: usize,
    /// The longest completion's length: columns `completion_start..`.
    pub completion_len: usize,
    /// `[rows, completion_len]`, 1.0 for a completion's real tokens and 0.0 for padding.
    pub completion_mask: Vec<f64>,
}

/// Packs `(prompt, completion)` pairs into at least `(prompt, completion)` columns; `pad` fills
/// the padding (masked out). A data-parallel rank packs its share of a micro-batch as wide as
/// the whole micro-batch, so that its rows go through the same shapes, and round the same, as
/// in one process.
pub(crate) fn pack_to(
    pairs: &[(&[u32], &[u32])],
    pad: u32,
    at_least: (usize, usize),
) -> Result<Packed> {
    let p = pairs.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
    let c = pairs.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    let (p, c) = if p == 0 || c == 0 {
        (p, c)
    } else {
        (p.max(at_least.0), c.max(at_least.1))
    };
    if pairs.is_empty() || p == 0 || c == 0 {
        return Err(Error::Run(RunError::EmptyBatch));
    }
    let cols = p + c;
    let mut ids = Vec::with_capacity(pairs.len() * cols);
    let mut mask = Vec::with_capacity(pairs.len() * cols);
    let mut completion_mask = Vec::with_capacity(pairs.len() * c);
    for (prompt, completion) in pairs {
        let (lp, rp) = (p - prompt.len(), c - completion.len());
        ids.extend(std::iter::repeat_n(pad, lp));
        ids.extend_from_slice(prompt);
        ids.extend_from_slice(completion);
        ids.extend(std::iter::repeat_n(pad, rp));
        mask.extend(std::iter::repeat_n(false, lp));
        mask.extend(std::iter::repeat_n(true, prompt.len() + completion.len()));
        mask.extend(std::iter::repeat_n(false, rp));
        completion_mask.extend(std::iter::repeat_n(1.0, completion.len()));
        completion_mask.extend(std::iter::repeat_n(0.0, rp));
    }
    Ok(Packed {
        batch: TokenBatch::new(ids, mask, pairs.len(), cols)?,
        completion_start: p,
        completion_len: c,
        completion_mask,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_to_a_width_pads_more() {
        let packed = pack_to(&[(&[1], &[3])], 0, (2, 3)).unwrap();
        assert_eq!(packed.completion_start, 2);
        assert_eq!(packed.batch.ids(), &[0, 1, 3, 0, 0]);
        assert_eq!(packed.completion_mask, vec![1.0, 0.0, 0.0]);
    }

    #[test]
    fn prompts_left_completions_right() {
        let packed = pack_to(&[(&[1, 2], &[3]), (&[4], &[5, 6])], 0, (0, 0)).unwrap();
        assert_eq!(packed.completion_start, 2);
        assert_eq!(packed.batch.ids(), &[1, 2, 3, 0, 0, 4, 5, 6]);
        assert_eq!(
            packed.batch.mask(),
            &[true, true, true, false, false, true, true, true]
        );
        assert_eq!(packed.completion_mask, vec![1.0, 0.0, 1.0, 1.0]);
    }
}
