//! `curate run` on curate's own fixture (built here with git and flate2): every rejection reason,
//! the tricky history shapes (merge commit after main moved on, squash merge with the head only
//! under `refs/pull/N/head`, a force-pushed head, trimmed 2025 payloads, renames, deletions, a
//! binary file, bot titles, every link form and non-links, a duplicate backport), bad input
//! (an invalid line, a repeated event, a truncated gzip), stable output, and shards that merge
//! into what one process writes.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use swerve_curate::{Config, Inputs, Reason, Shard};
use swerve_trainer::grpo::GrpoConfig;
use swerve_trainer::prompt::PromptFormat;
use swerve_trainer::train::commands::{
    GrpoCommand, ModelSource, OutputSpec, SftCommand, SftData, run_grpo, run_sft,
};
use swerve_trainer::train::data::PromptStyle;
use swerve_trainer::train::sft::SftConfig;

use support::fixture::{Events, Pr, WorkRepo, gzip};

const WIDGET: &str = "acme/widget";
const WIDGET_ID: u64 = 1001;

/// The n-th fixture day, 10:00 UTC, in 2017.
fn day(n: u32) -> String {
    format!("2017-{:02}-{:02}T10:00:00Z", n / 28 + 1, n % 28 + 1)
}

fn later(n: u32) -> String {
    format!("2017-{:02}-{:02}T11:00:00Z", n / 28 + 1, n % 28 + 1)
}

const CORE: &str = "\"\"\"Rendering.\"\"\"\n\n\ndef render(text):\n    return text.strip()\n\n\ndef width(text):\n    return len(text)\n";
const UTIL: &str = "def clamp(value, low, high):\n    return max(low, min(value, high))\n";

/// What each PR must come to: `None` = task.
struct Built {
    expected: BTreeMap<(String, u64), Option<Reason>>,
    squash34: String,
}

