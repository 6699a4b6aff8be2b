//! A container's file-system changes read from its own upper layer.
//!
//! The engine's diff (`docker diff`) is authoritative but slow on some storage drivers: with
//! `fuse-overlayfs` Docker compares the container's whole tree with its image's (about five
//! seconds for a Python image on this project's machines), once per hardened run. Where the
//! engine keeps the container's layers on this host (an overlay driver, `UpperDir` readable
//! here), the same list comes from walking the container's upper directory: every path a
//! process in the container created, changed or deleted is there — a write copies the file up, a
//! deletion leaves a whiteout — and nothing inside the container can reach the host's view of
//! that directory. It is what Docker itself reads for `overlay2`.
//!
//! How an upper directory spells things (kernel overlayfs and fuse-overlayfs alike):
//! - a deleted path is a character device 0/0 of its name, or a file `.wh.<name>` (a deletion
//!   of what the image never had, such as the runtime's own `/.pivot_root…` folder, is none);
//! - a directory whose lower contents are hidden ("opaque": deleted and made again) carries the
//!   xattr `trusted.overlay.opaque=y` (`user.overlay.opaque`, `user.fuseoverlayfs.opaque` in
//!   unprivileged modes) or holds a `.wh..wh..opq` entry; fuse-overlayfs adds a `.wh..opq`
//!   device beside it;
//! - any other entry exists in the container as it is in the upper directory.
//!
//! A path is [`FsChangeKind::Modified`] when the image (the lower layers, top first) has it,
//! else [`FsChangeKind::Added`]; an opaque directory that the image has also deletes every
//! image entry below it that the upper directory does not hold again.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use crate::container::{FsChange, FsChangeKind};

/// Prefix of a whiteout file's name (`.wh.<name>` hides `<name>`).
const WHITEOUT_PREFIX: &str = ".wh.";
/// The entries that mark their directory opaque (`.wh..wh..opq`; fuse-overlayfs's `.wh..opq`).
const OPAQUE_MARKERS: [&str; 2] = [".wh..wh..opq", ".wh..opq"];
/// The xattrs that mark a directory opaque, with the value `y`.
const OPAQUE_XATTRS: [&str; 3] = [
    "trusted.overlay.opaque",
    "user.overlay.opaque",
    "user.fuseoverlayfs.opaque",
];

/// The layers of one container as the engine's storage driver keeps them on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layers {
    /// The container's own writable directory.
    pub upper: PathBuf,
    /// The image's layers (and the engine's init layer), top first.
    pub lower: Vec<PathBuf>,
}

