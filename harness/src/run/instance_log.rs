//! `run_instance.log`: timestamped lines in Python logging's
//! `%(asctime)s - %(levelname)s - %(message)s` format (UTC), also mirrored to `tracing`.

use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// An open `run_instance.log`.
#[derive(Debug)]
pub(super) struct InstanceLog {
    file: Mutex<fs_err::File>,
    instance_id: String,
}

/// `YYYY-MM-DD HH:MM:SS,mmm` (UTC) for a time since the Unix epoch.
pub(super) fn asctime(since_epoch: std::time::Duration) -> String {
    let secs = since_epoch.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since_epoch.subsec_millis()
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ`-less ISO form Python's `datetime.isoformat(timespec="seconds")`
/// gives for a naive UTC time: `YYYY-MM-DDTHH:MM:SS`.
pub(super) fn iso_seconds(since_epoch: std::time::Duration) -> String {
    asctime(since_epoch)[..19].replacen(' ', "T", 1)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Now, since the Unix epoch.
pub(super) fn now() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl InstanceLog {
    /// Creates (truncates) the log file.
    pub(super) fn create(path: &Path, instance_id: &str) -> std::io::Result<InstanceLog> {
        Ok(InstanceLog {
            file: Mutex::new(fs_err::File::create(path)?),
            instance_id: instance_id.to_owned(),
        })
    }

    /// Appends an `INFO` line.
    pub(super) fn info(&self, message: &str) {
        tracing::debug!(instance = %self.instance_id, "{message}");
        self.write("INFO", message);
    }

    /// Appends an `ERROR` line.
    pub(super) fn error(&self, message: &str) {
        tracing::debug!(instance = %self.instance_id, "error: {message}");
        self.write("ERROR", message);
    }

    fn write(&self, level: &str, message: &str) {
        let line = format!("{} - {level} - {message}\n", asctime(now()));
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "cannot write run_instance.log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn python_asctime() {
        assert_eq!(asctime(Duration::from_millis(0)), "1970-01-01 00:00:00,000");
        assert_eq!(
            asctime(Duration::from_millis(1_717_243_200_123)),
            "2024-06-01 12:00:00,123"
        );
        assert_eq!(
            iso_seconds(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00"
        );
    }
}
