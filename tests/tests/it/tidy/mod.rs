//! The tidy test (rust-analyzer's `tidy.rs`): the mechanical claims of ARCHITECTURE.md and of
//! the house style, checked against the files git tracks (`git ls-files`, so that a working tree
//! and CI's clean clone are checked alike). Each check lists every file and line that breaks it.
//! ARCHITECTURE.md is read, not copied: its crate sections, the files it names and its `unsafe`
//! allow-list are parsed from it, so the document and the code cannot drift apart unnoticed.

mod architecture;
mod source;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use architecture::{Section, Span};
use source::SiteKind;

const ARCHITECTURE: &str = "ARCHITECTURE.md";

/// The repository as git tracks it.
struct Repo {
    root: PathBuf,
    /// Tracked paths, relative to the root, with `/` separators.
    files: Vec<String>,
}

/// A workspace crate: its folder (relative, no trailing `/`) and package name.
struct Member {
    dir: String,
    name: String,
}

/// A broken claim: where, and what.
struct Violation {
    path: String,
    line: usize,
    what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.what)
    }
}

fn violation(path: &str, line: usize, what: impl Into<String>) -> Violation {
    Violation {
        path: path.to_owned(),
        line,
        what: what.into(),
    }
}

/// Fails with every violation of `claim`, one a line.
fn assert_holds(claim: &str, violations: Vec<Violation>) {
    if violations.is_empty() {
        return;
    }
    let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
    panic!(
        "{claim}: {} violation(s)\n{}",
        violations.len(),
        list.join("\n")
    );
}

impl Repo {
    fn open() -> Repo {
        let root = swerve_tests::repo_root();
        let out = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["ls-files", "-z"])
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git ls-files in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let files = out
            .stdout
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8(p.to_vec()).expect("tracked paths are UTF-8"))
            .collect();
        Repo { root, files }
    }

    /// The text of a tracked file; None for one that is not UTF-8 text, or that the working
    /// tree no longer has.
    fn text(&self, path: &str) -> Option<String> {
        let bytes = std::fs::read(self.root.join(path)).ok()?;
        if bytes.contains(&0) {
            return None;
        }
        String::from_utf8(bytes).ok()
    }

    /// Every tracked Rust file with its text.
    fn rust_files(&self) -> Vec<(String, String)> {
        self.files
            .iter()
            .filter(|p| p.ends_with(".rs"))
            .filter_map(|p| Some((p.clone(), self.text(p)?)))
            .collect()
    }

    fn architecture(&self) -> String {
        self.text(ARCHITECTURE)
            .unwrap_or_else(|| panic!("{ARCHITECTURE} is tracked and readable"))
    }

    /// Whether `place` (a path relative to the root, with or without a trailing `/`) is a
    /// tracked file or a folder holding one.
    fn has(&self, place: &str) -> bool {
        let place = place.trim_end_matches('/');
        self.files.iter().any(|f| within(f, place))
    }

    /// The workspace's crates, as cargo reads them (`cargo metadata --no-deps`).
    fn members(&self) -> Vec<Member> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .arg("--manifest-path")
            .arg(self.root.join("Cargo.toml"))
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let metadata: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("cargo metadata writes JSON");
        let root = metadata["workspace_root"]
            .as_str()
            .expect("a workspace root");
        metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| {
                let manifest = Path::new(p["manifest_path"].as_str().expect("a manifest path"));
                let dir = manifest
                    .parent()
                    .and_then(|d| d.strip_prefix(root).ok())
                    .expect("members are inside the workspace");
                Member {
                    dir: dir.to_string_lossy().replace('\\', "/"),
                    name: p["name"].as_str().expect("a name").to_owned(),
                }
            })
            .collect()
    }
}

