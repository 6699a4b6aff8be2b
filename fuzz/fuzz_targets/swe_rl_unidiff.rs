//! The unified-diff reading of the SWE-RL reward: two patches (the input split at its first NUL)
//! compared file by file; any text gives a reward in [-1, 1], never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swerve_swe_rl::unidiff_reward;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (oracle, pred) = text.split_once('\0').unwrap_or((&text, &text));
    let _ = swerve_swe_rl::unidiff::file_changes(pred);
    let outcome = unidiff_reward(&[oracle], &[pred]);
    assert!((-1.0..=1.0).contains(&outcome.reward), "{}", outcome.reward);
});
