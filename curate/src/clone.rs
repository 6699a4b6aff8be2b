//! Stage 3: read a pull request's code from a bare mirror `<repos>/<owner>/<name>.git`.
//!
//! The library is `git2` (libgit2, without network transports) rather than `gix`: curate needs
//! merge bases, tree-to-tree diffs without rename detection, blob reads and unified patches, all
//! of which libgit2 has had for years with git's own semantics, in one small dependency that
//! builds from vendored C; `gix` would need several crates and features for the same and its
//! patch output is newer. Spawning `git` per PR would cost a process per query.
//!
//! Binary files are decided as git's `--numstat` does (a NUL byte in the first 8000 bytes of
//! either side), not with libgit2's looser heuristic, so the split agrees with `git diff`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git2::{DiffFormat, DiffOptions, Oid, Repository, Sort};

/// How far git looks for a NUL byte to call a file binary.
const BINARY_PROBE: usize = 8000;

/// git's rule: a NUL byte in the first 8000 bytes.
pub fn is_binary(content: &[u8]) -> bool {
    content[..content.len().min(BINARY_PROBE)].contains(&0)
}

/// One edited path between two commits.
#[derive(Debug, Clone)]
pub struct Change {
    /// The path (`/`-separated; non-UTF-8 bytes replaced).
    pub path: String,
    /// Blob at the old commit (`None`: added).
    pub old: Option<Oid>,
    /// Blob at the new commit (`None`: deleted).
    pub new: Option<Oid>,
    /// A submodule pointer (gitlink) on either side: listed like git lists it, never read.
    pub submodule: bool,
}

/// A commit on a branch, for the merge checks of trimmed payloads.
#[derive(Debug, Clone)]
struct BranchCommit {
    id: Oid,
    second_parent: Option<Oid>,
    subject: String,
}

/// An open bare mirror.
pub struct Clone {
    repo: Repository,
    branches: RefCell<HashMap<String, Vec<BranchCommit>>>,
}

