//! An installed `harness` works from any folder: the binary is copied out of the build tree (as
//! `cargo install` would put it), run from an unrelated folder with a fresh cache folder, and
//! still finds its bundled plugins, the bundled dataset and the plugin kit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A copy of the built binary in its own folder, and an empty folder to run it from.
struct Installed {
    _root: tempfile::TempDir,
    binary: PathBuf,
    work: PathBuf,
    cache: PathBuf,
}

impl Installed {
    fn new() -> Installed {
        let root = tempfile::tempdir().expect("temp dir");
        let bin = root.path().join("bin");
        let work = root.path().join("work");
        fs_err::create_dir_all(&bin).unwrap();
        fs_err::create_dir_all(&work).unwrap();
        let binary = bin.join("harness");
        fs_err::copy(env!("CARGO_BIN_EXE_harness"), &binary).unwrap();
        Installed {
            binary,
            work,
            cache: root.path().join("cache"),
            _root: root,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new(&self.binary)
            .args(args)
            .current_dir(&self.work)
            .env("SWERVE_CACHE_DIR", &self.cache)
            .env_remove("SWERVE_PLUGIN_DIR")
            .env_remove("CARGO_MANIFEST_DIR")
            .output()
            .expect("harness runs");
        assert!(
            out.status.success(),
            "harness {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn bundled_plugins_dataset_and_kit_travel_with_the_binary() {
    let h = Installed::new();

    let list = String::from_utf8(h.run(&["plugin", "list"]).stdout).unwrap();
    for name in ["swe-rl", "format", "tests-fixed", "swebench-parsers"] {
        assert!(
            list.lines().any(|l| l == name),
            "{name} missing in:\n{list}"
        );
    }
    assert!(
        !list.contains("hostile"),
        "test plugins are not offered:\n{list}"
    );

    let inspect = String::from_utf8(h.run(&["plugin", "inspect", "swe-rl"]).stdout).unwrap();
    assert!(
        inspect.contains("world       swerve:plugin/reward@0.1.0"),
        "{inspect}"
    );
    assert!(
        inspect.contains(&h.cache.display().to_string()),
        "the component is loaded from the cache folder:\n{inspect}"
    );

    // A perfect SEARCH/REPLACE answer scores 1 with the bundled SWE-RL reward.
    let sample = serde_json::json!({
        "id": "one",
        "completion": "<think>x</think>\n<solution>\n```python\n### a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n</solution>",
        "code_context": {"a.py": "x = 1\n"},
        "oracle_new_content": {"a.py": "x = 2\n"},
    });
    let input = h.work.join("samples.jsonl");
    fs_err::write(&input, format!("{sample}\n")).unwrap();
    let output = h.work.join("rewards.jsonl");
    h.run(&[
        "reward",
        "--plugin",
        "swe-rl",
        "--input",
        "samples.jsonl",
        "--output",
        "rewards.jsonl",
    ]);
    assert_eq!(lines(&output)[0]["plugins"]["swe-rl"]["reward"], 1.0);

    // The bundled dataset is read without a source tree.
    h.run(&["dataset", "export", "swerve-mini", "-o", "rows.jsonl"]);
    assert_eq!(lines(&h.work.join("rows.jsonl")).len(), 13);

    // A new Rust plugin carries the kit and the WIT package, and depends on them by relative
    // path (building it is `cli_reward`'s test).
    h.run(&["plugin", "new", "my-reward", "--lang", "rust"]);
    let project = h.work.join("my-reward");
    let manifest = fs_err::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"swerve-plugin-kit = { path = "vendor/swerve-plugin-kit" }"#),
        "{manifest}"
    );
    for file in [
        "vendor/swerve-plugin-kit/Cargo.toml",
        "vendor/swerve-plugin-kit/src/lib.rs",
        "wit/plugin.wit",
    ] {
        assert!(project.join(file).is_file(), "{file} missing");
    }
}
