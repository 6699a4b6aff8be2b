//! Steps 4–6 of the reward: normalised line-level diffs per path, a character-level similarity
//! per path, and their mean; plus the two entry points built on them.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::FileMap;
use crate::difflib::{Autojunk, SequenceMatcher, ratio_of, same_text, unified_diff_body};
use crate::edits::{apply_blocks, find_blocks, split_tags};
use crate::error::FormatError;
use crate::pystr::splitlines;

/// The reward of every format error.
const FORMAT_ERROR_REWARD: f64 = -1.0;

/// The similarity of one path's predicted and oracle diffs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathSimilarity {
    /// The file path, as keyed in the content maps.
    pub path: String,
    /// `2 * matches / total_len`; 0.0 when either side has no diff for this path.
    pub similarity: f64,
    /// `M`: the sum of the matching-block sizes (0 when either side has no diff).
    pub matches: usize,
    /// `T`: the code-point lengths of both diffs added up (also when one of them is empty).
    pub total_len: usize,
    /// The predicted normalised diff (`""` when the prediction does not change this path).
    pub pred_change: String,
    /// The oracle normalised diff (`""` when the oracle does not change this path).
    pub oracle_change: String,
}

/// The reward of one completion and what it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardOutcome {
    /// −1.0 on a format error; otherwise in [0, 1].
    pub reward: f64,
    /// Why the reward is −1, if it is.
    pub format_error: Option<FormatError>,
    /// The stripped thought, when the tags could be extracted (also when a later step failed;
    /// `Some("")` for [`FormatError::EmptyThought`]). `None` for the content-based variants.
    pub thought: Option<String>,
    /// The stripped answer, under the same conditions as `thought`.
    pub answer: Option<String>,
    /// One entry per path in the union of both diff maps, sorted by path; empty on a format
    /// error and when neither side changes anything.
    pub similarities: Vec<PathSimilarity>,
}

impl RewardOutcome {
    fn format_error(error: FormatError, texts: Option<(&str, &str)>) -> Self {
        Self {
            reward: FORMAT_ERROR_REWARD,
            format_error: Some(error),
            thought: texts.map(|(t, _)| t.to_owned()),
            answer: texts.map(|(_, a)| a.to_owned()),
            similarities: Vec::new(),
        }
    }
}

/// The reward of the SWE-RL paper (`calculate_search_replace_reward`): −1 on a format error,
/// otherwise the mean per-path similarity of the predicted and oracle diffs.
pub fn search_replace_reward(
    code_context: &FileMap,
    oracle_new_content: &FileMap,
    output: &str,
) -> RewardOutcome {
    let (thought, answer) = match split_tags(output) {
        Ok(texts) => texts,
        Err(error) => return RewardOutcome::format_error(error, None),
    };
    let texts = Some((thought, answer));
    if thought.is_empty() {
        return RewardOutcome::format_error(FormatError::EmptyThought, texts);
    }
    let blocks = find_blocks(answer);
    if blocks.is_empty() {
        return RewardOutcome::format_error(FormatError::NoBlocks, texts);
    }
    let pred_new_content = match apply_blocks(code_context, &blocks) {
        Ok(content) => content,
        Err(error) => return RewardOutcome::format_error(error, texts),
    };
    let mut outcome = content_reward(code_context, oracle_new_content, &pred_new_content);
    outcome.thought = Some(thought.to_owned());
    outcome.answer = Some(answer.to_owned());
    outcome
}

/// The content-based variant (`calculate_reward`): steps 4–6 on predicted file contents instead
/// of a completion. Never −1.
pub fn content_reward(
    code_context: &FileMap,
    oracle_new_content: &FileMap,
    pred_new_content: &FileMap,
) -> RewardOutcome {
    let oracle = patches(code_context, oracle_new_content, None);
    let pred = patches(
        code_context,
        pred_new_content,
        Some((oracle_new_content, &oracle)),
    );
    reward_from_patches(oracle, pred)
}

