//! `harness plugin new`: a plugin project that builds, passes its own test and runs in the host.

use std::path::PathBuf;

use crate::error::HarnessError;

/// The language of a new plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// A Rust crate on the plugin kit, built for `wasm32-wasip2`.
    Rust,
    /// A Python module built with componentize-py.
    Python,
}

/// What to create.
#[derive(Debug, Clone)]
pub struct Scaffold {
    /// The plugin's name: lower-case letters, digits and `-`, starting with a letter.
    pub name: String,
    /// Its language.
    pub language: Language,
    /// The folder to create the project in (the project is `<dir>/<name>`).
    pub dir: PathBuf,
    /// A plugin kit crate for a Rust project to depend on by path; `None` writes the kit this
    /// binary carries into the project (`vendor/swerve-plugin-kit/`).
    pub kit: Option<PathBuf>,
}

/// The WIT package, copied into every project so that it builds on its own.
pub(crate) const WIT: &str = include_str!("../../wit/plugin.wit");

/// The plugin kit's source, carried by the binary so that `harness plugin new` works from any
/// folder. Its bindings read `../../wit` from the kit's folder: the project's `wit/`.
const KIT_LIB: &str = include_str!("../../guest-plugins/kit/src/lib.rs");

/// The version requirement of wit-bindgen the kit is written against (the workspace's).
const KIT_WIT_BINDGEN: &str = "0.63";

/// Where the carried kit goes inside a Rust project.
const VENDORED_KIT: &str = "vendor/swerve-plugin-kit";

/// The carried kit's manifest: the workspace kit's, with its inherited fields written out.
fn kit_manifest() -> String {
    format!(
        r#"[package]
name = "swerve-plugin-kit"
description = "Write a swerve reward or evaluator plugin in Rust by implementing one trait"
version = "{version}"
edition = "2024"
license = "Apache-2.0"

[dependencies]
wit-bindgen = {{ version = "{KIT_WIT_BINDGEN}", default-features = false, features = ["macros", "realloc"] }}
"#,
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// Whether `name` can name a plugin.
pub fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

/// Writes the project and returns its folder. Refuses to overwrite an existing folder.
pub fn create(s: &Scaffold) -> Result<PathBuf, HarnessError> {
    let root = s.dir.join(&s.name);
    let exists = std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "the folder already exists",
    );
    if root.exists() {
        return Err(HarnessError::Write {
            path: root,
            source: exists,
        });
    }
    let files: Vec<(&str, String)> = match s.language {
        Language::Rust => rust_files(s)?,
        Language::Python => python_files(s),
    };
    for (rel, content) in files {
        let path = root.join(rel);
        let write = |source| HarnessError::Write {
            path: path.clone(),
            source,
        };
        fs_err::create_dir_all(path.parent().expect("files are inside the project"))
            .map_err(write)?;
        fs_err::write(&path, content).map_err(write)?;
        #[cfg(unix)]
        if rel.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(write)?;
        }
    }
    Ok(root)
}

const SAMPLES: &str = concat!(
    r#"{"id":"with-solution","completion":"<think>x</think><solution>fix</solution>"}"#,
    "\n",
    r#"{"id":"without","completion":"I would change the code."}"#,
    "\n"
);

