//! Requirements files: `requirements*.txt`, `*-requirements.txt`, `*_requirements.txt` and
//! `constraints*.txt` at the root, `requirements/*.txt`, and `requirements*.txt` in `tests/` or
//! `test/`, read as pip reads them: `\` continues a line, `-r` includes are followed (relative
//! to the including file), a requirement's own options (`--hash=…`) are left out.
//! Documentation requirements are left out; constraints files pin rather than add
//! ([`super::pins`]).

use super::{Files, Sources, is_recipe_file, requirement};

/// Folders of tests whose `requirements*.txt` list what the tests need.
const TEST_FOLDERS: [&str; 2] = ["tests/", "test/"];

/// Whether the root file `name` is a requirements or constraints file.
pub(super) fn is_top_level(name: &str) -> bool {
    name.ends_with(".txt")
        && (name.starts_with("requirements")
            || name.starts_with("constraints")
            || name.ends_with("-requirements.txt")
            || name.ends_with("_requirements.txt"))
}

/// Whether `path`, one folder deep and named `name`, is a requirements file.
pub(super) fn is_in_folder(path: &str, name: &str) -> bool {
    name.ends_with(".txt")
        && (path.starts_with("requirements/")
            || (TEST_FOLDERS.iter().any(|f| path.starts_with(f)) && name.contains("requirements")))
}

/// The requirements of the requirements files (documentation ones aside), files in path order;
/// each file read goes into `sources`.
pub(super) fn test_requirements(files: &Files, sources: &mut Sources) -> Vec<String> {
    let mut out = Vec::new();
    for path in files.keys().filter(|p| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.ends_with(".txt")
            && (name.contains("requirements") || p.starts_with("requirements/"))
            && !name.contains("doc")
            && is_recipe_file(p)
    }) {
        sources.insert(path.clone());
        out.extend(read(files, path, &mut Vec::new()));
    }
    out
}

/// The lines of the root's `constraints*.txt`, files in path order; each file goes into
/// `sources`.
pub(super) fn constraints(files: &Files, sources: &mut Sources) -> Vec<String> {
    let mut out = Vec::new();
    for path in files
        .keys()
        .filter(|p| !p.contains('/') && p.starts_with("constraints") && p.ends_with(".txt"))
    {
        sources.insert(path.clone());
        out.extend(read(files, path, &mut Vec::new()));
    }
    out
}

/// The requirements of a requirements file, its `-r` includes followed (relative to the file,
/// each file once); what [`requirement::from_line`] refuses is left out.
fn read(files: &Files, path: &str, seen: &mut Vec<String>) -> Vec<String> {
    if seen.iter().any(|s| s == path) {
        return Vec::new();
    }
    seen.push(path.to_owned());
    let Some(text) = files.get(path) else {
        return Vec::new();
    };
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut out = Vec::new();
    for line in logical_lines(text) {
        let line = line.split(" #").next().unwrap_or(&line).trim();
        let include = line
            .strip_prefix("-r ")
            .or_else(|| line.strip_prefix("--requirement "))
            .or_else(|| line.strip_prefix("-r"));
        if let Some(include) = include {
            let include = include.trim();
            let joined = if dir.is_empty() {
                include.to_owned()
            } else {
                format!("{dir}/{include}")
            };
            out.extend(read(files, &normalise(&joined), seen));
        } else if let Some(req) = requirement::from_line(without_options(line)) {
            out.push(req);
        }
    }
    out
}

/// The lines of a requirements file as pip reads them: a line that ends in `\` goes on in the
/// next (as `pip-compile --generate-hashes` writes each requirement's hashes).
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        match line.strip_suffix('\\') {
            Some(start) => {
                pending.push_str(start);
                pending.push(' ');
            }
            None => {
                pending.push_str(line);
                out.push(std::mem::take(&mut pending));
            }
        }
    }
    if !pending.is_empty() {
        out.push(pending);
    }
    out
}

/// A requirement line without pip's per-requirement options (`--hash=…`,
/// `--config-settings …`): the words before the first that starts with `-`.
fn without_options(line: &str) -> &str {
    let option = line
        .match_indices(char::is_whitespace)
        .find(|(i, _)| line[*i..].trim_start().starts_with('-'))
        .map_or(line.len(), |(i, _)| i);
    line[..option].trim_end()
}

/// `a/./b/../c` → `a/c`.
fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_continuation_lines_as_pip_reads_them() {
        let files = Files::from([(
            "requirements.txt".to_owned(),
            "attrs==23.1.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via pytest\n\
             pytest==8.3.4 --hash=sha256:cc  # pinned\n\
             six ; python_version < \"3\"\n\
             -e .\n"
                .to_owned(),
        )]);
        assert_eq!(
            read(&files, "requirements.txt", &mut Vec::new()),
            [
                "attrs==23.1.0",
                "pytest==8.3.4",
                "six ; python_version < \"3\""
            ]
        );
    }
}
