//! Builds every bundled plugin into `<target>/plugins/<name>.wasm`: the Rust guests with a nested
//! `cargo build --target wasm32-wasip2` (own target folder, so it never waits on this build's
//! lock), the Python guests with componentize-py when it is installed; then writes the table
//! that embeds them in the library (`$OUT_DIR/embedded.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

// RUST_PLUGINS and PYTHON_PLUGINS: the one list of bundled plugins, shared with the library.
include!("src/plugins.rs");

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().parent().unwrap().to_owned();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out.
    let target = out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR has the usual depth")
        .to_owned();
    let plugins = target.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();

    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("guest-plugins").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    // The `plugin` profile lives in the workspace manifest.
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    println!("cargo:rerun-if-env-changed=SWERVE_SKIP_PYTHON_PLUGINS");

    build_rust(&root, &target.join("wasm-plugins"), &plugins);
    build_python(&root, &target.join("wasm-plugins"), &plugins);
    write_embedded(&plugins, &out_dir.join("embedded.rs"));
}

/// Writes the table of embedded components: every bundled plugin that was built, its bytes
/// included in the library (so an installed binary carries them).
fn write_embedded(plugins: &Path, out: &Path) {
    let names = RUST_PLUGINS
        .iter()
        .map(|(_, name)| *name)
        .chain(PYTHON_PLUGINS.iter().map(|(_, _, name, _)| *name));
    let mut table = String::from("&[\n");
    for name in names {
        let path = plugins.join(format!("{name}.wasm"));
        if !path.is_file() {
            continue;
        }
        table.push_str(&format!(
            "    Embedded {{ name: {name:?}, bytes: include_bytes!({path:?}) }},\n",
            path = path.display().to_string(),
        ));
    }
    table.push(']');
    std::fs::write(out, table).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}

fn build_rust(root: &Path, wasm_target: &Path, plugins: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args([
            "build",
            "--profile",
            "plugin",
            "--target",
            "wasm32-wasip2",
            // 128-bit SIMD (on in every wasmtime engine): memchr's searchers use it, and LLVM
            // vectorises loops with it; integer SIMD is deterministic, float SIMD canonicalises
            // NaNs like the scalar code.
            "--config",
            "target.wasm32-wasip2.rustflags=[\"-Ctarget-feature=+simd128\"]",
            "--target-dir",
        ])
        .arg(wasm_target);
    for (package, _) in RUST_PLUGINS {
        cmd.args(["-p", package]);
    }
    // The outer build's flags (coverage, sanitizers, target features) are not for guests.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .expect("cannot run cargo to build the guest plugins");
    if !output.status.success() {
        panic!(
            "building the guest plugins failed (is the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    for (package, name) in RUST_PLUGINS {
        let built = wasm_target
            .join("wasm32-wasip2/plugin")
            .join(format!("{}.wasm", package.replace('-', "_")));
        copy_if_changed(&built, &plugins.join(format!("{name}.wasm")));
    }
}

fn build_python(root: &Path, work: &Path, plugins: &Path) {
    if std::env::var_os("SWERVE_SKIP_PYTHON_PLUGINS").is_some() {
        return;
    }
    for (folder, module, name, world) in PYTHON_PLUGINS {
        // componentize-py's interpreter writes `__pycache__` beside the modules it imports; a
        // copy keeps that out of `guest-plugins/`, which is watched above (a change there would
        // run this script again on the next build).
        let src = work.join(format!("{name}-src"));
        copy_sources(&root.join("guest-plugins").join(folder), &src);
        let out = work.join(format!("{name}.wasm"));
        let status = Command::new("componentize-py")
            .arg("-d")
            .arg(root.join("wit"))
            .args(["-w", world, "componentize", "--stub-wasi", "-p"])
            .arg(&src)
            .arg(module)
            .arg("-o")
            .arg(&out)
            .output();
        match status {
            Ok(o) if o.status.success() => {
                copy_if_changed(&out, &plugins.join(format!("{name}.wasm")))
            }
            Ok(o) => panic!(
                "componentize-py failed for {name}:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => println!(
                "cargo:warning=componentize-py not found ({e}); the Python example plugin `{name}` is not built (pip install componentize-py==0.25.1)"
            ),
        }
    }
}

fn copy_if_changed(from: &Path, to: &Path) {
    let new = std::fs::read(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
    if std::fs::read(to).ok().as_deref() != Some(&new[..]) {
        std::fs::write(to, &new).unwrap_or_else(|e| panic!("cannot write {}: {e}", to.display()));
    }
}

/// Copies the files of a Python plugin's folder (without bytecode) into `to`, made afresh.
fn copy_sources(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "__pycache__" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_sources(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}
