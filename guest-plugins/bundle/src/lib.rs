//! swerve's bundled plugins, built by this crate's build script into `<target>/plugins/`, and the
//! lookup that lets `harness --plugin swe-rl` find one by name.
//!
//! This crate holds no plugin code (each plugin is its own guest crate under `guest-plugins/`)
//! and loads nothing: it only knows where the built components are.

use std::path::{Path, PathBuf};

/// Names of the bundled plugins, each built to `<plugin_dir>/<name>.wasm`.
pub const BUNDLED: &[&str] = &[
    "swe-rl",
    "format",
    "tests-fixed",
    "swebench-parsers",
    "rust-length",
    "python-keywords",
    "hostile",
    "hostile-imports",
];

/// The environment variable that overrides the folder bundled plugins are looked up in.
pub const PLUGIN_DIR_ENV: &str = "SWERVE_PLUGIN_DIR";

/// The folder holding the bundled plugins: `$SWERVE_PLUGIN_DIR` when set, else the folder this
/// build wrote them to.
pub fn plugin_dir() -> PathBuf {
    std::env::var_os(PLUGIN_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("SWERVE_PLUGIN_DIR")))
}

/// Resolves a plugin argument: an existing path is taken as it is; otherwise a bundled plugin
/// of that name. `None` when neither exists.
pub fn resolve(name_or_path: &str) -> Option<PathBuf> {
    let as_path = Path::new(name_or_path);
    if as_path.is_file() {
        return Some(as_path.to_owned());
    }
    let bundled = plugin_dir().join(format!("{name_or_path}.wasm"));
    bundled.is_file().then_some(bundled)
}

/// The path of a bundled plugin, whether or not it was built.
pub fn bundled(name: &str) -> PathBuf {
    plugin_dir().join(format!("{name}.wasm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_rust_plugin_was_built() {
        for name in BUNDLED.iter().filter(|n| !n.starts_with("python-")) {
            assert!(
                bundled(name).is_file(),
                "{} is missing",
                bundled(name).display()
            );
            assert_eq!(resolve(name), Some(bundled(name)));
        }
        assert_eq!(resolve("no-such-plugin"), None);
    }
}
