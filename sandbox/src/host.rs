//! Running programs on the host (`debootstrap`, `tar`, `git`, `apt-get`) with a time limit and
//! their output kept for the error message.

use std::ffi::OsStr;
use std::time::Duration;

use tokio::process::Command;

use crate::error::{Error, Result, tail};

/// A host command line, built like [`std::process::Command`] but run with a limit.
pub(crate) struct HostCommand {
    display: String,
    command: Command,
}

impl HostCommand {
    pub(crate) fn new(program: &str) -> Self {
        let mut command = Command::new(program);
        command.stdin(std::process::Stdio::null());
        // A timed-out host command must not outlive the future that awaited it.
        command.kill_on_drop(true);
        Self {
            display: program.to_owned(),
            command,
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.display.push(' ');
        self.display.push_str(&arg.as_ref().to_string_lossy());
        self.command.arg(arg);
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    pub(crate) fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Run to completion within `limit`; return stdout on success, an error holding the tail of
    /// stdout and stderr otherwise.
    pub(crate) async fn run(mut self, limit: Duration) -> Result<String> {
        tracing::debug!(command = %self.display, "running host command");
        let output = match tokio::time::timeout(limit, self.command.output()).await {
            Err(_) => {
                return Err(Error::Timeout {
                    operation: "host command",
                    id: self.display,
                    after: limit,
                });
            }
            Ok(Err(e)) => {
                return Err(Error::HostCommand {
                    command: self.display,
                    status: format!("could not start: {e}"),
                    output_tail: String::new(),
                });
            }
            Ok(Ok(output)) => output,
        };
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Err(Error::HostCommand {
                command: self.display,
                status: output.status.to_string(),
                output_tail: tail(&format!("{stdout}{stderr}"), 40),
            })
        }
    }
}

/// Whether `program` is found on `PATH` (or in the sbin directories root has but PATH may lack).
pub(crate) fn find_program(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
