//! Hardened runs: what changed **outside the repository** while the eval script's setup part
//! ran. That part runs after the model patch is applied, as root, and installs commands
//! (`python -m pip …`, build backends, `setup.py`) can execute files the patch added; such code
//! can plant a hook outside `/testbed` (a `.pth` file, `sitecustomize`, a replaced module or its
//! bytecode, a program on `PATH`, git configuration, `/etc`) that the in-repository restore
//! never sees and that reports anything once the tests start.
//!
//! Right after the setup part, once every process it started is dead, the host lists the
//! container's file-system changes against its image (`docker diff`, which nothing in the
//! container can forge), and it reads a few files the rules need before and after the setup.
//! Before the setup nothing outside the repository has changed but what the container runtime
//! adds at start ([`RUNTIME`]) and root's git configuration, which the host itself writes (git
//! hooks off) and so compares by content ([`WATCHED`]). Every other changed path is a finding
//! unless a rule below allows it; an instance with findings is not resolved. The rules (also in
//! `docs/hardening.md`):
//!
//! - the repository itself (`/testbed`): the in-repository defences cover it;
//! - scratch: `/tmp`, `/var/tmp`, `/dev`, `/run`, `/proc`, `/sys`, `/root/.cache`;
//! - what the runtime adds at start: its init binary and the files it bind-mounts
//!   (`/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf`, `/.dockerenv`), and the folders that
//!   hold them as changed folders (Podman lists `/etc`, not the files);
//! - a directory listed only because something below it changed;
//! - `/root/.gitconfig` when the only new entries are `safe.directory` ones (what SWE-bench's
//!   eval scripts add) and none was removed;
//! - in a `site-packages` / `dist-packages` folder, the project's own install (its distribution
//!   is named like the repository, `-` and `.` read as `_`, case ignored): its `*.dist-info`,
//!   `*.egg-info` and `.egg-link` files, unless an `entry_points.txt` among them declares
//!   `[pytest11]` plugins; its `__editable__` finder module (and that module's bytecode) when
//!   its content is what it was before the setup part;
//! - any `.pth` file whose lines are all paths (a path line cannot run code; a line starting with
//!   `import` can), or whose content is unchanged;
//! - `/image_assets` and the files in it, added by the host (SWE-bench 5's patch assets): their
//!   contents and the repository copies the setup restores are compared with what was staged,
//!   through the engine, and any difference is a finding.
//!
//! Everything else (and every deletion outside these rules) is a finding.

use std::collections::{BTreeMap, BTreeSet};

use swerve_sandbox::{FsChange, FsChangeKind};

use super::eval_script::REPO_DIRECTORY;

/// Scratch paths a setup may change freely.
const SCRATCH: [&str; 7] = [
    "/tmp",
    "/var/tmp",
    "/dev",
    "/run",
    "/proc",
    "/sys",
    "/root/.cache",
];

/// What a container runtime adds when the container starts (Docker's `--init` binary, the files
/// it bind-mounts when the image lacks them, its marker file); Podman's go under `/run`.
pub(super) const RUNTIME: [&str; 5] = [
    "/usr/sbin/docker-init",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/.dockerenv",
];

/// Where site packages live in the images swerve and SWE-bench build (swerve's `/opt/testbed`
/// virtual environment, conda and its environments, Debian's and a source-built Python's
/// folders), as shell globs.
const SITE_PACKAGES: &str = "/opt/*/lib/python*/site-packages /opt/*/envs/*/lib/python*/site-packages \
    /usr/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
    /usr/local/lib/python3*/dist-packages";

