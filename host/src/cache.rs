//! The precompile cache: compiled plugins stored as native code, keyed by the plugin's content
//! hash and the engine's compatibility hash, so that each plugin is compiled once per machine.
//!
//! Loading native code is trusted, so the cache only ever loads files it wrote itself: they live
//! in a folder the host creates (mode 0700 on Unix), under names derived from the hashes, each
//! beside a digest file that must match the bytes read back. A `.cwasm` handed in as a plugin is
//! refused before it gets here (see `plugin::check_component_bytes`).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::HostError;

/// The environment variable naming swerve's cache folder.
pub const CACHE_DIR_ENV: &str = "SWERVE_CACHE_DIR";

/// swerve's cache folder, the one rule every binary follows: `$SWERVE_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/swerve`, else `~/.cache/swerve`, else `swerve-cache` in the temporary folder.
/// It holds precompiled plugins (`plugins/`, [`default_precompile_dir`]), the bundled plugins
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

/// The default precompile cache: `plugins/` in [`cache_root`].
pub fn default_precompile_dir() -> PathBuf {
    cache_root().join("plugins")
}

/// Writes `bytes` to `path` unless a file of that size is there already; the file appears whole
/// or not at all (a temporary file in the same folder, renamed), so that processes racing to
/// write the same content never see a partial file. `path`'s name must carry the content's
/// digest, so that a file of the right size is the right file.
fn write_once(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == bytes.len() as u64) {
        return Ok(());
    }
    let dir = path.parent().expect("a file inside a folder");
    fs_err::create_dir_all(dir)?;
    write_atomic(dir, path, bytes)
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

/// A folder of precompiled plugins.
#[derive(Debug, Clone)]
pub(crate) struct PrecompileCache {
    dir: PathBuf,
}

impl PrecompileCache {
    /// Opens (and creates) the cache folder.
    pub(crate) fn open(dir: &Path) -> Result<PrecompileCache, HostError> {
        let err = |source| HostError::Cache {
            path: dir.to_owned(),
            source,
        };
        fs_err::create_dir_all(dir).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        }
        Ok(PrecompileCache {
            dir: dir.to_owned(),
        })
    }

    fn path(&self, engine: &Engine, component_sha256: &str) -> PathBuf {
        let mut h = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        self.dir
            .join(format!("{component_sha256}-{:016x}.cwasm", h.finish()))
    }

    /// The compiled component from the cache, if this host wrote it and it is intact.
    pub(crate) fn load(&self, engine: &Engine, component_sha256: &str) -> Option<Component> {
        let path = self.path(engine, component_sha256);
        let bytes = std::fs::read(&path).ok()?;
        let digest = std::fs::read_to_string(digest_path(&path)).ok()?;
        if hex::encode(Sha256::digest(&bytes)) != digest.trim() {
            tracing::warn!(path = %path.display(), "ignoring a precompiled plugin whose digest does not match");
            return None;
        }
        // SAFETY: the bytes were produced by `Component::serialize` of this host (same engine
        // compatibility hash, in the cache folder only this host writes, checked against the
        // digest written with them), which is the precondition of `Component::deserialize`.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(engine, &bytes) };
        component
            .inspect_err(|e| tracing::warn!(path = %path.display(), "unusable cache entry: {e}"))
            .ok()
    }

    /// Stores a compiled component, atomically (write to a temporary file, then rename).
    pub(crate) fn store(
        &self,
        engine: &Engine,
        component_sha256: &str,
        component: &Component,
    ) -> Result<(), HostError> {
        let path = self.path(engine, component_sha256);
        let bytes = component
            .serialize()
            .map_err(|e| HostError::Engine(format!("cannot serialise a compiled plugin: {e:#}")))?;
        let err = |source| HostError::Cache {
            path: path.clone(),
            source,
        };
        write_atomic(
            &self.dir,
            &digest_path(&path),
            hex::encode(Sha256::digest(&bytes)).as_bytes(),
        )
        .map_err(err)?;
        write_atomic(&self.dir, &path, &bytes).map_err(err)?;
        Ok(())
    }
}

fn digest_path(path: &Path) -> PathBuf {
    path.with_extension("cwasm.sha256")
}

fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
