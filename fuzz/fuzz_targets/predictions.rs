//! The predictions reader in both formats on any text: predictions or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swerve_swebench::predictions::parse_predictions;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("fuzz.jsonl");
    for jsonl in [true, false] {
        if let Ok(predictions) = parse_predictions(text, jsonl, path) {
            for p in predictions {
                let _ = p.model_dir_name();
                let _ = p.is_empty_patch();
            }
        }
    }
});
