//! The exit-code table every swerve binary follows.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | an error stopped the command (printed once on stderr as `error: …` with its causes) |
//! | 2 | bad arguments (clap's usage errors) |
//! | 3 | the command finished, but part of the work was not done (a Slurm task ended before finishing its share); running the same command again completes it |
//! | 130 | interrupted (Ctrl-C) |
//! | 143 | terminated (SIGTERM: `scancel`, a time limit) |

use std::process::ExitCode;

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
    /// 130: interrupted (SIGINT).
    Interrupted,
    /// 143: terminated (SIGTERM).
    Terminated,
}

impl Exit {
    /// The numeric exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Incomplete => 3,
            Exit::Interrupted => 130,
            Exit::Terminated => 143,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// Ends a binary's `main`: an error is printed once, `error: ` and its chain of causes, and
/// exits with the code `classify` gives it (`None`: [`Exit::Failure`]), so that an interrupted
/// command exits with 130 and a terminated one with 143.
pub fn finish(
    result: anyhow::Result<Exit>,
    classify: impl FnOnce(&anyhow::Error) -> Option<Exit>,
) -> ExitCode {
    match result {
        Ok(exit) => exit.into(),
        Err(error) => {
            eprintln!("error: {error:#}");
            classify(&error).unwrap_or(Exit::Failure).into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        let codes: Vec<u8> = [
            Exit::Success,
            Exit::Failure,
            Exit::Usage,
            Exit::Incomplete,
            Exit::Interrupted,
            Exit::Terminated,
        ]
        .map(Exit::code)
        .to_vec();
        assert_eq!(codes, [0, 1, 2, 3, 130, 143]);
        // clap's own usage errors use the same code.
        assert_eq!(
            clap::Error::new(clap::error::ErrorKind::UnknownArgument).exit_code(),
            i32::from(Exit::Usage.code())
        );
    }
}
