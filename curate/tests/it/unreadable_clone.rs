//! A mirror that lost an object a PR needs (a damaged or partial copy) rejects that PR as
//! `unreadable_clone`, with the object in the detail, and the run goes on.

use crate::support;
use std::process::Command;

use swerve_curate::{Config, Inputs, Reason};
use swerve_tests::curation::history::{Events, Pr, WorkRepo};

#[test]
fn a_blob_missing_from_the_mirror_is_an_unreadable_clone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let w = WorkRepo::new(root, "acme/gadget");
    let base = w.commit(
        "main",
        &[("src/gadget.py", Some(b"def size():\n    return 0\n"))],
        "Initial commit",
    );
    w.branch("fix", &base);
    let fixed: &[u8] = b"def size():\n    return 1\n";
    let head = w.commit("fix", &[("src/gadget.py", Some(fixed))], "Fix the size");
    let merge = w.merge("main", "fix", 1);
    let mirror = w.mirror(root, &[(1, &head)], &["fix"]);

    // Unpack the mirror into loose objects, then lose the fixed file's blob.
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(&mirror)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let packs = mirror.join("objects/pack");
    let moved = root.join("packs");
    std::fs::rename(&packs, &moved).unwrap();
    std::fs::create_dir(&packs).unwrap();
    for pack in std::fs::read_dir(&moved).unwrap() {
        let pack = pack.unwrap().path();
        if pack.extension().is_some_and(|e| e == "pack") {
            let status = Command::new("git")
                .arg("--git-dir")
                .arg(&mirror)
                .arg("unpack-objects")
                .arg("-q")
                .stdin(std::fs::File::open(&pack).unwrap())
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
    let blob = git(&["rev-parse", &format!("{head}:src/gadget.py")]);
    std::fs::remove_file(mirror.join("objects").join(&blob[..2]).join(&blob[2..])).unwrap();

    let mut ev = Events::default();
    ev.issue(
        "acme/gadget",
        7,
        3,
        "size is 0",
        "It should be 1.",
        "2019-01-01T10:00:00Z",
    );
    let pr = Pr {
        repo: "acme/gadget",
        repo_id: 7,
        number: 1,
        title: "Fix the size",
        body: Some("Fixes #3"),
        login: "dev",
        base: ("main", &base),
        head: &head,
    };
    ev.pr(&pr, "opened", false, "2019-01-02T10:00:00Z");
    ev.pr(&pr, "closed", true, "2019-01-03T10:00:00Z");
    ev.write(&root.join("events"));
    assert!(!merge.is_empty());

    let outcome = support::run(
        &Inputs {
            events: vec![root.join("events")],
            repos: root.join("repos"),
        },
        &Config::default(),
        &root.join("out"),
    );
    assert!(outcome.tasks.is_empty(), "{:?}", outcome.tasks);
    let [rejected] = &outcome.rejected[..] else {
        panic!("{:?}", outcome.rejected)
    };
    assert_eq!(rejected.reason, Reason::UnreadableClone);
    assert!(rejected.detail.contains(&blob), "{}", rejected.detail);
}