fn build(root: &Path) -> Built {
    let w = WorkRepo::new(root, WIDGET);
    let mut ev = Events::default();
    let mut expected = BTreeMap::new();
    let mut want = |repo: &str, n: u64, reason: Option<Reason>| {
        expected.insert((repo.to_owned(), n), reason);
    };
    let c0 = w.commit(
        "main",
        &[
            (
                "src/widget/__init__.py",
                Some(b"from .core import render\n"),
            ),
            ("src/widget/core.py", Some(CORE.as_bytes())),
            ("src/widget/util.py", Some(UTIL.as_bytes())),
            ("src/widget/old.py", Some(b"LEGACY = True\n")),
            (
                "tests/test_core.py",
                Some(b"from widget.core import render\n"),
            ),
            ("README.md", Some(b"# widget\n")),
            ("pyproject.toml", Some(b"[project]\nname = \"widget\"\n")),
        ],
        "Initial commit",
    );
    w.branch("1.x", &c0);
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let mk = |number: u64,
              title: &'static str,
              body: Option<&'static str>,
              login: &'static str,
              base_ref: &'static str,
              base: &str,
              head: &str| Pr {
        repo: WIDGET,
        repo_id: WIDGET_ID,
        number,
        title,
        body,
        login,
        base: (base_ref, leak(base.to_owned())),
        head: leak(head.to_owned()),
    };

    // #2: merge commit after main moved on; "Fixes #1" in the body; code + test.
    ev.issue(
        WIDGET,
        WIDGET_ID,
        1,
        "render keeps capitals",
        "render('A') gives 'A'.",
        &day(1),
    );
    let fix = CORE.replace("text.strip()", "text.strip().lower()");
    w.branch("f2", &c0);
    let h2 = w.commit(
        "f2",
        &[
            ("src/widget/core.py", Some(fix.as_bytes())),
            (
                "tests/test_core.py",
                Some(b"from widget.core import render\nassert render('A') == 'a'\n"),
            ),
        ],
        "Lower-case output",
    );
    let c1 = w.commit(
        "main",
        &[("README.md", Some(b"# widget\n\nMore.\n"))],
        "Docs",
    );
    let p2 = mk(
        2,
        "Lower-case render output",
        Some("Fixes #1"),
        "ann",
        "main",
        &c0,
        &h2,
    );
    ev.pr(&p2, "opened", false, &day(2));
    w.merge("main", "f2", 2);
    ev.pr(
        &mk(
            2,
            "Lower-case render output",
            Some("Fixes #1"),
            "ann",
            "main",
            &c1,
            &h2,
        ),
        "closed",
        true,
        &later(2),
    );
    want(WIDGET, 2, None);

    // #28: backport of #2 into 1.x with the same code patch, merged later: duplicate.
    w.branch("f28", "1.x");
    let h28 = w.commit(
        "f28",
        &[("src/widget/core.py", Some(fix.as_bytes()))],
        "Backport lower-case output",
    );
    ev.pr(
        &mk(
            28,
            "[1.x] Lower-case render output",
            Some("Backport of #2. Fixes #1"),
            "ann",
            "1.x",
            &c0,
            &h28,
        ),
        "opened",
        false,
        &day(3),
    );
    w.merge("1.x", "f28", 28);
    ev.pr(
        &mk(
            28,
            "[1.x] Lower-case render output",
            Some("Backport of #2. Fixes #1"),
            "ann",
            "1.x",
            &c0,
            &h28,
        ),
        "closed",
        true,
        &later(3),
    );
    want(WIDGET, 28, Some(Reason::Duplicate));

    // #4: squash merge; the head only under refs/pull/4/head; "closes #3".
    ev.issue(
        WIDGET,
        WIDGET_ID,
        3,
        "clamp needs a wrap",
        "Add wrap().",
        &day(4),
    );
    let base4 = w.rev("main");
    w.branch("f4", &base4);
    let util4 = format!("{UTIL}\n\ndef wrap(value, size):\n    return value % size\n");
    let h4 = w.commit(
        "f4",
        &[("src/widget/util.py", Some(util4.as_bytes()))],
        "Add wrap",
    );
    ev.pr(
        &mk(
            4,
            "Add wrap",
            Some("This closes #3."),
            "ann",
            "main",
            &base4,
            &h4,
        ),
        "opened",
        false,
        &day(5),
    );
    w.squash("main", "f4", "Add wrap", 4);
    ev.pr(
        &mk(
            4,
            "Add wrap",
            Some("This closes #3."),
            "ann",
            "main",
            &base4,
            &h4,
        ),
        "closed",
        true,
        &later(5),
    );
    want(WIDGET, 4, None);

    // #6: rename util.py -> helpers.py with an edit, delete old.py; issue URL link.
    ev.issue(
        WIDGET,
        WIDGET_ID,
        5,
        "util is a bad name",
        "Rename it.",
        &day(6),
    );
    let base6 = w.rev("main");
    w.branch("f6", &base6);
    let helpers = util4.replace("% size", "% max(size, 1)");
    let h6 = w.commit(
        "f6",
        &[
            ("src/widget/util.py", None),
            ("src/widget/helpers.py", Some(helpers.as_bytes())),
            ("src/widget/old.py", None),
        ],
        "Rename util",
    );
    let body6 = "Fix https://github.com/acme/widget/issues/5";
    ev.pr(
        &mk(
            6,
            "Rename util to helpers",
            Some(body6),
            "ann",
            "main",
            &base6,
            &h6,
        ),
        "opened",
        false,
        &day(7),
    );
    w.merge("main", "f6", 6);
    ev.pr(
        &mk(
            6,
            "Rename util to helpers",
            Some(body6),
            "ann",
            "main",
            &base6,
            &h6,
        ),
        "closed",
        true,
        &later(7),
    );
    want(WIDGET, 6, None);

    // #8: a binary file next to a new module; "resolve acme/widget#7".
    ev.issue(WIDGET, WIDGET_ID, 7, "load data", "Need a loader.", &day(8));
    let base8 = w.rev("main");
    w.branch("f8", &base8);
    let h8 = w.commit(
        "f8",
        &[
            (
                "src/widget/loader.py",
                Some(b"def load(path):\n    return open(path, 'rb').read()\n"),
            ),
            ("src/widget/data/blob.bin", Some(b"\x00\x01\x02binary\x00")),
        ],
        "Add loader",
    );
    ev.pr(
        &mk(
            8,
            "Add a loader",
            Some("resolve ACME/widget#7"),
            "ann",
            "main",
            &base8,
            &h8,
        ),
        "opened",
        false,
        &day(9),
    );
    w.merge("main", "f8", 8);
    ev.pr(
        &mk(
            8,
            "Add a loader",
            Some("resolve ACME/widget#7"),
            "ann",
            "main",
            &base8,
            &h8,
        ),
        "closed",
        true,
        &later(9),
    );
    want(WIDGET, 8, None);

    // #10: force-pushed: the opened event's head is gone; "fix #9" only in a commit message.
    ev.issue(
        WIDGET,
        WIDGET_ID,
        9,
        "width of None",
        "width(None) raises.",
        &day(10),
    );
    let base10 = w.rev("main");
    w.branch("f10", &base10);
    let gone = w.commit(
        "f10",
        &[(
            "src/widget/core.py",
            Some(fix.replace("len(text)", "len(text or 'x')").as_bytes()),
        )],
        "wip",
    );
    w.git(&["reset", "-q", "--hard", &base10]);
    let h10 = w.commit(
        "f10",
        &[(
            "src/widget/core.py",
            Some(fix.replace("len(text)", "len(text or '')").as_bytes()),
        )],
        "Handle None in width\n\nfix #9",
    );
    ev.pr(
        &mk(
            10,
            "Handle None",
            Some("Handles None."),
            "ann",
            "main",
            &base10,
            &gone,
        ),
        "opened",
        false,
        &day(11),
    );
    w.merge("main", "f10", 10);
    ev.pr(
        &mk(
            10,
            "Handle None",
            Some("Handles None."),
            "ann",
            "main",
            &base10,
            &h10,
        ),
        "closed",
        true,
        &later(11),
    );
    want(WIDGET, 10, None);

    // #12: trimmed payloads (2025-11); merged per the clone; "Closes #11" in a commit message.
    ev.issue(
        WIDGET,
        WIDGET_ID,
        11,
        "need a title case",
        "Add title().",
        "2025-11-01T09:00:00Z",
    );
    let base12 = w.rev("main");
    w.branch("f12", &base12);
    let core12 = format!(
        "{}\n\ndef title(text):\n    return text.title()\n",
        fix.replace("len(text)", "len(text or '')")
    );
    let h12 = w.commit(
        "f12",
        &[("src/widget/core.py", Some(core12.as_bytes()))],
        "Add title\n\nCloses #11",
    );
    let p12 = mk(12, "", None, "carol", "main", &base12, &h12);
    ev.trimmed_pr(&p12, "opened", "2025-11-01T10:00:00Z");
    w.merge("main", "f12", 12);
    ev.trimmed_pr(&p12, "closed", "2025-11-02T10:00:00Z");
    want(WIDGET, 12, None);

    // Rejections.
    let base = w.rev("main");
    let change = |branch: &str, msg: &str| {
        w.branch(branch, &base);
        w.commit(
            branch,
            &[(
                "src/widget/__init__.py",
                Some(format!("from .core import render\n# {msg}\n").as_bytes()),
            )],
            msg,
        )
    };
    let h14 = change("f14", "unmerged");
    ev.pr(
        &mk(14, "Tweak", Some("fixes #13"), "ann", "main", &base, &h14),
        "closed",
        false,
        &day(20),
    );
    want(WIDGET, 14, Some(Reason::NotMerged));

    w.branch("f16", &base);
    let h16 = w.commit(
        "f16",
        &[(
            "pyproject.toml",
            Some(b"[project]\nname = \"widget\"\nversion = \"2\"\n"),
        )],
        "Bump",
    );
    ev.pr(
        &mk(
            16,
            "Bump pyyaml from 5 to 6",
            None,
            "dependabot[bot]",
            "main",
            &base,
            &h16,
        ),
        "closed",
        true,
        &day(21),
    );
    want(WIDGET, 16, Some(Reason::Bot));

    ev.pr(
        &mk(
            18,
            "Lost",
            Some("fixes #17"),
            "ann",
            "main",
            &base,
            "1234567890abcdef1234567890abcdef12345678",
        ),
        "closed",
        true,
        &day(22),
    );
    want(WIDGET, 18, Some(Reason::MissingCommit));

    ev.pr(
        &mk(20, "Nothing", Some("fixes #19"), "ann", "main", &base, &c0),
        "closed",
        true,
        &day(23),
    );
    want(WIDGET, 20, Some(Reason::EmptyDiff));

    w.branch("f22", &base);
    let many: Vec<(String, String)> = (0..51)
        .map(|i| (format!("src/widget/gen/m{i}.py"), format!("X = {i}\n")))
        .collect();
    let files: Vec<(&str, Option<&[u8]>)> = many
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_bytes())))
        .collect();
    let h22 = w.commit("f22", &files, "Generate");
    ev.pr(
        &mk(
            22,
            "Generate modules",
            Some("fixes #21"),
            "ann",
            "main",
            &base,
            &h22,
        ),
        "closed",
        true,
        &day(24),
    );
    want(WIDGET, 22, Some(Reason::TooLarge));

    w.branch("f24", &base);
    let h24 = w.commit(
        "f24",
        &[
            ("docs/guide.md", Some(b"Guide\n")),
            ("tests/test_core.py", Some(b"# more\n")),
            ("CHANGELOG.md", Some(b"- x\n")),
        ],
        "Docs and tests",
    );
    ev.pr(
        &mk(24, "Docs", Some("fixes #23"), "ann", "main", &base, &h24),
        "closed",
        true,
        &day(25),
    );
    want(WIDGET, 24, Some(Reason::NoCodeChange));

    let h26 = change("f26", "linked nowhere");
    let body26 = "see #25. Related to #25. fixed in #25\n\nFixes #<issue number>\n<!-- fixes #25 -->\nfixes other/repo#25, fixes #26";
    ev.pr(
        &mk(26, "Small change", Some(body26), "ann", "main", &base, &h26),
        "closed",
        true,
        &day(26),
    );
    want(WIDGET, 26, Some(Reason::NoLinkedIssue));

    let h30 = change("f30", "no issue text");
    ev.pr(
        &mk(
            30,
            "Small change",
            Some("fixes #29"),
            "ann",
            "main",
            &base,
            &h30,
        ),
        "closed",
        true,
        &day(27),
    );
    want(WIDGET, 30, Some(Reason::NoIssueText));

    // Trimmed payloads, closed: not merged per the clone; squash-merged per a `(#N)` subject.
    let h32 = change("f32", "never merged");
    let p32 = mk(32, "", None, "dan", "main", &base, &h32);
    ev.trimmed_pr(&p32, "opened", "2025-11-05T10:00:00Z");
    ev.trimmed_pr(&p32, "closed", "2025-11-06T10:00:00Z");
    want(WIDGET, 32, Some(Reason::NotMerged));
    ev.issue(
        WIDGET,
        WIDGET_ID,
        33,
        "render of None",
        "render(None) raises.",
        "2025-11-07T09:00:00Z",
    );
    let base34 = w.rev("main");
    w.branch("f34", &base34);
    let init34 = "from .core import render\n\n__all__ = [\"render\"]\n";
    let h34 = w.commit(
        "f34",
        &[("src/widget/__init__.py", Some(init34.as_bytes()))],
        "Export render\n\nfixes #33",
    );
    let p34 = mk(34, "", None, "erin", "main", &base34, &h34);
    ev.trimmed_pr(&p34, "opened", "2025-11-07T10:00:00Z");
    let squash34 = w.squash("main", "f34", "Export render", 34);
    ev.trimmed_pr(&p34, "closed", "2025-11-08T10:00:00Z");
    want(WIDGET, 34, None);
    // Trimmed and closed without a clone: the merge status is unknown, the clone is missing.
    let p3 = Pr {
        repo: "acme/noclone",
        repo_id: 1002,
        number: 3,
        title: "",
        body: None,
        login: "ann",
        base: ("main", leak("a".repeat(40))),
        head: leak("c".repeat(40)),
    };
    ev.trimmed_pr(&p3, "closed", "2025-11-09T10:00:00Z");
    want("acme/noclone", 3, Some(Reason::MissingClone));

    // Other repositories: no clone; SWE-bench by name, by id, by an id seen under its name.
    let other = |repo: &'static str, id: u64, ev: &mut Events, n: u32| {
        let p = Pr {
            repo,
            repo_id: id,
            number: 1,
            title: "Fix",
            body: Some("fixes #2"),
            login: "ann",
            base: ("main", leak("a".repeat(40))),
            head: leak("b".repeat(40)),
        };
        ev.pr(&p, "closed", true, &day(n));
    };
    other("acme/noclone", 1002, &mut ev, 40);
    want("acme/noclone", 1, Some(Reason::MissingClone));
    other("django/django", 4164482, &mut ev, 41);
    want("django/django", 1, Some(Reason::ExcludedRepo));
    other("someone/requests-renamed", 1362490, &mut ev, 42);
    want("someone/requests-renamed", 1, Some(Reason::ExcludedRepo));
    ev.push(serde_json::json!({"id": "1", "type": "WatchEvent", "repo": {"id": 777, "name": "astropy/astropy"}, "payload": {}, "created_at": day(43)}));
    other("old/astropy", 777, &mut ev, 44);
    want("old/astropy", 1, Some(Reason::ExcludedRepo));

    // Noise: an invalid line, a repeated event, a truncated file, events with missing fields.
    ev.push_raw("2017-02-01-10.json.gz", "{\"id\": \"cut-off");
    let repeated = ev.pr(
        &mk(
            4,
            "Add wrap",
            Some("This closes #3."),
            "ann",
            "main",
            &base4,
            &h4,
        ),
        "closed",
        true,
        &later(5),
    );
    ev.push(repeated);
    ev.push(serde_json::json!({"id": "2", "type": "PullRequestEvent", "created_at": day(45)}));
    ev.push(serde_json::json!({"id": "3", "type": "PullRequestEvent", "repo": {"name": "x/y"}, "payload": {"action": "opened"}, "created_at": day(45)}));
    let events = root.join("events");
    ev.write(&events);
    let cut = gzip(&["{\"id\":\"9\",\"type\":\"WatchEvent\"}"; 50]);
    std::fs::write(events.join("2017-03-01-0.json.gz"), &cut[..cut.len() / 2]).unwrap();

    w.mirror(
        root,
        &[
            (2, &h2),
            (4, &h4),
            (6, &h6),
            (8, &h8),
            (10, &h10),
            (12, &h12),
            (28, &h28),
            (32, &h32),
            (34, &h34),
        ],
        &["f4", "f34"],
    );
    Built { expected, squash34 }
}

