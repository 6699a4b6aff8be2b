//! Steps 1–3 of the reward: extracting the thought and the answer from the tags, parsing the
//! SEARCH/REPLACE blocks of the answer, and applying them to the files in memory.

use serde::Serialize;

use crate::FileMap;
use crate::error::FormatError;
use crate::pystr::py_strip;

/// The four tags, in the order in which their counts are checked.
pub const TAGS: [&str; 4] = ["<think>", "</think>", "<solution>", "</solution>"];

/// The block grammar, exactly as the reference applies it with `re.findall` (no flags): groups
/// are path, search and replace.
pub const BLOCK_PATTERN: &str =
    r"```.*?\n### (.*)\n<<<<<<< SEARCH\n([\s\S]*?)\n=======\n([\s\S]*?)\n>>>>>>> REPLACE\n```";

/// One parsed SEARCH/REPLACE block, borrowed from the answer: `(path, search, replace)`, the
/// triple of Python's `re.findall`.
pub(crate) type BlockRef<'a> = (&'a str, &'a str, &'a str);

/// A completion that passed the format check (steps 1–3): its texts, its blocks and the file
/// contents its edits produce.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edits {
    /// The text between `<think>` and `</think>`, stripped; never empty.
    pub thought: String,
    /// The text between `<solution>` and `</solution>`, stripped.
    pub answer: String,
    /// The `(path, search, replace)` triples in match order, as `re.findall` returns them.
    pub blocks: Vec<(String, String, String)>,
    /// Path → new content, for every path that a block names (`pred_new_content`).
    pub new_content: FileMap,
}

/// Steps 1–3: extracts the tags, parses the blocks and applies them to `code_context`.
///
/// This is the reward's "format" check: `Err` is exactly the set of completions that score −1.
pub fn parse_and_apply(code_context: &FileMap, output: &str) -> Result<Edits, FormatError> {
    let (thought, answer) = extract_tags(output)?;
    let blocks = find_blocks(answer);
    if blocks.is_empty() {
        return Err(FormatError::NoBlocks);
    }
    let new_content = apply_blocks(code_context, &blocks)?;
    Ok(Edits {
        thought: thought.to_owned(),
        answer: answer.to_owned(),
        blocks: blocks
            .iter()
            .map(|&(p, s, r)| (p.to_owned(), s.to_owned(), r.to_owned()))
            .collect(),
        new_content,
    })
}

/// Step 1: the stripped thought and answer of `output`.
///
/// Errors with [`FormatError::TagCount`] for the first tag (in [`TAGS`] order) that does not
/// occur exactly once, and with [`FormatError::EmptyThought`] when the stripped thought is empty.
/// Tag order is never checked: a closing tag before its opening tag cuts nothing, so the text
/// runs to the end of the output.
pub fn extract_tags(output: &str) -> Result<(&str, &str), FormatError> {
    let (thought, answer) = split_tags(output)?;
    if thought.is_empty() {
        return Err(FormatError::EmptyThought);
    }
    Ok((thought, answer))
}

/// Step 1 without the empty-thought check, so that callers can still report both texts.
pub(crate) fn split_tags(output: &str) -> Result<(&str, &str), FormatError> {
    // Every tag starts with its only '<', so no occurrence of a tag overlaps another occurrence
    // of a tag: counting the tags found at each '<' gives Python's non-overlapping counts.
    let mut counts = [0usize; 4];
    let mut first = [0usize; 4];
    // memchr's search is SIMD in the wasm build too, where `match_indices` is not.
    for at in memchr::memchr_iter(b'<', output.as_bytes()) {
        let rest = &output[at..];
        if let Some(n) = TAGS.iter().position(|tag| rest.starts_with(tag)) {
            if counts[n] == 0 {
                first[n] = at;
            }
            counts[n] += 1;
        }
    }
    if let Some(n) = counts.iter().position(|&count| count != 1) {
        return Err(FormatError::TagCount { tag: TAGS[n] });
    }
    Ok((
        between(output, first[0] + TAGS[0].len(), first[1]),
        between(output, first[2] + TAGS[2].len(), first[3]),
    ))
}