/// Path → normalised diff of `code_context[path]` (or `""`) to `new_content[path]`, for the
/// paths whose diff is not empty.
///
/// `known` holds already computed diffs of other contents (the oracle's): a path whose new text
/// equals the known one has the same diff, which is then copied instead of recomputed.
fn patches<'a>(
    code_context: &FileMap,
    new_content: &'a FileMap,
    known: Option<(&FileMap, &BTreeMap<&str, String>)>,
) -> BTreeMap<&'a str, String> {
    new_content
        .iter()
        .filter_map(|(path, new)| {
            let reused = known.and_then(|(contents, diffs)| {
                contents
                    .get(path)
                    .is_some_and(|known| same_text(known, new))
                    .then(|| diffs.get(path.as_str()).cloned().unwrap_or_default())
            });
            let diff = reused.unwrap_or_else(|| {
                let old = code_context.get(path).map_or("", String::as_str);
                normalized_diff(old, new)
            });
            (!diff.is_empty()).then_some((path.as_str(), diff))
        })
        .collect()
}

/// Steps 5–6 over two path → diff maps whose diffs are all non-empty.
pub(crate) fn reward_from_patches<K: AsRef<str> + Ord>(
    oracle: BTreeMap<K, String>,
    pred: BTreeMap<K, String>,
) -> RewardOutcome {
    // Both maps are sorted by path (`str`'s `Ord` is code-point order), so merging them gives
    // the union sorted by path.
    let mut oracle = oracle.into_iter().peekable();
    let mut pred = pred.into_iter().peekable();
    let mut similarities = Vec::new();
    loop {
        let (oracle_entry, pred_entry) = match (oracle.peek(), pred.peek()) {
            (None, None) => break,
            (Some(_), None) => (oracle.next(), None),
            (None, Some(_)) => (None, pred.next()),
            (Some((o, _)), Some((p, _))) => match o.cmp(p) {
                Ordering::Less => (oracle.next(), None),
                Ordering::Greater => (None, pred.next()),
                Ordering::Equal => (oracle.next(), pred.next()),
            },
        };
        similarities.push(path_similarity(oracle_entry, pred_entry));
    }
    if similarities.is_empty() {
        // Neither side changes anything at line level.
        return RewardOutcome {
            reward: 1.0,
            format_error: None,
            thought: None,
            answer: None,
            similarities,
        };
    }
    // Naive left-to-right summation from 0.0 in path order. The reference's order depends on
    // Python's string hashing, so with three or more paths its last bit can vary; path order
    // gives one of its possible values (the development vectors list them all).
    let sum = similarities
        .iter()
        .fold(0.0_f64, |acc, s| acc + s.similarity);
    RewardOutcome {
        reward: sum / similarities.len() as f64,
        format_error: None,
        thought: None,
        answer: None,
        similarities,
    }
}

/// The similarity of one path of the union; at least one side is present.
fn path_similarity<K: AsRef<str>>(
    oracle: Option<(K, String)>,
    pred: Option<(K, String)>,
) -> PathSimilarity {
    let path = oracle
        .as_ref()
        .or(pred.as_ref())
        .map(|(path, _)| path.as_ref().to_owned())
        .unwrap_or_default();
    let oracle_change = oracle.map(|(_, diff)| diff).unwrap_or_default();
    let pred_change = pred.map(|(_, diff)| diff).unwrap_or_default();
    let (similarity, matches, total_len) = if oracle_change.is_empty() || pred_change.is_empty() {
        let total = oracle_change.chars().count() + pred_change.chars().count();
        (0.0, 0, total)
    } else {
        self::similarity(&pred_change, &oracle_change)
    };
    PathSimilarity {
        path,
        similarity,
        matches,
        total_len,
        pred_change,
        oracle_change,
    }
}

/// The normalised line-level diff of step 4: `difflib.unified_diff` of the `splitlines()` of
/// both texts with 3 lines of context and no line terminators, without its two file-header lines,
/// joined with `"\n"`; `""` when there is no line-level change.
pub fn normalized_diff(old: &str, new: &str) -> String {
    if same_text(old, new) {
        return String::new();
    }
    unified_diff_body(&splitlines(old), &splitlines(new), 3)
}

