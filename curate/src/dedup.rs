//! Duplicate removal: two PRs whose code patches are equal after normalisation are one task (a
//! backport, a fork's copy). The key is the SHA-256 of the code files' unified diff without its
//! `index` lines (blob ids and modes say nothing the hunks do not). Among the candidates, in
//! merge order (merge time, then repository and number), the first keeps its place and every
//! later one is a duplicate of it. `curate merge` runs the same function over all shards.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// The dedup key of a code patch.
pub(crate) fn patch_key(patch: &str) -> String {
    let mut hasher = Sha256::new();
    for (i, line) in patch
        .split('\n')
        .filter(|line| !line.starts_with("index "))
        .enumerate()
    {
        if i > 0 {
            hasher.update(b"\n");
        }
        hasher.update(line.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// One candidate: merge time, repository, number, key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    /// Merge time (ISO text).
    pub merged_at: &'a str,
    /// `owner/name`.
    pub repo: &'a str,
    /// PR number.
    pub number: u64,
    /// [`patch_key`].
    pub key: &'a str,
}

/// For every candidate (in the given order), `Some("owner/name#N")` of the earlier candidate it
/// duplicates, else `None`.
pub(crate) fn duplicates(candidates: &[Candidate<'_>]) -> Vec<Option<String>> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&candidates[a], &candidates[b]);
        (x.merged_at, x.repo, x.number).cmp(&(y.merged_at, y.repo, y.number))
    });
    let mut first: HashMap<&str, String> = HashMap::new();
    let mut out = vec![None; candidates.len()];
    for i in order {
        let c = &candidates[i];
        match first.get(c.key) {
            Some(original) => out[i] = Some(original.clone()),
            None => {
                first.insert(c.key, format!("{}#{}", c.repo, c.number));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Candidate, duplicates, patch_key};

    #[test]
    fn index_lines_do_not_matter() {
        let a =
            "diff --git a/x b/x\nindex 111..222 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let b = a.replace("111..222", "333..444");
        assert_eq!(patch_key(a), patch_key(&b));
        assert_ne!(patch_key(a), patch_key(&a.replace("+b", "+c")));
    }

    #[test]
    fn later_merge_is_the_duplicate() {
        let c = |merged_at, number, key| Candidate {
            merged_at,
            repo: "a/b",
            number,
            key,
        };
        let got = duplicates(&[
            c("2021-02-01", 41, "k"),
            c("2021-01-01", 40, "k"),
            c("2020-01-01", 1, "other"),
        ]);
        assert_eq!(got, [Some("a/b#40".to_owned()), None, None]);
    }
}
