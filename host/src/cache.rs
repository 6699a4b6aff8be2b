//! The precompile cache: compiled plugins stored as native code, keyed by the plugin's content
//! hash and the engine's compatibility hash, so that each plugin is compiled once per machine.
//!
//! Loading native code is trusted, so the cache only ever loads files it wrote itself: they live
//! in a folder the host creates (mode 0700 on Unix), under names derived from the hashes, each
//! beside a digest file that must match the bytes read back. A `.cwasm` handed in as a plugin is
//! refused before it gets here (see `plugin::check_component_bytes`).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
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
            &digest_path(&path),
            hex::encode(Sha256::digest(&bytes)).as_bytes(),
        )
        .map_err(err)?;
        write_atomic(&path, &bytes).map_err(err)?;
        Ok(())
    }
}

fn digest_path(path: &Path) -> PathBuf {
    path.with_extension("cwasm.sha256")
}
