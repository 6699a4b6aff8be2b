//! Environment recipes from a chat model (`curate validate --setup-endpoint URL --setup-model
//! NAME`), asked only where the rules of [`crate::recipe`] make none or the install they describe
//! failed, as SWE-rebench asks one per version group: the model sees the repository's packaging
//! files, the rules' recipe when there is one, and the end of the failing build log, and answers
//! with a recipe as one JSON object. A task gets at most [`MAX_TRIES`] answers; each is built
//! like any recipe (network only while the image is built) and the first whose images build is
//! the task's recipe, written to `environments.json` like the rules' (so the image can be made
//! again from the file alone).
//!
//! The answer is data, never code that swerve runs outside a container: every field is checked
//! (a Python the base images offer, a log parser swerve has, single-line commands) and the
//! commands run only inside the image build.

use serde::Deserialize;
use swerve_harness::execution::{Lines, PYTHONS, RepoEnv, TestCmd};

use crate::endpoint::{Endpoint, EndpointConfig, EndpointError};
use crate::recipe::{Files, Recipe};

/// Answers a task gets from the model, at most.
pub(crate) const MAX_TRIES: usize = 3;

/// Most characters of one packaging file in the prompt.
const FILE_CHARS: usize = 4000;
/// Most characters of the failing log in the prompt (its end).
const LOG_CHARS: usize = 6000;

const SYSTEM: &str = "You set up Python repositories so that their tests run in a container. \
The container is Debian with the chosen Python in a virtual environment that is first on PATH; \
the network is available while the image is built and never while the tests run. Answer with one \
JSON object and nothing else, with these keys: \"python\" (one of the offered versions), \
\"pip_packages\" (requirements installed with pip before the repository is present), \
\"pre_install\" and \"install\" (shell commands run in the repository at /testbed, such as \
\"python -m pip install --no-build-isolation -e .\"), \"test_cmd\" (the command that runs the test \
files given to it as arguments, such as \"pytest -rA --color=no\") and \"log_parser\" (\"parse_log_pytest\" \
for pytest run with -rA, \"parse_log_django\" for python -m unittest -v).";

/// Why the model gave no recipe.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// The endpoint gave no usable reply.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The model's answer is not a usable recipe.
    #[error(transparent)]
    Answer(#[from] AnswerError),
}

/// Why a model's answer is not a usable recipe. The messages are what the model is shown when
/// it is asked again, so each names what to change.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerError {
    /// The answer holds no `{…}`.
    #[error("the model's answer holds no JSON object")]
    NoObject,
    /// The JSON object does not have the recipe's fields and types.
    #[error("the model's JSON object is not a recipe")]
    NotARecipe(#[source] serde_json::Error),
    /// The recipe's `python` is not one the base images offer.
    #[error("the model's recipe names python `{python}`, which is not offered ({offered})")]
    Python {
        /// The version the model named.
        python: String,
        /// What the base images have.
        offered: String,
    },
    /// The recipe's `log_parser` is not a parser swerve has.
    #[error("the model's recipe names no log parser swerve has: `{0}`")]
    LogParser(String),
    /// A command or requirement is empty or spans lines.
    #[error("the model's recipe's `{field}` has `{line}`, which is not one command line")]
    CommandLine {
        /// The recipe's field.
        field: &'static str,
        /// The offending entry.
        line: String,
    },
}

/// What the model is shown for one repository.
pub(crate) struct Ask<'a> {
    /// `owner/name`.
    pub repo: &'a str,
    /// Its packaging files at the base commit.
    pub files: &'a Files,
    /// The recipe that failed, if there was one.
    pub failed: Option<&'a Recipe>,
    /// Why there is no working recipe yet: the rules' refusal or the end of the build log.
    pub failure: &'a str,
}

/// The model, ready to be asked.
pub(crate) struct SetupModel {
    endpoint: Endpoint,
    name: String,
}

impl SetupModel {
    /// A client for the endpoint.
    pub(crate) fn new(config: &EndpointConfig) -> SetupModel {
        SetupModel {
            endpoint: Endpoint::new(config),
            name: config.model.clone(),
        }
    }

    /// One recipe from the model, checked; `Err` says why there is none (the endpoint failed,
    /// or its answer is not a usable recipe).
    pub(crate) fn recipe(&self, ask: &Ask<'_>) -> Result<Recipe, SetupError> {
        let answer = self.endpoint.chat(SYSTEM, &prompt(ask), 1024)?;
        let env = parse(&answer)?;
        Ok(Recipe {
            env,
            sources: vec![format!("model {}", self.name)],
        })
    }
}

