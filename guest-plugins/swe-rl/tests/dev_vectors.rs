//! Checks every development vector of `tests/data/swerl-dev-vectors.jsonl` (computed with the
//! reference implementation) bit for bit, and reports every mismatch with its vector id.

use std::path::PathBuf;

use serde::Deserialize;
use swerve_swe_rl::edits::{extract_tags, find_blocks};
use swerve_swe_rl::{FileMap, FormatError, content_reward, parse_and_apply, search_replace_reward};

#[derive(Deserialize)]
struct Vector {
    id: String,
    code_context: FileMap,
    oracle_new_content: FileMap,
    output: String,
    expected: Expected,
    debug: Debug,
}

#[derive(Deserialize)]
struct Expected {
    reward_bits: String,
    format_error: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    similarities: Vec<Similarity>,
    #[serde(default)]
    reward_all_orders_bits: Vec<String>,
    #[serde(default)]
    reward_fsum_mean_bits: Option<String>,
    #[serde(default)]
    order_sensitive: bool,
}

#[derive(Deserialize)]
struct Similarity {
    path: String,
    similarity_bits: String,
    matches: usize,
    total_len: usize,
    pred_change: String,
    oracle_change: String,
}

#[derive(Deserialize)]
struct Debug {
    thought: Option<String>,
    answer: Option<String>,
    findall: Option<Vec<(String, String, String)>>,
    pred_new_content: Option<FileMap>,
}

/// The vectors are this crate's test data; the harness and end-to-end tests read the same copy.
fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/swerl-dev-vectors.jsonl")
}

fn bits(hex: &str) -> u64 {
    u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("bad bits {hex:?}: {e}"))
}

impl Expected {
    /// Every reward value accepted for this vector.
    fn allowed_rewards(&self) -> Vec<u64> {
        let mut allowed = vec![bits(&self.reward_bits)];
        if self.order_sensitive {
            allowed.extend(self.reward_all_orders_bits.iter().map(|b| bits(b)));
            allowed.extend(self.reward_fsum_mean_bits.iter().map(|b| bits(b)));
        }
        allowed
    }
}

/// Compares one vector and appends a line per mismatch.
fn check(v: &Vector, mismatches: &mut Vec<String>) {
    let mut fail = |what: String| mismatches.push(format!("{}: {what}", v.id));
    let e = &v.expected;
    let allowed = e.allowed_rewards();

    let outcome = search_replace_reward(&v.code_context, &v.oracle_new_content, &v.output);
    if !allowed.contains(&outcome.reward.to_bits()) {
        fail(format!(
            "reward {} ({:016x}), expected one of {:016x?}",
            outcome.reward,
            outcome.reward.to_bits(),
            allowed
        ));
    }
    let error = outcome.format_error.as_ref().map(FormatError::to_string);
    let expected_error = if e.format_error {
        e.error.clone()
    } else {
        None
    };
    if error != expected_error {
        fail(format!("error {error:?}, expected {expected_error:?}"));
    }
    let applied = parse_and_apply(&v.code_context, &v.output);
    if applied.as_ref().err() != outcome.format_error.as_ref() {
        fail(format!("parse_and_apply gave {:?}", applied.as_ref().err()));
    }

    // The debug texts exist when the tags parsed.
    if let (Some(thought), Some(answer)) = (&v.debug.thought, &v.debug.answer) {
        if outcome.thought.as_ref() != Some(thought) || outcome.answer.as_ref() != Some(answer) {
            fail("thought/answer differ".into());
        }
        match extract_tags(&v.output) {
            Ok((t, a)) if t == thought && a == answer => {}
            other => fail(format!("extract_tags gave {other:?}")),
        }
        let found: Vec<(String, String, String)> = find_blocks(answer)
            .into_iter()
            .map(|(p, s, r)| (p.into(), s.into(), r.into()))
            .collect();
        if Some(&found) != v.debug.findall.as_ref() {
            fail(format!("findall {found:?}, expected {:?}", v.debug.findall));
        }
    } else if outcome.thought.is_some() {
        fail("tags parsed, expected a tag error".into());
    }

    if let Some(pred) = &v.debug.pred_new_content {
        match &applied {
            Ok(edits) if &edits.new_content == pred => {}
            Ok(edits) => fail(format!(
                "pred_new_content {:?}, expected {pred:?}",
                edits.new_content
            )),
            Err(_) => {}
        }
        let by_content = content_reward(&v.code_context, &v.oracle_new_content, pred);
        if !allowed.contains(&by_content.reward.to_bits()) {
            fail(format!("content_reward {} not allowed", by_content.reward));
        }
        if by_content.similarities != outcome.similarities {
            fail("content_reward similarities differ from search_replace_reward's".into());
        }
    } else if applied.is_ok() {
        fail("edits applied, expected them not to".into());
    }

    if outcome.similarities.len() != e.similarities.len() {
        fail(format!(
            "{} similarities, expected {}",
            outcome.similarities.len(),
            e.similarities.len()
        ));
    }
    for (got, want) in outcome.similarities.iter().zip(&e.similarities) {
        let at = &want.path;
        if got.path != want.path {
            fail(format!("path {:?}, expected {at:?}", got.path));
        }
        if got.pred_change != want.pred_change {
            fail(format!(
                "{at}: pred_change\n{}\nexpected\n{}",
                got.pred_change, want.pred_change
            ));
        }
        if got.oracle_change != want.oracle_change {
            fail(format!(
                "{at}: oracle_change\n{}\nexpected\n{}",
                got.oracle_change, want.oracle_change
            ));
        }
        if (got.matches, got.total_len) != (want.matches, want.total_len) {
            fail(format!(
                "{at}: M/T {}/{}, expected {}/{}",
                got.matches, got.total_len, want.matches, want.total_len
            ));
        }
        if got.similarity.to_bits() != bits(&want.similarity_bits) {
            fail(format!(
                "{at}: similarity {}, expected bits {}",
                got.similarity, want.similarity_bits
            ));
        }
    }
}

#[test]
fn dev_vectors_are_bit_exact() {
    let path = vectors_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let vectors: Vec<Vector> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1))
        })
        .collect();
    assert!(
        vectors.len() >= 120,
        "only {} vectors in {}",
        vectors.len(),
        path.display()
    );

    let mut mismatches = Vec::new();
    let mut failed_ids = std::collections::BTreeSet::new();
    for v in &vectors {
        let before = mismatches.len();
        check(v, &mut mismatches);
        if mismatches.len() > before {
            failed_ids.insert(v.id.clone());
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} vectors mismatch ({:?}):\n{}",
        failed_ids.len(),
        vectors.len(),
        failed_ids,
        mismatches.join("\n")
    );
    eprintln!("{}/{} vectors bit-exact", vectors.len(), vectors.len());
}
