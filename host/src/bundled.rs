//! Bundled plugins by name. Their components are embedded in the binary (`swerve-plugins`); to
//! load one, the host writes it once into `bundled-plugins/<name>-<digest>/` of swerve's cache
//! folder and loads that file like any other plugin. So an installed
//! `harness` or `trainer` finds `swe-rl` from any folder, with no source tree beside it.

use std::path::{Path, PathBuf};

use crate::error::HostError;
use swerve_cache::cache_root;

/// The environment variable naming a folder of `<name>.wasm` files that replaces the embedded
/// components (a development build of a plugin, for example).
pub(crate) const PLUGIN_DIR_ENV: &str = "SWERVE_PLUGIN_DIR";

/// Names of the bundled plugins, whether built into this binary or not.
pub fn names() -> impl Iterator<Item = &'static str> {
    swerve_plugins::names()
}

/// Whether the bundled plugin `name` is built into this binary.
pub fn is_built(name: &str) -> bool {
    swerve_plugins::embedded(name).is_some()
}

/// The file to load the bundled plugin `name` from: `$SWERVE_PLUGIN_DIR/<name>.wasm` when that
/// variable is set, else the embedded component written out to the cache folder. `Ok(None)` when
/// there is no such plugin (or it was not built into this binary).
pub fn path(name: &str) -> Result<Option<PathBuf>, HostError> {
    if let Some(dir) = std::env::var_os(PLUGIN_DIR_ENV) {
        let file = Path::new(&dir).join(format!("{name}.wasm"));
        return Ok(file.is_file().then_some(file));
    }
    let Some(plugin) = swerve_plugins::embedded(name) else {
        return Ok(None);
    };
    let file = format!("{name}.wasm");
    let dir = swerve_cache::materialise("bundled-plugins", name, &[(&file, plugin.bytes)])
        .map_err(|source| HostError::Bundled {
            path: cache_root().join("bundled-plugins"),
            source,
        })?;
    Ok(Some(dir.join(file)))
}

/// The bundled plugin `name`'s file, for callers that need it (the `swebench-parsers` log
/// parser of every evaluation): [`path`], with a missing plugin an error that names it.
pub fn require(name: &str) -> Result<PathBuf, HostError> {
    path(name)?.ok_or_else(|| HostError::NotBundled {
        name: name.to_owned(),
        in_dir: std::env::var_os(PLUGIN_DIR_ENV).map(PathBuf::from),
    })
}

/// Resolves a plugin argument: an existing file is taken as it is; otherwise the bundled plugin
/// of that name. `Ok(None)` when neither exists.
pub fn resolve(name_or_path: &str) -> Result<Option<PathBuf>, HostError> {
    let as_path = Path::new(name_or_path);
    if as_path.is_file() {
        return Ok(Some(as_path.to_owned()));
    }
    path(name_or_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_plugins_are_written_once_and_resolved_by_name() {
        let file = require("swe-rl").unwrap();
        assert!(file.starts_with(cache_root()), "{}", file.display());
        let bytes = fs_err::read(&file).unwrap();
        assert_eq!(bytes, swerve_plugins::embedded("swe-rl").unwrap().bytes);
        let modified = fs_err::metadata(&file).unwrap().modified().unwrap();
        assert_eq!(require("swe-rl").unwrap(), file);
        assert_eq!(
            fs_err::metadata(&file).unwrap().modified().unwrap(),
            modified,
            "an existing copy is not written again"
        );
        assert_eq!(resolve("swe-rl").unwrap(), Some(file.clone()));
        assert_eq!(
            resolve(&file.display().to_string()).unwrap(),
            Some(file),
            "a path is taken as it is"
        );
        assert_eq!(resolve("no-such-plugin").unwrap(), None);
        let err = require("no-such-plugin").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`no-such-plugin` is not a bundled plugin of this build"
        );
        assert!(names().any(|n| n == "python-keywords"));
    }
}
