//! The format errors of the SWE-RL reward. They are outcomes (the reward is −1), not failures of
//! swerve; their `Display` text is the reference implementation's exact message.

use serde::{Serialize, Serializer};

/// Why a completion scores −1: it does not follow the expected output format, or its edits do
/// not apply. `Display` gives the reference's exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// One of the four tags (checked in the order `<think>`, `</think>`, `<solution>`,
    /// `</solution>`) does not occur exactly once.
    #[error("count of {tag} is not 1")]
    TagCount {
        /// The first tag whose count is not 1.
        tag: &'static str,
    },
    /// The thought is empty after Python's `str.strip()`.
    #[error("Thought is empty")]
    EmptyThought,
    /// The answer contains no block that the SEARCH/REPLACE grammar accepts.
    #[error("No valid search blocks found")]
    NoBlocks,
    /// A block's search text equals its replace text (empty/empty included).
    #[error("Search and replace blocks are identical")]
    IdenticalBlocks,
    /// A block's search text is not found at a line start of the file as edited so far.
    #[error("Search block not found in the code: \n{search}")]
    SearchNotFound {
        /// The block's search text as written (the message prefixes it with `"\n"`, as the
        /// reference does).
        search: String,
    },
    /// swerve's own bound, not the reference's: the edits make a file larger than
    /// [`crate::edits::MAX_EDITED_BYTES`]. Blocks whose search text is empty insert their
    /// replacement at every line start, so a few of them grow a file geometrically; the
    /// reference would exhaust memory instead.
    #[error("Edited file {path} exceeds {limit} bytes")]
    EditTooLarge {
        /// The file.
        path: String,
        /// [`crate::edits::MAX_EDITED_BYTES`].
        limit: usize,
    },
}

/// Serialises as the message string, as the reference's `{"error": <message>}` metadata does.
impl Serialize for FormatError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_reference_ones() {
        fn check(error: FormatError, expect: &str) {
            assert_eq!(error.to_string(), expect);
        }
        check(
            FormatError::TagCount { tag: "<think>" },
            "count of <think> is not 1",
        );
        check(
            FormatError::TagCount { tag: "</solution>" },
            "count of </solution> is not 1",
        );
        check(FormatError::EmptyThought, "Thought is empty");
        check(FormatError::NoBlocks, "No valid search blocks found");
        check(
            FormatError::IdenticalBlocks,
            "Search and replace blocks are identical",
        );
        check(
            FormatError::SearchNotFound {
                search: "x = 1".into(),
            },
            "Search block not found in the code: \nx = 1",
        );
    }
}