/// The character-level similarity of step 5: CPython's
/// `SequenceMatcher(None, a, b, autojunk=False).ratio()` over code points, with `M` (matched code
/// points) and `T` (`len(a) + len(b)` in code points).
pub fn similarity(a: &str, b: &str) -> (f64, usize, usize) {
    if same_text(a, b) {
        // A sequence matched against itself is one block covering it all (the first
        // full-length diagonal wins), so this shortcut gives CPython's exact result.
        let n = a.chars().count();
        return (ratio_of(n, 2 * n), n, 2 * n);
    }
    let matcher = SequenceMatcher::for_chars(a, b, Autojunk::Off);
    let total = matcher.len_a() + matcher.len_b();
    let matches = matcher.matches();
    (ratio_of(matches, total), matches, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> FileMap {
        pairs
            .iter()
            .map(|&(p, c)| (p.to_owned(), c.to_owned()))
            .collect()
    }

    #[test]
    fn normalized_diffs() {
        fn check(old: &str, new: &str, expect: &str) {
            assert_eq!(normalized_diff(old, new), expect, "old {old:?} new {new:?}");
        }
        check("", "", "");
        check("a\nb\n", "a\nb\n", "");
        // Line endings are invisible: CRLF to LF, a final newline, one boundary for another.
        check("a\r\nb\r\n", "a\nb", "");
        check("a\u{0C}b", "a\u{2028}b\u{85}", "");
        check("", "x\n", "@@ -0,0 +1 @@\n+x");
        check("a\nb\n", "", "@@ -1,2 +0,0 @@\n-a\n-b");
        check(
            "1\n2\n3\n4\n5\n6\n7\n",
            "1\n2\n3\n4\n5\n6\n7\n8\n",
            "@@ -5,3 +5,4 @@\n 5\n 6\n 7\n+8",
        );
        // U+000C, U+2028 and U+0085 split lines; U+001F does not.
        check("a\u{0C}b\n", "a\u{0C}c\n", "@@ -1,2 +1,2 @@\n a\n-b\n+c");
        check(
            "a\u{2028}b\n",
            "a\u{2028}c\n",
            "@@ -1,2 +1,2 @@\n a\n-b\n+c",
        );
        check("a\u{85}b\n", "a\u{85}c\n", "@@ -1,2 +1,2 @@\n a\n-b\n+c");
        check(
            "a\u{1F}b\n",
            "a\u{1F}c\n",
            "@@ -1 +1 @@\n-a\u{1F}b\n+a\u{1F}c",
        );
    }

    #[test]
    fn line_diff_applies_the_popular_line_rule() {
        // 200 lines with 60 "pass" lines: "pass" is popular in the 202-line new file, so the
        // inserted pair is matched differently than with autojunk off (CPython 3.11 output).
        let pass_at = [
            0, 2, 8, 14, 16, 22, 28, 34, 35, 36, 41, 43, 49, 50, 52, 54, 56, 59, 61, 65, 69, 75,
            77, 80, 81, 82, 86, 91, 93, 97, 99, 105, 106, 112, 114, 115, 116, 127, 129, 133, 136,
            140, 142, 143, 144, 152, 153, 162, 163, 166, 167, 169, 173, 174, 176, 182, 183, 185,
            190, 199,
        ];
        let mut old: Vec<String> = (0..200).map(|i| format!("v{i}")).collect();
        for i in pass_at {
            old[i] = "pass".into();
        }
        let mut new = old.clone();
        new.splice(117..117, ["pass".to_owned(), "pass".to_owned()]);
        let (old, new) = (old.join("\n"), new.join("\n"));
        assert_eq!(
            normalized_diff(&old, &new),
            "@@ -112,6 +112,8 @@\n v111\n pass\n v113\n+pass\n+pass\n pass\n pass\n pass"
        );
    }

    #[test]
    fn similarity_counts_code_points() {
        fn check(a: &str, b: &str, expect: (f64, usize, usize)) {
            let got = similarity(a, b);
            assert_eq!(
                (got.0.to_bits(), got.1, got.2),
                (expect.0.to_bits(), expect.1, expect.2)
            );
        }
        check("", "", (1.0, 0, 0));
        check("😀é", "😀é", (1.0, 2, 4));
        check("😀é", "é😀", (0.5, 1, 4));
        check("abcd", "bcde", (0.75, 3, 8));
    }

    #[test]
    fn union_semantics() {
        let ctx = files(&[("a.py", "x = 1\n"), ("b.py", "y = 1\n")]);
        let check = |oracle: &[(&str, &str)], pred: &[(&str, &str)], expect: f64| {
            let outcome = content_reward(&ctx, &files(oracle), &files(pred));
            assert_eq!(
                outcome.reward.to_bits(),
                expect.to_bits(),
                "{oracle:?} {pred:?}"
            );
            let paths: Vec<&str> = outcome
                .similarities
                .iter()
                .map(|s| s.path.as_str())
                .collect();
            let mut sorted = paths.clone();
            sorted.sort_unstable();
            assert_eq!(paths, sorted);
        };
        let fix_a = ("a.py", "x = 2\n");
        let fix_b = ("b.py", "y = 2\n");
        check(&[fix_a], &[fix_a], 1.0);
        // A correct edit plus an edit to an extra file.
        check(&[fix_a], &[fix_a, fix_b], 0.5);
        // Fixing one of two oracle files.
        check(&[fix_a, fix_b], &[fix_a], 0.5);
        // Unchanged oracle paths are dropped; neither side changing anything gives 1.0.
        check(&[("a.py", "x = 1\n")], &[("b.py", "y = 1\r\n")], 1.0);
        check(&[], &[], 1.0);
        // Only non-oracle paths, or the oracle changing nothing: 0.0.
        check(&[fix_a], &[fix_b], 0.0);
        check(&[], &[fix_a], 0.0);
        // An oracle path missing from the context is a new file.
        check(&[("new.py", "z\n")], &[("new.py", "z\n")], 1.0);
        let one_sided = content_reward(&ctx, &files(&[fix_a]), &files(&[]));
        assert_eq!(one_sided.similarities[0].matches, 0);
        assert_eq!(
            one_sided.similarities[0].total_len,
            "@@ -1 +1 @@\n-x = 1\n+x = 2".len()
        );
    }

    #[test]
    fn format_errors_score_minus_one() {
        let ctx = files(&[("a.py", "x = 1\n")]);
        let oracle = files(&[("a.py", "x = 2\n")]);
        let check = |output: &str, expect: FormatError, texts: Option<(&str, &str)>| {
            let outcome = search_replace_reward(&ctx, &oracle, output);
            assert_eq!(outcome.reward.to_bits(), (-1.0_f64).to_bits());
            assert_eq!(outcome.format_error, Some(expect), "{output:?}");
            assert_eq!(
                (outcome.thought.as_deref(), outcome.answer.as_deref()),
                (texts.map(|t| t.0), texts.map(|t| t.1))
            );
            assert!(outcome.similarities.is_empty());
        };
        check("", FormatError::TagCount { tag: "<think>" }, None);
        check(
            "<think>\u{1C}</think><solution>s</solution>",
            FormatError::EmptyThought,
            Some(("", "s")),
        );
        check(
            "<think>t</think><solution>prose</solution>",
            FormatError::NoBlocks,
            Some(("t", "prose")),
        );
        let block = "```\n### a.py\n<<<<<<< SEARCH\nx = 3\n=======\nx = 2\n>>>>>>> REPLACE\n```";
        check(
            &format!("<think>t</think><solution>{block}</solution>"),
            FormatError::SearchNotFound {
                search: "x = 3".into(),
            },
            Some(("t", block)),
        );
        let exact = block.replace("x = 3", "x = 1");
        let outcome = search_replace_reward(
            &ctx,
            &oracle,
            &format!("<think>t</think><solution>{exact}</solution>"),
        );
        assert_eq!(outcome.reward, 1.0);
        assert_eq!(outcome.format_error, None);
    }
}