fn inputs(root: &Path) -> Inputs {
    Inputs {
        events: vec![root.join("events")],
        repos: root.join("repos"),
    }
}

#[test]
fn every_reason_and_shape() {
    let dir = tempfile::tempdir().unwrap();
    let built = build(dir.path());
    let config = Config {
        jobs: 2,
        ..Config::default()
    };
    let (a, b) = (dir.path().join("out-a"), dir.path().join("out-b"));
    let outcome = support::run(&inputs(dir.path()), &config, &a);
    let mut got = BTreeMap::new();
    for t in &outcome.tasks {
        got.insert((t.repo.clone(), t.pull_number), None);
    }
    for r in &outcome.rejected {
        got.insert((r.repo.clone(), r.pull_number), Some(r.reason));
    }
    got.remove(&("x/y".to_owned(), 0));
    assert_eq!(got, built.expected, "rejected: {:#?}", outcome.rejected);

    let task = |n: u64| outcome.tasks.iter().find(|t| t.pull_number == n).unwrap();
    // Merge base, not base.sha; test files stay out of the oracle.
    let t2 = task(2);
    assert_eq!(t2.edited_test_files, ["tests/test_core.py"]);
    assert!(t2.oracle_new_content["src/widget/core.py"].contains(".lower()"));
    assert!(!t2.oracle_new_content.contains_key("tests/test_core.py"));
    assert!(t2.test_patch.contains("tests/test_core.py") && !t2.patch.contains("tests/"));
    assert_eq!(
        t2.problem_statement,
        "render keeps capitals\nrender('A') gives 'A'.\n"
    );
    // Rename = deletion + addition; a deleted file's new content is "".
    let t6 = task(6);
    assert_eq!(t6.oracle_new_content["src/widget/util.py"], "");
    assert_eq!(t6.oracle_new_content["src/widget/old.py"], "");
    assert!(t6.oracle_new_content["src/widget/helpers.py"].contains("max(size, 1)"));
    assert!(!t6.code_context.contains_key("src/widget/helpers.py"));
    // Binary files appear nowhere in the context or oracle.
    let t8 = task(8);
    assert_eq!(t8.binary_files, ["src/widget/data/blob.bin"]);
    assert!(
        !t8.code_context
            .keys()
            .chain(t8.oracle_new_content.keys())
            .any(|p| p.ends_with(".bin"))
    );
    // The closed event's head, not the force-pushed-away one.
    assert!(task(10).oracle_new_content["src/widget/core.py"].contains("text or ''"));
    assert_eq!(task(10).issue_numbers, [9]);
    // Trimmed payloads: merged per the clone, the merge commit found.
    assert!(task(12).merge_commit.is_some());
    assert_eq!(
        task(34).merge_commit.as_deref(),
        Some(built.squash34.as_str())
    );
    assert_eq!(task(34).issue_numbers, [33]);
    // Relevant files: existing, unedited, code.
    for t in &outcome.tasks {
        for p in &t.relevant_files {
            assert!(
                !t.edited_files.contains(p) && t.code_context.contains_key(p),
                "{p}"
            );
        }
    }
    let funnel = &outcome.funnel;
    assert_eq!(funnel.events.invalid_lines, 1);
    assert_eq!(funnel.events.duplicate_events, 1);
    assert_eq!(funnel.events.broken_files, 1);
    assert!(
        funnel
            .problems
            .iter()
            .any(|p| p.file.ends_with("2017-03-01-0.json.gz"))
    );

    // Written output is trainer-ready and stable.
    support::run(
        &inputs(dir.path()),
        &Config {
            jobs: 1,
            ..Config::default()
        },
        &b,
    );
    // Many partitions on disk (one in memory at a time) write the same files as one.
    let c = dir.path().join("out-c");
    support::run(
        &inputs(dir.path()),
        &Config {
            partitions: 7,
            ..Config::default()
        },
        &c,
    );
    for file in ["tasks.jsonl", "rejected.jsonl"] {
        for other in [&b, &c] {
            assert_eq!(
                std::fs::read(a.join(file)).unwrap(),
                std::fs::read(other.join(file)).unwrap(),
                "{file} of {}",
                other.display()
            );
        }
    }
    let (mut fa, mut fb) = (
        support::read_output(&a).funnel,
        support::read_output(&b).funnel,
    );
    fa.timings_ms.clear();
    fb.timings_ms.clear();
    assert_eq!(fa, fb);
    support::check_trainer_ready(&a);

    // Shards merge into what one process writes.
    let mut shard_dirs = Vec::new();
    for k in 0..3 {
        let config = Config {
            shard: Some(Shard::parse(&format!("{k}/3")).unwrap()),
            partitions: 2,
            ..Config::default()
        };
        let out = dir.path().join(format!("shard-{k}"));
        support::run(&inputs(dir.path()), &config, &out);
        shard_dirs.push(out);
    }
    let merged = dir.path().join("merged");
    swerve_curate::merge::merge(
        &shard_dirs,
        &swerve_curate::Output {
            dir: merged.clone(),
            parquet: false,
        },
    )
    .unwrap();
    for file in ["tasks.jsonl", "rejected.jsonl"] {
        assert_eq!(
            std::fs::read(a.join(file)).unwrap(),
            std::fs::read(merged.join(file)).unwrap(),
            "{file}"
        );
    }
    let mut fm = support::read_output(&merged).funnel;
    fm.timings_ms.clear();
    assert_eq!(fa, fm);
}

