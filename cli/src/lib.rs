//! What every swerve binary (`harness`, `trainer`, `curate`) shares on its command line, so that
//! the three behave as one tool: the `-v`/`-q` flags and the logging they set up
//! ([`Verbosity`]), progress on stderr that draws a bar on a terminal and prints plain lines
//! anywhere else ([`Progress`]), the exit-code table ([`Exit`]), count flags that refuse 0
//! ([`count`]), and command lines rebuilt from a clap definition ([`argv`]) for the hidden
//! subcommands that Slurm array tasks run ([`ExecuteTaskArgs`]).
//!
//! What it is not: a library of the work itself. Nothing here evaluates, trains or curates;
//! libraries never depend on it for their results (they report progress through their own
//! callbacks and traits, which a binary connects to a [`Progress`]).

pub mod argv;
mod count;
mod execute_task;
mod exit;
mod progress;
mod verbosity;

pub use count::count;
pub use execute_task::{DEFAULT_EXECUTE_TIMEOUT, ExecuteTaskArgs};
pub use exit::{Exit, finish};
pub use progress::{INTERVAL_ENV, Progress};
pub use verbosity::{Verbosity, color_on_stderr};
