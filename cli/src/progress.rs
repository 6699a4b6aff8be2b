//! Progress of long work on stderr, one reporter for every binary.
//!
//! On a terminal it is an `indicatif` bar. Anywhere else (stderr redirected to a log file, a CI
//! job, a Slurm job's output, a pipe) a bar would draw nothing, so a plain line is printed
//! instead: at the first update, then at most every `SWERVE_PROGRESS_INTERVAL` seconds (default
//! 10; 0 prints every update), and at the end, e.g.
//! `grpo step 12/240 reward -0.6123 elapsed 1m02s eta 19m40s`. With `-q` nothing is shown.
//!
//! A reporter is `Sync`: the threads of one phase update it together.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::Verbosity;

/// The environment variable that sets the seconds between plain progress lines.
pub const INTERVAL_ENV: &str = "SWERVE_PROGRESS_INTERVAL";

/// The seconds between plain progress lines when the variable is not set.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// The bar's template when the total is known, and when it is not (a stream).
const BAR: &str = "{prefix} {bar:30} {pos}/{len} {msg} eta {eta}";
const SPINNER: &str = "{prefix} {spinner} {pos} {msg} [{elapsed_precise}]";

/// The interval of plain lines: `SWERVE_PROGRESS_INTERVAL` when it is a number of seconds.
fn interval() -> anyhow::Result<Duration> {
    match std::env::var(INTERVAL_ENV) {
        Ok(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                anyhow::anyhow!("{INTERVAL_ENV}={text:?} is not a number of seconds >= 0")
            }),
        Err(_) => Ok(DEFAULT_INTERVAL),
    }
}

/// Where a phase stands, for plain lines.
#[derive(Debug, Default)]
struct Lines {
    done: u64,
    total: Option<u64>,
    message: Option<String>,
    /// The time and count of the first update: the phase's clock starts there (a phase may be
    /// set up long before it runs, and a resumed run starts past 0).
    first: Option<(Instant, u64)>,
    /// When the last line was printed, and at which count.
    last: Option<(Instant, u64)>,
}

enum Sink {
    Hidden,
    Bar(ProgressBar),
    Lines {
        every: Duration,
        state: Mutex<Lines>,
    },
}

/// One phase's progress: `kind` (`sft`, `grpo`, `evaluation`, `reward`) counting `unit`s
/// (`step`, `instance`, `sample`).
pub struct Progress {
    kind: &'static str,
    unit: &'static str,
    sink: Sink,
}

impl Progress {
    /// A bar when stderr is a terminal, else plain lines; nothing with `-q`. An error when
    /// `SWERVE_PROGRESS_INTERVAL` is not a number of seconds.
    pub fn new(
        kind: &'static str,
        unit: &'static str,
        verbosity: &Verbosity,
    ) -> anyhow::Result<Self> {
        let sink = if verbosity.quiet {
            Sink::Hidden
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0);
            bar.set_style(ProgressStyle::with_template(BAR)?);
            bar.set_prefix(kind);
            Sink::Bar(bar)
        } else {
            Sink::Lines {
                every: interval()?,
                state: Mutex::new(Lines::default()),
            }
        };
        Ok(Self { kind, unit, sink })
    }

    /// A reporter that shows nothing.
    pub fn hidden() -> Self {
        Self {
            kind: "",
            unit: "",
            sink: Sink::Hidden,
        }
    }

    fn lines(state: &Mutex<Lines>) -> std::sync::MutexGuard<'_, Lines> {
        // A panic while holding the lock left at worst a stale count.
        state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The phase has `total` units (a bar; without a call the count is open-ended, as for a
    /// stream).
    pub fn set_total(&self, total: u64) {
        match &self.sink {
            Sink::Hidden => {}
            Sink::Bar(bar) => {
                if bar.length().is_none()
                    && let Ok(style) = ProgressStyle::with_template(BAR)
                {
                    bar.set_style(style);
                }
                bar.set_length(total);
            }
            Sink::Lines { state, .. } => Self::lines(state).total = Some(total),
        }
    }

    /// `more` units joined the phase (work discovered as it goes).
    pub fn add_to_total(&self, more: u64) {
        match &self.sink {
            Sink::Hidden => {}
            Sink::Bar(bar) => bar.inc_length(more),
            Sink::Lines { state, .. } => {
                let mut s = Self::lines(state);
                s.total = Some(s.total.unwrap_or(0) + more);
            }
        }
    }

    /// No total is known: the count grows as the work arrives (a spinner on a terminal).
    pub fn open_ended(&self) {
        if let Sink::Bar(bar) = &self.sink {
            bar.unset_length();
            if let Ok(style) = ProgressStyle::with_template(SPINNER) {
                bar.set_style(style);
            }
        } else if let Sink::Lines { state, .. } = &self.sink {
            Self::lines(state).total = None;
        }
    }

    /// `done` units are done; `message` is the latest metric or count (`reward -0.6123`).
    pub fn set(&self, done: u64, message: Option<String>) {
        match &self.sink {
            Sink::Hidden => {}
            Sink::Bar(bar) => {
                bar.set_position(done);
                if let Some(message) = message {
                    bar.set_message(message);
                }
                if bar.length().is_some_and(|total| done >= total) {
                    bar.finish();
                }
            }
            Sink::Lines { every, state } => {
                let mut s = Self::lines(state);
                s.done = done;
                if message.is_some() {
                    s.message = message;
                }
                self.maybe_print(&mut s, *every, false);
            }
        }
    }

    /// `n` more units are done.
    pub fn inc(&self, n: u64) {
        match &self.sink {
            Sink::Hidden => {}
            Sink::Bar(bar) => bar.inc(n),
            Sink::Lines { every, state } => {
                let mut s = Self::lines(state);
                s.done += n;
                self.maybe_print(&mut s, *every, false);
            }
        }
    }

    /// Replaces the message shown beside the count, without printing a line of its own.
    pub fn set_message(&self, message: String) {
        match &self.sink {
            Sink::Hidden => {}
            Sink::Bar(bar) => bar.set_message(message),
            Sink::Lines { state, .. } => Self::lines(state).message = Some(message),
        }
    }

    /// Prints a message for the user (a submitted job, an infrastructure error) on its own line
    /// of stderr, above the bar on a terminal. Printed with `-q` too: quiet hides progress and
    /// summaries, not what the user must act on.
    pub fn println(&self, text: &str) {
        match &self.sink {
            Sink::Bar(bar) => bar.suspend(|| eprintln!("{text}")),
            Sink::Hidden | Sink::Lines { .. } => eprintln!("{text}"),
        }
    }

    /// The phase ended: a bar stays at its last state; plain lines print the last count unless
    /// it was just printed.
    pub fn finish(&self) {
        match &self.sink {
            Sink::Hidden => {}
            Sink::Bar(bar) => bar.finish(),
            Sink::Lines { every, state } => {
                let mut s = Self::lines(state);
                self.maybe_print(&mut s, *every, true);
            }
        }
    }

    /// The phase ended and its bar is removed (what follows prints a summary in its place);
    /// plain lines print the last count as [`Progress::finish`] does.
    pub fn clear(&self) {
        match &self.sink {
            Sink::Bar(bar) => bar.finish_and_clear(),
            _ => self.finish(),
        }
    }

    fn maybe_print(&self, s: &mut Lines, every: Duration, end: bool) {
        let now = Instant::now();
        let (start, start_done) = *s.first.get_or_insert((now, s.done));
        let printed_this = s.last.is_some_and(|(_, at)| at == s.done);
        let finished = s.total.is_some_and(|t| s.done >= t);
        let due = match s.last {
            None => true,
            Some((at, _)) => now.duration_since(at) >= every || finished || end,
        };
        if !due || (printed_this && (finished || end)) {
            return;
        }
        s.last = Some((now, s.done));
        let count = Count {
            done: s.done,
            total: s.total,
            since_start: s.done.saturating_sub(start_done),
        };
        eprintln!(
            "{}",
            line(
                self.kind,
                self.unit,
                count,
                s.message.as_deref(),
                now.duration_since(start)
            )
        );
    }
}

