//! The dataset readers (JSONL, JSON list, one row) on any text: a row or an error naming what
//! is wrong, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swerve_swebench::dataset::{Instance, parse_json_rows, parse_jsonl_rows};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_jsonl_rows(text);
    let _ = parse_json_rows(text);
    if let Ok(row) = Instance::from_json(text) {
        let _ = row.check_evaluable();
    }
});
