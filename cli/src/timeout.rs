//! `-t`/`--timeout SECONDS`: the limit for one run of a task's tests, the same flag and the same
//! checks in every command that runs tests (`harness run`, `curate validate`, `trainer grpo
//! --execute`, the hidden `execute-task`): a whole number of seconds, at least 1, at most a
//! week. The default differs by command (SWE-bench's 1800 s for an evaluation,
//! [`DEFAULT_EXECUTE_TIMEOUT`] for an execution reward): it is the group's parameter.

use std::time::Duration;

/// The default limit for one execution's eval script (an execution reward's patch run), in
/// `trainer grpo --execute` and the harness's executor alike. `harness run`'s own default is
/// SWE-bench's 1800 s.
pub const DEFAULT_EXECUTE_TIMEOUT: Duration = Duration::from_secs(300);

/// The longest limit accepted: a week. A larger number is a typo (milliseconds for seconds),
/// and past it a container's deadline arithmetic would no longer mean anything.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// `--timeout SECONDS` with default `DEFAULT` seconds (flatten into a command's arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args, serde::Serialize)]
pub struct Timeout<const DEFAULT: u64> {
    /// Seconds for one run of a task's tests (its eval script)
    #[arg(
        short = 't',
        long = "timeout",
        value_name = "SECONDS",
        default_value = DEFAULT.to_string(),
        value_parser = seconds
    )]
    pub seconds: u64,
}

impl<const DEFAULT: u64> Timeout<DEFAULT> {
    /// The limit.
    pub fn get(self) -> Duration {
        Duration::from_secs(self.seconds)
    }
}

/// A clap value parser for a limit in whole seconds: at least 1, at most [`MAX_TIMEOUT`].
pub fn seconds(text: &str) -> Result<u64, String> {
    let max = MAX_TIMEOUT.as_secs();
    match text.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1 second".to_owned()),
        Ok(n) if n > max => Err(format!("must be at most {max} seconds (a week)")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a whole number of seconds")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        timeout: Timeout<1800>,
    }

    #[test]
    fn limits_are_whole_seconds_between_one_and_a_week() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map(|c| c.timeout.get())
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse(&[]), Ok(Duration::from_secs(1800)));
        assert_eq!(parse(&["-t", "60"]), Ok(Duration::from_secs(60)));
        let zero = parse(&["--timeout", "0"]).expect_err("0 is refused");
        assert!(zero.contains("must be at least 1 second"), "{zero}");
        let huge = parse(&["--timeout", "9223372036854775807"]).expect_err("refused");
        assert!(huge.contains("at most 604800 seconds"), "{huge}");
        let unit = parse(&["--timeout", "5m"]).expect_err("refused");
        assert!(
            unit.contains("`5m` is not a whole number of seconds"),
            "{unit}"
        );
    }
}
