//! The host's errors: what stops the host itself (as opposed to plugin outcomes, which are data).

use std::path::PathBuf;

/// An operation of the host that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The plugin file could not be read.
    #[error("cannot read plugin {path}")]
    ReadPlugin {
        /// The plugin's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The plugin is not a usable component for the world it was loaded as.
    #[error("invalid plugin {plugin}: {reason}")]
    InvalidPlugin {
        /// The plugin's path or name.
        plugin: String,
        /// What is wrong, in words a plugin author can act on.
        reason: String,
    },
    /// The wasmtime engine could not be configured.
    #[error("cannot configure the wasm engine: {0}")]
    Engine(String),
    /// The precompile cache could not be used.
    #[error("precompile cache {path}")]
    Cache {
        /// The cache file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A bundled plugin could not be written out of the binary into the cache folder.
    #[error("cannot write the bundled plugin to {path}")]
    Bundled {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A bundled plugin this build does not carry (or that `$SWERVE_PLUGIN_DIR` lacks).
    #[error("`{name}` is not a bundled plugin of this build{}", in_dir.as_ref().map(|d| format!(" (looked in {} from SWERVE_PLUGIN_DIR)", d.display())).unwrap_or_default())]
    NotBundled {
        /// The plugin's name.
        name: String,
        /// The folder `$SWERVE_PLUGIN_DIR` named, when set.
        in_dir: Option<PathBuf>,
    },
    /// A plugin call failed before the plugin ran (instantiation, host-side wiring).
    #[error("cannot instantiate plugin {plugin}: {reason}")]
    Instantiate {
        /// The plugin's name.
        plugin: String,
        /// The underlying error.
        reason: String,
    },
    /// A worker thread could not be started.
    #[error("cannot start a scoring thread")]
    Thread(#[source] std::io::Error),
}
