// The bundled plugins, one list for the build script (what to build) and the library (what
// exists). Included with `include!`, so it holds items only.

/// (cargo package, plugin name) of every Rust guest.
const RUST_PLUGINS: &[(&str, &str)] = &[
    ("swerve-plugin-swe-rl", "swe-rl"),
    ("swerve-plugin-format", "format"),
    ("swerve-plugin-tests-fixed", "tests-fixed"),
    ("swerve-log-parsers", "swebench-parsers"),
    ("swerve-plugin-rust-length", "rust-length"),
    ("swerve-plugin-hostile", "hostile"),
    ("swerve-plugin-hostile-imports", "hostile-imports"),
];

/// Plugins built for the host's own tests (a plugin that misbehaves on purpose): embedded and
/// loadable by name, but not offered to users (`names`, `harness plugin list`).
#[allow(dead_code)] // The build script builds them like every other guest.
const TEST_PLUGINS: &[&str] = &["hostile", "hostile-imports"];

/// (source folder under guest-plugins/, module, plugin name, world) of every Python guest.
const PYTHON_PLUGINS: &[(&str, &str, &str, &str)] = &[(
    "examples/python-keywords",
    "app",
    "python-keywords",
    "reward",
)];