/// The stripped text from `start` up to the (single) closing tag at `close` if that comes
/// after `start`, else up to the end.
fn between(output: &str, start: usize, close: usize) -> &str {
    let end = if close >= start { close } else { output.len() };
    py_strip(&output[start..end])
}

/// Step 2: every block of `answer` that the grammar accepts, in match order: the triples
/// `re.findall(BLOCK_PATTERN, answer)` returns.
///
/// The pattern is matched by hand rather than by a regex engine: a plugin gets a fresh instance
/// per batch, and compiling the pattern there cost more than scoring most samples. The matcher
/// follows the regex's leftmost-first semantics step by step (the tests compare it with the
/// `regex` crate on thousands of generated answers):
///
/// - a match can start at any occurrence of ```` ``` ```` (overlapping ones included), tried in
///   order;
/// - `.*?\n` can only end at the first `\n` after the fence, and `(.*)\n` only at the end of
///   the `### ` line (`.` does not match `\n`), so those parts have no alternatives;
/// - the lazy search group ends at the first `\n=======\n` after `<<<<<<< SEARCH\n` and the lazy
///   replace group at the first `\n>>>>>>> REPLACE\n```` ` after that. When either is missing,
///   later dividers or later starts cannot find one either, so no further match exists;
/// - after a match, the search resumes at its end (matches never overlap).
pub fn find_blocks(answer: &str) -> Vec<BlockRef<'_>> {
    const FENCE: &str = "```";
    const PATH: &str = "### ";
    const SEARCH: &str = "<<<<<<< SEARCH\n";
    const DIVIDER: &str = "\n=======\n";
    const END: &str = "\n>>>>>>> REPLACE\n```";
    let mut blocks = Vec::new();
    let mut from = 0;
    while let Some(found) = answer[from..].find(FENCE) {
        let start = from + found;
        // The next candidate start if this one does not match: the very next byte that can
        // begin a fence (fences may overlap, e.g. in "````").
        let next = start + 1;
        let Some(fence_nl) = answer[start + FENCE.len()..].find('\n') else {
            break;
        };
        let line = start + FENCE.len() + fence_nl + 1;
        let Some(path_line) = answer[line..].strip_prefix(PATH) else {
            from = next;
            continue;
        };
        let Some((path, after_path)) = path_line.split_once('\n') else {
            from = next;
            continue;
        };
        let Some(body) = after_path.strip_prefix(SEARCH) else {
            from = next;
            continue;
        };
        let Some((search, after_divider)) = body.split_once(DIVIDER) else {
            break;
        };
        let Some((replace, rest)) = after_divider.split_once(END) else {
            break;
        };
        blocks.push((path, search, replace));
        from = answer.len() - rest.len();
    }
    blocks
}

