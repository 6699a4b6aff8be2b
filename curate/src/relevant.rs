//! Stage 4: relevant unmodified files, whose full text joins the prompt (SWE-RL: shown only the
//! edited files, a model learns to edit every file it is given).
//!
//! The default needs no model and is deterministic. Candidates are the code files (per
//! [`crate::paths`]) at the base that an edited code file imports (Python `import a.b` /
//! `from a.b import c` / relative imports, resolved against the tree) and the edited files'
//! siblings in the same folder. Each candidate scores 2 for an import, 1 for a sibling, plus the
//! share of its identifier-like words that occur in the issue text; ties go to the path. At most
//! 16 candidates are read: the best by structural score, then by how many words of their path
//! the issue names; and reading stops once no unread one can reach the top (the lexical share
//! adds at most 1). Every
//! chosen path is validated: it exists at the base, is text (UTF-8, no NUL), is no larger than
//! the setting, and is not edited by the PR.
//!
//! With a model configured ([`crate::endpoint`]), the model's suggestions come first (validated
//! the same way); the deterministic rule is the fallback when the endpoint fails or none of its
//! paths is valid.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::Hasher;

use rustc_hash::{FxHashSet, FxHasher};

use crate::endpoint::Endpoint;
use crate::paths::{PathClass, classify};
use swerve_mirror::{Mirror, ObjectId, Tree, is_binary};

/// The most candidates whose content is read per PR (reading and scoring text is most of the
/// clone stage's time).
const MAX_CANDIDATES: usize = 16;

/// What the selection is given.
pub(crate) struct Request<'a> {
    /// The merge base.
    pub base: ObjectId,
    /// Every path the PR edits (any class).
    pub edited: &'a BTreeSet<String>,
    /// The edited code files' text at the base.
    pub edited_code: &'a BTreeMap<String, String>,
    /// The issue text.
    pub issue: &'a str,
    /// How many files to return at most.
    pub count: usize,
    /// Larger candidates are skipped.
    pub max_bytes: usize,
    /// The model to ask first, if any.
    pub endpoint: Option<&'a Endpoint>,
}

/// A set of word hashes (FxHash: the words are short and the sets are rebuilt per candidate).
type WordSet = FxHashSet<u64>;

/// Adds the words of `text` to `set`: runs of letters and digits (`_` and punctuation split
/// them) of at least three characters, lower-case, each as its 64-bit hash. ASCII is scanned
/// byte by byte; a word with other characters is lower-cased by `char` rules.
fn add_words(text: &str, set: &mut WordSet) {
    let bytes = text.as_bytes();
    let mut lower: Vec<u8> = Vec::with_capacity(64);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 && !b.is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        // A word starts here (or a non-ASCII separator): find its end.
        let start = i;
        let mut ascii = true;
        while i < bytes.len() {
            let b = bytes[i];
            if b < 0x80 {
                if !b.is_ascii_alphanumeric() {
                    break;
                }
                i += 1;
            } else {
                let c = text[i..].chars().next().expect("a char starts here");
                if !c.is_alphanumeric() {
                    break;
                }
                ascii = false;
                i += c.len_utf8();
            }
        }
        if i == start {
            // A non-ASCII separator.
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let word = &text[start..i];
        lower.clear();
        if ascii {
            if word.len() < 3 {
                continue;
            }
            lower.extend(word.bytes().map(|b| b.to_ascii_lowercase()));
        } else {
            if word.chars().count() < 3 {
                continue;
            }
            lower.extend_from_slice(word.to_lowercase().as_bytes());
        }
        let mut hasher = FxHasher::default();
        hasher.write(&lower);
        set.insert(hasher.finish());
    }
}

/// The word set of `text`.
fn words(text: &str) -> WordSet {
    let mut set = WordSet::default();
    add_words(text, &mut set);
    set
}

