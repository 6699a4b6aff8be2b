//! What `trainer` prints, as snapshots (`tests/it/snapshots/`; `cargo insta review` after a
//! deliberate change): every `--help`, and the errors a user meets first.

use std::path::Path;

use swerve_tests::cli::{help_tree, run, run_signalled};

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
    // A task row with neither a code context nor the oracle's new content.
    std::fs::write(
        dir.path().join("bare.jsonl"),
        "{\"instance_id\": \"a__b-1\", \"problem_statement\": \"w1 w2\"}\n",
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
            "swerve-mini",
            "--set",
            "learning_rat=1e-5",
        ]),
        grpo(&[
            "--model",
            "tiny",
            "--dataset",
            "princeton-nlp/SWE-bench_Lite",
        ]),
        grpo(&["--model", "tiny", "--dataset", "missing.jsonl"]),
        grpo(&["--model", "tiny", "--dataset", "bare.jsonl"]),
        // Past the fixture's 128 positions: refused before sampling, and 0 new tokens as usage.
        vec![
            "generate",
            "--model",
            "tiny",
            "--prompt",
            "w1 w2",
            "--max-new-tokens",
            "200",
        ],
        vec![
            "generate",
            "--model",
            "tiny",
            "--prompt",
            "w1",
            "--max-new-tokens",
            "0",
        ],
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

/// `trainer plan` prints the memory plan of a run, and a model is refused on a device this
/// build cannot use, with the way to get one that can.
#[test]
fn plan_and_device() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
    let dir = tempfile::tempdir().unwrap();
    let model = fixture.to_str().unwrap();
    let plan = run(
        trainer(),
        &[
            "plan",
            "--model",
            model,
            "--prompt-tokens",
            "64",
            "--set",
            "max_completion_length=64",
            "--set",
            "gradient_checkpointing=false",
        ],
        dir.path(),
    );
    assert!(plan.contains("exit 0"), "{plan}");
    // A sequence past the model's 128 positions (or past any number) is refused, naming both.
    for tokens in ["100", "9223372036854775807"] {
        let past = run(
            trainer(),
            &["plan", "--model", model, "--prompt-tokens", tokens],
            dir.path(),
        );
        assert!(
            past.contains("exit 2") && past.contains("context of 128 tokens"),
            "{past}"
        );
    }
    for item in [
        "weights",
        "optimizer (AdamW moments)",
        "activations",
        "generation KV cache",
    ] {
        assert!(plan.contains(item), "{item} in {plan}");
    }
    assert!(plan.contains("gradient checkpointing off"), "{plan}");
    let sft = run(
        trainer(),
        &["plan", "--model", model, "--kind", "sft", "--device", "cpu"],
        dir.path(),
    );
    assert!(!sft.contains("generation KV cache"), "{sft}");
    let cuda = run(
        trainer(),
        &[
            "sft",
            "--model",
            model,
            "--data",
            "none.jsonl",
            "--output",
            "out",
            "--device",
            "cuda:1",
        ],
        dir.path(),
    );
    if cfg!(feature = "cuda") {
        return;
    }
    assert!(cuda.contains("exit 1") || cuda.contains("exit 2"), "{cuda}");
    assert!(
        cuda.contains("device cuda:1") && cuda.contains("`cuda` feature"),
        "{cuda}"
    );
    let bad = run(
        trainer(),
        &["plan", "--model", model, "--device", "tpu"],
        dir.path(),
    );
    assert!(bad.contains("unknown device `tpu`"), "{bad}");
}

/// A signal stops `trainer` as it stops the other binaries: the one exit classifier and the one
/// line naming the signal (`docs/cli.md`).
#[test]
fn a_signal_exits_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let case_stdin = ["loss", "--case", "/dev/stdin"];
    insta::assert_snapshot!(run_signalled(trainer(), &case_stdin, dir.path(), "TERM"));
}
