//! INI files as Python's `configparser` reads `setup.cfg` and `tox.ini`: sections, `key = value`
//! (or `:`), indented continuation lines, `#` and `;` comment lines. Keys are lower-cased, as
//! `configparser` does; a file always parses (a line that is none of these is skipped).

use std::collections::BTreeMap;

/// A parsed INI file: each section's entries in file order.
#[derive(Debug, Default)]
pub(super) struct Ini {
    sections: BTreeMap<String, Vec<(String, String)>>,
}

impl Ini {
    /// `text` as INI.
    pub(super) fn parse(text: &str) -> Ini {
        let mut ini = Ini::default();
        let mut section = String::new();
        let mut last: Option<usize> = None;
        for raw in text.lines() {
            let trimmed = raw.trim();
            if trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            if trimmed.is_empty() {
                continue;
            }
            let indented = raw.starts_with([' ', '\t']);
            if indented && let Some(i) = last {
                let entries = ini.sections.entry(section.clone()).or_default();
                let value = &mut entries[i].1;
                value.push('\n');
                value.push_str(trimmed);
                continue;
            }
            if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                section = name.trim().to_owned();
                ini.sections.entry(section.clone()).or_default();
                last = None;
                continue;
            }
            let split = trimmed.find(['=', ':']);
            if let Some(at) = split {
                let entries = ini.sections.entry(section.clone()).or_default();
                entries.push((
                    trimmed[..at].trim().to_ascii_lowercase(),
                    trimmed[at + 1..].trim().to_owned(),
                ));
                last = Some(entries.len() - 1);
            }
        }
        ini
    }

    /// Whether the file has the section `[name]`.
    pub(super) fn has_section(&self, name: &str) -> bool {
        self.sections.contains_key(name)
    }

    /// The value of `key` in `[section]`, trimmed; continuation lines joined with `\n`.
    pub(super) fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .get(section)?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
    }

    /// The keys of `[section]`, in file order.
    pub(super) fn keys<'a>(&'a self, section: &str) -> impl Iterator<Item = &'a str> {
        self.sections
            .get(section)
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
    }
}