/// Where a phase stands.
#[derive(Debug, Clone, Copy)]
struct Count {
    done: u64,
    total: Option<u64>,
    /// Units done since the first update.
    since_start: u64,
}

/// A plain progress line, `elapsed` after the first update. The ETA assumes the remaining
/// units take as long as those done since the first update.
fn line(kind: &str, unit: &str, count: Count, message: Option<&str>, elapsed: Duration) -> String {
    let Count {
        done,
        total,
        since_start,
    } = count;
    let mut text = match total {
        Some(total) => format!("{kind} {unit} {done}/{total}"),
        None => format!("{kind} {unit} {done}"),
    };
    if let Some(message) = message {
        text.push(' ');
        text.push_str(message);
    }
    text.push_str(&format!(" elapsed {}", clock(elapsed)));
    if let Some(total) = total.filter(|&t| since_start > 0 && done < t) {
        let eta = elapsed.mul_f64(total.saturating_sub(done) as f64 / since_start as f64);
        text.push_str(&format!(" eta {}", clock(eta)));
    }
    text
}

/// `1h02m03s`, `2m05s` or `7s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(done: u64, total: Option<u64>, since_start: u64) -> Count {
        Count {
            done,
            total,
            since_start,
        }
    }

    #[test]
    fn lines_show_count_metric_elapsed_and_eta() {
        assert_eq!(
            line(
                "grpo",
                "step",
                count(13, Some(241), 12),
                Some("reward -0.6123"),
                Duration::from_secs(62)
            ),
            "grpo step 13/241 reward -0.6123 elapsed 1m02s eta 19m38s"
        );
        // The first update has no rate yet; the last needs no ETA.
        assert_eq!(
            line("sft", "step", count(1, Some(200), 0), None, Duration::ZERO),
            "sft step 1/200 elapsed 0s"
        );
        assert_eq!(
            line(
                "predict",
                "task",
                count(13, Some(13), 12),
                None,
                Duration::from_secs(3725)
            ),
            "predict task 13/13 elapsed 1h02m05s"
        );
        // A stream has no total and no ETA.
        assert_eq!(
            line(
                "reward",
                "samples",
                count(500, None, 499),
                None,
                Duration::from_secs(3)
            ),
            "reward samples 500 elapsed 3s"
        );
    }

    #[test]
    fn plain_lines_print_the_first_the_due_and_the_last_update_once() {
        let progress = Progress {
            kind: "k",
            unit: "u",
            sink: Sink::Lines {
                every: Duration::from_secs(3600),
                state: Mutex::new(Lines::default()),
            },
        };
        let printed = |p: &Progress| {
            let Sink::Lines { state, .. } = &p.sink else {
                unreachable!()
            };
            Progress::lines(state).last
        };
        let at = |p: &Progress| printed(p).map(|(_, at)| at);
        progress.set_total(3);
        progress.set(1, None);
        assert_eq!(at(&progress), Some(1), "the first update prints");
        progress.inc(1);
        assert_eq!(at(&progress), Some(1), "not due within the interval");
        progress.inc(1);
        assert_eq!(at(&progress), Some(3), "the last update prints");
        let last = printed(&progress);
        progress.finish();
        assert_eq!(
            printed(&progress),
            last,
            "the end does not print the same count again"
        );
    }
}
