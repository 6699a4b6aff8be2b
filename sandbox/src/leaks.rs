//! Later history in an image swerve did not build (a prebuilt SWE-bench, SWE-rebench or
//! SWE-bench Pro image), found and scrubbed.
//!
//! swerve's own instance images hold a repository cut at its base commit ([`crate::RepoSource`]).
//! A prebuilt image's repository may still reach later commits — the fix itself — through
//! remotes, branches and tags past the base, `ORIG_HEAD` or `FETCH_HEAD`, the reflog, or commit
//! objects stored though nothing references them. [`Sandbox::history_leaks`] lists each of these
//! from inside a container of the image (no network, the image unchanged);
//! [`Sandbox::scrubbed_image`] builds a derived image that makes the same cut swerve's own images
//! get, in a layer of its own, and checks that nothing is left. The files of the task's own
//! evaluation (the working tree, the installed environment) are not touched: only `.git`.
//!
//! Both run `git` inside the image: an image without `git`, without the repository folder or
//! without the base commit is an error naming which.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::container::{ContainerSpec, ExecRequest};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::image::{ImageInfo, temp_dir};
use crate::sandbox::Sandbox;

/// What a repository in an image holds beyond its base commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryLeaks {
    /// The base commit, in full.
    pub base: String,
    /// Configured remotes (their URLs fetch the whole history where a network is allowed).
    pub remotes: Vec<String>,
    /// References (branches, tags, remote-tracking refs, notes, the stash) whose commit is not
    /// the base commit or one of its ancestors.
    pub refs: Vec<String>,
    /// Special heads left behind (`ORIG_HEAD`, `FETCH_HEAD`, `MERGE_HEAD`, …).
    pub heads: Vec<String>,
    /// Reflog entries (each names a commit the repository was at).
    pub reflog_entries: u64,
    /// Commit objects stored, referenced or not, that are not the base commit or one of its
    /// ancestors.
    pub future_commits: u64,
}

impl HistoryLeaks {
    /// Whether nothing past the base commit is stored or named.
    pub fn is_clean(&self) -> bool {
        self.remotes.is_empty()
            && self.refs.is_empty()
            && self.heads.is_empty()
            && self.reflog_entries == 0
            && self.future_commits == 0
    }

    /// One line: what was found (`clean` when nothing).
    pub fn summary(&self) -> String {
        if self.is_clean() {
            return "clean".to_owned();
        }
        let mut parts = Vec::new();
        if self.future_commits > 0 {
            parts.push(format!("{} commits past the base", self.future_commits));
        }
        if !self.refs.is_empty() {
            parts.push(format!("refs past the base: {}", self.refs.join(", ")));
        }
        if !self.remotes.is_empty() {
            parts.push(format!("remotes: {}", self.remotes.join(", ")));
        }
        if !self.heads.is_empty() {
            parts.push(format!("heads: {}", self.heads.join(", ")));
        }
        if self.reflog_entries > 0 {
            parts.push(format!("{} reflog entries", self.reflog_entries));
        }
        parts.join("; ")
    }
}

/// The shell prelude of both scripts: `$1` the repository folder, `$2` the base commit; git
/// trusts the folder whoever owns it; the base is resolved to `$base`, or the script prints
/// `error …` and exits with `$fail_status` (0 for the check, whose lines say it; 1 for the scrub,
/// which fails its build step).
const PRELUDE: &str = r#"
fail() { echo "error $*"; exit "$fail_status"; }
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
command -v git >/dev/null 2>&1 || fail "the image has no git"
cd "$1" 2>/dev/null || fail "no folder $1 in the image"
git rev-parse --git-dir >/dev/null 2>&1 || fail "$1 is not a git repository"
base=$(git rev-parse --verify -q "$2^{commit}") || fail "the repository has no commit $2"
echo "base $base"
"#;

/// Lists, one per line, what reaches past the base (see [`HistoryLeaks`]).
const CHECK: &str = r#"
git remote | sed 's/^/remote /'
git for-each-ref --format='%(refname)' | while read -r ref; do
    git merge-base --is-ancestor "$ref" "$base" 2>/dev/null || echo "ref $ref"
done
for head in ORIG_HEAD FETCH_HEAD MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD AUTO_MERGE; do
    test -e "$(git rev-parse --git-path "$head")" && echo "head $head"
done
logs=$(git rev-parse --git-path logs)
echo "reflog $(find "$logs" -type f -exec cat {} + 2>/dev/null | wc -l)"
list=$(mktemp -d)
git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' | sed -n 's/^commit //p' | sort >"$list/stored"
git rev-list "$base" | sort >"$list/history"
echo "future $(comm -23 "$list/stored" "$list/history" | wc -l)"
rm -rf "$list"
"#;