#[test]
fn window_and_budget() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let config = Config {
        since: Some("2025-01-01".into()),
        max_prompt_tokens: 10,
        relevant_files: 0,
        ..Config::default()
    };
    let outcome = support::run(&inputs(dir.path()), &config, &dir.path().join("out-1"));
    assert!(outcome.tasks.is_empty());
    let reason = |repo: &str, n: u64| {
        outcome
            .rejected
            .iter()
            .find(|r| r.repo == repo && r.pull_number == n)
            .unwrap()
            .reason
    };
    assert_eq!(reason(WIDGET, 12), Reason::TooLong);
    assert_eq!(reason(WIDGET, 2), Reason::OutOfWindow);
    assert_eq!(reason("django/django", 1), Reason::ExcludedRepo);
}

#[test]
fn cli_run_shards_merge_and_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let curate = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_curate"))
            .args(args)
            .output()
            .unwrap()
    };
    let root = dir.path().to_str().unwrap().to_owned();
    let (events, repos) = (format!("{root}/events"), format!("{root}/repos"));
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "run", "--events", &events, "--repos", &repos, "--output", out,
        ];
        args.extend_from_slice(extra);
        curate(&args)
    };
    let whole = format!("{root}/whole");
    let out = run(&whole, &["--jobs", "2", "--relevant", "1", "--parquet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tasks: 7"), "{stderr}");
    assert!(
        support::read_output(Path::new(&whole))
            .tasks
            .iter()
            .all(|t| t.relevant_files.len() <= 1)
    );
    let (s0, s1) = (format!("{root}/s0"), format!("{root}/s1"));
    assert!(
        run(&s0, &["--shard", "0/2", "--relevant", "1"])
            .status
            .success()
    );
    assert!(
        run(&s1, &["--shard", "1/2", "--relevant", "1"])
            .status
            .success()
    );
    let merged = format!("{root}/merged");
    let out = curate(&["merge", &s0, &s1, "--output", &merged, "--parquet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["tasks.jsonl", "rejected.jsonl"] {
        let read = |d: &str| std::fs::read(Path::new(d).join(file)).unwrap();
        assert_eq!(read(&whole), read(&merged), "{file}");
    }
    check_parquet(Path::new(&whole));
    check_parquet(Path::new(&merged));
    assert!(
        !Path::new(&s0).join("tasks.parquet").exists(),
        "only when asked"
    );
    // Bad arguments are the only thing that stops a run.
    assert!(!run(&whole, &["--shard", "2/2"]).status.success());
    assert!(!run(&whole, &["--since", "2020/01/01"]).status.success());
    assert!(
        !curate(&["run", "--repos", &repos, "--output", &whole])
            .status
            .success()
    );
    let missing = format!("{root}/no-such-events");
    assert!(
        !curate(&[
            "run", "--events", &missing, "--repos", &repos, "--output", &whole
        ])
        .status
        .success()
    );
    // A missing repos folder is not bad arguments: every PR is `missing_clone` or earlier.
    let nowhere = format!("{root}/no-repos");
    let out = curate(&[
        "run", "--events", &events, "--repos", &nowhere, "--output", &whole,
    ]);
    assert!(out.status.success());
    assert!(support::read_output(Path::new(&whole)).tasks.is_empty());
}

