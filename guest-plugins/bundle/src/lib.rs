//! swerve's bundled plugins: the build script compiles every guest under `guest-plugins/` into a
//! WebAssembly component, and this crate embeds their bytes, so that a binary built with it
//! carries them wherever it is installed.
//!
//! This crate holds no plugin code (each plugin is its own guest crate) and runs nothing; finding
//! a plugin by name, writing it where the host loads it from, and loading it are the host's
//! (`swerve_host::bundled`).

include!("plugins.rs");

/// A bundled plugin's component, embedded in the binary.
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    /// The plugin's name, e.g. `swe-rl`.
    pub name: &'static str,
    /// The component.
    pub bytes: &'static [u8],
}

/// Every bundled plugin that was built (the Python ones need componentize-py at build time).
pub static EMBEDDED: &[Embedded] = include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// Names of the bundled plugins offered to users, built or not: the Rust guests, then the
/// Python ones. The host's test plugins (`hostile`, `hostile-imports`) are embedded too, and
/// [`embedded`] finds them, but they are not listed.
pub fn names() -> impl Iterator<Item = &'static str> {
    RUST_PLUGINS
        .iter()
        .map(|(_, name)| *name)
        .chain(PYTHON_PLUGINS.iter().map(|(_, _, name, _)| *name))
        .filter(|name| !TEST_PLUGINS.contains(name))
}

/// The embedded component of a bundled plugin, `None` when there is no such plugin or it was
/// not built.
pub fn embedded(name: &str) -> Option<&'static Embedded> {
    EMBEDDED.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_rust_plugin_is_embedded() {
        for (_, name) in RUST_PLUGINS {
            let plugin = embedded(name).unwrap_or_else(|| panic!("{name} is not embedded"));
            // A component starts with the wasm magic and the component-model layer.
            assert_eq!(&plugin.bytes[..4], b"\0asm", "{name}");
        }
        assert!(embedded("no-such-plugin").is_none());
        assert_eq!(
            names().count(),
            RUST_PLUGINS.len() + PYTHON_PLUGINS.len() - TEST_PLUGINS.len()
        );
        for name in TEST_PLUGINS {
            assert!(
                embedded(name).is_some() && !names().any(|n| n == *name),
                "{name}"
            );
        }
    }
}
