//! Test statuses and the insertion-ordered status map the parsers fill.

use std::collections::HashMap;
use std::fmt;

/// The five status words of SWE-bench's `TestStatus` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestStatus {
    /// `PASSED`
    Passed,
    /// `FAILED`
    Failed,
    /// `SKIPPED`
    Skipped,
    /// `ERROR`
    Error,
    /// `XFAIL` (an expected failure; graded like a pass)
    Xfail,
}

impl TestStatus {
    /// All statuses in the declaration order of the Python enum (`FAILED`, `PASSED`, `SKIPPED`,
    /// `ERROR`, `XFAIL`); the parsers test prefixes and suffixes in this order.
    pub const ALL: [TestStatus; 5] = [
        TestStatus::Failed,
        TestStatus::Passed,
        TestStatus::Skipped,
        TestStatus::Error,
        TestStatus::Xfail,
    ];

    /// The status word as it appears in logs and in status maps.
    pub fn as_str(self) -> &'static str {
        match self {
            TestStatus::Passed => "PASSED",
            TestStatus::Failed => "FAILED",
            TestStatus::Skipped => "SKIPPED",
            TestStatus::Error => "ERROR",
            TestStatus::Xfail => "XFAIL",
        }
    }

    /// The status whose word is exactly `word`.
    pub fn from_word(word: &str) -> Option<TestStatus> {
        TestStatus::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// The status word `line` starts with, if any.
    pub(crate) fn prefix_of(line: &str) -> Option<TestStatus> {
        TestStatus::ALL
            .into_iter()
            .find(|s| line.starts_with(s.as_str()))
    }

    /// Whether `line` ends with any status word.
    pub(crate) fn is_suffix_of(line: &str) -> bool {
        TestStatus::ALL.iter().any(|s| line.ends_with(s.as_str()))
    }
}

impl fmt::Display for TestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value in a status map.
///
/// The pytest-family parsers store the first (or last) token of a line as the status, and that
/// token only has to *start* (or end) with a status word: `ERROR: file not found` stores
/// `ERROR:` under the key `file`. Such a value is none of the five statuses, so the grader
/// counts the test neither as passed nor as failed, and the exit-code check does not see an
/// `ERROR`. [`Status::Other`] keeps that token so that these quirks grade exactly as upstream.
///
/// This is also the status an evaluator plugin returns (the WIT `test-status`) and the one an
/// execution reports; in JSON (feature `serde`) it is the bare word.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(from = "String", into = "String")
)]
pub enum Status {
    /// One of the five status words, exactly.
    Known(TestStatus),
    /// Any other token (`ERROR:`, `PASSEDx`, `xFAILED`, ...).
    Other(String),
}

impl Status {
    /// The status for a token taken from a log line.
    pub fn from_token(token: &str) -> Status {
        match TestStatus::from_word(token) {
            Some(status) => Status::Known(status),
            None => Status::Other(token.to_owned()),
        }
    }

    /// The status as the string the Python map would hold.
    pub fn as_str(&self) -> &str {
        match self {
            Status::Known(status) => status.as_str(),
            Status::Other(token) => token,
        }
    }

    /// The status word, when the value is exactly one.
    pub fn known(&self) -> Option<TestStatus> {
        match self {
            Status::Known(status) => Some(*status),
            Status::Other(_) => None,
        }
    }

    /// `PASSED` or `XFAIL`: what the grader counts as a pass.
    pub fn is_pass(&self) -> bool {
        matches!(self, Status::Known(TestStatus::Passed | TestStatus::Xfail))
    }
}

impl From<TestStatus> for Status {
    fn from(status: TestStatus) -> Status {
        Status::Known(status)
    }
}

impl From<String> for Status {
    fn from(token: String) -> Status {
        match TestStatus::from_word(&token) {
            Some(status) => Status::Known(status),
            None => Status::Other(token),
        }
    }
}

impl From<Status> for String {
    fn from(status: Status) -> String {
        match status {
            Status::Known(status) => status.as_str().to_owned(),
            Status::Other(token) => token,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Test name → status, in first-insertion order, with Python `dict` semantics: inserting an
/// existing key replaces its value and keeps its position. The order matters to the grader's
/// truncated-id prefix rule, which picks the first matching key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusMap {
    entries: Vec<(String, Status)>,
    index: HashMap<String, usize>,
}

impl StatusMap {
    /// An empty map.
    pub fn new() -> StatusMap {
        StatusMap::default()
    }

    /// Sets `key` to `status`; an existing key keeps its position.
    pub fn insert(&mut self, key: impl Into<String>, status: impl Into<Status>) {
        let key = key.into();
        let status = status.into();
        match self.index.get(&key) {
            Some(&at) => self.entries[at].1 = status,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, status));
            }
        }
    }

    /// Removes `key` (Python's `del` / `pop`); inserting it again puts it last.
    pub fn remove(&mut self, key: &str) -> Option<Status> {
        let at = self.index.remove(key)?;
        let (_, status) = self.entries.remove(at);
        for slot in self.index.values_mut() {
            if *slot > at {
                *slot -= 1;
            }
        }
        Some(status)
    }

    /// The status stored under exactly `key`.
    pub fn get(&self, key: &str) -> Option<&Status> {
        self.index.get(key).map(|&at| &self.entries[at].1)
    }

    /// Whether `key` is in the map.
    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// Number of tests in the map.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any test is `FAILED` or `ERROR` (the exit-code cross-check asks this).
    pub fn has_failures(&self) -> bool {
        self.entries.iter().any(|(_, status)| {
            matches!(status.known(), Some(TestStatus::Failed | TestStatus::Error))
        })
    }

    /// The entries in first-insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Status)> {
        self.entries
            .iter()
            .map(|(key, status)| (key.as_str(), status))
    }
}

impl<K: Into<String>, S: Into<Status>> FromIterator<(K, S)> for StatusMap {
    fn from_iter<I: IntoIterator<Item = (K, S)>>(iter: I) -> StatusMap {
        let mut map = StatusMap::new();
        for (key, status) in iter {
            map.insert(key, status);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reinsert_keeps_position_and_replaces_value() {
        let mut map = StatusMap::new();
        map.insert("a", TestStatus::Failed);
        map.insert("b", TestStatus::Passed);
        map.insert("a", TestStatus::Passed);
        let got: Vec<_> = map.iter().map(|(k, s)| (k, s.as_str())).collect();
        assert_eq!(got, [("a", "PASSED"), ("b", "PASSED")]);
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn tokens_map_to_statuses() {
        let check = |token: &str, expect: Option<TestStatus>| {
            let status = Status::from_token(token);
            assert_eq!(status.known(), expect, "{token}");
            assert_eq!(status.as_str(), token);
        };
        check("PASSED", Some(TestStatus::Passed));
        check("XFAIL", Some(TestStatus::Xfail));
        check("ERROR:", None);
        check("PASSEDx", None);
        check("passed", None);
    }
}
