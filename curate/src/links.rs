//! Which issues a pull request closes: GitHub's nine closing keywords, any letter case, as whole
//! words, then whitespace, then `#N`, `OWNER/REPO#N` or `https://github.com/OWNER/REPO/issues/N`
//! where OWNER/REPO is the pull request's own repository. HTML comments are removed first (PR
//! templates hide instructions in them). Nothing else links: "see #N", "related to #N", a
//! template's `Fixes #<issue number>`, an issue of another repository, the PR's own number.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

/// A keyword and its target. The `regex` crate has no look-around, so the whole-word checks on
/// both ends are done by hand in [`linked_issues`].
static LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:close|closes|closed|fix|fixes|fixed|resolve|resolves|resolved)\s+(?:([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#([0-9]+)|#([0-9]+)|https?://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/issues/([0-9]+))",
    )
    .expect("valid link pattern")
});

static HTML_COMMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<!--.*?-->").expect("valid comment pattern"));

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The issue numbers `texts` (title, body, commit messages) link for PR `number` of `repo`
/// (`owner/name`), sorted and without repeats.
pub(crate) fn linked_issues<'a>(
    repo: &str,
    number: u64,
    texts: impl IntoIterator<Item = &'a str>,
) -> Vec<u64> {
    let joined = texts.into_iter().collect::<Vec<_>>().join("\n");
    let text = HTML_COMMENT.replace_all(&joined, "");
    let mut found = BTreeSet::new();
    for caps in LINK.captures_iter(&text) {
        let whole = caps.get(0).expect("group 0");
        // The keyword starts a word: not after a word character, `/`, `#` or `-`.
        let before = text[..whole.start()].chars().next_back();
        if before.is_some_and(|c| is_word(c) || matches!(c, '/' | '#' | '-')) {
            continue;
        }
        // The number ends a word: `#12abc` is not a link.
        if text[whole.end()..].chars().next().is_some_and(is_word) {
            continue;
        }
        let target = caps.get(1).or_else(|| caps.get(4));
        if target.is_some_and(|t| !t.as_str().eq_ignore_ascii_case(repo)) {
            continue;
        }
        let digits = caps.get(2).or_else(|| caps.get(3)).or_else(|| caps.get(5));
        if let Some(n) = digits.and_then(|d| d.as_str().parse::<u64>().ok()) {
            found.insert(n);
        }
    }
    found.remove(&number);
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::linked_issues;

    fn check(text: &str, want: &[u64]) {
        assert_eq!(linked_issues("acme/widget", 99, [text]), want, "{text:?}");
    }

    #[test]
    fn keywords_and_forms() {
        for kw in [
            "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
        ] {
            check(&format!("{kw} #3"), &[3]);
            check(&format!("{} #3", kw.to_uppercase()), &[3]);
        }
        check("Fix #1: crash on empty input", &[1]);
        check("resolve acme/widget#27", &[27]);
        check("resolve ACME/Widget#27", &[27]);
        check("Fix https://github.com/acme/widget/issues/25", &[25]);
        check("fixes\n#4 and closes #5, fixes #4", &[4, 5]);
        check("(fixes #6)", &[6]);
    }

    #[test]
    fn non_links() {
        check("see #24", &[]);
        check("Related to #26", &[]);
        check("fixed in #8", &[]);
        check("Reverts acme/widget#8", &[]);
        check("Fixes #<issue number>", &[]);
        check("<!-- Fixes #12 -->", &[]);
        check("fixes other/repo#3", &[]);
        check("fix https://github.com/other/repo/issues/3", &[]);
        check("prefix #3", &[]);
        check("hotfix #3", &[]);
        check("fixes #3abc", &[]);
        check("fixes #99", &[]);
        check("fixes#3", &[]);
        check("Fixes: #3", &[]);
    }
}