/// The exec that reads what the rules need, as `sh -c SCRIPT sh FILE...`: records
/// `KIND\0PATH\0DATA\0`, NUL bytes removed from file contents. `git`: `/root/.gitconfig`'s
/// text; `pth`: a `.pth` file's text; `sha`: the SHA-256 of an `__editable__` file; `ep`, with
/// `entry_points`, every site-packages `*.dist-info` / `*.egg-info` `entry_points.txt` (its text:
/// the one rule that reads them is that a project's own metadata may not declare `[pytest11]`
/// plugins); for each `FILE` argument, `file` (its SHA-256: the [`WATCHED`] files, which the
/// file-system diff cannot show changing again).
pub(super) fn snapshot_script(entry_points: bool) -> String {
    let eps = if entry_points {
        r#"for f in "$sp"/*.dist-info/entry_points.txt "$sp"/*.egg-info/entry_points.txt; do
        [ -f "$f" ] || continue; printf 'ep\0%s\0' "$f"; head -c 65536 "$f" | tr -d '\000';
        printf '\0'; done;"#
    } else {
        ""
    };
    let lines = [
        r#"cd /;"#,
        r#"printf 'git\0-\0'; head -c 65536 /root/.gitconfig 2>/dev/null | tr -d '\000'; printf '\0';"#,
        r#"for sp in SITE_PACKAGES; do [ -d "$sp" ] || continue;"#,
        r#"for f in "$sp"/*.pth; do [ -f "$f" ] || continue; printf 'pth\0%s\0' "$f";"#,
        r#"head -c 65536 "$f" | tr -d '\000'; printf '\0'; done;"#,
        r#"for f in "$sp"/__editable__*; do [ -f "$f" ] || continue; printf 'sha\0%s\0' "$f";"#,
        r#"sha256sum < "$f" | cut -c1-64 | tr -d '\n'; printf '\0'; done;"#,
        eps,
        r#"done;"#,
        r#"for f in "$@"; do [ -f "$f" ] || continue; printf 'file\0%s\0' "$f";"#,
        r#"sha256sum < "$f" | cut -c1-64 | tr -d '\n'; printf '\0'; done; true"#,
    ];
    lines.join(" ").replace("SITE_PACKAGES", SITE_PACKAGES)
}

/// The exec right after the setup part: `kill` (every process the setup left), then
/// [`snapshot_script`] with the entry points, in one round trip; nothing runs in the container
/// between the two, so the snapshot is the state the file-system changes are listed in.
pub(super) fn after_setup_script(kill: &str) -> String {
    format!("{kill}; {}", snapshot_script(true))
}

/// Files outside the repository that the host itself changes before the setup part (git hooks
/// off, in root's git configuration): the file-system diff lists them whatever the setup does,
/// so their content is compared instead. [`snapshot_script`] is given these.
pub(super) const WATCHED: [&str; 1] = [GITCONFIG];

/// What [`snapshot_script`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Snapshot {
    /// `/root/.gitconfig`'s lines (empty when there is none).
    pub git: Vec<String>,
    /// `.pth` files' text.
    pub pth: BTreeMap<String, String>,
    /// `__editable__` files' SHA-256.
    pub sha: BTreeMap<String, String>,
    /// The text of the site-packages `entry_points.txt` files (after the setup only).
    pub entry_points: BTreeMap<String, String>,
    /// Watched files' SHA-256.
    pub files: BTreeMap<String, String>,
}

impl Snapshot {
    /// Parses [`snapshot_script`]'s output; a record cut short is dropped.
    pub(super) fn parse(output: &[u8]) -> Snapshot {
        let mut snap = Snapshot::default();
        let mut fields = output.split(|b| *b == 0);
        while let (Some(kind), Some(path), Some(data)) =
            (fields.next(), fields.next(), fields.next())
        {
            let path = String::from_utf8_lossy(path).into_owned();
            let data = String::from_utf8_lossy(data).into_owned();
            match kind {
                b"git" => snap.git = data.lines().map(str::to_owned).collect(),
                b"pth" => {
                    snap.pth.insert(path, data);
                }
                b"sha" => {
                    snap.sha.insert(path, data);
                }
                b"ep" => {
                    snap.entry_points.insert(path, data);
                }
                b"file" => {
                    snap.files.insert(path, data);
                }
                _ => {}
            }
        }
        snap
    }
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct EnvironmentCheck {
    /// Changes outside the repository that no rule allows (`A /path`, `C /path`, `D /path`).
    pub findings: Vec<String>,
    /// Changes outside the repository and scratch that a rule allowed, with the rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
}

fn kind_letter(kind: FsChangeKind) -> char {
    match kind {
        FsChangeKind::Modified => 'C',
        FsChangeKind::Added => 'A',
        FsChangeKind::Deleted => 'D',
    }
}

fn under(path: &str, dir: &str) -> bool {
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Outside the repository and scratch.
fn outside(path: &str) -> bool {
    !(under(path, REPO_DIRECTORY) || SCRATCH.iter().any(|dir| under(path, dir)))
}

/// `name` as a distribution name is compared: lower case, `-` and `.` as `_`.
fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '.'], "_")
}