/// `owner/name` with GitHub's characters only, so that a name from an event can never point
/// outside `--repos`.
pub fn is_repo_name(name: &str) -> bool {
    let mut parts = name.split('/');
    let ok = |part: Option<&str>| {
        part.is_some_and(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// The mirror of `owner/name` under `repos`.
pub fn clone_path(repos: &Path, name: &str) -> PathBuf {
    repos.join(format!("{name}.git"))
}

impl Clone {
    /// Opens the mirror of `name`; `Err` holds why it is missing or unreadable.
    ///
    /// The first call turns off libgit2's re-hashing of every object it reads (its "strict
    /// hash verification", a quarter of the clone stage): like git itself, curate trusts the
    /// objects that `git clone --mirror` / `git fetch` verified when they arrived.
    pub fn open(repos: &Path, name: &str) -> Result<Clone, String> {
        static TRUST_OBJECTS: std::sync::Once = std::sync::Once::new();
        TRUST_OBJECTS.call_once(|| git2::opts::strict_hash_verification(false));
        if !is_repo_name(name) {
            return Err(format!("{name:?} is not an owner/name repository name"));
        }
        let path = clone_path(repos, name);
        if !path.is_dir() {
            return Err(format!("no clone at {}", path.display()));
        }
        let repo = Repository::open_bare(&path)
            .map_err(|e| format!("cannot open {}: {}", path.display(), e.message()))?;
        Ok(Clone {
            repo,
            branches: RefCell::new(HashMap::new()),
        })
    }

    /// The commit `sha` names, when it is a full or abbreviated id of a commit in the clone.
    pub fn commit(&self, sha: &str) -> Option<Oid> {
        let oid = Oid::from_str(sha).ok()?;
        self.repo.find_commit(oid).ok().map(|c| c.id())
    }

    /// `git merge-base a b`.
    pub fn merge_base(&self, a: Oid, b: Oid) -> Result<Oid, String> {
        self.repo
            .merge_base(a, b)
            .map_err(|e| format!("no merge base of {a} and {b}: {}", e.message()))
    }

    /// The tree of `commit`.
    pub fn tree(&self, commit: Oid) -> Result<git2::Tree<'_>, String> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| format!("cannot read tree of {commit}: {}", e.message()))
    }

    /// The edited paths between `from` and `to` (`git diff --no-renames`: a rename is a
    /// deletion plus an addition), sorted by path.
    pub fn changes(&self, from: Oid, to: Oid) -> Result<Vec<Change>, String> {
        let (old, new) = (self.tree(from)?, self.tree(to)?);
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), Some(&new), None)
            .map_err(|e| format!("cannot diff {from}..{to}: {}", e.message()))?;
        let oid = |f: git2::DiffFile<'_>| Some(f.id()).filter(|id| !id.is_zero());
        let mut changes: Vec<Change> = diff
            .deltas()
            .map(|d| {
                let file = d.new_file().path_bytes().or(d.old_file().path_bytes());
                Change {
                    path: String::from_utf8_lossy(file.unwrap_or_default()).into_owned(),
                    old: oid(d.old_file()),
                    new: oid(d.new_file()),
                    submodule: [d.old_file().mode(), d.new_file().mode()]
                        .contains(&git2::FileMode::Commit),
                }
            })
            .collect();
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// A blob's bytes.
    pub fn blob(&self, id: Oid) -> Result<Vec<u8>, String> {
        self.repo
            .find_blob(id)
            .map(|b| b.content().to_vec())
            .map_err(|e| format!("cannot read blob {id}: {}", e.message()))
    }

    /// The blob at `path` in `tree`, if any.
    pub fn blob_in(tree: &git2::Tree<'_>, path: &str) -> Option<Oid> {
        let entry = tree.get_path(Path::new(path)).ok()?;
        (entry.kind() == Some(git2::ObjectType::Blob)).then(|| entry.id())
    }

    /// Every file path (blobs) in `commit`'s tree.
    pub fn files(&self, commit: Oid) -> Result<Vec<String>, String> {
        let tree = self.tree(commit)?;
        let mut out = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                out.push(format!(
                    "{dir}{}",
                    String::from_utf8_lossy(entry.name_bytes())
                ));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(|e| format!("cannot walk tree of {commit}: {}", e.message()))?;
        Ok(out)
    }

    /// The messages of the commits in `from..to` (the PR's own commits).
    pub fn messages(&self, from: Oid, to: Oid) -> Result<Vec<String>, String> {
        let commits = self.walk(to, Some(from), Sort::NONE)?;
        Ok(commits
            .iter()
            .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
            .collect())
    }

    /// The commits reachable from `tip` and not from `hide`, in `sort` order.
    fn walk(
        &self,
        tip: Oid,
        hide: Option<Oid>,
        sort: Sort,
    ) -> Result<Vec<git2::Commit<'_>>, String> {
        let message = |e: git2::Error| e.message().to_owned();
        let mut walk = self.repo.revwalk().map_err(message)?;
        walk.set_sorting(sort).map_err(message)?;
        walk.push(tip).map_err(message)?;
        if let Some(hide) = hide {
            walk.hide(hide).map_err(message)?;
        }
        walk.map(|id| self.repo.find_commit(id.map_err(message)?).map_err(message))
            .collect()
    }

    /// `git diff --no-renames -U3 from to -- paths` for each group of paths, from one diff
    /// (with `GIT binary patch` sections for binary files, so that `git apply` can apply it);
    /// a file's section is the same whichever other files are diffed with it. A group that is
    /// empty gets an empty patch.
    pub fn patches(&self, from: Oid, to: Oid, groups: &[&[&str]]) -> Result<Vec<String>, String> {
        let mut member: HashMap<&str, u64> = HashMap::new();
        for (i, group) in groups.iter().enumerate() {
            for path in *group {
                *member.entry(path).or_default() |= 1 << i;
            }
        }
        let mut out = vec![Vec::new(); groups.len()];
        if member.is_empty() {
            return Ok(vec![String::new(); groups.len()]);
        }
        let (old, new) = (self.tree(from)?, self.tree(to)?);
        let mut opts = DiffOptions::new();
        opts.ignore_submodules(true)
            .show_binary(true)
            .context_lines(3)
            .disable_pathspec_match(true);
        for path in member.keys() {
            opts.pathspec(*path);
        }
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))
            .map_err(|e| format!("cannot diff {from}..{to}: {}", e.message()))?;
        diff.print(DiffFormat::Patch, |delta, _, line| {
            let path = delta
                .new_file()
                .path_bytes()
                .or(delta.old_file().path_bytes());
            let path = String::from_utf8_lossy(path.unwrap_or_default());
            let groups = member.get(path.as_ref()).copied().unwrap_or(0);
            for (i, out) in out.iter_mut().enumerate() {
                if groups & (1 << i) != 0 {
                    if matches!(line.origin(), '+' | '-' | ' ') {
                        out.push(line.origin() as u8);
                    }
                    out.extend_from_slice(line.content());
                }
            }
            true
        })
        .map_err(|e| format!("cannot print diff {from}..{to}: {}", e.message()))?;
        Ok(out
            .into_iter()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .collect())
    }

    /// For a trimmed payload: the commit on `refs/heads/<branch>` that merged PR `number` with
    /// head `head`, when the head is reachable from the branch or a commit subject ends with
    /// `(#number)`. `Ok(None)`: not merged. The commit is the newest whose second parent is the
    /// head or whose subject ends so; `Some(None)` inside when reachable but no such commit.
    pub fn merged_into(
        &self,
        branch: &str,
        head: Oid,
        number: u64,
    ) -> Result<Option<Option<Oid>>, String> {
        let reference = format!("refs/heads/{branch}");
        let Ok(tip) = self.repo.refname_to_id(&reference) else {
            return Ok(None);
        };
        let reachable = tip == head
            || self
                .repo
                .graph_descendant_of(tip, head)
                .map_err(|e| e.message().to_owned())?;
        let suffix = format!("(#{number})");
        let mut cache = self.branches.borrow_mut();
        if !cache.contains_key(&reference) {
            cache.insert(reference.clone(), self.branch_log(tip)?);
        }
        let log = &cache[&reference];
        let found = log
            .iter()
            .find(|c| c.second_parent == Some(head) || c.subject.trim_end().ends_with(&suffix));
        let squashed = log.iter().any(|c| c.subject.trim_end().ends_with(&suffix));
        Ok((reachable || squashed).then(|| found.map(|c| c.id)))
    }

    fn branch_log(&self, tip: Oid) -> Result<Vec<BranchCommit>, String> {
        Ok(self
            .walk(tip, None, Sort::TIME)?
            .iter()
            .map(|commit| BranchCommit {
                id: commit.id(),
                second_parent: commit.parent_id(1).ok(),
                subject: commit
                    .summary_bytes()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .unwrap_or_default(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{is_binary, is_repo_name};

    #[test]
    fn repository_names_stay_inside_repos() {
        assert!(is_repo_name("quietpine/slugkit"));
        assert!(is_repo_name("a-b/c_d.e"));
        for bad in ["../x", "a/..", "a", "a/b/c", "/a/b", "a/b c", ""] {
            assert!(!is_repo_name(bad), "{bad}");
        }
    }

    #[test]
    fn binary_is_a_nul_in_the_first_8000_bytes() {
        assert!(is_binary(b"PNG\0\x01"));
        assert!(!is_binary("naïve ’ text".as_bytes()));
        let mut late = vec![b'a'; 9000];
        late[8500] = 0;
        assert!(!is_binary(&late));
    }
}
