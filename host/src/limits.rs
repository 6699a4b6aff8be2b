//! Caps on what a plugin hands back. Budgets bound what a plugin may *spend*; these bound what
//! it may *return*, so that a hostile plugin cannot blow up the output files, the logs or the
//! trainer's metrics: every string and list in a result is cut to a documented size, the cut
//! is marked in the text, and the result says it was cut ([`crate::Score::truncated`],
//! [`crate::Failure::truncated`]). Test statuses from evaluator plugins are capped too; a test
//! name that was cut or dropped no longer matches the instance's test lists, so a cap can only
//! make a grade worse, never better.

/// Bytes of a message: `score.message`, the `err` of a sample or a parse, and `info` fields.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Metrics of one score; later ones (in the plugin's order) are dropped.
pub const MAX_METRICS: usize = 64;
/// Bytes of one metric name.
pub const MAX_METRIC_NAME_BYTES: usize = 128;
/// Test results of one parsed log; later ones are dropped.
pub(crate) const MAX_TESTS: usize = 200_000;
/// Bytes of one test name.
pub(crate) const MAX_TEST_NAME_BYTES: usize = 4096;

/// `text` cut to at most `max` bytes (at a character boundary) plus a marker saying how much was
/// cut; `true` when it was.
pub fn cap_text(text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    let mut out = text;
    out.truncate(end);
    out.push_str(&format!("… [{cut} more bytes cut by the host]"));
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::cap_text;

    #[test]
    fn cuts_at_a_char_boundary_and_says_so() {
        assert_eq!(cap_text("short".into(), 10), ("short".into(), false));
        let (cut, was) = cap_text("ééééé".into(), 5);
        assert!(was);
        assert!(cut.starts_with("éé") && !cut.starts_with("ééé"), "{cut}");
        assert!(cut.ends_with("[6 more bytes cut by the host]"), "{cut}");
        let (big, was) = cap_text("x".repeat(48 << 20), 4096);
        assert!(was && big.len() < 4200);
    }
}
