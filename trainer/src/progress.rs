//! Progress of the long phases (SFT and GRPO steps, generation in `trainer predict`) on stderr.
//!
//! On a terminal it is an `indicatif` bar. Anywhere else (output redirected to a log file, a CI
//! job, a pipe) a bar draws nothing, so a plain line is printed instead: at the first update,
//! then at most every `SWERVE_PROGRESS_INTERVAL` seconds (default 10; 0 prints every update),
//! and at the last one, e.g.
//! `grpo step 12/240 reward -0.6123 elapsed 1m02s eta 19m40s`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// The environment variable that sets the seconds between plain progress lines.
pub const INTERVAL_ENV: &str = "SWERVE_PROGRESS_INTERVAL";

/// The seconds between plain progress lines when the variable is not set.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

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

enum Sink {
    Bar(ProgressBar),
    Lines {
        every: Duration,
        last: Option<Instant>,
    },
}

/// One phase's progress: `kind` (`sft`, `grpo`, `predict`) counting `unit`s (`step`, `task`).
pub struct Progress {
    kind: &'static str,
    unit: &'static str,
    /// The time and count of the first update: the phase's clock starts there (a phase may be
    /// set up long before it runs, and a resumed run starts past 0).
    first: Option<(Instant, u64)>,
    sink: Sink,
}

impl Progress {
    /// A bar when stderr is a terminal, else plain lines.
    pub fn new(kind: &'static str, unit: &'static str) -> anyhow::Result<Self> {
        let sink = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{prefix} {bar:30} {pos}/{len} {msg} eta {eta}")
                    .expect("valid template"),
            );
            bar.set_prefix(kind);
            Sink::Bar(bar)
        } else {
            Sink::Lines {
                every: interval()?,
                last: None,
            }
        };
        Ok(Self {
            kind,
            unit,
            first: None,
            sink,
        })
    }

    /// `done` of `total` units are done; `message` is the latest metric (`reward -0.6123`).
    pub fn update(&mut self, done: u64, total: u64, message: Option<String>) {
        match &mut self.sink {
            Sink::Bar(bar) => {
                bar.set_length(total);
                bar.set_position(done);
                if let Some(message) = message {
                    bar.set_message(message);
                }
                if done >= total {
                    bar.finish();
                }
            }
            Sink::Lines { every, last } => {
                let now = Instant::now();
                let (start, start_done) = *self.first.get_or_insert((now, done));
                let due = last.is_none_or(|t| now.duration_since(t) >= *every) || done >= total;
                if due {
                    *last = Some(now);
                    let count = Count {
                        done,
                        total,
                        since_start: done.saturating_sub(start_done),
                    };
                    eprintln!(
                        "{}",
                        line(
                            self.kind,
                            self.unit,
                            count,
                            message.as_deref(),
                            now.duration_since(start)
                        )
                    );
                }
            }
        }
    }
}

/// Where a phase stands.
#[derive(Debug, Clone, Copy)]
struct Count {
    done: u64,
    total: u64,
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
    let mut text = format!("{kind} {unit} {done}/{total}");
    if let Some(message) = message {
        text.push(' ');
        text.push_str(message);
    }
    text.push_str(&format!(" elapsed {}", clock(elapsed)));
    if since_start > 0 && done < total {
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

    #[test]
    fn lines_show_step_metric_elapsed_and_eta() {
        let count = |done, total, since_start| Count {
            done,
            total,
            since_start,
        };
        assert_eq!(
            line(
                "grpo",
                "step",
                count(13, 241, 12),
                Some("reward -0.6123"),
                Duration::from_secs(62)
            ),
            "grpo step 13/241 reward -0.6123 elapsed 1m02s eta 19m38s"
        );
        // The first update has no rate yet; the last needs no ETA.
        assert_eq!(
            line("sft", "step", count(1, 200, 0), None, Duration::ZERO),
            "sft step 1/200 elapsed 0s"
        );
        assert_eq!(
            line(
                "predict",
                "task",
                count(13, 13, 12),
                None,
                Duration::from_secs(3725)
            ),
            "predict task 13/13 elapsed 1h02m05s"
        );
    }
}