/// Whether `path` is `place` or inside the folder `place` (no trailing `/`).
fn within(path: &str, place: &str) -> bool {
    path == place
        || path
            .strip_prefix(place)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `relative` as seen from the folder `dir`, with `.` and `..` resolved.
fn join(dir: &str, relative: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// The folder of a relative path (`""` at the root).
fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The 1-based line of the first occurrence of `needle` in `text`, else 1.
fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map_or(1, |at| text[..at].matches('\n').count() + 1)
}

#[test]
fn every_rust_file_starts_with_its_module_doc() {
    let repo = Repo::open();
    let files = repo.rust_files();
    // A file pulled in with `include!` holds items only (an inner doc there does not compile);
    // its includer documents it, and it opens with a plain comment instead.
    let included: BTreeSet<String> = files
        .iter()
        .flat_map(|(path, text)| {
            source::includes(text)
                .into_iter()
                .map(|relative| join(folder(path), &relative))
        })
        .collect();
    let violations = files
        .iter()
        .filter_map(|(path, text)| {
            if included.contains(path) {
                (!text.starts_with("//"))
                    .then(|| violation(path, 1, "an `include!`d file opens with a `//` comment"))
            } else {
                (!source::starts_with_module_doc(text))
                    .then(|| violation(path, 1, "no `//!` doc on the first line"))
            }
        })
        .collect();
    assert_holds("every Rust file starts with its `//!` doc", violations);
}

#[test]
fn unsafe_code_is_only_where_architecture_md_allows_it_and_says_why() {
    let repo = Repo::open();
    let architecture = repo.architecture();
    let members = repo.members();
    let mut violations = Vec::new();
    let Some(items) = architecture::unsafe_allow_list(&architecture) else {
        panic!(
            "{ARCHITECTURE} has no invariant titled {} listing where `unsafe` is allowed",
            architecture::UNSAFE_INVARIANT
        );
    };
    // The places each item names: a path of the repository, or a workspace crate by its folder's
    // name (`hostile-imports`). Other code spans (`gemm`, `Vec::set_len`) are prose.
    let mut places: Vec<(usize, String)> = Vec::new();
    for item in &items {
        let named: Vec<String> = item
            .spans
            .iter()
            .filter_map(|span| {
                let span = span.trim_end_matches('/');
                if repo.has(span) {
                    return Some(span.to_owned());
                }
                members
                    .iter()
                    .find(|m| m.dir.rsplit('/').next() == Some(span))
                    .map(|m| m.dir.clone())
            })
            .collect();
        if named.is_empty() {
            violations.push(violation(
                ARCHITECTURE,
                item.line,
                "this `unsafe` allow-list item names no file, folder or crate of the repository",
            ));
        }
        places.extend(named.into_iter().map(|place| (item.line, place)));
    }
    let mut used: BTreeSet<&str> = BTreeSet::new();
    for (path, text) in repo.rust_files() {
        for site in source::unsafe_sites(&text) {
            let what = match site.kind {
                SiteKind::Allow => "`allow(unsafe_code)`",
                SiteKind::Unsafe | SiteKind::Declaration => "`unsafe`",
            };
            match places.iter().find(|(_, place)| within(&path, place)) {
                Some((_, place)) => {
                    used.insert(place.as_str());
                }
                None => violations.push(violation(
                    &path,
                    site.line,
                    format!("{what} outside {ARCHITECTURE}'s allow-list"),
                )),
            }
            if site.kind != SiteKind::Allow && !source::has_safety_comment(&text, site) {
                violations.push(violation(
                    &path,
                    site.line,
                    "`unsafe` without a `// SAFETY:` comment right above it",
                ));
            }
        }
    }
    for (line, place) in &places {
        if !used.contains(place.as_str()) {
            violations.push(violation(
                ARCHITECTURE,
                *line,
                format!("the `unsafe` allow-list names `{place}`, which has no unsafe code"),
            ));
        }
    }
    assert_holds(
        "`unsafe` is only where ARCHITECTURE.md allows it, each with its `// SAFETY:` comment",
        violations,
    );
}

/// What a pointer outside the repository looks like: the shared folder beside the checkout, and
/// the development machine's absolute paths (the folder that holds the checkout, the shared
/// folder and the machine's dot-folders). Built here so that this file does not match itself.
fn outside_pointers(text: &str) -> Vec<(usize, String)> {
    let beside = ["..", "shared"].join("/");
    let machine = ["", "work", ""].join("/");
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.contains(&beside) {
            found.push((index + 1, format!("`{beside}`")));
        }
        let on_machine = line.match_indices(&machine).any(|(at, _)| {
            let rest = &line[at + machine.len()..];
            rest.starts_with("main") || rest.starts_with("shared") || rest.starts_with('.')
        });
        if on_machine {
            found.push((index + 1, format!("an absolute `{machine}…` path")));
        }
    }
    found
}

