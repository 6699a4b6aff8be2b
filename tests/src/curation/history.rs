//! Small git repositories shaped like GitHub history, built with the `git` command in a folder and mirrored with `git clone --mirror --no-local` (so objects
//! that no ref reaches are really gone), plus GH Archive hour files written with flate2.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A working repository whose history the test writes, mirrored at the end.
pub struct WorkRepo {
    /// `owner/name`.
    pub name: String,
    /// The working tree.
    pub dir: PathBuf,
    home: PathBuf,
    clock: std::cell::Cell<u64>,
}

/// Runs git in `dir` with a fixed identity and no user or system configuration.
fn git_in(dir: &Path, home: &Path, args: &[&str], when: u64) -> String {
    let date = format!("{} +0000", 1_500_000_000 + when * 3600);
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", home.join("gitconfig"))
        .env("GIT_AUTHOR_NAME", "Dev")
        .env("GIT_AUTHOR_EMAIL", "dev@example.invalid")
        .env("GIT_COMMITTER_NAME", "Dev")
        .env("GIT_COMMITTER_EMAIL", "dev@example.invalid")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl WorkRepo {
    /// A new repository `name` (branch `main`) under `<root>/work/`.
    pub fn new(root: &Path, name: &str) -> WorkRepo {
        let dir = root.join("work").join(name);
        let home = root.join("home");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let repo = WorkRepo {
            name: name.to_owned(),
            dir,
            home,
            clock: std::cell::Cell::new(0),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// Runs git in the working tree, one fixture hour after the last call.
    pub fn git(&self, args: &[&str]) -> String {
        self.clock.set(self.clock.get() + 1);
        git_in(&self.dir, &self.home, args, self.clock.get())
    }

    /// Checks out `branch` (creating it at `at` when given), writes (`Some`) or deletes
    /// (`None`) files, commits with `message`; returns the sha.
    pub fn commit(&self, branch: &str, files: &[(&str, Option<&[u8]>)], message: &str) -> String {
        self.checkout(branch);
        for (path, content) in files {
            let full = self.dir.join(path);
            match content {
                Some(bytes) => {
                    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                    std::fs::write(&full, bytes).unwrap();
                }
                None => {
                    std::fs::remove_file(&full).unwrap();
                }
            }
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.rev("HEAD")
    }

    /// `git diff from to -- paths`, exactly as git prints it (a patch to apply).
    pub fn diff(&self, from: &str, to: &str, paths: &[&str]) -> String {
        let out = Command::new("git")
            .args(["diff", "--no-color", "--no-ext-diff", from, to, "--"])
            .args(paths)
            .current_dir(&self.dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", self.home.join("gitconfig"))
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git diff failed");
        String::from_utf8(out.stdout).expect("a text patch")
    }

    /// Checks out `branch`.
    pub fn checkout(&self, branch: &str) {
        if self.git(&["symbolic-ref", "--short", "HEAD"]) != branch {
            self.git(&["checkout", "-q", branch]);
        }
    }

    /// Creates branch `name` at `at`.
    pub fn branch(&self, name: &str, at: &str) {
        self.git(&["branch", name, at]);
    }

    /// `git rev-parse rev`.
    pub fn rev(&self, rev: &str) -> String {
        self.git(&["rev-parse", rev])
    }

    /// `git merge --no-ff` of `from` into `into`: "Merge pull request #N from …".
    pub fn merge(&self, into: &str, from: &str, number: u64) -> String {
        self.checkout(into);
        let message = format!("Merge pull request #{number} from dev/{from}");
        self.git(&["merge", "-q", "--no-ff", "-m", &message, from]);
        self.rev("HEAD")
    }

    /// Squash-merge of `from` into `into` with subject `subject (#N)`.
    pub fn squash(&self, into: &str, from: &str, subject: &str, number: u64) -> String {
        self.checkout(into);
        self.git(&["merge", "-q", "--squash", from]);
        self.git(&["commit", "-q", "-m", &format!("{subject} (#{number})")]);
        self.rev("HEAD")
    }

    /// Mirrors into `<root>/repos/<name>.git`, then moves PR heads to `refs/pull/N/head` and
    /// deletes the branches named in `drop_branches` from the mirror.
    pub fn mirror(&self, root: &Path, pulls: &[(u64, &str)], drop_branches: &[&str]) -> PathBuf {
        let mirror = root.join("repos").join(format!("{}.git", self.name));
        std::fs::create_dir_all(mirror.parent().unwrap()).unwrap();
        let source = format!("file://{}", self.dir.display());
        git_in(
            root,
            &self.home,
            &[
                "clone",
                "-q",
                "--mirror",
                "--no-local",
                &source,
                mirror.to_str().unwrap(),
            ],
            0,
        );
        let gd = mirror.to_str().unwrap();
        for (number, sha) in pulls {
            let name = format!("refs/pull/{number}/head");
            git_in(
                root,
                &self.home,
                &["--git-dir", gd, "update-ref", &name, sha],
                0,
            );
        }
        for branch in drop_branches {
            let name = format!("refs/heads/{branch}");
            git_in(
                root,
                &self.home,
                &["--git-dir", gd, "update-ref", "-d", &name],
                0,
            );
        }
        git_in(
            root,
            &self.home,
            &["--git-dir", gd, "gc", "-q", "--prune=now"],
            0,
        );
        mirror
    }
}

/// GH Archive events of a fixture, written as hour files.
#[derive(Default)]
pub struct Events {
    next_id: u64,
    lines: Vec<(String, String)>,
}

/// A pull request as its events describe it.
pub struct Pr<'a> {
    /// `owner/name`.
    pub repo: &'a str,
    /// GH Archive's `repo.id`.
    pub repo_id: u64,
    /// The PR's number.
    pub number: u64,
    /// Its title.
    pub title: &'a str,
    /// Its body.
    pub body: Option<&'a str>,
    /// The author's login.
    pub login: &'a str,
    /// `(ref, sha)` of the base branch.
    pub base: (&'a str, &'a str),
    /// The head commit.
    pub head: &'a str,
}

impl Events {
    fn id(&mut self) -> String {
        self.next_id += 1;
        (30_000_000_000 + self.next_id).to_string()
    }

    /// Adds `event` (its `created_at` decides the hour file).
    pub fn push(&mut self, event: Value) -> Value {
        let at = event["created_at"].as_str().unwrap().to_owned();
        let hour: u32 = at[11..13].parse().unwrap();
        let file = format!("{}-{hour}.json.gz", &at[..10]);
        self.lines.push((file, event.to_string()));
        event
    }

    /// Adds a raw line to `file`.
    pub(crate) fn push_raw(&mut self, file: &str, line: &str) {
        self.lines.push((file.to_owned(), line.to_owned()));
    }

    fn envelope(
        &mut self,
        kind: &str,
        repo: &str,
        repo_id: u64,
        login: &str,
        at: &str,
        payload: Value,
    ) -> Value {
        json!({
            "id": self.id(), "type": kind,
            "actor": {"id": 1, "login": login, "display_login": login},
            "repo": {"id": repo_id, "name": repo, "url": format!("https://api.github.com/repos/{repo}")},
            "payload": payload, "public": true, "created_at": at,
        })
    }

    /// An `IssuesEvent` opening issue `number`.
    pub fn issue(
        &mut self,
        repo: &str,
        repo_id: u64,
        number: u64,
        title: &str,
        body: &str,
        at: &str,
    ) {
        let payload = json!({"action": "opened", "issue": {
            "number": number, "title": title, "body": body, "user": {"login": "reporter"}, "labels": []}});
        let event = self.envelope("IssuesEvent", repo, repo_id, "reporter", at, payload);
        self.push(event);
    }

    /// A full `PullRequestEvent` (before 2025-10-07).
    pub fn pr(&mut self, pr: &Pr<'_>, action: &str, merged: bool, at: &str) -> Value {
        let closed = action == "closed";
        let payload = json!({"action": action, "number": pr.number, "pull_request": {
            "number": pr.number, "title": pr.title, "body": pr.body,
            "user": {"login": pr.login},
            "merged": closed && merged,
            "merged_at": if closed && merged { Value::from(at) } else { Value::Null },
            "merge_commit_sha": "0".repeat(40),
            "base": {"ref": pr.base.0, "sha": pr.base.1, "repo": {"full_name": pr.repo}},
            "head": {"ref": "feature", "sha": pr.head, "repo": null},
            "created_at": "2017-01-01T00:00:00Z",
        }});
        self.pr_event(pr, at, payload)
    }

    fn pr_event(&mut self, pr: &Pr<'_>, at: &str, payload: Value) -> Value {
        let event = self.envelope(
            "PullRequestEvent",
            pr.repo,
            pr.repo_id,
            pr.login,
            at,
            payload,
        );
        self.push(event)
    }

    /// A trimmed `PullRequestEvent` (from 2025-10-07 on).
    pub(crate) fn trimmed_pr(&mut self, pr: &Pr<'_>, action: &str, at: &str) {
        let payload = json!({"action": action, "number": pr.number, "pull_request": {
            "url": "u", "id": 1, "number": pr.number,
            "head": {"ref": "feature", "sha": pr.head, "repo": null},
            "base": {"ref": pr.base.0, "sha": pr.base.1, "repo": null},
        }});
        self.pr_event(pr, at, payload);
    }

    /// Writes the hour files: every file as two gzip members (multi-member decoding).
    pub fn write(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let mut files: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (file, line) in &self.lines {
            files.entry(file).or_default().push(line);
        }
        for (file, lines) in files {
            let half = lines.len() / 2;
            let mut bytes = gzip(&lines[..half]);
            bytes.extend(gzip(&lines[half..]));
            std::fs::write(dir.join(file), bytes).unwrap();
        }
    }
}

/// `lines` as one gzip member, a newline after each.
pub fn gzip(lines: &[&str]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for line in lines {
        enc.write_all(line.as_bytes()).unwrap();
        enc.write_all(b"\n").unwrap();
    }
    enc.finish().unwrap()
}