/// Step 3: applies `blocks` to `code_context` and returns the new content of every path they
/// name.
///
/// Blocks are grouped by exact path string, paths taken in order of first appearance and blocks
/// in order within a path. Each path starts from `"\n" + code_context[path]` (empty for an unknown
/// path); for each block the identical check comes first, then `"\n" + search` must occur in the
/// current text, and every occurrence is replaced by `"\n" + replace`. The first failure stops
/// everything. An empty `blocks` gives an empty map (the caller reports
/// [`FormatError::NoBlocks`]).
pub(crate) fn apply_blocks(
    code_context: &FileMap,
    blocks: &[BlockRef<'_>],
) -> Result<FileMap, FormatError> {
    let mut paths: Vec<&str> = Vec::new();
    for &(path, _, _) in blocks {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    let mut new_content = FileMap::new();
    let mut search = String::new();
    let mut replace = String::new();
    let mut edited = String::new();
    for path in paths {
        let original = code_context.get(path).map_or("", String::as_str);
        let mut content = String::with_capacity(original.len() + 1);
        content.push('\n');
        content.push_str(original);
        for &(_, s, r) in blocks.iter().filter(|block| block.0 == path) {
            if s == r {
                return Err(FormatError::IdenticalBlocks);
            }
            prefix_newline(&mut search, s);
            prefix_newline(&mut replace, r);
            match replace_all(&content, &search, &replace, &mut edited) {
                Replaced::Done => {}
                Replaced::NotFound => {
                    return Err(FormatError::SearchNotFound {
                        search: s.to_owned(),
                    });
                }
                Replaced::TooLarge => {
                    return Err(FormatError::EditTooLarge {
                        path: path.to_owned(),
                        limit: MAX_EDITED_BYTES,
                    });
                }
            }
            std::mem::swap(&mut content, &mut edited);
        }
        content.remove(0);
        new_content.insert(path.to_owned(), content);
    }
    Ok(new_content)
}

/// The largest an edited file may grow, in bytes (16 MiB): far above any source file, and a
/// bound on the memory one completion can make the reward use.
pub const MAX_EDITED_BYTES: usize = 16 << 20;

/// What [`replace_all`] did.
enum Replaced {
    /// `out` holds the text with every occurrence replaced.
    Done,
    /// `from` does not occur (`out` unspecified).
    NotFound,
    /// The result would exceed [`MAX_EDITED_BYTES`] (`out` unspecified).
    TooLarge,
}

/// Python's `text.replace(from, to)` written into `out`, in one search pass.
fn replace_all(text: &str, from: &str, to: &str, out: &mut String) -> Replaced {
    out.clear();
    let mut copied = 0;
    for at in Occurrences::new(text.as_bytes(), from.as_bytes()) {
        if out.len() + (at - copied) + to.len() > MAX_EDITED_BYTES {
            return Replaced::TooLarge;
        }
        out.push_str(&text[copied..at]);
        out.push_str(to);
        copied = at + from.len();
    }
    if copied == 0 {
        // `from` starts with '\n', so a match always ends after position 0.
        return Replaced::NotFound;
    }
    if out.len() + (text.len() - copied) > MAX_EDITED_BYTES {
        return Replaced::TooLarge;
    }
    out.push_str(&text[copied..]);
    Replaced::Done
}

/// The longest haystack searched directly by [`Occurrences`]; longer ones go to the two-way
/// searcher at once, its construction then being small against the search.
const DIRECT_SEARCH_MAX: usize = 8 << 10;

/// The non-overlapping occurrences of a non-empty needle in a haystack, leftmost first (what
/// `str::match_indices` and Python's `str.replace` find).
///
/// Search blocks are short and files mostly small, where building memchr's searcher costs more
/// than the search. So in texts under [`DIRECT_SEARCH_MAX`] bytes, candidates start as
/// occurrences of the needle's first byte (found with `memchr`, SIMD in the wasm build too),
/// each compared in full. Once the compared bytes exceed a linear budget (a needle and text
/// built so that most candidates nearly match), the rest of the text goes to memchr's two-way
/// searcher, which is linear in the worst case.
enum Occurrences<'h, 'n> {
    Direct {
        haystack: &'h [u8],
        needle: &'n [u8],
        /// Where the search resumes.
        at: usize,
        /// Bytes that may still be compared before switching.
        budget: usize,
    },
    TwoWay {
        offset: usize,
        /// Boxed: it is large, and rarely built.
        inner: Box<memchr::memmem::FindIter<'h, 'n>>,
    },
}

impl<'h, 'n> Occurrences<'h, 'n> {
    fn new(haystack: &'h [u8], needle: &'n [u8]) -> Self {
        assert!(!needle.is_empty(), "the needle is never empty");
        if haystack.len() >= DIRECT_SEARCH_MAX {
            return Occurrences::TwoWay {
                offset: 0,
                inner: Box::new(memchr::memmem::find_iter(haystack, needle)),
            };
        }
        Occurrences::Direct {
            haystack,
            needle,
            at: 0,
            budget: 4 * haystack.len() + 1024,
        }
    }
}

impl Iterator for Occurrences<'_, '_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        match self {
            Occurrences::Direct {
                haystack,
                needle,
                at,
                budget,
            } => {
                let (haystack, needle) = (*haystack, *needle);
                while let Some(found) = memchr::memchr(needle[0], &haystack[*at..]) {
                    let start = *at + found;
                    let candidate = haystack.get(start..start + needle.len())?;
                    let same = candidate
                        .iter()
                        .zip(needle)
                        .take_while(|(x, y)| x == y)
                        .count();
                    let Some(left) = budget.checked_sub(same + 1) else {
                        *self = Occurrences::TwoWay {
                            offset: start,
                            inner: Box::new(memchr::memmem::find_iter(&haystack[start..], needle)),
                        };
                        return self.next();
                    };
                    *budget = left;
                    if same == needle.len() {
                        *at = start + needle.len();
                        return Some(start);
                    }
                    *at = start + 1;
                }
                None
            }
            Occurrences::TwoWay { offset, inner } => inner.next().map(|at| *offset + at),
        }
    }
}

