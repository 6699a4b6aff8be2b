//! Ctrl-C and SIGTERM as data: the one signal watcher of a swerve process, the typed
//! interruption every library returns when a signal stopped its work ([`Interrupted`], which
//! names the [`Signal`]), and the exit status each signal maps to.
//!
//! A binary calls [`install`] first thing. From then on the first SIGINT or SIGTERM is handled
//! in one of two ways:
//!
//! - while some code is [`cooperate`]-ing (it holds a [`Cooperation`]: a Slurm array being
//!   followed, a run that finishes the file it is writing), the signal is only recorded: that
//!   code sees it through [`received`] or [`check`], stops at a point where nothing is lost,
//!   and returns [`Interrupted`], which the binary's exit classifier turns into the signal's
//!   exit status;
//! - otherwise the process prints one line on stderr (`interrupted by SIGINT (Ctrl-C)`, and the
//!   [`set_resume_hint`] line when one was given) and exits at once with the signal's status,
//!   as the shell reports a process the signal killed (130, 143).
//!
//! A second signal always ends the process at once: a user who presses Ctrl-C twice is not kept
//! waiting for a clean stop.
//!
//! Without [`install`] (a library's own tests, a program of a user's) nothing is caught: the
//! signals keep their default action and [`received`] stays `None`.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

/// A signal that stops a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGINT: Ctrl-C at a terminal.
    Interrupt,
    /// SIGTERM: `kill`, `scancel`, a scheduler's time limit, `docker stop`.
    Terminate,
}

impl Signal {
    /// Both signals, in the order of their numbers.
    pub const ALL: [Signal; 2] = [Signal::Interrupt, Signal::Terminate];

    /// The signal's POSIX name: `SIGINT`, `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }

    /// The signal's number on Linux (and every POSIX system): 2, 15.
    pub fn number(self) -> i32 {
        match self {
            Signal::Interrupt => signal_hook::consts::SIGINT,
            Signal::Terminate => signal_hook::consts::SIGTERM,
        }
    }

    /// The exit status of a command this signal stopped: 128 plus its number (130, 143), what
    /// a POSIX shell reports for a process the signal killed.
    pub fn exit_code(self) -> u8 {
        // 128 + 2 and 128 + 15 both fit in a byte.
        128 + self.number() as u8
    }

    fn from_number(number: i32) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.number() == number)
    }

    fn to_byte(self) -> u8 {
        self.number() as u8
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signal::Interrupt => f.write_str("SIGINT (Ctrl-C)"),
            Signal::Terminate => f.write_str("SIGTERM"),
        }
    }
}

/// Work stopped because the process received a signal. Libraries return it (or carry it as the
/// `#[source]` of their own variant) so that the binary's exit classifier finds it in the error
/// chain and exits with [`Signal::exit_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by {signal}")]
pub struct Interrupted {
    /// The signal.
    pub signal: Signal,
}

/// The first signal received (its number), 0 while none was.
static RECEIVED: AtomicU8 = AtomicU8::new(0);
/// How many [`Cooperation`]s are alive.
static COOPERATING: AtomicUsize = AtomicUsize::new(0);
/// The line printed after `interrupted by …` when the process ends at once.
static RESUME_HINT: Mutex<Option<String>> = Mutex::new(None);
/// Woken when a signal is recorded, for [`wait`].
static WAKE: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

/// Installs the process's watcher of SIGINT and SIGTERM (a thread of its own; see the module
/// documentation). Later calls do nothing and return the first call's result.
pub fn install() -> Result<(), InstallError> {
    static INSTALLED: OnceLock<Result<(), InstallError>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let numbers = Signal::ALL.map(Signal::number);
            let mut signals = signal_hook::iterator::Signals::new(numbers)
                .map_err(|e| InstallError(e.to_string()))?;
            std::thread::Builder::new()
                .name("swerve-signals".to_owned())
                .spawn(move || {
                    for number in signals.forever() {
                        if let Some(signal) = Signal::from_number(number) {
                            on_signal(signal);
                        }
                    }
                })
                .map_err(|e| InstallError(e.to_string()))?;
            Ok(())
        })
        .clone()
}

/// The signal watcher could not be installed (the process cannot create its thread or its
/// signal pipe).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot watch for Ctrl-C and SIGTERM: {0}")]
pub struct InstallError(String);

