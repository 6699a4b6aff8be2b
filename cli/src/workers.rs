//! How much runs at once, with one name per concept in every binary:
//!
//! - `--max-workers N`: containers (or image builds) at once — SWE-bench's own name, which
//!   `harness run` keeps as its drop-in (`--max_workers` is accepted too);
//! - `-j`/`--jobs N`: threads of a command that works on this machine's cores (`harness
//!   reward`, `curate run`), all cores by default.
//!
//! Both refuse 0 ([`crate::count`]). The default of `--max-workers` differs by command (4
//! evaluations, 2 image builds or validations): it is the group's parameter.

/// `--max-workers N` with default `DEFAULT` (flatten into a command's arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args, serde::Serialize)]
pub struct MaxWorkers<const DEFAULT: usize> {
    /// Containers (or image builds) at once
    #[arg(
        long = "max-workers",
        alias = "max_workers",
        value_name = "N",
        default_value = DEFAULT.to_string(),
        value_parser = crate::count
    )]
    pub max_workers: usize,
}

impl<const DEFAULT: usize> MaxWorkers<DEFAULT> {
    /// The count.
    pub fn get(self) -> usize {
        self.max_workers
    }
}

/// `-j`/`--jobs N`, all cores when absent (flatten into a command's arguments).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct Jobs {
    /// Worker threads (default: one per core)
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = crate::count)]
    pub jobs: Option<usize>,
}

impl Jobs {
    /// The count given, or one per core this process may use.
    pub fn get(self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        workers: MaxWorkers<3>,
        #[command(flatten)]
        jobs: Jobs,
    }

    fn parse(args: &[&str]) -> Result<(usize, Option<usize>), clap::error::ErrorKind> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map(|c| (c.workers.get(), c.jobs.jobs))
            .map_err(|e| e.kind())
    }

    #[test]
    fn one_name_per_concept_and_the_default_is_the_commands() {
        assert_eq!(parse(&[]), Ok((3, None)));
        assert_eq!(parse(&["--max-workers", "8", "-j", "2"]), Ok((8, Some(2))));
        assert_eq!(parse(&["--max_workers", "5", "--jobs=1"]), Ok((5, Some(1))));
        assert_eq!(
            parse(&["--max-workers", "0"]),
            Err(clap::error::ErrorKind::ValueValidation)
        );
        assert_eq!(
            parse(&["-j", "0"]),
            Err(clap::error::ErrorKind::ValueValidation)
        );
        assert!(Jobs::default().get() >= 1);
    }
}