/// Cuts the repository at the base, as swerve's own images are cut: HEAD's branch at the base
/// (the working tree as it is when HEAD is already there), no remotes, no other ref but tags in
/// the base's history, no special heads, an empty reflog, the objects of a borrowed object store
/// (`objects/info/alternates`) copied in and the borrowing ended, and unreferenced objects
/// pruned.
const SCRUB: &str = r#"
set -e
branch=$(git symbolic-ref -q --short HEAD || echo main)
git checkout -q -B "$branch" "$base"
for remote in $(git remote); do git remote remove "$remote"; done
git for-each-ref --format='%(refname)' | while read -r ref; do
    test "$ref" = "refs/heads/$branch" && continue
    case "$ref" in
        refs/tags/*) git merge-base --is-ancestor "$ref" "$base" 2>/dev/null && continue ;;
    esac
    git update-ref -d "$ref"
done
for head in ORIG_HEAD FETCH_HEAD MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD AUTO_MERGE; do
    rm -f "$(git rev-parse --git-path "$head")"
done
git reflog expire --expire=now --all
alternates=$(git rev-parse --git-path objects/info/alternates)
if test -e "$alternates"; then
    git repack -a -d -q
    rm -f "$alternates"
fi
git -c gc.auto=0 gc -q --prune=now
"#;

/// How long the check or the scrub may take in the container.
const LIMIT: Duration = Duration::from_secs(10 * 60);

/// Reads the check's lines; `image` names the image in errors.
fn parse(text: &str, image: &str) -> Result<HistoryLeaks> {
    let mut leaks = HistoryLeaks::default();
    let bad = |detail: String| Error::HistoryCheck {
        image: image.to_owned(),
        detail,
    };
    let count = |value: &str| {
        value
            .trim()
            .parse::<u64>()
            .map_err(|_| bad(format!("unexpected count `{value}`")))
    };
    let mut counted = (false, false);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "error" => return Err(bad(value.to_owned())),
            "base" => leaks.base = value.to_owned(),
            "remote" => leaks.remotes.push(value.to_owned()),
            "ref" => leaks.refs.push(value.to_owned()),
            "head" => leaks.heads.push(value.to_owned()),
            "reflog" => {
                leaks.reflog_entries = count(value)?;
                counted.0 = true;
            }
            "future" => {
                leaks.future_commits = count(value)?;
                counted.1 = true;
            }
            _ => return Err(bad(format!("unexpected line `{line}`"))),
        }
    }
    if leaks.base.is_empty() || counted != (true, true) {
        return Err(bad(format!("the check did not finish: {}", text.trim())));
    }
    Ok(leaks)
}

impl Sandbox {
    /// What the repository at `repo_dir` in `image` holds past `base` (a commit-ish), checked
    /// in a container of the image without network; the image is not changed.
    pub async fn history_leaks(
        &self,
        image: &str,
        repo_dir: &str,
        base: &str,
    ) -> Result<HistoryLeaks> {
        let spec = ContainerSpec::new(image, "swerve-history-check", base);
        let container = self.start(&spec).await?;
        let script = format!("fail_status=0\n{PRELUDE}{CHECK}");
        let request =
            ExecRequest::new(["/bin/sh", "-c", &script, "sh", repo_dir, base]).with_timeout(LIMIT);
        let output = container.exec(&request).await;
        container.remove().await?;
        let output = output?;
        parse(&output.text(), image)
    }

    /// `image` with its repository at `repo_dir` cut at `base` (see the module documentation),
    /// built as `name` unless it exists, then checked: its leaks are returned and must be none,
    /// else [`Error::HistoryCheck`].
    pub async fn scrubbed_image(
        &self,
        image: &str,
        repo_dir: &str,
        base: &str,
        name: &str,
    ) -> Result<(ImageInfo, HistoryLeaks)> {
        let info = self
            .ensure_built(name, || async {
                let dir = temp_dir("swerve-scrub-")?;
                let mut ctx = Context::create(dir.path().join("context.tar"))?;
                let script = format!("fail_status=1\n{PRELUDE}{SCRUB}");
                ctx.add_bytes("swerve-scrub.sh", script.as_bytes(), 0o755)?;
                let quoted = |s: &str| serde_json::to_string(s).expect("a string serialises");
                let mut dockerfile = String::new();
                let _ = writeln!(dockerfile, "FROM {image}");
                let _ = writeln!(dockerfile, "COPY swerve-scrub.sh /tmp/swerve-scrub.sh");
                let _ = writeln!(
                    dockerfile,
                    "RUN [\"/bin/sh\", \"/tmp/swerve-scrub.sh\", {}, {}]",
                    quoted(repo_dir),
                    quoted(base)
                );
                let _ = writeln!(dockerfile, "RUN [\"rm\", \"/tmp/swerve-scrub.sh\"]");
                ctx.add_bytes("Dockerfile", dockerfile.as_bytes(), 0o644)?;
                let context = ctx.finish()?;
                self.build_context(name, &context).await
            })
            .await?;
        let leaks = self.history_leaks(name, repo_dir, base).await?;
        if !leaks.is_clean() {
            return Err(Error::HistoryCheck {
                image: name.to_owned(),
                detail: format!(
                    "still reaches past the base after scrubbing: {}",
                    leaks.summary()
                ),
            });
        }
        Ok((info, leaks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_lines_are_read_and_an_unfinished_check_is_an_error() {
        let text = "base abc\nremote origin\nref refs/remotes/origin/main\nref refs/tags/v2\n\
                    head ORIG_HEAD\nreflog 3\nfuture 12\n";
        let leaks = parse(text, "img").unwrap();
        assert_eq!(leaks.remotes, ["origin"]);
        assert_eq!(leaks.refs, ["refs/remotes/origin/main", "refs/tags/v2"]);
        assert_eq!((leaks.reflog_entries, leaks.future_commits), (3, 12));
        assert!(!leaks.is_clean());
        assert_eq!(
            leaks.summary(),
            "12 commits past the base; refs past the base: refs/remotes/origin/main, \
             refs/tags/v2; remotes: origin; heads: ORIG_HEAD; 3 reflog entries"
        );
        let clean = parse("base abc\nreflog 0\nfuture 0\n", "img").unwrap();
        assert!(clean.is_clean() && clean.summary() == "clean");
        for bad in [
            "base abc\nreflog 0\n",
            "error the image has no git\n",
            "base a\nfuture x\n",
        ] {
            let error = parse(bad, "img").unwrap_err().to_string();
            assert!(error.contains("img"), "{error}");
        }
    }
}
