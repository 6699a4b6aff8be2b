//! The exit-code table every swerve binary follows, and the one classifier that picks a code.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | an error stopped the command (printed once on stderr as `error: …` with its causes) |
//! | 2 | bad arguments: clap's usage errors, and values the binary parses itself ([`UsageError`]) |
//! | 3 | the command finished, but part of the work was not done (a Slurm task ended before finishing its share, a shard was lost, a task ended in an infrastructure error); running the same command again completes it |
//! | 130 | interrupted (SIGINT, Ctrl-C) |
//! | 143 | terminated (SIGTERM: `kill`, `scancel`, a time limit) |
//!
//! A command that finishes returns its [`Exit`]; a command that fails returns an error, which
//! [`Exit::of_error`] classifies by what its chain of causes holds: a
//! [`swerve_interrupt::Interrupted`] (the signal named) gives the signal's code, a
//! [`UsageError`] gives 2, anything else 1. A signal that arrives while no code cooperates ends
//! the process at once with the same code ([`swerve_interrupt`]).

use std::process::ExitCode;

use swerve_interrupt::{Interrupted, Signal};

#[cfg(doc)]
use crate::Verbosity;

/// How a command ended, as its exit code (the table in this module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done.
    Success,
    /// 1: an error stopped the command.
    Failure,
    /// 2: bad arguments.
    Usage,
    /// 3: finished, with part of the work not done; rerun to complete it.
    Incomplete,
    /// 130 or 143: stopped by a signal.
    Signalled(Signal),
}

impl Exit {
    /// Every exit, in the order of the table.
    pub const ALL: [Exit; 6] = [
        Exit::Success,
        Exit::Failure,
        Exit::Usage,
        Exit::Incomplete,
        Exit::Signalled(Signal::Interrupt),
        Exit::Signalled(Signal::Terminate),
    ];

    /// The numeric exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Incomplete => 3,
            Exit::Signalled(signal) => signal.exit_code(),
        }
    }

    /// The exit of a command that failed with `error`: the first cause in its chain that is an
    /// interruption or a usage error decides, anything else is [`Exit::Failure`].
    pub fn of_error(error: &anyhow::Error) -> Exit {
        for cause in error.chain() {
            if let Some(Interrupted { signal }) = cause.downcast_ref::<Interrupted>() {
                return Exit::Signalled(*signal);
            }
            if cause.downcast_ref::<UsageError>().is_some() {
                return Exit::Usage;
            }
        }
        Exit::Failure
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// A flag's value that the binary parses itself (`--set KEY=VALUE`, a plugin spec, a
/// `--fallback`) is not valid. It exits with 2, as clap's own usage errors do, and reads like
/// them: `invalid value 'VALUE' for '--flag': why`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value '{value}' for '{flag}': {reason}")]
pub struct UsageError {
    /// The flag, as typed (`--set`, `--plugin`, or a positional argument's name).
    pub flag: String,
    /// The value given.
    pub value: String,
    /// What is wrong with it, and what is accepted.
    pub reason: String,
}

impl UsageError {
    /// The error for `value` of `flag`.
    pub fn new(
        flag: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            flag: flag.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// Starts a binary's `main`: logging as `verbosity` says ([`Verbosity::init_logging`]) and the
/// process's watcher of Ctrl-C and SIGTERM ([`swerve_interrupt::install`]), so that a signal
/// ends every command with the table's code.
pub fn start(verbosity: &crate::Verbosity) {
    verbosity.init_logging();
    if let Err(e) = swerve_interrupt::install() {
        tracing::warn!("{e}");
    }
}

/// Ends a binary's `main`: an error is printed once, `error: ` and its chain of causes, and
/// exits with the code [`Exit::of_error`] gives it. A command a signal stopped prints one line
/// naming the signal, then what the command said it kept and how to continue (the other
/// causes): `interrupted by SIGINT (Ctrl-C): the results … are kept in …; run the same command
/// again to continue`.
pub fn finish(result: anyhow::Result<Exit>) -> ExitCode {
    match result {
        Ok(exit) => exit.into(),
        Err(error) => {
            eprintln!("{}", error_line(&error));
            Exit::of_error(&error).into()
        }
    }
}

/// The line [`finish`] prints for `error`.
fn error_line(error: &anyhow::Error) -> String {
    let Some(interrupted) = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<Interrupted>())
    else {
        return format!("error: {error:#}");
    };
    let said: Vec<String> = error
        .chain()
        .filter(|cause| cause.downcast_ref::<Interrupted>().is_none())
        .map(ToString::to_string)
        .collect();
    if said.is_empty() {
        interrupted.to_string()
    } else {
        format!("{interrupted}: {}", said.join(": "))
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    #[test]
    fn the_table() {
        let codes: Vec<u8> = Exit::ALL.map(Exit::code).to_vec();
        assert_eq!(codes, [0, 1, 2, 3, 130, 143]);
        // clap's own usage errors use the same code.
        assert_eq!(
            clap::Error::new(clap::error::ErrorKind::UnknownArgument).exit_code(),
            i32::from(Exit::Usage.code())
        );
    }

    /// A library error that carries an interruption as its source, as `SlurmError::Cancelled`
    /// and the harness's run errors do.
    #[derive(Debug, thiserror::Error)]
    #[error("cancelled job 7")]
    struct Cancelled(#[source] Interrupted);

    #[test]
    fn errors_are_classified_by_the_causes_they_carry() {
        let classify = |e: anyhow::Error| Exit::of_error(&e).code();
        assert_eq!(classify(anyhow::anyhow!("disk full")), 1);
        let sigterm = Cancelled(Interrupted {
            signal: Signal::Terminate,
        });
        assert_eq!(
            classify(anyhow::Error::new(sigterm).context("harness run")),
            143
        );
        let sigint: anyhow::Result<()> = Err(Interrupted {
            signal: Signal::Interrupt,
        })
        .context("trainer grpo");
        assert_eq!(classify(sigint.unwrap_err()), 130);
        let usage = UsageError::new("--set", "learnin_rate=1", "unknown key");
        assert_eq!(
            usage.to_string(),
            "invalid value 'learnin_rate=1' for '--set': unknown key"
        );
        assert_eq!(
            classify(anyhow::Error::new(usage).context("reading flags")),
            2
        );
    }

    #[test]
    fn a_signal_is_named_first_then_what_was_kept() {
        let kept = anyhow::Error::new(Cancelled(Interrupted {
            signal: Signal::Interrupt,
        }));
        assert_eq!(
            error_line(&kept),
            "interrupted by SIGINT (Ctrl-C): cancelled job 7"
        );
        let bare = anyhow::Error::new(Interrupted {
            signal: Signal::Terminate,
        });
        assert_eq!(error_line(&bare), "interrupted by SIGTERM");
        assert_eq!(
            error_line(&anyhow::anyhow!("disk full").context("writing out")),
            "error: writing out: disk full"
        );
    }
}
