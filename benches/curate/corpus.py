#!/usr/bin/env python3
"""Synthetic inputs for benches/curate/run.sh.

  corpus.py events OUT --mb MB [--hours H]   GH Archive-shaped hour files OUT/YYYY-MM-DD-H.json.gz
  corpus.py mirror OUT --prs N                a bare mirror OUT/repos/benchorg/project.git with N
                                              merged PRs, and their events in OUT/events/

Events: a 2024-like mix of event types (PushEvent 45 %, CreateEvent 13 %, PullRequestEvent 8 %,
WatchEvent 8 %, IssueCommentEvent 6 %, ...) over 50,000 repositories (the first 1 % get a fifth of the events), with
full pre-2025 payloads: a PullRequestEvent carries the whole pull_request object with its user
and both repository objects (about 15 KB a line), a WatchEvent a few hundred bytes. Text fields
are drawn from a pool of random sentences, so the files compress about as well as real hours.
Deterministic: the same arguments give the same bytes.
"""

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
from multiprocessing import Pool

WORDS = (
    "the a fix add remove update support when with for of in to on error test docs build "
    "parser config cache client server request response handle value type return crash "
    "missing empty list dict string path file module import version release option flag "
    "default raise exception warning deprecate refactor rename move speed memory thread "
    "async timeout retry encode decode unicode bytes json yaml csv http url query index"
).split()

TYPES = [
    ("PushEvent", 45),
    ("CreateEvent", 13),
    ("PullRequestEvent", 8),
    ("WatchEvent", 8),
    ("IssueCommentEvent", 6),
    ("DeleteEvent", 4),
    ("PullRequestReviewEvent", 4),
    ("PullRequestReviewCommentEvent", 3),
    ("IssuesEvent", 3),
    ("ForkEvent", 2),
    ("ReleaseEvent", 1),
    ("GollumEvent", 1),
    ("MemberEvent", 1),
    ("PublicEvent", 1),
]
REPOS = 50_000


def sentence(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def sha(rng):
    return "%040x" % rng.getrandbits(160)


def user(login, uid):
    base = f"https://api.github.com/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": f"MDQ6VXNlcj{uid}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": base,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": "User",
        "site_admin": False,
    }


def repo_object(rng, name, rid, owner):
    base = f"https://api.github.com/repos/{name}"
    obj = {
        "id": rid,
        "node_id": f"MDEwOlJlcG9zaXRvcnk{rid}",
        "name": name.split("/")[1],
        "full_name": name,
        "private": False,
        "owner": owner,
        "html_url": f"https://github.com/{name}",
        "description": sentence(rng, 4, 14),
        "fork": False,
        "url": base,
    }
    for key in (
        "forks keys collaborators teams hooks issue_events events assignees branches tags "
        "blobs git_tags git_refs trees statuses languages stargazers contributors subscribers "
        "subscription commits git_commits comments issue_comment contents compare merges "
        "archive downloads issues pulls milestones notifications labels releases deployments"
    ).split():
        obj[f"{key}_url"] = f"{base}/{key}{{/id}}"
    obj.update(
        {
            "created_at": "2019-03-02T10:11:12Z",
            "updated_at": "2024-01-02T10:11:12Z",
            "pushed_at": "2024-01-02T10:11:12Z",
            "git_url": f"git://github.com/{name}.git",
            "ssh_url": f"git@github.com:{name}.git",
            "clone_url": f"https://github.com/{name}.git",
            "homepage": None,
            "size": rng.randint(10, 90000),
            "stargazers_count": rng.randint(0, 5000),
            "watchers_count": rng.randint(0, 5000),
            "language": rng.choice(["Python", "JavaScript", "Go", "Rust", "Java", None]),
            "has_issues": True,
            "has_projects": True,
            "has_downloads": True,
            "has_wiki": True,
            "has_pages": False,
            "forks_count": rng.randint(0, 900),
            "archived": False,
            "disabled": False,
            "open_issues_count": rng.randint(0, 300),
            "license": None,
            "topics": [rng.choice(WORDS) for _ in range(rng.randint(0, 5))],
            "visibility": "public",
            "forks": 3,
            "open_issues": 7,
            "watchers": 11,
            "default_branch": "main",
        }
    )
    return obj