/// Sets `buf` to `"\n" + text`, reusing its allocation.
fn prefix_newline(buf: &mut String, text: &str) {
    buf.clear();
    buf.push('\n');
    buf.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference grammar, compiled by the `regex` crate (leftmost-first, lazy quantifiers:
    /// the same matches as Python's `re` for this pattern): the oracle `find_blocks` is checked
    /// against.
    static BLOCK_RE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(BLOCK_PATTERN).expect("valid pattern"));

    fn files(pairs: &[(&str, &str)]) -> FileMap {
        pairs
            .iter()
            .map(|&(p, c)| (p.to_owned(), c.to_owned()))
            .collect()
    }

    fn block(path: &str, search: &str, replace: &str) -> String {
        format!(
            "```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"
        )
    }

    #[test]
    fn geometric_growth_is_a_format_error_not_an_allocation() {
        // Found by the `swe_rl_answer` fuzz target: empty search texts insert their replacement
        // at every line start, and a replacement with line breaks multiplies the line starts.
        let code: FileMap = [("a.py".to_owned(), "x\ny\n".to_owned())].into();
        let lines = "a\n".repeat(1000);
        let blocks: Vec<BlockRef<'_>> = (0..4).map(|_| ("a.py", "", lines.as_str())).collect();
        assert_eq!(
            apply_blocks(&code, &blocks),
            Err(FormatError::EditTooLarge {
                path: "a.py".into(),
                limit: MAX_EDITED_BYTES,
            })
        );
        // One such block stays within the bound and applies as Python's `replace` would.
        let one = apply_blocks(&code, &blocks[..1]).unwrap();
        assert_eq!(one["a.py"].matches('\n').count(), 3 * 1001 - 1);
    }

    /// The direct search and its switch to the two-way searcher find what `match_indices`
    /// finds: random texts over small alphabets, and needles that nearly match everywhere so
    /// that the budget runs out part way.
    #[test]
    fn occurrences_are_match_indices() {
        let mut next = crate::test_rng(0x853c_49e6_748f_ea9b);
        let check = |text: &str, needle: &str| {
            let want: Vec<usize> = text.match_indices(needle).map(|(at, _)| at).collect();
            let got: Vec<usize> = Occurrences::new(text.as_bytes(), needle.as_bytes()).collect();
            assert_eq!(got, want, "text {text:?} needle {needle:?}");
        };
        for _ in 0..3000 {
            let alphabet = [b"ab\n".as_slice(), b"\n", b"abc\nx"][next(3) as usize];
            let (text_len, needle_len) = (next(200), 1 + next(6));
            let mut pick = |len: u64| -> String {
                (0..len)
                    .map(|_| char::from(alphabet[next(alphabet.len() as u64) as usize]))
                    .collect()
            };
            let text = pick(text_len);
            let needle = pick(needle_len);
            check(&text, &needle);
        }
        // Every candidate matches all but the needle's last byte: the budget runs out, and the
        // occurrences after the switch are still found, also one straddling it. The 10,001-byte
        // text is past `DIRECT_SEARCH_MAX`, so it goes to the two-way searcher from the start.
        for (lines, tail) in [(2000, "\nx"), (5000, "\n\nx\n\nx"), (300, "")] {
            let text = format!("{}x{}{tail}", "\n".repeat(lines), "\n".repeat(lines));
            for width in [1, 2, 40, 300] {
                let needle = format!("{}x", "\n".repeat(width));
                check(&text, &needle);
                check(&text, &format!("{needle}\n"));
            }
        }
    }

    #[test]
    fn tag_extraction() {
        fn check(output: &str, expect: Result<(&str, &str), FormatError>) {
            assert_eq!(extract_tags(output), expect, "output {output:?}");
        }
        let tag = |tag| Err(FormatError::TagCount { tag });
        check("", tag("<think>"));
        check("<think>a</think>", tag("<solution>"));
        check(
            "<think>a<think></think><solution>x</solution>",
            tag("<think>"),
        );
        check(
            "<think>a</think></think><solution></solution>",
            tag("</think>"),
        );
        check(
            "<think>a</think><solution>x</solution></solution>",
            tag("</solution>"),
        );
        check("<THINK>a</THINK><solution>x</solution>", tag("<think>"));
        check(
            "<think> a </think> pre <solution>\n x \n</solution> post",
            Ok(("a", "x")),
        );
        // Empty answers pass this step.
        check("<think>a</think><solution> </solution>", Ok(("a", "")));
        // Solution first; tags nested.
        check("<solution>s</solution><think>t</think>", Ok(("t", "s")));
        check(
            "<solution>s<think>t</think>u</solution>",
            Ok(("t", "s<think>t</think>u")),
        );
        // Reverse order: nothing cuts, the text runs to the end.
        check(
            "</think>x<think> t </solution> y <solution> s ",
            Ok(("t </solution> y <solution> s", "s")),
        );
        // U+001C–U+001F are whitespace for Python's strip, not for Rust's trim.
        check(
            "<think>\u{1C}\u{1D}\u{1E}\u{1F}</think><solution>x</solution>",
            Err(FormatError::EmptyThought),
        );
        check(
            "<think>\u{1F}t\u{1C}</think><solution>x</solution>",
            Ok(("t", "x")),
        );
        check(
            "<think>\u{85}\u{A0}\u{3000}</think><solution>x</solution>",
            Err(FormatError::EmptyThought),
        );
        check(
            "<think>\u{200B}</think><solution>x</solution>",
            Ok(("\u{200B}", "x")),
        );
    }

    #[test]
    fn block_grammar() {
        fn check(answer: &str, expect: &[BlockRef<'_>]) {
            assert_eq!(find_blocks(answer), expect, "answer {answer:?}");
        }
        let ok = "```python\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```";
        check(ok, &[("a.py", "x", "y")]);
        // Fence anywhere, any tag after it; the closing fence may be followed by anything.
        check(
            "text ```title=x\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```more",
            &[("a.py", "x", "y")],
        );
        // Path verbatim: trailing space, two spaces, empty, CR.
        check(&block("a.py ", "x", "y"), &[("a.py ", "x", "y")]);
        check(&block(" a.py", "x", "y"), &[(" a.py", "x", "y")]);
        check(&block("", "x", "y"), &[("", "x", "y")]);
        check(&block("a.py\r", "x", "y"), &[("a.py\r", "x", "y")]);
        check(&ok.replace("### a", "#### a"), &[]);
        check(&ok.replace("### a", "###a"), &[]);
        check(&ok.replace("python\n###", "python\n\n###"), &[]);
        // Empty search/replace must be blank lines; SEARCH right before ======= does not match.
        check(&block("a.py", "", "y"), &[("a.py", "", "y")]);
        check(&block("a.py", "x", ""), &[("a.py", "x", "")]);
        check(&ok.replace("SEARCH\nx\n", "SEARCH\n"), &[]);
        // The search splits at the first divider line.
        check(
            &block("a.py", "p\n=======\nq", "y"),
            &[("a.py", "p", "q\n=======\ny")],
        );
        // CRLF output: no block.
        check(&ok.replace('\n', "\r\n"), &[]);
        // A \r inside a body is content.
        check(&block("a.py", "x\r", "y\r"), &[("a.py", "x\r", "y\r")]);
        // A block without its closing fence swallows the next block into its replace text.
        let unclosed = ok.trim_end_matches("```");
        let second = block("b.py", "p", "q");
        check(
            &format!("{unclosed}\n{second}"),
            &[(
                "a.py",
                "x",
                "y\n>>>>>>> REPLACE\n\n```python\n### b.py\n<<<<<<< SEARCH\np\n=======\nq",
            )],
        );
        // An indented closing fence also swallows.
        check(
            &format!("{}  ```\n{second}", unclosed),
            &[(
                "a.py",
                "x",
                "y\n>>>>>>> REPLACE\n  ```\n```python\n### b.py\n<<<<<<< SEARCH\np\n=======\nq",
            )],
        );
        // Six backticks close one block and open the next one.
        let six = "```\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n``````\n### b.py\n<<<<<<< SEARCH\np\n=======\nq\n>>>>>>> REPLACE\n```";
        check(six, &[("a.py", "x", "y"), ("b.py", "p", "q")]);
        // Malformed blocks are skipped as long as one parses.
        check(
            &format!(
                "{}\n{}",
                ok.replace("SEARCH", "search"),
                block("c.py", "1", "2")
            ),
            &[("c.py", "1", "2")],
        );
    }

    #[test]
    fn the_hand_matcher_finds_what_the_regex_finds() {
        // Token soups around the grammar's pieces, from a fixed xorshift sequence.
        const TOKENS: [&str; 27] = [
            "`",
            "``",
            "```\n",
            "### a.py\n",
            "<<<<<<< SEARCH\n",
            "\n=======",
            "=======\n",
            "```\n### b.py\n<<<<<<< SEARCH\n",
            "\n=======\n",
            "\n>>>>>>> REPLACE\n```",
            "\n>>>>>>> REPLACE\n",
            "```",
            "```python",
            "\n",
            "### ",
            "a.py",
            "<<<<<<< SEARCH",
            "=======",
            ">>>>>>> REPLACE",
            "x",
            " ",
            "\r",
            "####",
            "``````",
            "\n\n",
            "é😀",
            "```python\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```",
        ];
        let mut rng = crate::test_rng(0x2545_f491_4f6c_dd1d);
        let mut next = |bound: usize| rng(bound as u64) as usize;
        // Where each group starts in the answer, so that equal text at another place differs.
        fn offsets(answer: &str, blocks: &[BlockRef<'_>]) -> Vec<[usize; 3]> {
            let at = |g: &str| g.as_ptr() as usize - answer.as_ptr() as usize;
            blocks
                .iter()
                .map(|(p, s, r)| [at(p), at(s), at(r)])
                .collect()
        }
        let mut with_blocks = 0;
        for _ in 0..20_000 {
            let answer: String = (0..next(60)).map(|_| TOKENS[next(TOKENS.len())]).collect();
            let by_regex: Vec<BlockRef<'_>> = BLOCK_RE
                .captures_iter(&answer)
                .map(|c| {
                    let group = |n| c.get(n).map_or("", |m| m.as_str());
                    (group(1), group(2), group(3))
                })
                .collect();
            let found = find_blocks(&answer);
            assert_eq!(found, by_regex, "answer {answer:?}");
            assert_eq!(
                offsets(&answer, &found),
                offsets(&answer, &by_regex),
                "answer {answer:?}"
            );
            with_blocks += usize::from(!found.is_empty());
        }
        assert!(with_blocks > 2000, "only {with_blocks} soups had blocks");
    }

    #[test]
    fn applying_edits() {
        fn check(
            context: &[(&str, &str)],
            blocks: &[BlockRef<'_>],
            expect: Result<&[(&str, &str)], FormatError>,
        ) {
            let got = apply_blocks(&files(context), blocks);
            assert_eq!(got, expect.map(files), "blocks {blocks:?}");
        }
        let ctx = [("a.py", "def add(x):\n    return x\n")];
        check(
            &ctx,
            &[("a.py", "def ad", "def plus_ad")],
            Ok(&[("a.py", "def plus_add(x):\n    return x\n")]),
        );
        // Start-anchored: a search missing its indentation is not found.
        check(
            &ctx,
            &[("a.py", "return x", "return y")],
            Err(FormatError::SearchNotFound {
                search: "return x".into(),
            }),
        );
        // Every occurrence is replaced.
        check(
            &[("a.py", "x\ny\nx\n")],
            &[("a.py", "x", "z")],
            Ok(&[("a.py", "z\ny\nz\n")]),
        );
        // Empty search on an existing file glues the replace after every \n.
        check(
            &[("a.py", "a\nb\n")],
            &[("a.py", "", "R")],
            Ok(&[("a.py", "Ra\nRb\nR")]),
        );
        check(
            &[("a.py", "a\rb\u{2028}c")],
            &[("a.py", "", "R")],
            Ok(&[("a.py", "Ra\rb\u{2028}c")]),
        );
        // Empty search on a new file creates it.
        check(
            &[],
            &[("new.py", "", "print(1)\n")],
            Ok(&[("new.py", "print(1)\n")]),
        );
        // Empty replace collapses the searched lines into one empty line.
        check(
            &[("a.py", "a\nb\nc\n")],
            &[("a.py", "b", "")],
            Ok(&[("a.py", "a\n\nc\n")]),
        );
        // Identical blocks, checked before not-found.
        check(&ctx, &[("a.py", "", "")], Err(FormatError::IdenticalBlocks));
        check(
            &ctx,
            &[("a.py", "zzz", "zzz")],
            Err(FormatError::IdenticalBlocks),
        );
        // Unknown files and path typos.
        check(
            &ctx,
            &[("a.py ", "def", "fn")],
            Err(FormatError::SearchNotFound {
                search: "def".into(),
            }),
        );
        check(
            &ctx,
            &[("./a.py", "def", "fn")],
            Err(FormatError::SearchNotFound {
                search: "def".into(),
            }),
        );
        // Chained edits: a later block sees the earlier one's result.
        check(
            &[("a.py", "x\n")],
            &[("a.py", "x", "y"), ("a.py", "y", "z")],
            Ok(&[("a.py", "z\n")]),
        );
        check(
            &[("a.py", "x\n")],
            &[("a.py", "x", "y"), ("a.py", "x", "w")],
            Err(FormatError::SearchNotFound { search: "x".into() }),
        );
        // Errors follow path first-appearance order: b.py's blocks all come after a.py's.
        check(
            &[("a.py", "1\n"), ("b.py", "2\n")],
            &[("b.py", "2", "3"), ("a.py", "1", "1"), ("b.py", "9", "8")],
            Err(FormatError::SearchNotFound { search: "9".into() }),
        );
        check(
            &[("a.py", "1\n"), ("b.py", "2\n")],
            &[("a.py", "1", "4"), ("b.py", "2", "3"), ("a.py", "4", "5")],
            Ok(&[("a.py", "5\n"), ("b.py", "3\n")]),
        );
    }

    #[test]
    fn parse_and_apply_pipeline() {
        let ctx = files(&[("a.py", "x = 1\n")]);
        let out = format!(
            "<think>fix</think>\n<solution>\n{}\n</solution>",
            block("a.py", "x = 1", "x = 2")
        );
        let edits = parse_and_apply(&ctx, &out).expect("valid output");
        assert_eq!(edits.thought, "fix");
        assert_eq!(
            edits.blocks,
            [("a.py".into(), "x = 1".into(), "x = 2".into())]
        );
        assert_eq!(edits.new_content, files(&[("a.py", "x = 2\n")]));
        // CRLF output has no block.
        assert_eq!(
            parse_and_apply(&ctx, &out.replace('\n', "\r\n")),
            Err(FormatError::NoBlocks)
        );
        // Blocks inside the thought are never seen.
        let hidden = format!(
            "<think>{}</think><solution>none</solution>",
            block("a.py", "x = 1", "x = 2")
        );
        assert_eq!(parse_and_apply(&ctx, &hidden), Err(FormatError::NoBlocks));
    }
}
