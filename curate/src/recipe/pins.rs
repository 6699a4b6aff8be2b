//! What pins the requirements to versions: lock files (`uv.lock`, then `poetry.lock`: a package
//! locked at one version, the first lock that has it), then constraints files (their lines win).
//! A pinned requirement keeps its extras and takes the pin's version and markers; its own
//! markers go, as the environment has one Python and the pin was made for it.

use std::collections::BTreeMap;

use pep508_rs::{PackageName, Requirement};

use super::{Files, NoRecipe, Sources, requirement, requirements_files};

/// Lock files whose versions pin the requirements, in the order they are read.
const LOCK_FILES: [&str; 2] = ["uv.lock", "poetry.lock"];

/// One pin: its text (a constraints line, or `name==version` from a lock) and its parse.
pub(super) struct Pin {
    text: String,
    requirement: Requirement,
}

impl Pin {
    /// `text` as a pin; `None` where it is not a PEP 508 requirement.
    fn new(text: String) -> Option<Pin> {
        let requirement = requirement::parse(&text)?;
        Some(Pin { text, requirement })
    }

    /// What replaces `requirement`: the pin, with the extras of `requirement` it lacks added.
    pub(super) fn replacing(&self, requirement: &Requirement) -> String {
        let missing: Vec<_> = requirement
            .extras
            .iter()
            .filter(|e| !self.requirement.extras.contains(e))
            .cloned()
            .collect();
        if missing.is_empty() {
            return self.text.clone();
        }
        let mut pinned = self.requirement.clone();
        pinned.extras.extend(missing);
        pinned.to_string()
    }
}

/// Pins by normalised package name.
#[derive(Default)]
pub(super) struct Pins(BTreeMap<PackageName, Pin>);

impl Pins {
    /// The pin of the package `name`.
    pub(super) fn get(&self, name: &PackageName) -> Option<&Pin> {
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
            if let Some(pin) = Pin::new(format!("{name}=={version}")) {
                pins.0.entry(name).or_insert(pin);
            }
        }
    }
    for line in requirements_files::constraints(files, sources) {
        if let Some(pin) = Pin::new(line) {
            pins.0.insert(pin.requirement.name.clone(), pin);
        }
    }
    Ok(pins)
}

/// The versions a `uv.lock` or `poetry.lock` gives its packages (`[[package]]` tables with
/// `name` and `version`), by normalised name; a package locked at more than one version (for
/// different platforms or Pythons) is left unpinned. `Err` is the TOML parser's message.
fn locked_versions(text: &str) -> Result<BTreeMap<PackageName, String>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_owned())?;
    let mut versions: BTreeMap<PackageName, Vec<&str>> = BTreeMap::new();
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
        if let Some(name) = PackageName::new(name.to_owned()).ok().filter(|_| !local) {
            let locked = versions.entry(name).or_default();
            if !locked.contains(&version) {
                locked.push(version);
            }
        }
    }
    Ok(versions
        .into_iter()
        .filter_map(|(name, locked)| match locked[..] {
            [version] => Some((name, version.to_owned())),
            _ => None,
        })
        .collect())
}
