//! An installed `trainer` works from any folder: the binary is copied out of the build tree (as
//! `cargo install` would put it) and `trainer demo` runs from an unrelated folder with a fresh
//! cache folder, taking the tiny model's assets, the `swerve-mini` tasks and the `swe-rl` reward
//! plugin from the binary itself.

use std::process::Command;

#[test]
fn trainer_demo_runs_outside_the_source_tree() {
    let root = tempfile::tempdir().expect("temp dir");
    let (bin, work) = (root.path().join("bin"), root.path().join("work"));
    fs_err::create_dir_all(&bin).unwrap();
    fs_err::create_dir_all(&work).unwrap();
    let trainer = bin.join("trainer");
    fs_err::copy(env!("CARGO_BIN_EXE_trainer"), &trainer).unwrap();

    // The bundled settings, shortened to a few steps so that the test takes seconds.
    let settings = include_str!("../../configs/swerve-mini-tiny.toml")
        .replace("max_steps = 200", "max_steps = 2")
        .replace("max_steps = 240", "max_steps = 1")
        .replace("max_completion_length = 192", "max_completion_length = 16")
        .replace(
            "predict_max_new_tokens = 256",
            "predict_max_new_tokens = 16",
        );
    assert_ne!(
        settings,
        include_str!("../../configs/swerve-mini-tiny.toml")
    );
    fs_err::write(work.join("short.toml"), settings).unwrap();

    let out = Command::new(&trainer)
        .args(["demo", "--config", "short.toml", "--output", "out"])
        .current_dir(&work)
        .env("SWERVE_CACHE_DIR", root.path().join("cache"))
        .env("RAYON_NUM_THREADS", "2")
        .env_remove("SWERVE_PLUGIN_DIR")
        .output()
        .expect("trainer runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(work.join("out/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["grpo_steps"], 1);
    let predictions = fs_err::read_to_string(work.join("out/predictions.jsonl")).unwrap();
    assert_eq!(predictions.lines().count(), 13, "one prediction per task");
}
