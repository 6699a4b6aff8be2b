//! The committed tokenizer and model configs under `trainer/assets/` are what the project's own
//! build produces, and they fit together.

use std::path::Path;

use swerve_trainer::commands::train_tokenizer::{END_OF_TEXT, PAD, TokenizerSpec, build};
use swerve_trainer::model::ModelConfig;
use swerve_trainer::tokenizer::Tokenizer;

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn rebuilding_the_tokenizer_gives_the_committed_bytes() {
    let root = crate_dir().join("..");
    let built = build(&TokenizerSpec::bundled(&root)).unwrap();
    let committed = fs_err::read_to_string(crate_dir().join("assets/tiny/tokenizer.json")).unwrap();
    // Comparing lengths first keeps a failure message short; then every byte.
    assert_eq!(built.len(), committed.len(), "rerun `trainer tokenizer`");
    assert!(built == committed, "rerun `trainer tokenizer`");
}

#[test]
fn tokenizer_round_trips_code_and_knows_its_special_tokens() {
    let tok = Tokenizer::from_file(&crate_dir().join("assets/tiny/tokenizer.json")).unwrap();
    assert_eq!(tok.token_id(END_OF_TEXT), Some(0));
    assert_eq!(tok.token_id(PAD), Some(1));
    for text in [
        "def parse(text):\n    return {}\n",
        "key, _, value = line.partition(\"=\")",
        "naïve ünïcode ✓ and tabs\t",
    ] {
        let ids = tok.encode(text, false).unwrap();
        assert!(ids.len() < text.len(), "{text:?} should compress");
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
    }
}

#[test]
fn configs_match_the_tokenizer_and_their_intended_sizes() {
    let tok = Tokenizer::from_file(&crate_dir().join("assets/tiny/tokenizer.json")).unwrap();
    // (config, vocabulary, parameter count range)
    let cases = [
        ("assets/tiny/config.json", tok.vocab_size(), 0.5e6..1.5e6),
        ("assets/base-100m/config.json", 32000, 90e6..110e6),
    ];
    for (path, vocab, params) in cases {
        let config = ModelConfig::from_file(&crate_dir().join(path)).unwrap();
        assert_eq!(config.vocab_size, vocab, "{path}");
        assert_eq!(config.eos_token_ids, vec![0], "{path}");
        let n = swerve_trainer::model::params::expected_shapes(&config)
            .iter()
            .map(|(_, shape)| shape.iter().product::<usize>())
            .sum::<usize>() as f64;
        assert!(params.contains(&n), "{path}: {n} parameters");
    }
}