/// The project's distribution name, from the repository `owner/name`.
pub(super) fn project_distribution(repo: &str) -> String {
    normalise(repo.rsplit('/').next().unwrap_or(repo))
}

/// `(site-packages folder, path below it)` when `path` is inside one.
fn in_site_packages(path: &str) -> Option<(&str, &str)> {
    ["/site-packages/", "/dist-packages/"]
        .iter()
        .find_map(|marker| {
            let at = path.find(marker)?;
            Some((&path[..at + marker.len() - 1], &path[at + marker.len()..]))
        })
}

/// Whether a `.pth` text can only add paths (no line Python's `site` would execute).
fn pth_is_paths_only(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim_start();
        !(line.starts_with("import ") || line.starts_with("import\t"))
    })
}

/// Why a site-packages entry is allowed, if it is.
fn site_packages_rule(
    change: &FsChange,
    below: &str,
    dist: &str,
    before: &Snapshot,
    after: &Snapshot,
) -> Option<&'static str> {
    let first = below.split('/').next().unwrap_or(below);
    let own_metadata = {
        let stem = first
            .strip_suffix(".dist-info")
            .or_else(|| first.strip_suffix(".egg-info"))
            .map(|s| s.split('-').next().unwrap_or(s))
            .or_else(|| first.strip_suffix(".egg-link"));
        stem.is_some_and(|s| normalise(s) == dist)
    };
    if own_metadata {
        if below.ends_with("/entry_points.txt")
            && after
                .entry_points
                .get(&change.path)
                .is_some_and(|t| t.contains("[pytest11]"))
        {
            return None;
        }
        return Some("the project's own install metadata");
    }
    let editable = |name: &str| {
        name.strip_prefix("__editable___")
            .is_some_and(|rest| normalise(rest).starts_with(&format!("{dist}_")))
    };
    let unchanged =
        |path: &str| before.sha.contains_key(path) && before.sha.get(path) == after.sha.get(path);
    if editable(first) && first.ends_with("_finder.py") {
        return unchanged(&change.path).then_some("the project's editable finder, unchanged");
    }
    if first == "__pycache__" {
        let name = below.rsplit('/').next().unwrap_or(below);
        let module = name.split('.').next().unwrap_or(name);
        if editable(module) && module.ends_with("_finder") {
            let (folder, _) = in_site_packages(&change.path)?;
            let source = format!("{folder}/{module}.py");
            return unchanged(&source)
                .then_some("bytecode of the project's unchanged editable finder");
        }
        return None;
    }
    if first.ends_with(".pth") && below == first {
        if change.kind == FsChangeKind::Deleted {
            return None;
        }
        let text = after.pth.get(&change.path)?;
        if pth_is_paths_only(text) {
            return Some("a .pth file of paths only");
        }
        return (before.pth.get(&change.path) == Some(text)).then_some("a .pth file, unchanged");
    }
    None
}

