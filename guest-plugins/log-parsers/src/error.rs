//! What a parser does where SWE-bench's raises: an exception ends the upstream parse (and with
//! it the instance's evaluation), so the port returns it as a value.

use std::fmt;

/// The Python exception class a SWE-bench parser raises on some input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyException {
    /// `ValueError`: an instance id that no per-instance dispatcher knows (jekyll,
    /// immutable_js), or a `version` that `float()` cannot read (lighthouse).
    ValueError,
    /// `IndexError`: an instance id without `-` (jekyll), a suite popped from an empty stack
    /// (karma), a `FAIL:`/`ERROR:` header without a test name (django).
    IndexError,
    /// `KeyError`: the mocha JSON report lacks `failures`, `passes` or a `fullTitle` (prismjs).
    KeyError,
    /// `TypeError`: the mocha JSON report has the wrong shape (prismjs).
    TypeError,
    /// `AttributeError`: a line looked like a result but its pattern did not match (calypso
    /// calls `.group` on `None`).
    AttributeError,
    /// `json.JSONDecodeError`: the mocha JSON report is not JSON (prismjs).
    JsonDecodeError,
    /// `xml.etree.ElementTree.ParseError`: the doctest XML report is not well-formed.
    XmlParseError,
    /// `RecursionError`: a JSON line nested too deeply for `json.loads` (SWE-rebench V2's
    /// dart parser).
    RecursionError,
}

impl PyException {
    /// The class name, as `type(e).__name__` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            PyException::ValueError => "ValueError",
            PyException::IndexError => "IndexError",
            PyException::KeyError => "KeyError",
            PyException::TypeError => "TypeError",
            PyException::AttributeError => "AttributeError",
            PyException::JsonDecodeError => "JSONDecodeError",
            PyException::XmlParseError => "ParseError",
            PyException::RecursionError => "RecursionError",
        }
    }
}

impl fmt::Display for PyException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parse that SWE-bench 5.0.2 ends with an exception: which one, and why (in this crate's
/// words; the message is not Python's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The exception upstream raises.
    pub exception: PyException,
    /// What was wrong with the input.
    pub detail: String,
}

impl ParseError {
    pub(crate) fn new(exception: PyException, detail: impl Into<String>) -> ParseError {
        ParseError {
            exception,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.exception, self.detail)
    }
}

impl std::error::Error for ParseError {}