#[test]
fn cli_run_on_slurm_writes_what_one_process_writes() {
    if !swerve_tests::slurm_up("curate run --executor slurm") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let root = dir.path().to_str().unwrap().to_owned();
    let (events, repos) = (format!("{root}/events"), format!("{root}/repos"));
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--events",
            &events,
            "--repos",
            &repos,
            "--output",
            out,
            "--relevant",
            "1",
        ];
        args.extend_from_slice(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_curate"))
            .args(&args)
            .output()
            .unwrap()
    };
    let (whole, cluster) = (format!("{root}/whole"), format!("{root}/cluster"));
    assert!(run(&whole, &["--parquet"]).status.success());
    let out = run(
        &cluster,
        &["--parquet", "--executor", "slurm", "--slurm-tasks", "3"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Submitted Slurm job"), "{stderr}");
    for file in ["tasks.jsonl", "rejected.jsonl", "funnel.json"] {
        let read = |d: &str| std::fs::read(Path::new(d).join(file)).unwrap();
        if file == "funnel.json" {
            // Timings differ; the counts do not.
            let counts = |d: &str| {
                let mut v: serde_json::Value = serde_json::from_slice(&read(d)).unwrap();
                v.as_object_mut().unwrap().remove("timings_ms");
                v
            };
            assert_eq!(counts(&whole), counts(&cluster), "{file}");
        } else {
            assert_eq!(read(&whole), read(&cluster), "{file}");
        }
    }
    check_parquet(Path::new(&cluster));
    assert!(
        !Path::new(&cluster).join(".slurm").exists(),
        "the shards are merged and removed"
    );
    // A partition that does not exist is refused before any work.
    let bad = format!("{root}/bad");
    let out = run(
        &bad,
        &["--executor", "slurm", "--slurm-arg=--partition=nope"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("sbatch refused"),
        "{stderr}"
    );
    assert!(!Path::new(&bad).exists(), "{stderr}");
}

/// `tasks.parquet` holds the rows of `tasks.jsonl`: the same rows for the dataset reader, and
/// every field of every task (maps, lists, a null merge commit) read back as written.
fn check_parquet(dir: &Path) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let rows = |file: &str| swerve_swebench::dataset::read_rows(&dir.join(file)).unwrap();
    let jsonl = rows("tasks.jsonl");
    assert!(jsonl.iter().any(|row| !row.code_context.is_empty()));
    assert_eq!(rows("tasks.parquet"), jsonl);
    let file = std::fs::File::open(dir.join("tasks.parquet")).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let tasks: Vec<swerve_curate::Task> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| serde_json::from_value(row.unwrap().to_json_value()).unwrap())
        .collect();
    assert_eq!(tasks, support::read_output(dir).tasks);
}