def pull_request(rng, name, rid, number, login, uid, action, ts):
    owner = user(login, uid)
    merged = action == "closed" and rng.random() < 0.7
    base = f"https://api.github.com/repos/{name}"
    repo = repo_object(rng, name, rid, user(name.split("/")[0], rid + 7))
    return {
        "url": f"{base}/pulls/{number}",
        "id": rng.getrandbits(40),
        "node_id": "PR_kwDO" + sha(rng)[:12],
        "html_url": f"https://github.com/{name}/pull/{number}",
        "diff_url": f"https://github.com/{name}/pull/{number}.diff",
        "patch_url": f"https://github.com/{name}/pull/{number}.patch",
        "issue_url": f"{base}/issues/{number}",
        "number": number,
        "state": "closed" if action == "closed" else "open",
        "locked": False,
        "title": sentence(rng, 3, 10),
        "user": owner,
        "body": sentence(rng, 10, 200) + f"\n\nFixes #{max(1, number - 1)}",
        "created_at": ts,
        "updated_at": ts,
        "closed_at": ts if action == "closed" else None,
        "merged_at": ts if merged else None,
        "merge_commit_sha": sha(rng),
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "labels": [],
        "milestone": None,
        "draft": False,
        "commits_url": f"{base}/pulls/{number}/commits",
        "review_comments_url": f"{base}/pulls/{number}/comments",
        "review_comment_url": f"{base}/pulls/comments{{/number}}",
        "comments_url": f"{base}/issues/{number}/comments",
        "statuses_url": f"{base}/statuses/{sha(rng)}",
        "head": {
            "label": f"{login}:fix-{number}",
            "ref": f"fix-{number}",
            "sha": sha(rng),
            "user": owner,
            "repo": repo,
        },
        "base": {
            "label": f"{name.split('/')[0]}:main",
            "ref": "main",
            "sha": sha(rng),
            "user": repo["owner"],
            "repo": repo,
        },
        "_links": {
            k: {"href": f"{base}/pulls/{number}/{k}"}
            for k in ("self", "html", "issue", "comments", "review_comments", "commits")
        },
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "active_lock_reason": None,
        "merged": merged,
        "mergeable": None,
        "rebaseable": None,
        "mergeable_state": "unknown",
        "merged_by": owner if merged else None,
        "comments": rng.randint(0, 20),
        "review_comments": rng.randint(0, 20),
        "maintainer_can_modify": False,
        "commits": rng.randint(1, 9),
        "additions": rng.randint(1, 900),
        "deletions": rng.randint(0, 300),
        "changed_files": rng.randint(1, 30),
    }


def issue(rng, name, number, login, uid, ts):
    base = f"https://api.github.com/repos/{name}"
    return {
        "url": f"{base}/issues/{number}",
        "repository_url": base,
        "labels_url": f"{base}/issues/{number}/labels{{/name}}",
        "comments_url": f"{base}/issues/{number}/comments",
        "events_url": f"{base}/issues/{number}/events",
        "html_url": f"https://github.com/{name}/issues/{number}",
        "id": rng.getrandbits(40),
        "number": number,
        "title": sentence(rng, 3, 12),
        "user": user(login, uid),
        "labels": [],
        "state": "open",
        "locked": False,
        "assignee": None,
        "assignees": [],
        "comments": 0,
        "created_at": ts,
        "updated_at": ts,
        "closed_at": None,
        "author_association": "NONE",
        "body": sentence(rng, 10, 250),
    }


def payload(rng, kind, name, rid, login, uid, ts):
    number = rng.randint(1, 40000)
    if kind == "PushEvent":
        commits = [
            {
                "sha": sha(rng),
                "author": {"email": f"{login}@example.com", "name": login},
                "message": sentence(rng, 3, 30),
                "distinct": True,
                "url": f"https://api.github.com/repos/{name}/commits/{sha(rng)}",
            }
            for _ in range(rng.choice([1, 1, 1, 2, 3, 5]))
        ]
        return {
            "repository_id": rid,
            "push_id": rng.getrandbits(34),
            "size": len(commits),
            "distinct_size": len(commits),
            "ref": "refs/heads/main",
            "head": sha(rng),
            "before": sha(rng),
            "commits": commits,
        }
    if kind in ("CreateEvent", "DeleteEvent"):
        return {
            "ref": f"branch-{number}",
            "ref_type": "branch",
            "master_branch": "main",
            "description": sentence(rng, 0, 12),
            "pusher_type": "user",
        }
    if kind == "WatchEvent":
        return {"action": "started"}
    if kind == "PullRequestEvent":
        action = rng.choice(["opened", "closed", "closed", "reopened", "synchronize"])
        return {
            "action": action,
            "number": number,
            "pull_request": pull_request(rng, name, rid, number, login, uid, action, ts),
        }
    if kind in ("PullRequestReviewEvent", "PullRequestReviewCommentEvent"):
        pr = pull_request(rng, name, rid, number, login, uid, "opened", ts)
        review = {
            "id": rng.getrandbits(40),
            "user": user(login, uid),
            "body": sentence(rng, 0, 60),
            "commit_id": sha(rng),
            "state": "commented",
        }
        key = "review" if kind == "PullRequestReviewEvent" else "comment"
        return {"action": "created", key: review, "pull_request": pr}
    if kind in ("IssueCommentEvent", "IssuesEvent"):
        out = {
            "action": "created" if kind == "IssueCommentEvent" else "opened",
            "issue": issue(rng, name, number, login, uid, ts),
        }
        if kind == "IssueCommentEvent":
            out["comment"] = {
                "id": rng.getrandbits(40),
                "user": user(login, uid),
                "body": sentence(rng, 5, 120),
                "created_at": ts,
            }
        return out
    if kind == "ForkEvent":
        return {"forkee": repo_object(rng, f"{login}/fork{number}", rid + 1, user(login, uid))}
    if kind == "ReleaseEvent":
        return {
            "action": "published",
            "release": {
                "tag_name": f"v{number}",
                "name": sentence(rng, 1, 4),
                "body": sentence(rng, 10, 200),
                "author": user(login, uid),
            },
        }
    if kind == "GollumEvent":
        return {"pages": [{"page_name": "Home", "title": "Home", "action": "edited", "sha": sha(rng)}]}
    return {"action": "added"}


