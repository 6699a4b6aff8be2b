//! Which files of a repository to show the model for an issue, for rows that carry no
//! `code_context` (SWE-bench rows carry only the repository, the base commit and the issue).
//!
//! [`Bm25`] ranks a repository's files against the issue text with Okapi BM25, SWE-bench's
//! "BM25 retrieval" setting: each document is a file's path followed by its text, the query is
//! the problem statement, and the parameters are Pyserini's defaults, `k1 = 0.9`, `b = 0.4`.
//! Tokenisation is swerve's own and is stated here because scores depend on it: a token is a
//! maximal run of ASCII letters, digits and `_`, lower-cased; an identifier also yields its
//! `snake_case` and `camelCase` parts (`parse_ini_value` → `parse_ini_value`, `parse`, `ini`,
//! `value`), so that prose naming a part of an identifier matches it; no stemming, no stop
//! words (BM25's IDF already makes common words cheap). [`oracle_files`] is SWE-bench's
//! "oracle" setting: the files the gold patch edits. [`recall_at`] measures a ranking against
//! them. [`named_files`] reads the files a model names in its answer to a localisation prompt
//! (the `model` retriever's ranking).
//!
//! What it is not: it reads no repository (callers hand it `(path, text)` pairs) and builds no
//! prompt (the context budget decides how many ranked files fit).

use std::collections::{BTreeSet, HashMap};

/// BM25's term-frequency saturation (Pyserini's default).
pub(super) const K1: f64 = 0.9;
/// BM25's length normalisation (Pyserini's default).
pub(super) const B: f64 = 0.4;

/// The tokens of `text` (see the module documentation).
pub(super) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        let lower = word.to_ascii_lowercase();
        let parts = parts(word);
        if parts.len() > 1 {
            out.extend(parts);
        }
        out.push(lower);
    }
    out
}

