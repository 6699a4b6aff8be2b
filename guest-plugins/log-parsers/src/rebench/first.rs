//! Ports of SWE-rebench V2's log parsers (part: first).

use super::ParseFn;

/// `(name, parser)` for every parser this part ports.
pub(super) const PARSERS: &[(&str, ParseFn)] = &[];
