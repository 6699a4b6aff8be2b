//! swerve's cache folder and the file writes every swerve tool shares: where the cache lives
//! ([`cache_root`], one rule for every binary), writing a file so that it appears whole or not
//! at all ([`write_atomic`] for text in hand, [`AtomicFile`] for a file written piece by
//! piece), a streamed output that an interrupted run leaves as whole lines a rerun continues
//! from ([`PartialLines`]), and writing a bundled folder (a dataset or plugin a binary carries)
//! out of the binary once ([`materialise`]).
//!
//! Not here: what goes into the cache (the plugin host's precompiled components are
//! `swerve-host`'s, the bundled dataset is `swerve-swebench`'s) or any reading of it.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

mod partial;

pub use partial::{PartialLines, Reopened};

/// The environment variable naming swerve's cache folder.
pub const CACHE_DIR_ENV: &str = "SWERVE_CACHE_DIR";

/// swerve's cache folder, the one rule every binary follows: `$SWERVE_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/swerve`, else `~/.cache/swerve`, else `swerve-cache` in the temporary folder.
/// It holds precompiled plugins (`plugins/`, the host's precompile cache), the bundled plugins
/// written out for loading (`bundled-plugins/`) and bundled datasets (`datasets/`).
pub fn cache_root() -> PathBuf {
    let from_env = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from_env(CACHE_DIR_ENV)
        .or_else(|| from_env("XDG_CACHE_HOME").map(|d| d.join("swerve")))
        .or_else(|| from_env("HOME").map(|h| h.join(".cache/swerve")))
        .unwrap_or_else(|| std::env::temp_dir().join("swerve-cache"))
}

/// Writes `bytes` to `path` so that readers see the old file or the new one, never a part: a
/// temporary file beside it (a name of its own, so concurrent writers do not collide), renamed
/// over `path`. The file gets the permissions a plain write would give it (0666 less the
/// umask). The one atomic file write of every swerve tool; [`AtomicFile`] is the same for a
/// file written piece by piece.
pub fn write_atomic(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(contents.as_ref())?;
    file.commit()
}

/// A file written piece by piece that appears at its path whole or not at all: the pieces go to
/// a temporary file beside the path (buffered), and [`commit`](Self::commit) renames it over the
/// path. Until then a file already at the path is left as it was; dropped without a commit (an
/// error, a panic, an interrupted command), the temporary file is removed and nothing changed.
pub struct AtomicFile {
    path: PathBuf,
    out: std::io::BufWriter<tempfile::NamedTempFile>,
}

impl AtomicFile {
    /// Starts writing `path` (its folder must exist).
    pub fn create(path: &Path) -> std::io::Result<AtomicFile> {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".swerve-").suffix(".tmp");
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let tmp = builder.tempfile_in(dir).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create a temporary file in {}: {e}", dir.display()),
            )
        })?;
        Ok(AtomicFile {
            path: path.to_owned(),
            out: std::io::BufWriter::with_capacity(1 << 16, tmp),
        })
    }

    /// The path the file will have.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes what is buffered and renames the file over its path.
    pub fn commit(self) -> std::io::Result<()> {
        let path = self.path;
        let tmp = self.out.into_inner().map_err(|e| {
            std::io::Error::new(
                e.error().kind(),
                format!("cannot write {}: {}", path.display(), e.error()),
            )
        })?;
        tmp.persist(&path).map_err(|e| {
            std::io::Error::new(
                e.error.kind(),
                format!(
                    "cannot rename a temporary file to {}: {}",
                    path.display(),
                    e.error
                ),
            )
        })?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes `bytes` to `path` unless a file of that size is there already; the file appears whole
/// or not at all (a temporary file in the same folder, renamed), so that processes racing to
/// write the same content never see a partial file. `path`'s name must carry the content's
/// digest, so that a file of the right size is the right file.
fn write_once(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == bytes.len() as u64) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    write_atomic(path, bytes)
}

/// Writes a bundled folder (a dataset the binary carries) into `<cache root>/<kind>/` once and
/// returns its path: `<name>-<digest>`, the digest over every path and content, so a binary with
/// other contents never reads a folder written by this one. Each file appears whole or not at
/// all (`write_once`), so concurrent processes can do this at the same time.
pub fn materialise(kind: &str, name: &str, files: &[(&str, &[u8])]) -> std::io::Result<PathBuf> {
    let mut digest = Sha256::new();
    for (path, bytes) in files {
        digest.update((path.len() as u64).to_le_bytes());
        digest.update(path.as_bytes());
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    }
    let digest = hex::encode(digest.finalize());
    let dir = cache_root()
        .join(kind)
        .join(format!("{name}-{}", &digest[..16]));
    for (path, bytes) in files {
        write_once(&dir.join(path), bytes)?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_whole_files_and_leave_nothing_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        write_atomic(&path, "{}").unwrap();
        write_atomic(&path, b"{\"a\": 1}").unwrap();
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "{\"a\": 1}");
        let names: Vec<_> = fs_err::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs_err::metadata(&path).unwrap().permissions().mode();
            // 0666 less the umask: readable by others as a plain write makes it (umask 022).
            assert_eq!(mode & 0o600, 0o600, "{mode:o}");
        }
        let err = write_atomic(&dir.path().join("no/such/folder/f"), "x").unwrap_err();
        assert!(err.to_string().contains("no/such/folder"), "{err}");
    }

    #[test]
    fn a_file_written_in_pieces_replaces_the_old_one_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        write_atomic(&path, "old\n").unwrap();
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"new 1\n").unwrap();
        file.write_all(b"new 2\n").unwrap();
        // An interrupted writer (dropped without a commit) leaves the old file and no other.
        drop(file);
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 1);
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"new 1\n").unwrap();
        assert_eq!(
            fs_err::read_to_string(&path).unwrap(),
            "old\n",
            "not before the commit"
        );
        file.commit().unwrap();
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "new 1\n");
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 1);
    }
}