#[test]
fn relevant_files_from_a_model_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    // A missing file, an edited file, a binary file and a real one: only the real one is kept.
    let answer =
        "1. `src/widget/missing.py`\n- src/widget/core.py\n- src/widget/__init__.py\nREADME.md";
    let (url, served) = support::mock_chat_server(answer);
    let config = Config {
        relevant_endpoint: Some(swerve_curate::endpoint::EndpointConfig::new(&url, "m")),
        ..Config::default()
    };
    let outcome = support::run(&inputs(dir.path()), &config, &dir.path().join("out-2"));
    assert!(served.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    let t2 = outcome.tasks.iter().find(|t| t.pull_number == 2).unwrap();
    assert_eq!(t2.relevant_files, ["src/widget/__init__.py", "README.md"]);
    assert_eq!(t2.code_context["README.md"], "# widget\n");

    // An endpoint that does not answer: the deterministic rule, and the run goes on.
    let config = Config {
        relevant_endpoint: Some(swerve_curate::endpoint::EndpointConfig {
            timeout_s: 2,
            ..swerve_curate::endpoint::EndpointConfig::new("http://127.0.0.1:9/v1", "m")
        }),
        ..Config::default()
    };
    let fallback = support::run(&inputs(dir.path()), &config, &dir.path().join("out-3"));
    let plain = support::run(
        &inputs(dir.path()),
        &Config::default(),
        &dir.path().join("out-4"),
    );
    assert_eq!(fallback.tasks, plain.tasks);
}