def hour_file(args):
    out, index, target_bytes = args
    rng = random.Random(index)
    day, hour = divmod(index, 24)
    stamp = f"2024-01-{day + 1:02d}"
    path = os.path.join(out, f"{stamp}-{hour}.json.gz")
    kinds = [k for k, w in TYPES for _ in range(w)]
    written = 0
    event_id = 30_000_000_000 + index * 10_000_000
    # mtime 0: the same arguments give the same bytes.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
        while written < target_bytes:
            lines = []
            for _ in range(200):
                event_id += 1
                kind = rng.choice(kinds)
                # Skewed: the first 1 % of repositories get a fifth of the events.
                repo_index = int(REPOS * rng.random() ** 3)
                rid = 100_000 + repo_index
                name = f"owner{repo_index % 7919}/project-{repo_index}"
                uid = rng.randint(1, 9_000_000)
                login = f"dev{uid}"
                ts = f"{stamp}T{hour:02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
                event = {
                    "id": str(event_id),
                    "type": kind,
                    "actor": {
                        "id": uid,
                        "login": login,
                        "display_login": login,
                        "gravatar_id": "",
                        "url": f"https://api.github.com/users/{login}",
                        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?",
                    },
                    "repo": {"id": rid, "name": name, "url": f"https://api.github.com/repos/{name}"},
                    "payload": payload(rng, kind, name, rid, login, uid, ts),
                    "public": True,
                    "created_at": ts,
                }
                if rng.random() < 0.3:
                    event["org"] = {"id": rid + 3, "login": name.split("/")[0]}
                lines.append(json.dumps(event, separators=(",", ":")))
            chunk = ("\n".join(lines) + "\n").encode()
            gz.write(chunk)
            written += len(chunk)
    return written


def events(out, mb, hours):
    os.makedirs(out, exist_ok=True)
    per_file = mb * 1_000_000 // hours
    with Pool(os.cpu_count()) as pool:
        sizes = pool.map(hour_file, [(out, i, per_file) for i in range(hours)])
    # Uncompressed bytes per file, for the throughput figures.
    with open(os.path.join(out, "sizes.tsv"), "w") as f:
        for i, size in enumerate(sizes):
            day, hour = divmod(i, 24)
            f.write(f"2024-01-{day + 1:02d}-{hour}.json.gz\t{size}\n")
    print(f"{hours} files, {sum(sizes) / 1e6:.0f} MB uncompressed", file=sys.stderr)


# --- the mirror ----------------------------------------------------------------------------


def module_text(rng, index):
    lines = [f'"""Module {index}: {sentence(rng, 4, 10)}."""', "", "import os", ""]
    if index > 0:
        lines.insert(2, f"from .mod{rng.randint(0, index - 1)} import func0")
    for f in range(12):
        lines += ["", f"def func{f}(value, option=None):", f'    """{sentence(rng, 5, 15)}."""']
        for s in range(rng.randint(8, 16)):
            lines.append(f"    value = value + {rng.randint(1, 999)}  # {sentence(rng, 2, 6)}")
        lines.append("    return value")
    return "\n".join(lines) + "\n"