/// Checks `changes` (the file-system diff right after the setup part), with the files
/// [`snapshot_script`] read before and after the setup.
pub(super) fn check(
    repo: &str,
    changes: &[FsChange],
    before: &Snapshot,
    after: &Snapshot,
) -> EnvironmentCheck {
    let dist = project_distribution(repo);
    let paths: BTreeSet<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    let mut out = EnvironmentCheck::default();
    let mut record = |line: String, rule: Option<&str>| match rule {
        Some(rule) => out.allowed.push(format!("{line} ({rule})")),
        None => out.findings.push(line),
    };
    // The files the host changed before the setup: compared by content.
    for path in WATCHED {
        if before.files.get(path) != after.files.get(path) {
            let rule = (path == GITCONFIG)
                .then(|| gitconfig_rule(before, after))
                .flatten();
            record(format!("C {path}"), rule);
        }
    }
    for change in changes {
        let path = change.path.as_str();
        if !outside(path) || WATCHED.contains(&path) || RUNTIME.contains(&path) {
            continue;
        }
        // The runtime's own mount points were made in this directory (Podman lists `/etc`
        // itself, not the files it bind-mounts there).
        if change.kind == FsChangeKind::Modified
            && RUNTIME
                .iter()
                .any(|r| std::path::Path::new(r).parent() == Some(std::path::Path::new(path)))
        {
            continue;
        }
        // A directory changed because of what is below it: the entries below are checked.
        let prefix = format!("{path}/");
        if change.kind == FsChangeKind::Modified
            && paths
                .range::<&str, _>(prefix.as_str()..)
                .next()
                .is_some_and(|next| next.starts_with(&prefix))
        {
            continue;
        }
        let rule = if let Some((_, below)) = in_site_packages(path) {
            site_packages_rule(change, below, &dist, before, after)
        } else if change.kind == FsChangeKind::Added && under(path, super::assets::CONTAINER_DIR) {
            // Copied in by the host before the setup; their contents, and the copies the
            // setup's restore commands make, are compared with the staged files afterwards
            // (instance.rs, `check_assets`).
            Some("patch assets the harness staged")
        } else {
            None
        };
        record(format!("{} {path}", kind_letter(change.kind)), rule);
    }
    out
}

/// root's git configuration (SWE-bench's containers run as root).
const GITCONFIG: &str = "/root/.gitconfig";

