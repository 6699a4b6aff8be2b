//! A shell session: one long-lived exec in a container whose shell runs each command it is sent
//! as a fresh `bash -c` (no state carries from one to the next, as with one exec per command)
//! and reports its exit status after a sentinel line. A command then costs one round trip over
//! an open stream instead of the engine's and the runtime's exec setup (tens of milliseconds a
//! command with runc), which is what an agent pays at every step.
//!
//! Each command runs under `timeout -s KILL` in its own process group and with a per-command
//! token in its environment, as [`Container::exec`]'s commands do: when the host's limit runs
//! out, every process holding the token is killed with its group. Its output (stdout and stderr
//! together) is kept as [`Container::exec`] keeps it: a head, a tail and the count between. The
//! sentinel that ends a command's output holds a random nonce that only the session's shell
//! knows (it is not in any command's environment), so a command cannot end its output early by
//! printing it. Output that a command's background processes print after it ended is not its
//! output: what comes with the sentinel is dropped, what comes later is counted in the next
//! command's (one exec per command, [`Container::exec`], waits for them instead). A session
//! whose shell died (the container stopped) fails its command with an error; a new session is
//! needed.

use std::hash::{BuildHasher as _, Hasher as _};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use tokio::io::AsyncWriteExt as _;

use crate::container::{
    Capture, Container, ExecInput, ExecOutput, ExecStream, env_pairs, exec_token,
};
use crate::error::{DockerError, Result};

/// How long a killed command's shell is given to report its end.
const AFTER_KILL: Duration = Duration::from_secs(10);

/// The session's shell: reads `nonce`, `limit`, `token` and the command, NUL-terminated, runs
/// the command and prints the sentinel line.
const SHELL: &str = r#"while IFS= read -r -d '' nonce && IFS= read -r -d '' limit && IFS= read -r -d '' token && IFS= read -r -d '' cmd; do
SWERVE_EXEC="$token" timeout -s KILL "$limit" bash -c "$cmd" </dev/null 2>&1
printf '\n%s %s\n' "$nonce" "$?"
done"#;

/// How a session's shell starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSpec {
    /// Environment variables every command gets.
    pub env: Vec<(String, String)>,
    /// The commands' working directory (`None`: the container's).
    pub workdir: Option<String>,
    /// Largest file a command may write, in bytes (`ulimit -f`; `None`: no limit).
    pub file_bytes: Option<u64>,
}

/// An open shell in a container. Dropping it ends the shell (its input closes).
pub struct Session {
    output: ExecStream,
    input: ExecInput,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// 128 random bits as hex, from the standard library's randomly keyed hasher.
fn nonce() -> String {
    let mut text = String::new();
    for _ in 0..2 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        text.push_str(&format!("{:016x}", hasher.finish()));
    }
    text
}

/// Where the sentinel line `\n<nonce> <status>\n` is in `bytes`: its start and the status.
fn find_sentinel(bytes: &[u8], nonce: &str) -> Option<(usize, i64, usize)> {
    let marker = format!("\n{nonce} ");
    let start = bytes
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())?;
    let after = &bytes[start + marker.len()..];
    let end = after.iter().position(|&b| b == b'\n')?;
    let status = std::str::from_utf8(&after[..end]).ok()?.parse().ok()?;
    Some((start, status, start + marker.len() + end + 1))
}

impl Container {
    /// Opens a shell session in this container (see [`Session`]).
    pub async fn session(&self, spec: &SessionSpec) -> Result<Session> {
        let mut script = String::new();
        if let Some(bytes) = spec.file_bytes {
            script.push_str(&format!("ulimit -f {} 2>/dev/null\n", bytes.div_ceil(1024)));
        }
        script.push_str(SHELL);
        let cmd = vec!["bash".to_owned(), "-c".to_owned(), script];
        let (_, output, input) = self
            .start_attached_exec(cmd, env_pairs(&spec.env), spec.workdir.clone())
            .await?;
        Ok(Session { output, input })
    }
}

impl Session {
    /// Runs `command` as `bash -c COMMAND` in the session, up to `timeout`, keeping at most
    /// `head` bytes of its output from the start and `tail` from the end. An `Err` means the
    /// session is broken (its shell or the engine's stream ended): open a new one.
    pub async fn run(
        &mut self,
        container: &Container,
        command: &str,
        timeout: Duration,
        head: usize,
        tail: usize,
    ) -> Result<ExecOutput> {
        let started = Instant::now();
        if command.contains('\0') {
            return Ok(ExecOutput {
                exit_code: Some(2),
                output: b"the command holds a NUL byte, which a shell command cannot".to_vec(),
                timed_out: false,
                truncated: false,
                tail: Vec::new(),
                elided_bytes: 0,
                elapsed: started.elapsed(),
            });
        }
        let nonce = nonce();
        let token = exec_token();
        // The in-container limit is a backstop; the host's deadline below decides.
        let limit = (timeout + Duration::from_secs(5)).as_secs_f64().ceil();
        let message = format!("{nonce}\0{limit}\0{token}\0{command}\0");
        let broken = |what: &str, e: Option<std::io::Error>| {
            container.exec_failed(DockerError::other(match e {
                Some(e) => format!("the shell session {what}: {e}"),
                None => format!("the shell session {what}"),
            }))
        };
        self.input
            .write_all(message.as_bytes())
            .await
            .map_err(|e| broken("cannot take a command", Some(e)))?;
        self.input
            .flush()
            .await
            .map_err(|e| broken("cannot take a command", Some(e)))?;
        let mut capture = Capture::new(head, tail);
        // The last bytes are held back until they cannot be part of the sentinel.
        let hold = nonce.len() + 24;
        let mut pending: Vec<u8> = Vec::new();
        let mut deadline = tokio::time::Instant::from_std(started + timeout);
        let mut timed_out = false;
        let status = loop {
            match tokio::time::timeout_at(deadline, self.output.next()).await {
                Ok(Some(Ok(chunk))) => {
                    pending.extend_from_slice(&chunk.into_bytes());
                    // What follows the sentinel in the same read is a background process's
                    // late output: dropped.
                    if let Some((start, status, _)) = find_sentinel(&pending, &nonce) {
                        capture.push(&pending[..start]);
                        break status;
                    }
                    let keep_from = pending.len().saturating_sub(hold);
                    capture.push(&pending[..keep_from]);
                    pending.drain(..keep_from);
                }
                Ok(Some(Err(e))) => return Err(container.exec_failed(e)),
                Ok(None) => return Err(broken("ended", None)),
                Err(_) if !timed_out => {
                    timed_out = true;
                    container.kill_exec(&token).await;
                    deadline = tokio::time::Instant::now() + AFTER_KILL;
                }
                Err(_) => return Err(broken("did not report the killed command's end", None)),
            }
        };
        Ok(capture.finish(Some(status), timed_out, started.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentinel_is_found_with_its_status_and_only_with_the_nonce() {
        let text = b"out\nmore\n\nabc 17\nlate";
        assert_eq!(find_sentinel(text, "abc"), Some((9, 17, 17)));
        assert_eq!(&text[17..], b"late");
        assert_eq!(find_sentinel(text, "abd"), None);
        assert_eq!(
            find_sentinel(b"\nabc 1", "abc"),
            None,
            "the line is not whole yet"
        );
        assert_eq!(find_sentinel(b"\nabc x\n", "abc"), None);
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }
}
