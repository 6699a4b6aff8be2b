//! What `trainer` prints, as snapshots (`tests/it/snapshots/`; `cargo insta review` after a
//! deliberate change): every `--help`, and the errors a user meets first.

use std::path::Path;

use swerve_tests::cli::{help_tree, run};

fn trainer() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_trainer"))
}

#[test]
fn help() {
    insta::assert_snapshot!(help_tree(trainer()));
}

#[test]
fn errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "learning_rate = 1e-5\nbeta = \"high\"\n",
    )
    .unwrap();
    // The tiny fixture model, and a copy whose config.json is not a model's.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
    for (name, config) in [
        ("broken", Some(r#"{"hidden_size": "wide"}"#)),
        ("tiny", None),
    ] {
        let model = dir.path().join(name);
        std::fs::create_dir(&model).unwrap();
        for file in ["config.json", "model.safetensors", "tokenizer.json"] {
            std::fs::copy(fixture.join(file), model.join(file)).unwrap();
        }
        if let Some(config) = config {
            std::fs::write(model.join("config.json"), config).unwrap();
        }
    }
    let grpo = |extra: &[&'static str]| -> Vec<&'static str> {
        ["grpo", "--output", "out", "--plugin", "swe-rl"]
            .iter()
            .chain(extra)
            .copied()
            .collect()
    };
    let cases = [
        grpo(&["--model", "no-model", "--dataset", "swerve-mini"]),
        grpo(&["--model", "broken", "--dataset", "swerve-mini"]),
        grpo(&[
            "--model",
            "tiny",
            "--dataset",
            "swerve-mini",
            "--config",
            "bad.toml",
        ]),
        grpo(&[
            "--model",
            "tiny",
            "--dataset",
            "swerve-mini",
            "--set",
            "beta=[1]",
        ]),
        grpo(&[
            "--model",
            "tiny",
            "--dataset",
            "princeton-nlp/SWE-bench_Lite",
        ]),
        grpo(&["--model", "tiny", "--dataset", "missing.jsonl"]),
        grpo(&[
            "--model",
            "tiny",
            "--dataset",
            "swerve-mini",
            "--plugin",
            "nope",
        ]),
    ];
    let text: Vec<String> = cases
        .iter()
        .map(|args| run(trainer(), args, dir.path()))
        .collect();
    insta::assert_snapshot!(text.join("\n"));
}