/// Curated tasks are trainer-ready as they are: one SFT step on the tasks' gold completions and
/// one GRPO step rewarded by the bundled `swe-rl` plugin, through the library calls behind
/// `trainer sft --dataset tasks.jsonl` and `trainer grpo --dataset tasks.jsonl --plugin swe-rl`.
#[test]
fn one_sft_and_one_grpo_step_on_curated_tasks() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let out = dir.path().join("curated");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_curate"))
        .args(["run", "--events"])
        .arg(dir.path().join("events"))
        .arg("--repos")
        .arg(dir.path().join("repos"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let tasks = out.join("tasks.jsonl");
    assert!(fs_err::read_to_string(&tasks).unwrap().lines().count() > 0);

    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../trainer/fixtures/tiny-qwen2");
    let style = PromptStyle {
        format: PromptFormat::Bare,
        focus: Some(2),
    };
    let sft = run_sft(
        &SftCommand {
            source: ModelSource {
                model: model.clone(),
                resume: None,
            },
            data: SftData::Gold(tasks.clone(), style),
            config: SftConfig::from_toml_str("max_steps = 1\nper_device_train_batch_size = 2\n")
                .unwrap(),
            output: OutputSpec {
                dir: dir.path().join("sft"),
                save_steps: 0,
                report_to: Default::default(),
            },
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert!(sft.join("model.safetensors").is_file(), "{}", sft.display());

    let mut steps = 0;
    let grpo = run_grpo(
        &GrpoCommand {
            source: ModelSource {
                model,
                resume: None,
            },
            dataset: tasks,
            plugins: vec!["swe-rl".parse().unwrap()],
            config: GrpoConfig::from_toml_str(
                "max_steps = 1\nnum_generations = 2\nper_device_train_batch_size = 2\n\
                 max_completion_length = 8\n",
            )
            .unwrap(),
            prompt_style: style,
            output: OutputSpec {
                dir: dir.path().join("grpo"),
                save_steps: 0,
                report_to: Default::default(),
            },
            reward_jobs: 1,
            execute: None,
        },
        &mut |metrics, _| {
            steps += 1;
            // Every completion of 8 tokens is malformed: the swe-rl reward is -1, not missing.
            assert_eq!(metrics.values["reward"], -1.0, "{:?}", metrics.values);
        },
    )
    .unwrap();
    assert_eq!(steps, 1);
    assert!(
        grpo.join("model.safetensors").is_file(),
        "{}",
        grpo.display()
    );
}
