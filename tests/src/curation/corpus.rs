//! curate's own corpus: one repository with the history shapes curation must handle (a merge
//! commit after main moved on, a squash merge with the head only under `refs/pull/N/head`, a
//! force-pushed head, trimmed 2025 payloads, renames, deletions, a binary file, bot titles,
//! every link form and non-links, a duplicate backport), PRs of every rejection reason, and
//! bad input (an invalid line, a repeated event, a truncated gzip).

use std::collections::BTreeMap;
use std::path::Path;

use super::history::{Events, Pr, WorkRepo, gzip};

/// The corpus's repository of history shapes.
pub const WIDGET: &str = "acme/widget";
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

/// What the corpus must come to.
pub struct Built {
    /// Each PR's outcome by `(repo, number)`: `None` a task, else the reason in
    /// `rejected.jsonl`.
    pub expected: BTreeMap<(String, u64), Option<&'static str>>,
    /// The squash commit that merged the trimmed PR #34 (found from history alone).
    pub squash34: String,
}

/// Writes the corpus under `root`: `events/` (GH Archive hour files) and `repos/` (bare
/// mirrors), and says what each PR must come to.
pub fn build(root: &Path) -> Built {
    let w = WorkRepo::new(root, WIDGET);
    let mut ev = Events::default();
    let mut expected = BTreeMap::new();
    let mut want = |repo: &str, n: u64, reason: Option<&'static str>| {
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
    want(WIDGET, 28, Some("duplicate"));

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
    want(WIDGET, 14, Some("not_merged"));

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
    want(WIDGET, 16, Some("bot"));

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
    want(WIDGET, 18, Some("missing_commit"));

    ev.pr(
        &mk(20, "Nothing", Some("fixes #19"), "ann", "main", &base, &c0),
        "closed",
        true,
        &day(23),
    );
    want(WIDGET, 20, Some("empty_diff"));

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
    want(WIDGET, 22, Some("too_large"));

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
    want(WIDGET, 24, Some("no_code_change"));

    let h26 = change("f26", "linked nowhere");
    let body26 = "see #25. Related to #25. fixed in #25\n\nFixes #<issue number>\n<!-- fixes #25 -->\nfixes other/repo#25, fixes #26";
    ev.pr(
        &mk(26, "Small change", Some(body26), "ann", "main", &base, &h26),
        "closed",
        true,
        &day(26),
    );
    want(WIDGET, 26, Some("no_linked_issue"));

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
    want(WIDGET, 30, Some("no_issue_text"));

    // Trimmed payloads, closed: not merged per the clone; squash-merged per a `(#N)` subject.
    let h32 = change("f32", "never merged");
    let p32 = mk(32, "", None, "dan", "main", &base, &h32);
    ev.trimmed_pr(&p32, "opened", "2025-11-05T10:00:00Z");
    ev.trimmed_pr(&p32, "closed", "2025-11-06T10:00:00Z");
    want(WIDGET, 32, Some("not_merged"));
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
    want("acme/noclone", 3, Some("missing_clone"));

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
    want("acme/noclone", 1, Some("missing_clone"));
    other("django/django", 4164482, &mut ev, 41);
    want("django/django", 1, Some("excluded_repo"));
    other("someone/requests-renamed", 1362490, &mut ev, 42);
    want("someone/requests-renamed", 1, Some("excluded_repo"));
    ev.push(serde_json::json!({"id": "1", "type": "WatchEvent", "repo": {"id": 777, "name": "astropy/astropy"}, "payload": {}, "created_at": day(43)}));
    other("old/astropy", 777, &mut ev, 44);
    want("old/astropy", 1, Some("excluded_repo"));

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