class Stream:
    """A `git fast-import` stream, written as it is built."""

    def __init__(self, sink):
        self.sink = sink
        self.mark = 0
        self.when = 1_600_000_000

    def commit(self, ref, message, files, parents=()):
        self.mark += 1
        self.when += 60
        w = self.sink.write
        w(f"commit {ref}\nmark :{self.mark}\n".encode())
        w(f"committer Dev <dev@example.com> {self.when} +0000\n".encode())
        data = message.encode()
        w(b"data %d\n%s\n" % (len(data), data))
        if parents:
            w(f"from :{parents[0]}\n".encode())
            for p in parents[1:]:
                w(f"merge :{p}\n".encode())
        for path, text in files.items():
            blob = text.encode()
            w(f"M 100644 inline {path}\n".encode())
            w(b"data %d\n%s\n" % (len(blob), blob))
        return self.mark


def edit(rng, text):
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(lines))
        if lines[at].startswith("    value = "):
            lines[at] = f"    value = value * {rng.randint(2, 99)}  # {sentence(rng, 2, 6)}"
        else:
            lines.insert(at + 1, f"# {sentence(rng, 3, 8)}")
    return "\n".join(lines)


def mirror(out, prs):
    rng = random.Random(7)
    name = "benchorg/project"
    repo = os.path.join(out, "repos", name + ".git")
    os.makedirs(os.path.join(out, "events"), exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", repo], check=True)
    files = {f"src/project/mod{i}.py": module_text(rng, i) for i in range(300)}
    files.update({f"tests/test_mod{i}.py": module_text(rng, i) for i in range(60)})
    marks_file = os.path.join(out, "marks")
    proc = subprocess.Popen(
        ["git", "--git-dir", repo, "fast-import", "--quiet", f"--export-marks={marks_file}"],
        stdin=subprocess.PIPE,
    )
    stream = Stream(proc.stdin)
    main = stream.commit("refs/heads/main", "initial", files)
    lines = []
    marks = []
    for n in range(1, prs + 1):
        base = main
        edited = rng.sample(sorted(p for p in files if p.startswith("src/")), rng.randint(1, 4))
        change = {p: edit(rng, files[p]) for p in edited}
        test = f"tests/test_mod{rng.randrange(60)}.py"
        change[test] = edit(rng, files[test])
        head = stream.commit(f"refs/pull/{2 * n}/head", f"fix {n}", change, (base,))
        # main moves on (another file) before the merge.
        other = rng.choice(sorted(p for p in files if p.startswith("src/") and p not in change))
        files[other] = edit(rng, files[other])
        main = stream.commit("refs/heads/main", f"unrelated {n}", {other: files[other]}, (main,))
        files.update(change)
        main = stream.commit(
            "refs/heads/main", f"Merge pull request #{2 * n}", change, (main, head)
        )
        marks.append((n, base, head, main))
    proc.stdin.close()
    if proc.wait() != 0:
        sys.exit("git fast-import failed")
    shas = {}
    with open(marks_file) as f:
        for line in f:
            mark, commit = line.split()
            shas[int(mark[1:])] = commit
    for n, base, head, merge in marks:
        ts = f"2024-02-01T{(n // 60) % 24:02d}:{n % 60:02d}:00Z"
        lines.append(
            {
                "id": str(9_000_000 + 2 * n),
                "type": "IssuesEvent",
                "actor": {"login": "reporter"},
                "repo": {"id": 424242, "name": name},
                "payload": {
                    "action": "opened",
                    "issue": {
                        "number": 2 * n - 1,
                        "title": sentence(rng, 3, 9),
                        "body": sentence(rng, 20, 80),
                    },
                },
                "created_at": ts,
            }
        )
        lines.append(
            {
                "id": str(9_000_001 + 2 * n),
                "type": "PullRequestEvent",
                "actor": {"login": "maintainer"},
                "repo": {"id": 424242, "name": name},
                "payload": {
                    "action": "closed",
                    "number": 2 * n,
                    "pull_request": {
                        "number": 2 * n,
                        "title": f"Fix {sentence(rng, 2, 6)}",
                        "body": f"Fixes #{2 * n - 1}",
                        "user": {"login": "contributor"},
                        "merged": True,
                        "merged_at": ts,
                        "created_at": ts,
                        "merge_commit_sha": shas[merge],
                        "base": {"ref": "main", "sha": shas[base]},
                        "head": {"ref": f"fix-{n}", "sha": shas[head]},
                    },
                },
                "created_at": ts,
            }
        )
    with gzip.open(os.path.join(out, "events", "2024-02-01-0.json.gz"), "wt") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    print(f"{prs} PRs in {repo}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("events")
    e.add_argument("out")
    e.add_argument("--mb", type=int, required=True)
    e.add_argument("--hours", type=int, default=48)
    m = sub.add_parser("mirror")
    m.add_argument("out")
    m.add_argument("--prs", type=int, default=300)
    args = parser.parse_args()
    if args.command == "events":
        events(args.out, args.mb, args.hours)
    else:
        mirror(args.out, args.prs)


if __name__ == "__main__":
    main()
