//! `-v` and `-q`, with one mapping to log levels for every binary, and the logging they set up.

use std::io::IsTerminal;

/// The global `-v`/`-q` flags (flatten into a binary's top-level parser).
///
/// Levels: `-q` errors only (and no progress or summaries on stderr; messages the user must act
/// on, such as a submitted Slurm job, still print), none warnings, `-v` info, `-vv` debug,
/// `-vvv` trace. `RUST_LOG`, when set, overrides the level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct Verbosity {
    /// More logging on stderr: -v info, -vv debug, -vvv trace (RUST_LOG overrides)
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors in the log on stderr: no progress, no summaries
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

impl Verbosity {
    /// The `tracing` filter directive of these flags.
    pub fn level(&self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "error",
            (false, 0) => "warn",
            (false, 1) => "info",
            (false, 2) => "debug",
            (false, _) => "trace",
        }
    }

    /// Installs the process's `tracing` subscriber: stderr, [`Verbosity::level`] unless
    /// `RUST_LOG` is set, colour only when stderr is a terminal and `NO_COLOR` is not set.
    /// Call once, first thing in `main`.
    pub fn init_logging(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(self.level()));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(color_on_stderr())
            .init();
    }
}

/// Whether what goes to stderr may be coloured: stderr is a terminal and `NO_COLOR` is unset or
/// empty (<https://no-color.org>).
pub fn color_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        verbosity: Verbosity,
    }

    #[test]
    fn one_mapping_of_flags_to_levels() {
        let level = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map(|c| c.verbosity.level())
                .map_err(|e| e.kind())
        };
        assert_eq!(level(&[]), Ok("warn"));
        assert_eq!(level(&["-q"]), Ok("error"));
        assert_eq!(level(&["-v"]), Ok("info"));
        assert_eq!(level(&["-vv"]), Ok("debug"));
        assert_eq!(level(&["-v", "--verbose", "-v"]), Ok("trace"));
        assert_eq!(
            level(&["-q", "-v"]),
            Err(clap::error::ErrorKind::ArgumentConflict)
        );
    }
}