#[test]
fn no_tracked_file_points_outside_the_repository() {
    let repo = Repo::open();
    let violations = repo
        .files
        .iter()
        .filter_map(|path| Some((path, repo.text(path)?)))
        .flat_map(|(path, text)| {
            outside_pointers(&text)
                .into_iter()
                .map(|(line, what)| {
                    violation(path, line, format!("points outside the repository: {what}"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_holds(
        "no tracked file points outside the repository (a clean clone has nothing beside it)",
        violations,
    );
}

#[test]
fn every_crate_has_its_architecture_md_section_and_every_section_its_crate() {
    let repo = Repo::open();
    let architecture = repo.architecture();
    let manifest = repo.text("Cargo.toml").expect("Cargo.toml is readable");
    let members = repo.members();
    let sections = architecture::sections(&architecture);
    let spans = architecture::code_spans(&architecture);
    let mut violations = Vec::new();
    for member in &members {
        if !sections
            .iter()
            .any(|s| within(&member.dir, s.dir.trim_end_matches('/')))
        {
            violations.push(violation(
                "Cargo.toml",
                line_of(&manifest, &format!("\"{}\"", member.dir)),
                format!(
                    "workspace crate `{}/` has no `### {}/` section in {ARCHITECTURE} (nor has a folder above it)",
                    member.dir, member.dir
                ),
            ));
        }
    }
    let member_at = |dir: &str| members.iter().find(|m| m.dir == dir.trim_end_matches('/'));
    for section in &sections {
        if !repo.has(&section.dir) {
            violations.push(violation(
                ARCHITECTURE,
                section.line,
                format!(
                    "section `{}` names no folder of the repository",
                    section.dir
                ),
            ));
        }
        let mut named = Vec::new();
        if let Some(package) = &section.package {
            named.push((section.line, section.dir.clone(), package.clone()));
        }
        // Crates inside a section's folder named with their package: `` `kit/` (`swerve-plugin-kit` ``.
        // A folder and a span in parentheses after it are such a pair only where one of them is
        // a crate's (its folder, or its package's name): `` `train/` (`driver.rs` `` is prose.
        let body: Vec<&Span> = spans
            .iter()
            .filter(|s| s.line > section.line && s.line < section.end)
            .collect();
        for pair in body.windows(2) {
            let between = &architecture[pair[0].end..pair[1].start];
            let dir = format!("{}{}", section.dir, pair[0].text);
            let crate_like =
                member_at(&dir).is_some() || members.iter().any(|m| m.name == pair[1].text);
            if pair[0].text.ends_with('/') && between.trim() == "(" && crate_like {
                named.push((pair[0].line, dir, pair[1].text.clone()));
            }
        }
        for (line, dir, package) in named {
            match member_at(&dir) {
                Some(member) if member.name == package => {}
                Some(member) => violations.push(violation(
                    ARCHITECTURE,
                    line,
                    format!("`{dir}` is the crate `{}`, not `{package}`", member.name),
                )),
                None => violations.push(violation(
                    ARCHITECTURE,
                    line,
                    format!("`{package}` is named for `{dir}`, which is not a workspace crate"),
                )),
            }
        }
    }
    assert_holds(
        "every workspace crate has its section in ARCHITECTURE.md, and every section names a crate that is there",
        violations,
    );
}

#[test]
fn every_file_architecture_md_names_exists() {
    let repo = Repo::open();
    let architecture = repo.architecture();
    let sections = architecture::sections(&architecture);
    let mut violations = Vec::new();
    for span in architecture::code_spans(&architecture) {
        if !architecture::names_a_repository_file(&span.text) {
            continue;
        }
        let name = span.text.as_str();
        // A module named in a crate's section is in that crate's folder, outside the folders of
        // the crates that have sections of their own (`harness/swebench/` in `harness/`).
        let section: Option<&Section> = sections
            .iter()
            .find(|s| span.line > s.line && span.line < s.end);
        let in_scope = |path: &str| match section {
            Some(s) => {
                path.starts_with(&s.dir)
                    && !sections.iter().any(|other| {
                        other.dir.len() > s.dir.len()
                            && other.dir.starts_with(&s.dir)
                            && path.starts_with(&other.dir)
                    })
            }
            None => true,
        };
        let is_module = name.ends_with(".rs") || name.ends_with(".wit");
        let found = repo.files.iter().any(|path| {
            // A path from the repository's root is found wherever it is named.
            path == name
                || (path.ends_with(name)
                    && path[..path.len() - name.len()].ends_with('/')
                    && (!is_module || in_scope(path)))
        });
        if !found {
            let scope = section.map_or("the repository", |s| s.dir.as_str());
            violations.push(violation(
                ARCHITECTURE,
                span.line,
                format!("`{name}` names no file in {scope}"),
            ));
        }
    }
    assert_holds(
        "every file ARCHITECTURE.md names exists where it says",
        violations,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_outside_the_repository() {
        let beside = ["..", "shared"].join("/");
        let machine = ["", "work"].join("/");
        for (text, expect) in [
            (format!("see {beside}/specs/x.md\n"), vec![1]),
            (format!("ok\nroot=\"$root/{beside}/data\"\n"), vec![2]),
            (format!("cd {machine}/main && make\n"), vec![1]),
            (format!("ls {machine}/.library\n"), vec![1]),
            // A container's path and a placeholder under another root are not the machine's.
            (format!("copy_in(\"{machine}/in\")\n"), vec![]),
            (format!("under `<root>{machine}/`\n"), vec![]),
            ("shared/ beside the checkout\n".to_owned(), vec![]),
        ] {
            let lines: Vec<usize> = outside_pointers(&text).iter().map(|(l, _)| *l).collect();
            assert_eq!(lines, expect, "{text:?}");
        }
    }

    #[test]
    fn paths_join_and_nest() {
        assert_eq!(
            join("guest-plugins/bundle", "src/plugins.rs"),
            "guest-plugins/bundle/src/plugins.rs"
        );
        assert_eq!(join("a/src", "../b.rs"), "a/b.rs");
        assert_eq!(join("", "build.rs"), "build.rs");
        assert!(within("host/src/cache.rs", "host/src/cache.rs"));
        assert!(within("trainer/src/model/x.rs", "trainer/src/model"));
        assert!(!within("harness-extra/a.rs", "harness"));
    }
}