/// Module paths a Python file imports, as `/`-separated path stems relative to `dir` for
/// relative imports or to any root for absolute ones.
fn python_imports(dir: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, names)) = rest.split_once(" import ") else {
                continue;
            };
            let module = module.trim();
            let dots = module.chars().take_while(|c| *c == '.').count();
            let tail = module[dots..].replace('.', "/");
            let prefix = if dots == 0 {
                String::new()
            } else {
                let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
                for _ in 1..dots {
                    parts.pop();
                }
                parts.join("/")
            };
            let join = |a: &str, b: &str| match (a.is_empty(), b.is_empty()) {
                (true, _) => b.to_owned(),
                (_, true) => a.to_owned(),
                _ => format!("{a}/{b}"),
            };
            let base = join(&prefix, &tail);
            out.push(base.clone());
            for name in names.split(',') {
                let name = name.trim().trim_matches(|c| c == '(' || c == ')');
                let name = name.split_whitespace().next().unwrap_or_default();
                if !name.is_empty() && name != "*" {
                    out.push(join(&base, name));
                }
            }
        } else if let Some(rest) = line.strip_prefix("import ") {
            for module in rest.split(',') {
                let module = module.split_whitespace().next().unwrap_or_default();
                out.push(module.replace('.', "/"));
            }
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// `(folder, file name)` of a path.
fn split_path(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Chooses up to `request.count` relevant files: `(path, text)` best first.
pub(crate) fn select(clone: &Mirror, request: &Request<'_>) -> Vec<(String, String)> {
    if request.count == 0 || request.edited_code.is_empty() {
        return Vec::new();
    }
    let Ok(files) = clone.files(request.base) else {
        return Vec::new();
    };
    let code: Vec<&String> = files
        .iter()
        .filter(|p| classify(p) == PathClass::Code && !request.edited.contains(*p))
        .collect();
    // Code files by folder, and by their last two path components (`pkg/mod.py`), so that
    // siblings and imports are looked up rather than scanned for.
    let mut by_dir: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut by_tail: HashMap<String, Vec<&str>> = HashMap::new();
    for path in &code {
        let (dir, name) = split_path(path);
        by_dir.entry(dir).or_default().push(path);
        let parent = dir.rsplit('/').next().unwrap_or_default();
        by_tail
            .entry(format!("{parent}/{name}"))
            .or_default()
            .push(path);
    }
    let mut score: BTreeMap<&str, f64> = BTreeMap::new();
    for (path, text) in request.edited_code {
        let (dir, _) = split_path(path);
        for sibling in by_dir.get(dir).into_iter().flatten() {
            *score.entry(sibling).or_default() += 1.0;
        }
        if !path.ends_with(".py") {
            continue;
        }
        for module in python_imports(dir, text) {
            for suffix in [format!("{module}.py"), format!("{module}/__init__.py")] {
                let (sdir, name) = suffix.rsplit_once('/').unwrap_or(("", &suffix));
                let tail = format!("{}/{name}", sdir.rsplit('/').next().unwrap_or_default());
                for candidate in by_tail.get(&tail).into_iter().flatten() {
                    if *candidate == suffix || candidate.ends_with(&format!("/{suffix}")) {
                        *score.entry(candidate).or_default() += 2.0;
                    }
                }
            }
        }
    }
    // Which candidates are read: by structural score, then by how many of the path's words the
    // issue names, then by path.
    let issue = words(request.issue);
    let mut path_words = WordSet::default();
    let mut ranked: Vec<(&str, f64, usize)> = score
        .into_iter()
        .map(|(path, score)| {
            path_words.clear();
            add_words(path, &mut path_words);
            let hits = path_words.iter().filter(|w| issue.contains(w)).count();
            (path, score, hits)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(b.0)));
    ranked.truncate(MAX_CANDIDATES);
    let ranked: Vec<(&str, f64)> = ranked.into_iter().map(|(p, s, _)| (p, s)).collect();
    if let Some(endpoint) = request.endpoint {
        let first: HashSet<&str> = ranked.iter().map(|(p, _)| *p).collect();
        let mut paths: Vec<&str> = ranked.iter().map(|(p, _)| *p).collect();
        paths.extend(
            files
                .iter()
                .map(String::as_str)
                .filter(|p| !request.edited.contains(*p) && !first.contains(p)),
        );
        let edited: Vec<&str> = request.edited.iter().map(String::as_str).collect();
        match endpoint.suggest(request.issue, &edited, &paths, request.count) {
            Ok(suggested) => {
                let chosen: Vec<(String, String)> = suggested
                    .into_iter()
                    .filter_map(|p| {
                        let tree = clone.tree(request.base).ok()?;
                        validated(clone, &tree, request, &p).map(|text| (p, text))
                    })
                    .take(request.count)
                    .collect();
                if !chosen.is_empty() {
                    return chosen;
                }
            }
            // Recorded as an error, the message carries its causes (a refused connection, a
            // field missing from the answer).
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "relevant-file model failed; using the default rule"
            ),
        }
    }
    // Reading candidates is most of the cost, so they are read in order of their structural
    // score and the reading stops once no unread candidate can reach the top `count`: the
    // lexical share adds at most 1.
    let Ok(tree) = clone.tree(request.base) else {
        return Vec::new();
    };
    let mut own = WordSet::default();
    let mut scored: Vec<(String, String, f64)> = Vec::new();
    for (path, base_score) in ranked {
        if scored.len() >= request.count {
            scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
            if scored[request.count - 1].2 > base_score + 1.0 {
                break;
            }
        }
        let Some(text) = validated(clone, &tree, request, path) else {
            continue;
        };
        own.clear();
        add_words(path, &mut own);
        add_words(&text, &mut own);
        let lexical = if own.is_empty() {
            0.0
        } else {
            own.iter().filter(|w| issue.contains(w)).count() as f64 / own.len() as f64
        };
        scored.push((path.to_owned(), text, base_score + lexical));
    }
    scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    scored.truncate(request.count);
    scored.into_iter().map(|(p, t, _)| (p, t)).collect()
}

/// The text of `path` in the base `tree` when it may join the context.
fn validated(clone: &Mirror, tree: &Tree<'_>, request: &Request<'_>, path: &str) -> Option<String> {
    if request.edited.contains(path) {
        return None;
    }
    let blob = tree.blob(path)?;
    let bytes = clone.blob(blob).ok()?;
    if bytes.len() > request.max_bytes || is_binary(&bytes) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::{python_imports, words};

    #[test]
    fn imports_resolve_to_path_stems() {
        let text = "import os, a.b as c\nfrom .core import slugify, (x)\nfrom ..util import y\nfrom pkg.sub import *\n";
        assert_eq!(
            python_imports("src/pkg/inner", text),
            [
                "os",
                "a/b",
                "src/pkg/inner/core",
                "src/pkg/inner/core/slugify",
                "src/pkg/inner/core/x",
                "src/pkg/util",
                "src/pkg/util/y",
                "pkg/sub"
            ]
        );
    }

    #[test]
    fn words_are_lower_case_and_split() {
        let w = words("read_statement fails on CSV, Größe");
        for word in ["read", "statement", "csv", "fails", "größe"] {
            assert!(words(word).is_subset(&w), "{word}");
        }
        assert_eq!(w, words("GRÖßE größe csv FAILS statement read_"));
        assert!(words("on").is_empty() && words("ab_cd").is_empty());
        assert_eq!(w.len(), 5);
        // Non-ASCII separators split words as ASCII ones do.
        assert_eq!(words("alpha—beta “gamma”"), words("alpha beta gamma"));
        assert_eq!(words("x1y2z3 été"), words("X1Y2Z3 ÉTÉ"));
    }
}
