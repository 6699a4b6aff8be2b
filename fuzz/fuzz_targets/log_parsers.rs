//! Every log parser, the test-section extraction, the log evaluation and the infrastructure
//! classifier on any log text: never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swerve_log_parsers::{
    LogContext, LogText, Parser, classify_infra_failure, evaluate_log_with, extract_test_section,
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let ctx = LogContext::default();
    let log = LogText::new(&text);
    let _ = extract_test_section(&log);
    let _ = classify_infra_failure(&log);
    for parser in Parser::ALL {
        let _ = parser.parse(&text, &ctx);
        let _ = evaluate_log_with(&log, |section| {
            Ok::<_, std::convert::Infallible>(parser.parse(section, &ctx))
        });
    }
});
