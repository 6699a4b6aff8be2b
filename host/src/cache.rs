//! The precompile cache: compiled plugins stored as native code, keyed by the plugin's content
//! hash and the engine's compatibility hash, so that each plugin is compiled once per machine.
//!
//! Loading native code is trusted, so the cache only ever loads files it wrote itself: they live
//! in a folder the host creates (mode 0700 on Unix), under names derived from the hashes, each
//! beside a checksum file that must match the bytes found there. A `.cwasm` handed in as a
//! plugin is refused before it gets here (see `plugin::check_component_bytes`).
//!
//! The checksum (XXH3-128) guards against a torn or damaged file, not against an adversary:
//! whoever can write into the folder can write the checksum beside it too, so a cryptographic
//! digest would protect nothing more, and hashing the native code with SHA-256 cost a third of
//! a millisecond at every process start. Entries are mapped rather than read (wasmtime runs the
//! code from the file's own pages): every file is written whole to a temporary name and renamed
//! into place, so a mapped entry is never changed under the process that mapped it.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use twox_hash::XxHash3_128;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::HostError;
use swerve_cache::{cache_root, write_atomic};

/// The default precompile cache: `plugins/` in [`cache_root`].
pub fn default_precompile_dir() -> PathBuf {
    cache_root().join("plugins")
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
        let file = std::fs::File::open(&path).ok()?;
        let checksum = std::fs::read_to_string(checksum_path(&path)).ok()?;
        // SAFETY: the file is in the cache folder, which only this host writes, and always by
        // writing a temporary file and renaming it into place (`store`): a file is never
        // truncated or rewritten where it lies, so the mapping's bytes cannot change while it is
        // read here. It is unmapped at the end of this function.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        if checksum_hex(&map) != checksum.trim() {
            tracing::warn!(path = %path.display(), "ignoring a precompiled plugin whose checksum does not match");
            return None;
        }
        drop(map);
        // SAFETY: the file was produced by `Component::serialize` of this host (same engine
        // compatibility hash, in the cache folder only this host writes, its bytes checked
        // against the checksum written with them just above), which is the precondition of
        // `Component::deserialize_file`; wasmtime maps it, and the file is never changed in
        // place (see above), as that function also requires.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize_file(engine, &path) };
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
        write_atomic(&checksum_path(&path), checksum_hex(&bytes).as_bytes()).map_err(err)?;
        write_atomic(&path, &bytes).map_err(err)?;
        Ok(())
    }
}

fn checksum_path(path: &Path) -> PathBuf {
    path.with_extension("cwasm.xxh3")
}

/// The XXH3-128 checksum of `bytes`, in hex.
fn checksum_hex(bytes: &[u8]) -> String {
    format!("{:032x}", XxHash3_128::oneshot(bytes))
}