impl Layers {
    /// The layers from a container's `GraphDriver` (its driver's name and data), when the driver
    /// is an overlay one and its upper directory is on this host; `None` otherwise.
    pub(crate) fn from_driver(
        name: &str,
        data: &std::collections::HashMap<String, String>,
    ) -> Option<Self> {
        if !matches!(name, "overlay2" | "fuse-overlayfs" | "overlay") {
            return None;
        }
        let upper = PathBuf::from(data.get("UpperDir")?);
        if !upper.is_absolute() || !upper.is_dir() {
            return None;
        }
        let lower = data
            .get("LowerDir")
            .map(|l| {
                l.split(':')
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        Some(Self { upper, lower })
    }

    /// Bytes of disk the upper directory's entries take (allocated blocks, so a sparse file
    /// counts what it holds), walking at most `limit` entries (a lower bound past them).
    pub(crate) fn upper_bytes(&self, limit: usize) -> io::Result<u64> {
        let mut total = 0u64;
        let mut seen = 0usize;
        let mut stack = vec![self.upper.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let meta = entry.metadata()?;
                total += meta.blocks() * 512;
                seen += 1;
                if seen >= limit {
                    return Ok(total);
                }
                if meta.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        Ok(total)
    }

    /// Every change, in path order, or `None` when there are more than `limit` entries (the
    /// caller then asks the engine).
    pub(crate) fn changes(&self, limit: usize) -> io::Result<Option<Vec<FsChange>>> {
        let mut out = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            let host_dir = join(&self.upper, &dir);
            let mut names = Vec::new();
            for entry in fs_err::read_dir(&host_dir)? {
                names.push(entry?.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            let opaque = !dir.is_empty() && is_opaque(&host_dir, &names);
            let mut present = BTreeSet::new();
            for name in &names {
                if OPAQUE_MARKERS.contains(&name.as_str()) {
                    continue;
                }
                let path = format!("{dir}/{name}");
                // A whiteout of a path the image lacks hides nothing (the runtime makes and
                // deletes a `/.pivot_root…` folder at start): not a change.
                if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
                    let path = format!("{dir}/{hidden}");
                    if self.in_image(&path) {
                        out.push(change(path, FsChangeKind::Deleted));
                    }
                    continue;
                }
                let meta = fs_err::symlink_metadata(join(&self.upper, &path))?;
                if is_whiteout_device(&meta) {
                    if self.in_image(&path) {
                        out.push(change(path, FsChangeKind::Deleted));
                    }
                    continue;
                }
                present.insert(name.clone());
                let kind = if self.in_image(&path) {
                    FsChangeKind::Modified
                } else {
                    FsChangeKind::Added
                };
                out.push(change(path.clone(), kind));
                if meta.is_dir() {
                    stack.push(path);
                }
                if out.len() > limit {
                    return Ok(None);
                }
            }
            if opaque && self.in_image(&dir) {
                for name in self.image_entries(&dir) {
                    if !present.contains(&name) {
                        out.push(change(format!("{dir}/{name}"), FsChangeKind::Deleted));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out.dedup();
        Ok(Some(out))
    }

    /// Whether the image has `path` (absolute, in the container): the lower layers looked up
    /// top first, as overlayfs looks them up.
    fn in_image(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        for layer in &self.lower {
            match lookup(layer, &parts) {
                Lookup::Found => return true,
                Lookup::Hidden => return false,
                Lookup::Absent => {}
            }
        }
        false
    }

    /// The names in the image's directory `dir` (which it has), over the layers that show
    /// through: top first, down to the first layer where it is opaque.
    fn image_entries(&self, dir: &str) -> BTreeSet<String> {
        let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
        let mut names = BTreeSet::new();
        let mut hidden = BTreeSet::new();
        for layer in &self.lower {
            let host = parts.iter().fold(layer.clone(), |p, part| p.join(part));
            let Ok(entries) = fs_err::read_dir(&host) else {
                continue;
            };
            let mut listed = Vec::new();
            for entry in entries.flatten() {
                listed.push(entry.file_name().to_string_lossy().into_owned());
            }
            for name in &listed {
                if OPAQUE_MARKERS.contains(&name.as_str()) {
                    continue;
                }
                if let Some(gone) = name.strip_prefix(WHITEOUT_PREFIX) {
                    hidden.insert(gone.to_owned());
                } else if fs_err::symlink_metadata(host.join(name))
                    .is_ok_and(|m| is_whiteout_device(&m))
                {
                    hidden.insert(name.clone());
                } else if !hidden.contains(name) {
                    names.insert(name.clone());
                }
            }
            if is_opaque(&host, &listed) {
                break;
            }
        }
        names
    }
}

/// What one lower layer says about a path.
enum Lookup {
    /// The layer has it.
    Found,
    /// The layer hides it (a whiteout, a file where a directory would be, an opaque directory
    /// above it): layers below do not count.
    Hidden,
    /// The layer does not know it: look below.
    Absent,
}

fn lookup(layer: &Path, parts: &[&str]) -> Lookup {
    let mut host = layer.to_path_buf();
    let mut opaque_above = false;
    for (i, part) in parts.iter().enumerate() {
        if host.join(format!("{WHITEOUT_PREFIX}{part}")).exists() {
            return Lookup::Hidden;
        }
        host.push(part);
        let Ok(meta) = std::fs::symlink_metadata(&host) else {
            return if opaque_above {
                Lookup::Hidden
            } else {
                Lookup::Absent
            };
        };
        if is_whiteout_device(&meta) {
            return Lookup::Hidden;
        }
        if i + 1 == parts.len() {
            return Lookup::Found;
        }
        if !meta.is_dir() {
            return Lookup::Hidden;
        }
        if is_opaque(&host, &[]) || OPAQUE_MARKERS.iter().any(|m| host.join(m).exists()) {
            opaque_above = true;
        }
    }
    Lookup::Found
}

/// A character device 0/0: overlayfs's whiteout.
fn is_whiteout_device(meta: &std::fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether a directory of a layer is opaque: an opaque xattr, or a marker among `names`.
fn is_opaque(dir: &Path, names: &[String]) -> bool {
    names.iter().any(|n| OPAQUE_MARKERS.contains(&n.as_str()))
        || OPAQUE_XATTRS
            .iter()
            .any(|attr| matches!(xattr::get(dir, attr), Ok(Some(v)) if v == b"y"))
}

fn join(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn change(path: String, kind: FsChangeKind) -> FsChange {
    FsChange { path, kind }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::fs;

    use super::*;

    fn kinds(changes: &[FsChange]) -> Vec<(String, char)> {
        changes
            .iter()
            .map(|c| {
                let k = match c.kind {
                    FsChangeKind::Added => 'A',
                    FsChangeKind::Modified => 'C',
                    FsChangeKind::Deleted => 'D',
                };
                (c.path.clone(), k)
            })
            .collect()
    }

    /// Layers made by hand as an overlay driver leaves them (whiteouts as `.wh.` files, since
    /// making a 0/0 device needs privileges a test may not have).
    #[test]
    fn upper_entries_become_added_modified_and_deleted() {
        let root = tempfile::tempdir().unwrap();
        let (base, init, upper) = (
            root.path().join("base"),
            root.path().join("init"),
            root.path().join("upper"),
        );
        for dir in ["etc", "usr/lib/python3/dist-packages/pkg", "opt/old/sub"] {
            fs::create_dir_all(base.join(dir)).unwrap();
        }
        for file in [
            "etc/issue",
            "etc/passwd",
            "usr/lib/python3/dist-packages/pkg/mod.py",
            "opt/old/a",
            "opt/old/sub/b",
        ] {
            fs::write(base.join(file), "x").unwrap();
        }
        fs::create_dir_all(init.join("etc")).unwrap();
        fs::write(init.join("etc/hostname"), "").unwrap();
        fs::write(init.join(".wh.gone"), "").unwrap();
        fs::write(base.join("gone"), "").unwrap();

        // The container: changed /etc/passwd, deleted /etc/issue, added /opt/new/f, replaced
        // /opt/old with a fresh directory holding only `a`, touched /etc/hostname.
        fs::create_dir_all(upper.join("etc")).unwrap();
        fs::write(upper.join("etc/passwd"), "y").unwrap();
        fs::write(upper.join("etc/.wh.issue"), "").unwrap();
        fs::write(upper.join("etc/hostname"), "h").unwrap();
        fs::create_dir_all(upper.join("opt/new")).unwrap();
        fs::write(upper.join("opt/new/f"), "").unwrap();
        fs::create_dir_all(upper.join("opt/old")).unwrap();
        fs::write(upper.join("opt/old/.wh..wh..opq"), "").unwrap();
        fs::write(upper.join("opt/old/a"), "again").unwrap();
        fs::write(upper.join("gone"), "back").unwrap();
        fs::write(upper.join(".wh..pivot_root123"), "").unwrap();

        let data = HashMap::from([
            ("UpperDir".to_owned(), upper.display().to_string()),
            (
                "LowerDir".to_owned(),
                format!("{}:{}", init.display(), base.display()),
            ),
        ]);
        let layers = Layers::from_driver("fuse-overlayfs", &data).unwrap();
        assert_eq!(Layers::from_driver("vfs", &data), None);
        let changes = layers.changes(1000).unwrap().unwrap();
        let expected: Vec<(String, char)> = [
            ("/etc", 'C'),
            ("/etc/hostname", 'C'),
            ("/etc/issue", 'D'),
            ("/etc/passwd", 'C'),
            // Hidden by the init layer's whiteout: new to the container.
            ("/gone", 'A'),
            ("/opt", 'C'),
            ("/opt/new", 'A'),
            ("/opt/new/f", 'A'),
            ("/opt/old", 'C'),
            ("/opt/old/a", 'C'),
            ("/opt/old/sub", 'D'),
        ]
        .map(|(p, k)| (p.to_owned(), k))
        .to_vec();
        assert_eq!(kinds(&changes), expected);
        assert_eq!(layers.changes(3).unwrap(), None, "over the limit");
    }
}
