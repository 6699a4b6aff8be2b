//! A task repository cut at its base commit: nothing after the base commit is reachable, or even
//! stored, in the copy that goes into an instance image.
//!
//! SWE-bench images once shipped the repository's later history (SWE-bench#465), so an agent
//! could `git log --all` its way to the fix. The copy made here has no remotes, one branch at the
//! base commit, only tags that point into the base commit's history, an empty reflog, and is
//! garbage-collected; then every commit object left in it is checked to be an ancestor of (or
//! equal to) the base commit.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::host::HostCommand;

/// Where an instance's repository comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoSource {
    /// A `git bundle` file holding (at least) the base commit.
    Bundle(PathBuf),
    /// A local repository (working tree or bare) holding the base commit.
    Path(PathBuf),
}

impl RepoSource {
    fn path(&self) -> &Path {
        match self {
            RepoSource::Bundle(p) | RepoSource::Path(p) => p,
        }
    }
}

fn git(repo: &Path) -> HostCommand {
    HostCommand::new("git")
        .arg("-C")
        .arg(repo)
        // The repository may belong to another user (a CI checkout); it is only read.
        .args(["-c", "safe.directory=*"])
}

/// Clone `source` into `dest` (which must not exist) and cut it at `base`. Returns the full
/// hash of the base commit.
pub(crate) async fn prepare(
    source: &RepoSource,
    base: &str,
    dest: &Path,
    instance: &str,
    limit: Duration,
) -> Result<String> {
    let mut clone = HostCommand::new("git")
        .args(["-c", "safe.directory=*", "clone", "-q", "--no-checkout"])
        .env("GIT_TERMINAL_PROMPT", "0");
    if matches!(source, RepoSource::Path(_)) {
        // Through the pack protocol rather than hard links: only objects reachable from refs
        // are copied, and nothing is shared with the source.
        clone = clone.arg("--no-local");
    }
    clone.arg(source.path()).arg(dest).run(limit).await?;

    let sha = git(dest)
        .args(["rev-parse", "--verify", "--end-of-options"])
        .arg(format!("{base}^{{commit}}"))
        .run(limit)
        .await?
        .trim()
        .to_owned();
    let branch = match git(dest)
        .args(["symbolic-ref", "-q", "--short", "HEAD"])
        .run(limit)
        .await
    {
        Ok(name) if !name.trim().is_empty() => name.trim().to_owned(),
        _ => "main".to_owned(),
    };
    git(dest)
        .args(["checkout", "-q", "-f", "-B", &branch, &sha])
        .run(limit)
        .await?;

    for remote in git(dest).arg("remote").run(limit).await?.lines() {
        git(dest)
            .args(["remote", "remove", remote])
            .run(limit)
            .await?;
    }
    let keep = format!("refs/heads/{branch}");
    let refs = git(dest)
        .args(["for-each-ref", "--format=%(refname)"])
        .run(limit)
        .await?;
    for reference in refs.lines().filter(|r| *r != keep) {
        let is_old_tag = reference.starts_with("refs/tags/")
            && git(dest)
                .args(["merge-base", "--is-ancestor", reference, &sha])
                .run(limit)
                .await
                .is_ok();
        if !is_old_tag {
            git(dest)
                .args(["update-ref", "-d", reference])
                .run(limit)
                .await?;
        }
    }
    for stale in ["FETCH_HEAD", "ORIG_HEAD"] {
        let path = dest.join(".git").join(stale);
        if path.exists() {
            fs_err::remove_file(&path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        }
    }
    git(dest)
        .args(["reflog", "expire", "--expire=now", "--all"])
        .run(limit)
        .await?;
    git(dest)
        .args(["gc", "-q", "--prune=now"])
        .run(limit)
        .await?;

    check_no_future_commits(dest, &sha, instance, limit).await?;
    Ok(sha)
}

/// Fail with [`Error::FutureCommits`] when `repo` stores any commit object that is not `base` or
/// one of its ancestors (reachable or not).
pub(crate) async fn check_no_future_commits(
    repo: &Path,
    base: &str,
    instance: &str,
    limit: Duration,
) -> Result<()> {
    let history: HashSet<String> = git(repo)
        .args(["rev-list", base])
        .run(limit)
        .await?
        .lines()
        .map(str::to_owned)
        .collect();
    let objects = git(repo)
        .args([
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objecttype) %(objectname)",
        ])
        .run(limit)
        .await?;
    let extra: Vec<&str> = objects
        .lines()
        .filter_map(|line| line.strip_prefix("commit "))
        .filter(|sha| !history.contains(*sha))
        .collect();
    match extra.first() {
        None => Ok(()),
        Some(example) => Err(Error::FutureCommits {
            instance: instance.to_owned(),
            base: base.to_owned(),
            count: extra.len(),
            example: (*example).to_owned(),
        }),
    }
}

/// The shell check run again inside the instance image build, so that the image itself is
/// verified and not only the host copy: every stored commit is an ancestor of `HEAD`.
pub(crate) const IN_IMAGE_CHECK: &str = r#"test -z "$(git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' | sed -n 's/^commit //p' | sort | comm -23 - <(git rev-list HEAD | sort))"
test -z "$(git remote)"
test "$(git rev-list --all | sort)" = "$(git rev-list HEAD | sort)""#;
