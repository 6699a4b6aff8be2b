//! The SWE-RL rule-based reward, reproduced bit for bit as a pure Rust library.
//!
//! Given the files shown to a model, the ground-truth ("oracle") new contents of those files and
//! the model's completion (a `<think>` block and a `<solution>` block of SEARCH/REPLACE edits),
//! [`search_replace_reward`] returns −1.0 when the completion is malformed or its edits do not
//! apply, and otherwise the mean, over the changed paths, of the character-level similarity
//! between the predicted and the oracle line diffs. [`content_reward`] scores predicted file
//! contents directly and [`unidiff_reward`] scores unified-diff patches. The results equal the
//! reference implementation's to the last bit, with one deliberate choice where the reference is
//! non-deterministic: it sums the per-path similarities in an order set by Python's string
//! hashing, which can change the last bit with three or more paths; swerve sums in path order,
//! which gives one of the values the reference can produce.
//!
//! What it is not: it does not run tests or apply patches to a repository, it does no I/O and
//! spawns no threads (so that it builds unchanged for `wasm32-wasip2`), and it is not a general
//! diff library: [`difflib`] ports only what the reward needs.
//!
//! Credits: the reward is defined by SWE-RL (Meta), "SWE-RL: Advancing LLM Reasoning via
//! Reinforcement Learning on Open Software Evolution" (arXiv 2502.18449); this crate is written
//! from a behavioural specification, not from its source. [`difflib`] is a port of the algorithm
//! of CPython's `difflib` (Python Software Foundation, PSF licence).
//!
//! Layout: `pystr` (Python's `strip`/`splitlines`), [`difflib`] (the matcher and unified-diff
//! rendering), [`edits`] (tags, block grammar, applying edits), `reward` (the pipeline),
//! `unidiff` (parsing unified-diff patches for the diff-based variant), `error` (the
//! format errors).

pub mod difflib;
pub mod edits;
mod error;
mod pystr;
mod reward;
mod unidiff;

/// A xorshift64 generator for the tests' random cases: each call gives a number below its
/// bound, the same sequence for the same seed on every machine.
#[cfg(test)]
pub(crate) fn test_rng(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |bound| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    }
}

/// Path → file text. A `BTreeMap`, so iteration (and so every result) is in path order.
pub type FileMap = std::collections::BTreeMap<String, String>;

pub use edits::{Edits, parse_and_apply};
pub use error::FormatError;
pub use reward::{
    PathSimilarity, RewardOutcome, content_reward, normalized_diff, search_replace_reward,
    similarity,
};
pub use unidiff::unidiff_reward;
