//! What pins the requirements to versions: lock files (`uv.lock`, then `poetry.lock`: a package
//! locked at one version, the first lock that has it), then constraints files (their lines win).
//! A pinned requirement keeps its extras and takes the pin's version and markers; its own
//! markers go, as the environment has one Python and the pin was made for it.

use std::collections::{BTreeMap, BTreeSet};

use super::{Files, NoRecipe, Sources, requirement, requirements_files};

/// Lock files whose versions pin the requirements, in the order they are read.
const LOCK_FILES: [&str; 2] = ["uv.lock", "poetry.lock"];

/// One pin: a constraints line, or `name==version` from a lock.
pub(super) struct Pin(String);

impl Pin {
    /// What replaces the requirement `requirement`: the pin, with the requirement's extras.
    pub(super) fn replacing(&self, requirement: &str) -> String {
        let extras = requirement
            .split_once('[')
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(extras, _)| format!("[{extras}]"))
            .unwrap_or_default();
        match self.0.split_once("==") {
            Some((name, version)) if !extras.is_empty() => {
                format!("{}{extras}=={version}", name.trim())
            }
            _ => self.0.clone(),
        }
    }
}

/// Pins by normalised package name.
#[derive(Default)]
pub(super) struct Pins(BTreeMap<String, Pin>);

impl Pins {
    /// The pin of the package `name`.
    pub(super) fn get(&self, name: &str) -> Option<&Pin> {
        self.0.get(name)
    }
}

/// The pins of the repository's lock and constraints files; those that pin something go into
/// `sources` (constraints files whatever they hold).
pub(super) fn read(files: &Files, sources: &mut Sources) -> Result<Pins, NoRecipe> {
    let mut pins = Pins::default();
    for lock in LOCK_FILES {
        let Some(text) = files.get(lock) else {
            continue;
        };
        let locked = locked_versions(text).map_err(|detail| NoRecipe::Unreadable {
            file: lock.to_owned(),
            detail,
        })?;
        if !locked.is_empty() {
            sources.insert(lock.to_owned());
        }
        for (name, version) in locked {
            let pin = Pin(format!("{name}=={version}"));
            pins.0.entry(name).or_insert(pin);
        }
    }
    for line in requirements_files::constraints(files, sources) {
        if let Some(name) = requirement::name(&line) {
            pins.0.insert(name, Pin(line));
        }
    }
    Ok(pins)
}

/// The versions a `uv.lock` or `poetry.lock` gives its packages (`[[package]]` tables with
/// `name` and `version`), by normalised name; a package locked at more than one version (for
/// different platforms or Pythons) is left unpinned. `Err` is the TOML parser's message.
fn locked_versions(text: &str) -> Result<BTreeMap<String, String>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_owned())?;
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in table
        .get("package")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(version)) = (
            package.get("name").and_then(|v| v.as_str()),
            package.get("version").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        // The project itself (uv: an editable or virtual source) is not a requirement.
        let local = package
            .get("source")
            .and_then(|s| s.as_table())
            .is_some_and(|s| s.contains_key("editable") || s.contains_key("virtual"));
        if let Some(name) = requirement::name(name).filter(|_| !local) {
            versions.entry(name).or_default().insert(version.to_owned());
        }
    }
    Ok(versions
        .into_iter()
        .filter(|(_, v)| v.len() == 1)
        .filter_map(|(name, v)| Some((name, v.into_iter().next()?)))
        .collect())
}