/// The `snake_case` and `camelCase` parts of an identifier, lower-cased (the word itself when it
/// has one part).
fn parts(word: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let mut current = String::new();
        let mut prev_lower = false;
        for c in piece.chars() {
            if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            current.push(c.to_ascii_lowercase());
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

/// A BM25 index over one repository's files.
#[derive(Debug, Clone)]
pub(super) struct Bm25 {
    paths: Vec<String>,
    /// Per document: term → count.
    counts: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    /// Documents containing each term.
    document_frequency: HashMap<String, u32>,
    average_length: f64,
}

impl Bm25 {
    /// Indexes `files` (path, text): each document is the path, then the text.
    pub(super) fn new<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Bm25 {
        let mut paths = Vec::new();
        let mut counts = Vec::new();
        let mut lengths = Vec::new();
        let mut document_frequency: HashMap<String, u32> = HashMap::new();
        for (path, text) in files {
            let mut count: HashMap<String, u32> = HashMap::new();
            let terms = tokens(path).into_iter().chain(tokens(text));
            let mut length = 0usize;
            for term in terms {
                length += 1;
                *count.entry(term).or_default() += 1;
            }
            for term in count.keys() {
                *document_frequency.entry(term.clone()).or_default() += 1;
            }
            paths.push(path.to_owned());
            counts.push(count);
            lengths.push(length as f64);
        }
        let average_length = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f64>() / lengths.len() as f64
        };
        Bm25 {
            paths,
            counts,
            lengths,
            document_frequency,
            average_length,
        }
    }

    /// Every file with its score for `query`, best first; ties (and files no query term
    /// reaches, score 0) in path order.
    pub(super) fn rank(&self, query: &str) -> Vec<(String, f64)> {
        let n = self.paths.len() as f64;
        let mut query_terms: Vec<String> = tokens(query);
        query_terms.sort();
        query_terms.dedup();
        // Lucene's IDF: ln(1 + (N - df + 0.5) / (df + 0.5)), never negative.
        let idf: Vec<(String, f64)> = query_terms
            .into_iter()
            .filter_map(|t| {
                let df = f64::from(*self.document_frequency.get(&t)?);
                Some((t, (1.0 + (n - df + 0.5) / (df + 0.5)).ln()))
            })
            .collect();
        let mut scored: Vec<(String, f64)> = self
            .paths
            .iter()
            .enumerate()
            .map(|(d, path)| {
                let norm = K1 * (1.0 - B + B * self.lengths[d] / self.average_length.max(1.0));
                let score = idf
                    .iter()
                    .filter_map(|(t, idf)| {
                        let tf = f64::from(*self.counts[d].get(t)?);
                        Some(idf * tf * (K1 + 1.0) / (tf + norm))
                    })
                    .sum();
                (path.clone(), score)
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored
    }
}

/// The files a unified diff edits (its `+++ b/<path>` lines; `/dev/null`, a deletion, counts as
/// the `--- a/<path>` side), in order of appearance, each once.
pub(super) fn oracle_files(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut minus: Option<&str> = None;
    for line in patch.lines() {
        if let Some(path) = line.strip_prefix("--- ") {
            minus = Some(path.trim_end());
        } else if let Some(path) = line.strip_prefix("+++ ") {
            let plus = path.trim_end();
            let chosen = if plus == "/dev/null" {
                minus.unwrap_or(plus)
            } else {
                plus
            };
            let name = chosen
                .strip_prefix("b/")
                .or_else(|| chosen.strip_prefix("a/"))
                .unwrap_or(chosen);
            if name != "/dev/null" && !out.iter().any(|p| p == name) {
                out.push(name.to_owned());
            }
        }
    }
    out
}

/// Recall@k: the share of `gold` files among the first `k` of `ranked` (1 when `gold` is empty).
pub(super) fn recall_at(ranked: &[String], gold: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 1.0;
    }
    let top: BTreeSet<&str> = ranked.iter().take(k).map(String::as_str).collect();
    let found = gold.iter().filter(|g| top.contains(g.as_str())).count();
    found as f64 / gold.len() as f64
}

/// The files a model's localisation answer names, in the answer's order, each once; names that
/// are not paths of the repository (`is_path`) are ignored.
///
/// A line counts as one name when, without a list marker (`- `, `* `, `1. `, `### `), it is a
/// path; otherwise each of its words is tried (words split at whitespace and `,;()[]{}<>|`).
/// A name is tried as written, then trimmed of backticks, quotes and `*`, of a `./` prefix, of a
/// trailing `.`, `,` or `:`, of a `:<line>` suffix and of a diff's `a/` or `b/` prefix, and the
/// first form that is a path counts.
pub(super) fn named_files(answer: &str, is_path: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |path: &str| {
        if !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    };
    for line in answer.lines() {
        if let Some(path) = resolve(strip_list_marker(line), &is_path) {
            add(path);
            continue;
        }
        for word in line
            .split(|c: char| c.is_whitespace() || ",;()[]{}<>|".contains(c))
            .filter(|w| !w.is_empty())
        {
            if let Some(path) = resolve(word, &is_path) {
                add(path);
            }
        }
    }
    out
}

/// `line` without surrounding spaces and a leading list or heading marker.
fn strip_list_marker(line: &str) -> &str {
    let line = line.trim();
    for marker in ["- ", "* ", "+ ", "### ", "## ", "# "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return rest.trim_start();
        }
    }
    line
}

/// The first form of `name` that is a path (see [`named_files`]).
fn resolve<'a>(name: &'a str, is_path: &impl Fn(&str) -> bool) -> Option<&'a str> {
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    if is_path(name) {
        return Some(name);
    }
    let mut bare = name.trim_matches(|c: char| matches!(c, '`' | '"' | '\'' | '*'));
    while let Some(rest) = bare.strip_prefix("./") {
        bare = rest;
    }
    let unpunctuated = bare.trim_end_matches(['.', ',', ':']);
    let before_colon = bare.split(':').next().unwrap_or(bare);
    [bare, unpunctuated, before_colon]
        .into_iter()
        .flat_map(|form| [Some(form), form.strip_prefix("a/"), form.strip_prefix("b/")])
        .flatten()
        .find(|form| !form.is_empty() && is_path(form))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_yield_their_parts() {
        assert_eq!(
            tokens("Fix parse_ini_value; HTTPServer getValue x2"),
            vec![
                "fix",
                "parse",
                "ini",
                "value",
                "parse_ini_value",
                "httpserver",
                "get",
                "value",
                "getvalue",
                "x2"
            ]
        );
    }

    #[test]
    fn bm25_matches_hand_computed_scores() {
        // Three documents; the query term `spans` is in two of them.
        let files = [
            ("a.py", "spans spans other"),
            ("b.py", "spans"),
            ("c.py", "nothing here at all"),
        ];
        let index = Bm25::new(files);
        let ranked = index.rank("spans");
        // Lengths include the path tokens: a.py → [a, py, spans, spans, other] = 5,
        // b.py → 3, c.py → 6; average 14/3.
        let n = 3.0f64;
        let idf = (1.0 + (n - 2.0 + 0.5) / (2.0 + 0.5)).ln();
        let score = |tf: f64, len: f64| {
            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / (14.0 / 3.0)))
        };
        assert_eq!(ranked[0].0, "a.py");
        assert!((ranked[0].1 - score(2.0, 5.0)).abs() < 1e-12);
        assert_eq!(ranked[1].0, "b.py");
        assert!((ranked[1].1 - score(1.0, 3.0)).abs() < 1e-12);
        assert_eq!(ranked[2], ("c.py".to_owned(), 0.0));
        assert!(Bm25::new([]).rank("x").is_empty());
    }

    #[test]
    fn the_issue_finds_the_file_it_names() {
        let files = [
            (
                "inicfg/parser.py",
                "def parse(text):\n    key, value = line.split('=')\n",
            ),
            (
                "inicfg/errors.py",
                "class ParseError(Exception):\n    pass\n",
            ),
            ("README.md", "inicfg reads INI files"),
        ];
        let index = Bm25::new(files);
        let ranked: Vec<String> = index
            .rank("parse() splits a value containing '=' at the wrong place")
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(ranked[0], "inicfg/parser.py");
        let gold = vec!["inicfg/parser.py".to_owned()];
        assert_eq!(recall_at(&ranked, &gold, 1), 1.0);
        assert_eq!(recall_at(&ranked[1..], &gold, 1), 0.0);
        assert_eq!(recall_at(&ranked, &[], 1), 1.0);
    }

    #[test]
    fn oracle_files_are_the_edited_paths() {
        let patch = "diff --git a/x/a.py b/x/a.py\n--- a/x/a.py\n+++ b/x/a.py\n@@ -1 +1 @@\n-a\n+b\n\
                     diff --git a/old.py b/old.py\n--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\
                     diff --git a/new.py b/new.py\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+y\n";
        assert_eq!(oracle_files(patch), vec!["x/a.py", "old.py", "new.py"]);
        assert!(oracle_files("").is_empty());
    }

    #[test]
    fn named_files_are_paths_of_the_tree_in_the_answers_order() {
        let tree = [
            "src/a.py",
            "src/b.py",
            "setup.py",
            "docs/my notes.md",
            "c.py",
        ];
        let is_path = |p: &str| tree.contains(&p);
        // (answer, files named)
        let cases: [(&str, &[&str]); 9] = [
            ("src/b.py\nsrc/a.py\n", &["src/b.py", "src/a.py"]),
            ("./src/a.py\n././setup.py", &["src/a.py", "setup.py"]),
            (
                "`src/a.py`\n- `src/b.py`\n1. setup.py",
                &["src/a.py", "src/b.py", "setup.py"],
            ),
            ("src/a.py\nsrc/a.py\n./src/a.py", &["src/a.py"]),
            ("src/missing.py\nREADME.md\nsrc/b.py", &["src/b.py"]),
            (
                "Edit `src/b.py`, then setup.py. Also src/a.py:12 and (c.py).",
                &["src/b.py", "setup.py", "src/a.py", "c.py"],
            ),
            (
                "### docs/my notes.md\n--- a/c.py\n+++ b/c.py",
                &["docs/my notes.md", "c.py"],
            ),
            ("w3 w10 <unk>\n\n", &[]),
            ("", &[]),
        ];
        for (answer, want) in cases {
            assert_eq!(named_files(answer, is_path), want, "{answer:?}");
        }
    }
}