/// `/root/.gitconfig` may only gain `safe.directory` entries (`[safe]` section lines and
/// `directory = …` lines, as `git config --global --add safe.directory` writes them); no line may
/// go.
fn gitconfig_rule(before: &Snapshot, after: &Snapshot) -> Option<&'static str> {
    let mut left: Vec<&String> = after.git.iter().collect();
    for line in &before.git {
        let at = left.iter().position(|l| *l == line)?;
        left.remove(at);
    }
    left.iter()
        .all(|l| {
            let l = l.trim();
            l == "[safe]"
                || l.strip_prefix("directory")
                    .is_some_and(|v| v.trim_start().starts_with('='))
        })
        .then_some("git configuration: safe.directory entries only")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str, kind: FsChangeKind) -> FsChange {
        FsChange {
            path: path.to_owned(),
            kind,
        }
    }

    const SP: &str = "/opt/miniconda3/envs/testbed/lib/python3.11/site-packages";

    #[test]
    fn planted_hooks_are_findings_and_installs_are_not() {
        use FsChangeKind::{Added, Deleted, Modified};
        let mut before = Snapshot {
            git: vec!["[core]".into(), "\thooksPath = /dev/null".into()],
            ..Snapshot::default()
        };
        before.files.insert("/root/.gitconfig".into(), "h1".into());
        before.sha.insert(
            format!("{SP}/__editable___inicfg_0_1_finder.py"),
            "aa".into(),
        );
        let mut after = before.clone();
        after.git.push("[safe]".into());
        after.git.push("\tdirectory = /testbed".into());
        after.files.insert("/root/.gitconfig".into(), "h2".into());
        after
            .pth
            .insert(format!("{SP}/evil.pth"), "import evil\n".into());
        after
            .pth
            .insert(format!("{SP}/easy-install.pth"), "/testbed\n".into());
        after.entry_points.insert(
            format!("{SP}/inicfg-0.1.dist-info/entry_points.txt"),
            "[console_scripts]\ninicfg = inicfg.cli:main\n".into(),
        );
        let after_changes = [
            c("/usr/sbin/docker-init", Added),
            c("/tmp", Modified),
            c("/tmp/patch.diff", Added),
            c("/tmp/pip-build-xyz", Added),
            c("/testbed/build", Added),
            c("/root", Modified),
            c("/root/.gitconfig", Modified),
            c("/root/.cache/pip/x", Added),
            c("/opt", Modified),
            c(SP, Modified),
            c(&format!("{SP}/evil.pth"), Added),
            c(&format!("{SP}/easy-install.pth"), Modified),
            c(&format!("{SP}/inicfg-0.1.dist-info"), Added),
            c(
                &format!("{SP}/inicfg-0.1.dist-info/entry_points.txt"),
                Added,
            ),
            c(&format!("{SP}/inicfg-0.0.dist-info/RECORD"), Deleted),
            c(&format!("{SP}/__editable___inicfg_0_1_finder.py"), Modified),
            c(
                &format!("{SP}/__pycache__/sitecustomize.cpython-311.pyc"),
                Added,
            ),
            c(&format!("{SP}/_pytest/runner.py"), Modified),
            c("/usr/local/bin/pytest", Added),
            // Podman lists the folder of its mount points; a folder with no runtime file in it
            // and nothing listed below it is a finding.
            c("/etc", Modified),
            c("/usr/lib", Modified),
            c("/etc/profile.d/x.sh", Added),
        ];
        let got = check("swerve/inicfg", &after_changes, &before, &after);
        let mut findings = got.findings.clone();
        findings.sort();
        let mut want = vec![
            format!("A {SP}/__pycache__/sitecustomize.cpython-311.pyc"),
            format!("C {SP}/_pytest/runner.py"),
            format!("A {SP}/evil.pth"),
            "A /usr/local/bin/pytest".to_owned(),
            "C /usr/lib".to_owned(),
            "A /etc/profile.d/x.sh".to_owned(),
        ];
        want.sort();
        assert_eq!(findings, want);
        assert_eq!(got.allowed.len(), 6, "{:?}", got.allowed);

        // A changed finder, an entry point for pytest, a git alias: findings.
        let mut bad = after.clone();
        bad.sha.insert(
            format!("{SP}/__editable___inicfg_0_1_finder.py"),
            "bb".into(),
        );
        bad.entry_points.insert(
            format!("{SP}/inicfg-0.1.dist-info/entry_points.txt"),
            "[pytest11]\nx = inicfg.plugin\n".into(),
        );
        bad.git.push("[alias]".into());
        bad.git.push("\tst = !sh evil".into());
        let got = check("swerve/inicfg", &after_changes, &before, &bad);
        for path in [
            "/root/.gitconfig".to_owned(),
            format!("{SP}/__editable___inicfg_0_1_finder.py"),
            format!("{SP}/inicfg-0.1.dist-info/entry_points.txt"),
        ] {
            assert!(
                got.findings.iter().any(|f| f.ends_with(&path)),
                "{path}: {got:?}"
            );
        }
    }

    #[test]
    fn snapshot_records_parse() {
        let out = b"git\0-\0[safe]\n\tdirectory = /testbed\n\0file\0/root/.bashrc\0ff\0pth\0/sp/a.pth\0/x\n\0sha\0/sp/__editable___a_finder.py\0abc\0ep\0/sp/a-1.dist-info/entry_points.txt\0[x]\n\0pth\0/sp/cut";
        let snap = Snapshot::parse(out);
        assert_eq!(snap.git.len(), 2);
        assert_eq!(snap.files["/root/.bashrc"], "ff");
        assert_eq!(snap.pth.len(), 1);
        assert_eq!(snap.sha["/sp/__editable___a_finder.py"], "abc");
        assert_eq!(snap.entry_points.len(), 1);
        assert!(pth_is_paths_only("/a\n# c\n") && !pth_is_paths_only("/a\nimport x\n"));
        assert_eq!(
            project_distribution("scikit-learn/scikit-learn"),
            "scikit_learn"
        );
        // The snapshot after the setup lists site-packages' entry points; before, none.
        assert!(snapshot_script(true).contains("*.dist-info/entry_points.txt"));
        assert!(!snapshot_script(false).contains("entry_points"));
        assert!(after_setup_script("kill-them").starts_with("kill-them; cd /;"));
    }
}
