//! The GH Archive event reader on any bytes, as JSON lines and as (possibly multi-member,
//! truncated) gzip: kept events and counted problems, never a panic; the line counts add up.
#![no_main]

use std::io::BufReader;

use libfuzzer_sys::fuzz_target;
use swerve_curate::events::read_from;

fuzz_target!(|data: &[u8]| {
    let plain = read_from(BufReader::new(data), "fuzz.json");
    assert!(plain.invalid_lines <= plain.lines);
    let gz = flate2::read::MultiGzDecoder::new(data);
    let _ = read_from(BufReader::new(gz), "fuzz.json.gz");
});