/// The user message for `ask`.
fn prompt(ask: &Ask<'_>) -> String {
    let mut text = format!(
        "Repository: {}\nOffered Python versions: {}\n",
        ask.repo,
        PYTHONS.map(|(version, _)| version).join(", ")
    );
    for (path, content) in ask.files {
        let shown: String = content.chars().take(FILE_CHARS).collect();
        let cut = if shown.len() < content.len() {
            "\n[…]"
        } else {
            ""
        };
        text.push_str(&format!("\n--- {path}\n{shown}{cut}\n"));
    }
    if let Some(recipe) = ask.failed {
        text.push_str(&format!(
            "\nThis recipe failed:\n{}\n",
            serde_json::to_string_pretty(&recipe.env).expect("a spec serialises")
        ));
    }
    let start = ask
        .failure
        .char_indices()
        .rev()
        .nth(LOG_CHARS)
        .map_or(0, |(i, _)| i);
    text.push_str(&format!(
        "\nWhy it failed:\n{}\n\nAnswer with the JSON object of a recipe that works.",
        &ask.failure[start..]
    ));
    text
}

/// The recipe fields a model answers with.
#[derive(Deserialize)]
struct Answer {
    python: String,
    #[serde(default)]
    pip_packages: Vec<String>,
    #[serde(default)]
    pre_install: Vec<String>,
    #[serde(default)]
    install: Vec<String>,
    test_cmd: String,
    log_parser: String,
}

/// The recipe in a model's answer: the first JSON object in it (code fences and prose around it
/// are ignored), every field checked.
pub(crate) fn parse(answer: &str) -> Result<RepoEnv, AnswerError> {
    let (Some(start), Some(end)) = (answer.find('{'), answer.rfind('}')) else {
        return Err(AnswerError::NoObject);
    };
    if end < start {
        return Err(AnswerError::NoObject);
    }
    let answer: Answer =
        serde_json::from_str(&answer[start..=end]).map_err(AnswerError::NotARecipe)?;
    if !PYTHONS.iter().any(|(version, _)| *version == answer.python) {
        return Err(AnswerError::Python {
            python: answer.python,
            offered: PYTHONS.map(|(version, _)| version).join(", "),
        });
    }
    if swerve_log_parsers::Parser::from_log_parser_name(&answer.log_parser).is_none() {
        return Err(AnswerError::LogParser(answer.log_parser));
    }
    let fields = [
        ("pip_packages", &answer.pip_packages),
        ("pre_install", &answer.pre_install),
        ("install", &answer.install),
    ];
    let lines = fields
        .into_iter()
        .flat_map(|(field, lines)| lines.iter().map(move |line| (field, line)))
        .chain([("test_cmd", &answer.test_cmd)]);
    for (field, line) in lines {
        if line.trim().is_empty() || line.contains(['\n', '\r']) {
            return Err(AnswerError::CommandLine {
                field,
                line: line.clone(),
            });
        }
    }
    Ok(RepoEnv {
        python: Some(answer.python),
        packages: None,
        pre_install: Lines::Many(answer.pre_install),
        install: Lines::Many(answer.install),
        pip_packages: answer.pip_packages,
        eval_commands: Vec::new(),
        test_cmd: TestCmd::One(answer.test_cmd),
        log_parser: Some(answer.log_parser),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_checked_recipes() {
        let env = parse(
            "Here it is:\n```json\n{\"python\": \"3.11\", \"pip_packages\": [\"pytest\"], \
             \"install\": [\"python -m pip install -e .\"], \"test_cmd\": \"pytest -rA\", \
             \"log_parser\": \"parse_log_pytest\", \"notes\": \"extra keys are ignored\"}\n```",
        )
        .unwrap();
        assert_eq!(env.python.as_deref(), Some("3.11"));
        assert_eq!(env.pip_packages, ["pytest"]);
        assert_eq!(env.install.to_vec(), ["python -m pip install -e ."]);
        assert_eq!(env.test_cmd, TestCmd::One("pytest -rA".into()));
        let bad = |answer: &str| parse(answer).unwrap_err();
        assert!(matches!(bad("no idea"), AnswerError::NoObject));
        assert!(matches!(
            bad(r#"{"python": "2.7", "test_cmd": "t", "log_parser": "parse_log_pytest"}"#),
            AnswerError::Python { python, .. } if python == "2.7"
        ));
        assert!(matches!(
            bad(r#"{"python": "3.13", "test_cmd": "t", "log_parser": "grep"}"#),
            AnswerError::LogParser(name) if name == "grep"
        ));
        assert!(matches!(
            bad(
                r#"{"python": "3.13", "install": ["a\nb"], "test_cmd": "t", "log_parser": "parse_log_pytest"}"#
            ),
            AnswerError::CommandLine {
                field: "install",
                ..
            }
        ));
        assert!(matches!(
            bad(r#"{"python": "3.13"}"#),
            AnswerError::NotARecipe(_)
        ));
    }

    #[test]
    fn the_prompt_shows_the_files_the_recipe_and_the_end_of_the_log() {
        let files = Files::from([("setup.py".to_owned(), "x".repeat(FILE_CHARS + 10))]);
        let log = format!("{}THE END", "y".repeat(3 * LOG_CHARS));
        let text = prompt(&Ask {
            repo: "o/r",
            files: &files,
            failed: None,
            failure: &log,
        });
        assert!(text.contains("--- setup.py\n") && text.contains("[…]"));
        assert!(text.contains("THE END"));
        assert!(text.len() < FILE_CHARS + LOG_CHARS + 1000, "{}", text.len());
    }
}