fn rust_files(s: &Scaffold) -> Result<Vec<(&'static str, String)>, HarnessError> {
    let kit = match &s.kit {
        Some(kit) => fs_err::canonicalize(kit)
            .map_err(|source| HarnessError::Read {
                path: kit.clone(),
                source,
            })?
            .display()
            .to_string(),
        None => VENDORED_KIT.to_owned(),
    };
    let crate_name = s.name.replace('-', "_");
    let cargo = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
# cdylib: the wasm32-wasip2 component; rlib: native unit tests.
crate-type = ["cdylib", "rlib"]

[dependencies]
swerve-plugin-kit = {{ path = "{kit}" }}

[profile.release]
opt-level = "s"
strip = "debuginfo"

# A project of its own, not a member of an enclosing workspace.
[workspace]
"#,
        name = s.name,
    );
    let lib = format!(
        r#"//! Reward plugin `{name}`: scores 1 when the completion has a `<solution>` block, else 0.
//! Replace `score` with your own reward; `info` says who the plugin is.

use swerve_plugin_kit::reward::{{PluginInfo, Sample, Score}};

pub struct Plugin;

impl swerve_plugin_kit::RewardPlugin for Plugin {{
    fn info() -> PluginInfo {{
        PluginInfo {{
            name: "{name}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "1 when the completion has a <solution> block, else 0".into(),
        }}
    }}

    fn score(sample: &Sample) -> Result<Score, String> {{
        let has = sample.completion.contains("<solution>") && sample.completion.contains("</solution>");
        Ok(Score::reward(if has {{ 1.0 }} else {{ 0.0 }}))
    }}
}}

swerve_plugin_kit::export_reward!(Plugin);

#[cfg(test)]
mod tests {{
    use super::*;
    use swerve_plugin_kit::RewardPlugin;

    fn sample(completion: &str) -> Sample {{
        Sample {{
            id: "t".into(),
            prompt: String::new(),
            completion: completion.into(),
            code_context: vec![],
            oracle_new_content: vec![],
            reference_patch: None,
            execution: None,
            metadata: vec![],
        }}
    }}

    #[test]
    fn rewards_a_solution_block() {{
        assert_eq!(Plugin::score(&sample("<solution>x</solution>")).unwrap().reward, Some(1.0));
        assert_eq!(Plugin::score(&sample("no")).unwrap().reward, Some(0.0));
    }}
}}
"#,
        name = s.name
    );
    let readme = format!(
        "# {name}\n\nA swerve reward plugin.\n\n```sh\ncargo test                                        # unit tests, natively\ncargo build --release --target wasm32-wasip2      # the component\nharness reward --plugin target/wasm32-wasip2/release/{crate_name}.wasm --input samples.jsonl\n```\n",
        name = s.name
    );
    let mut files = vec![
        ("Cargo.toml", cargo),
        ("src/lib.rs", lib),
        ("README.md", readme),
        ("samples.jsonl", SAMPLES.to_owned()),
    ];
    if s.kit.is_none() {
        files.extend([
            ("vendor/swerve-plugin-kit/Cargo.toml", kit_manifest()),
            ("vendor/swerve-plugin-kit/src/lib.rs", KIT_LIB.to_owned()),
            ("wit/plugin.wit", WIT.to_owned()),
        ]);
    }
    Ok(files)
}

fn python_files(s: &Scaffold) -> Vec<(&'static str, String)> {
    let app = format!(
        r#""""Reward plugin `{name}`: scores 1 when the completion has a <solution> block, else 0."""

from typing import List

import wit_world
from wit_world.imports import reward_types, types
from componentize_py_types import Ok, Result


def reward(completion: str) -> float:
    """The reward of one completion; replace it with your own."""
    return 1.0 if "<solution>" in completion and "</solution>" in completion else 0.0


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(name="{name}", version="0.1.0", description="1 when the completion has a <solution> block")

    def score(self, samples: List[reward_types.Sample]) -> List[Result[reward_types.Score, str]]:
        return [Ok(reward_types.Score(reward=reward(s.completion), metrics=[], message=None)) for s in samples]
"#,
        name = s.name
    );
    let test = r#"import unittest

from app import reward


class RewardTest(unittest.TestCase):
    def test_rewards_a_solution_block(self):
        self.assertEqual(reward("<solution>x</solution>"), 1.0)
        self.assertEqual(reward("no"), 0.0)


if __name__ == "__main__":
    unittest.main()
"#
    .to_owned();
    let build = format!(
        "#!/usr/bin/env bash\n# Generates the bindings, runs the tests and builds {name}.wasm (needs componentize-py).\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\ncomponentize-py -d wit -w reward bindings .\npython3 -m unittest -v test_app\ncomponentize-py -d wit -w reward componentize --stub-wasi app -o {name}.wasm\n",
        name = s.name
    );
    let readme = format!(
        "# {name}\n\nA swerve reward plugin in Python.\n\n```sh\npip install componentize-py==0.25.1\n./build.sh                      # bindings, tests, {name}.wasm\nharness reward --plugin {name}.wasm --input samples.jsonl\n```\n",
        name = s.name
    );
    vec![
        ("app.py", app),
        ("test_app.py", test),
        ("build.sh", build),
        ("wit/plugin.wit", WIT.to_owned()),
        ("README.md", readme),
        ("samples.jsonl", SAMPLES.to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carried_kit_matches_the_workspace() {
        // The carried manifest pins the wit-bindgen the workspace builds the kit with.
        let workspace = include_str!("../../Cargo.toml");
        assert!(
            workspace.contains(&format!("wit-bindgen = {{ version = \"{KIT_WIT_BINDGEN}\"")),
            "update KIT_WIT_BINDGEN to the workspace's wit-bindgen"
        );
        assert!(KIT_LIB.contains("path: \"../../wit\""));
    }

    #[test]
    fn names() {
        for ok in ["a", "my-reward", "r2d2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "A", "a_b", "a-", "1a", "a b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
