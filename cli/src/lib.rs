//! What every swerve binary (`harness`, `trainer`, `curate`) shares on its command line, so that
//! the three behave as one tool: the `-v`/`-q` flags and the logging they set up
//! ([`Verbosity`]), the flag groups every command that has them flattens in — where work runs
//! ([`PlacementArgs`]), how much runs at once ([`MaxWorkers`], [`Jobs`]), the limit of one test
//! run ([`Timeout`]) — progress on stderr that draws a bar on a terminal and prints plain lines
//! anywhere else ([`Progress`]), the exit-code table and its one classifier ([`Exit`],
//! [`UsageError`] for values a binary parses itself), count flags that refuse 0 ([`count`]),
//! and command lines rebuilt from a clap definition (`argv`) for the hidden subcommands that
//! Slurm array tasks run ([`ExecuteTaskArgs`]). `docs/cli.md` lists every shared flag and exit
//! code.
//!
//! What it is not: a library of the work itself. Nothing here evaluates, trains or curates;
//! libraries never depend on it for their results (they report progress through their own
//! callbacks and traits, which a binary connects to a [`Progress`]).

mod argv;
mod count;
mod execute_task;
mod exit;
mod placement;
mod progress;
mod timeout;
mod verbosity;
mod workers;

pub use count::count;
pub use execute_task::ExecuteTaskArgs;
pub use exit::{Exit, UsageError, finish, start};
pub use placement::{Executor, PlacementArgs};
pub use progress::{INTERVAL_ENV, Progress};
pub use timeout::{DEFAULT_EXECUTE_TIMEOUT, MAX_TIMEOUT, Timeout, seconds};
pub use verbosity::{Verbosity, color_on_stderr};
pub use workers::{Jobs, MaxWorkers};
