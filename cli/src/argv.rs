//! Command lines rebuilt from a clap definition: the arguments that make clap parse a value back
//! into itself.
//!
//! A Slurm array task runs a hidden subcommand of the submitting binary; its command line is
//! built here from the same `#[derive(clap::Args)]` struct that parses it on the node, so the
//! two cannot drift apart (every flag is looked up by its clap id, which is the field name, and
//! written with the long name clap gives it).

use clap::{Args, Command};
use serde::Serialize;
use serde_json::Value;

/// Why a value cannot be written as arguments.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgvError {
    /// The value does not serialise to a JSON object of its fields.
    #[error("the arguments do not serialise to an object of fields: {0}")]
    Shape(String),
    /// A field's value is not a string, number, boolean, list of those, or null.
    #[error("argument `{id}` has a value that is not a flag value: {value}")]
    Value {
        /// The clap id (the field name).
        id: String,
        /// The value.
        value: String,
    },
    /// A field has no argument of its name in the clap definition (a `serde` rename?).
    #[error("field `{0}` is not an argument of the clap definition")]
    Unknown(String),
}

/// The arguments after `subcommand` that parse into `args` (see the module documentation):
/// `--long value` per set field, `--flag` for a true boolean, one `--long value` per item of a
/// list, positionals in their clap order; unset (`None`) fields and false booleans are left
/// out.
pub(crate) fn to_args<A: Args + Serialize>(args: &A) -> Result<Vec<String>, ArgvError> {
    let Value::Object(mut fields) =
        serde_json::to_value(args).map_err(|e| ArgvError::Shape(e.to_string()))?
    else {
        return Err(ArgvError::Shape("not an object".into()));
    };
    let command = A::augment_args(Command::new("args"));
    let mut flags = Vec::new();
    let mut positionals = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(value) = fields.remove(id) else {
            continue;
        };
        let words = words(id, value)?;
        match arg.get_long() {
            Some(long) if matches!(arg.get_action(), clap::ArgAction::SetTrue) => {
                if words.first().is_some_and(|w| w == "true") {
                    flags.push(format!("--{long}"));
                }
            }
            Some(long) => {
                for word in words {
                    flags.push(format!("--{long}"));
                    flags.push(word);
                }
            }
            None => positionals.extend(words),
        }
    }
    if let Some(id) = fields.keys().next() {
        return Err(ArgvError::Unknown(id.clone()));
    }
    if !positionals.is_empty() {
        flags.push("--".into());
        flags.extend(positionals);
    }
    Ok(flags)
}

/// A field's value as the words of its argument.
fn words(id: &str, value: Value) -> Result<Vec<String>, ArgvError> {
    let word = |v: Value| match v {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(ArgvError::Value {
            id: id.to_owned(),
            value: other.to_string(),
        }),
    };
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items.into_iter().map(word).collect(),
        other => Ok(vec![word(other)?]),
    }
}

/// Parses `argv` (the words after the subcommand) with `A`'s clap definition, as a node's binary
/// does with the arguments [`to_args`] wrote. Only the tests call it: a binary parses its whole
/// command line with its own clap definition, and the tests check that round trip here.
#[cfg(test)]
pub(crate) fn parse<A: Args + clap::FromArgMatches>(argv: &[String]) -> Result<A, clap::Error> {
    let matches =
        A::augment_args(Command::new("args").no_binary_name(true)).try_get_matches_from(argv)?;
    A::from_arg_matches(&matches)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Every shape of argument the hidden subcommands use.
    #[derive(Debug, Clone, PartialEq, clap::Args, Serialize)]
    struct Sample {
        #[arg(long)]
        name: String,
        #[arg(long, value_parser = crate::count)]
        workers: usize,
        #[arg(long)]
        limit: Option<u64>,
        #[arg(long)]
        strict: bool,
        #[arg(long = "slurm-arg", allow_hyphen_values = true)]
        slurm_args: Vec<String>,
        #[arg(long)]
        work_dir: PathBuf,
        inputs: Vec<String>,
    }

    fn round_trip(value: &Sample) -> Sample {
        let argv = to_args(value).unwrap();
        parse::<Sample>(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
    }

    #[test]
    fn arguments_parse_back_into_the_value() {
        let full = Sample {
            name: "it's a name with spaces".into(),
            workers: 3,
            limit: Some(300),
            strict: true,
            slurm_args: vec!["--partition=cpu".into(), "--time=1:00:00".into()],
            work_dir: "/shared/run dir/executions".into(),
            inputs: vec!["-x".into(), "b".into()],
        };
        assert_eq!(round_trip(&full), full);
        let sparse = Sample {
            limit: None,
            strict: false,
            slurm_args: Vec::new(),
            inputs: Vec::new(),
            ..full.clone()
        };
        assert_eq!(round_trip(&sparse), sparse);
        assert_eq!(
            to_args(&sparse).unwrap(),
            [
                "--name",
                "it's a name with spaces",
                "--workers",
                "3",
                "--work-dir",
                "/shared/run dir/executions"
            ]
        );
    }

    #[test]
    fn a_field_clap_does_not_know_is_an_error() {
        #[derive(clap::Args, Serialize)]
        struct Renamed {
            #[arg(long)]
            #[serde(rename = "other")]
            name: String,
        }
        let err = to_args(&Renamed { name: "x".into() }).unwrap_err();
        assert!(
            matches!(err, ArgvError::Unknown(ref id) if id == "other"),
            "{err}"
        );
    }
}
