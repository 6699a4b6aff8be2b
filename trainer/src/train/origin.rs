//! A run's identity across `--resume`: the data it trains on, the folder it writes and the
//! settings it was given ([`RunOrigin`], kept in every checkpoint's run state), and the rules
//! a command line must meet to continue a checkpoint.
//!
//! - The data (by content) and the output folder must be the run's own, unless the user asks
//!   for another run's checkpoint to be continued with these (`--allow-other-run`).
//! - The settings must mean the same run: a setting the command line gives otherwise is refused,
//!   naming both values. The settings that only say how long the run goes or what it logs
//!   ([`LIVE_SETTINGS`]) are taken from the command line: a run stopped at step 40 of 100 and
//!   resumed with `max_steps = 60` ends at 60.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::checkpoint::RunOrigin;
use crate::error::{Error, IoOp, Result};
use crate::train::driver::RunError;

/// The settings a resumed run takes from its command line: how long it trains
/// (`max_steps`, `num_train_epochs`), how often it logs, and whether it recomputes layers in
/// the backward pass (memory only; the gradients are the same).
pub(crate) const LIVE_SETTINGS: [&str; 4] = [
    "max_steps",
    "num_train_epochs",
    "logging_steps",
    "gradient_checkpointing",
];

/// This command line's [`RunOrigin`]: `data` as given, its content (what the run read, as
/// JSON), the output folder and the settings table.
pub(crate) fn origin_of(
    data: &Path,
    content: &impl serde::Serialize,
    output: &Path,
    settings: &toml::Table,
) -> Result<RunOrigin> {
    let absolute =
        |path: &Path| std::path::absolute(path).map_err(|e| Error::io(IoOp::Read, path, e));
    let json = serde_json::to_vec(content).expect("examples and tasks serialise");
    Ok(RunOrigin {
        data: absolute(data)?,
        data_sha256: hex::encode(Sha256::digest(&json)),
        output: absolute(output)?,
        settings: settings.clone(),
    })
}

/// Refuses to continue `checkpoint`'s run with `now` (see the module documentation); `parse`
/// reads a settings table as the run's settings, so that a setting written out at its default
/// value and one left out are the same.
pub(crate) fn check_resume<C: PartialEq, E>(
    checkpoint: &RunOrigin,
    now: &RunOrigin,
    allow_other_run: bool,
    parse: impl Fn(&str) -> std::result::Result<C, E>,
) -> Result<()> {
    if !allow_other_run {
        if checkpoint.data_sha256 != now.data_sha256 {
            return Err(Error::Run(RunError::OtherRun {
                what: "data",
                checkpoint: format!(
                    "{} (sha256 {})",
                    checkpoint.data.display(),
                    &checkpoint.data_sha256[..12]
                ),
                now: format!("{} (sha256 {})", now.data.display(), &now.data_sha256[..12]),
            }));
        }
        if checkpoint.output != now.output {
            return Err(Error::Run(RunError::OtherRun {
                what: "output folder",
                checkpoint: checkpoint.output.display().to_string(),
                now: now.output.display().to_string(),
            }));
        }
    }
    let run_settings = |table: &toml::Table| {
        let mut table = table.clone();
        for key in LIVE_SETTINGS {
            table.remove(key);
        }
        table
    };
    let (before, after) = (
        run_settings(&checkpoint.settings),
        run_settings(&now.settings),
    );
    let read = |table: &toml::Table| parse(&toml::to_string(table).expect("tables serialise")).ok();
    if read(&before).is_some() && read(&before) == read(&after) {
        return Ok(());
    }
    // The settings differ: name a key whose value alone makes the difference.
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for key in keys {
        let one = |table: &toml::Table| {
            table
                .get(key)
                .map(|value| toml::Table::from_iter([(key.clone(), value.clone())]))
                .unwrap_or_default()
        };
        if read(&one(&before)) != read(&one(&after)) {
            let shown = |table: &toml::Table| {
                table
                    .get(key)
                    .map_or_else(|| "its default".to_owned(), ToString::to_string)
            };
            return Err(Error::Run(RunError::SettingConflict {
                key: key.clone(),
                checkpoint: shown(&before),
                now: shown(&after),
            }));
        }
    }
    Err(Error::Run(RunError::SettingConflict {
        key: "settings".to_owned(),
        checkpoint: toml::to_string(&before).unwrap_or_default(),
        now: toml::to_string(&after).unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::sft_loop::SftConfig;

    fn origin(data: &str, output: &str, settings: &str) -> RunOrigin {
        RunOrigin {
            data: data.into(),
            data_sha256: hex::encode(Sha256::digest(data.as_bytes())),
            output: output.into(),
            settings: toml::from_str(settings).unwrap(),
        }
    }

    fn check(
        checkpoint: &RunOrigin,
        now: &RunOrigin,
        allow: bool,
    ) -> std::result::Result<(), String> {
        check_resume(checkpoint, now, allow, SftConfig::parse_toml).map_err(|e| match e {
            Error::Run(run) => run.to_string(),
            other => other.to_string(),
        })
    }

    #[test]
    fn a_resume_continues_its_own_run_and_takes_only_the_live_settings() {
        let run = origin(
            "/d/pairs.jsonl",
            "/o/run",
            "learning_rate = 1e-4\nmax_steps = 100",
        );
        // How long it trains comes from the command line.
        let longer = origin(
            "/d/pairs.jsonl",
            "/o/run",
            "learning_rate = 1e-4\nmax_steps = 60",
        );
        assert_eq!(check(&run, &longer, false), Ok(()));
        // A setting written at its default and one left out are the same run.
        let defaults = origin("/d/pairs.jsonl", "/o/run", "max_length = 1024");
        let bare = origin("/d/pairs.jsonl", "/o/run", "");
        assert_eq!(check(&defaults, &bare, false), Ok(()));

        let other_rate = origin("/d/pairs.jsonl", "/o/run", "learning_rate = 2e-5");
        assert_eq!(
            check(&run, &other_rate, false),
            Err(
                "--resume: `learning_rate` is 0.0001 in the checkpoint's run and 0.00002 on this \
                 command line; give the run's value (or leave it out), or start a new run in \
                 another --output"
                    .to_owned()
            )
        );
        let other_data = origin("/d/other.jsonl", "/o/run", "learning_rate = 1e-4");
        let error = check(&run, &other_data, false).unwrap_err();
        assert!(error.contains("its data is /d/pairs.jsonl"), "{error}");
        assert!(error.contains("--allow-other-run"), "{error}");
        let other_output = origin("/d/pairs.jsonl", "/o/elsewhere", "learning_rate = 1e-4");
        assert!(check(&run, &other_output, false).is_err());
        // Asked for: another run's checkpoint continues with this data and folder.
        assert_eq!(check(&run, &other_output, true), Ok(()));
        assert_eq!(check(&run, &other_data, true), Ok(()));
    }
}