/// What the watcher thread does with a signal (the module documentation's two ways).
fn on_signal(signal: Signal) {
    let first = RECEIVED
        .compare_exchange(0, signal.to_byte(), Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if first && COOPERATING.load(Ordering::SeqCst) > 0 {
        let _guard = WAKE
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        WAKE.1.notify_all();
        return;
    }
    stop_now(signal, first);
}

/// Prints the stop line (with the resume hint) and ends the process with the signal's status.
fn stop_now(signal: Signal, first: bool) -> ! {
    let hint = RESUME_HINT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    eprintln!("{}", stop_line(signal, first, hint.as_deref()));
    std::process::exit(i32::from(signal.exit_code()));
}

/// Runs `f` so that a first signal cannot end the process in the middle of it: a signal that
/// arrives meanwhile is acted on once `f` returns — it ends the process then, as it would have
/// at once, unless some enclosing code is [`cooperate`]-ing, which then sees it through
/// [`received`]. For a write that must not be cut short (a batch of whole lines: a process ended
/// during a large write can leave part of it). A second signal still ends the process at once.
pub fn shielded<T>(f: impl FnOnce() -> T) -> T {
    let cooperating_before = COOPERATING.fetch_add(1, Ordering::SeqCst) > 0;
    let value = f();
    COOPERATING.fetch_sub(1, Ordering::SeqCst);
    if !cooperating_before && let Some(signal) = received() {
        stop_now(signal, true);
    }
    value
}

/// The line printed when a signal ends the process at once.
fn stop_line(signal: Signal, first: bool, hint: Option<&str>) -> String {
    let mut line = if first {
        format!("interrupted by {signal}")
    } else {
        format!("interrupted again by {signal}: stopping at once")
    };
    if let Some(hint) = hint {
        line.push_str("; ");
        line.push_str(hint);
    }
    line
}

/// The first SIGINT or SIGTERM this process received since [`install`], if any.
pub fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        number => Signal::from_number(i32::from(number)),
    }
}

/// `Err` once a signal was received: for loops that stop between two units of work.
pub fn check() -> Result<(), Interrupted> {
    match received() {
        Some(signal) => Err(Interrupted { signal }),
        None => Ok(()),
    }
}

/// Blocks until a signal is received (at once if one was), and returns it. Only useful while
/// cooperating: otherwise the first signal ends the process.
pub fn wait() -> Signal {
    let mut guard = WAKE
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        if let Some(signal) = received() {
            return signal;
        }
        guard = WAKE
            .1
            .wait(guard)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// While the returned value lives, the first signal is recorded for this code to act on instead
/// of ending the process (the module documentation). Nested and concurrent cooperations are
/// counted.
#[must_use = "the first signal ends the process once the cooperation is dropped"]
pub fn cooperate() -> Cooperation {
    COOPERATING.fetch_add(1, Ordering::SeqCst);
    Cooperation(())
}

/// A section of code that stops cleanly on a signal ([`cooperate`]).
#[derive(Debug)]
pub struct Cooperation(());

impl Drop for Cooperation {
    fn drop(&mut self) {
        COOPERATING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The line the process prints after `interrupted by …` when a signal ends it at once: what was
/// kept and the command that continues the work (e.g. `rows written so far are kept in
/// out.jsonl; run the same command again to continue`). `None` removes it.
pub fn set_resume_hint(hint: Option<String>) {
    *RESUME_HINT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = hint;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_have_their_posix_numbers_and_statuses() {
        let table: Vec<(&str, i32, u8)> = Signal::ALL
            .iter()
            .map(|s| (s.name(), s.number(), s.exit_code()))
            .collect();
        assert_eq!(table, [("SIGINT", 2, 130), ("SIGTERM", 15, 143)]);
        for signal in Signal::ALL {
            assert_eq!(Signal::from_number(signal.number()), Some(signal));
        }
        assert_eq!(Signal::from_number(9), None);
    }

    #[test]
    fn the_error_names_the_signal() {
        let e = Interrupted {
            signal: Signal::Interrupt,
        };
        assert_eq!(e.to_string(), "interrupted by SIGINT (Ctrl-C)");
        assert_eq!(
            stop_line(Signal::Terminate, true, Some("run it again")),
            "interrupted by SIGTERM; run it again"
        );
        assert_eq!(
            stop_line(Signal::Interrupt, false, None),
            "interrupted again by SIGINT (Ctrl-C): stopping at once"
        );
    }
}
