//! TensorBoard event files of a training run, written beside `metrics.jsonl`.
//!
//! An event file is a sequence of TFRecords, each `length` (u64, little-endian), the masked
//! CRC-32C of those 8 bytes, `data`, and the masked CRC-32C of `data`. Each record's data is an
//! `Event` protobuf (`tensorflow/core/util/event.proto`): the first holds `file_version =
//! "brain.Event:2"`, every later one a step's `Summary` of scalar values (`simple_value`). The
//! tags are the metric names as Hugging Face's `TensorBoardCallback` writes TRL's logs:
//! `train/` before each `metrics.jsonl` key (`train/loss`, `train/reward`,
//! `train/rewards/swe-rl/mean`, `train/completions/mean_length`, ...). An undefined metric
//! (`null` in the JSONL) is written as NaN, as the callback writes a NaN float.
//!
//! The file is named as TensorBoard's writers name theirs, `events.out.tfevents.<unix
//! seconds>.<hostname>`. A run's folder holds one event file with exactly the steps of its
//! `metrics.jsonl`: opening the metrics log replaces earlier event files and writes the steps
//! it keeps (a resumed run) into the new one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, IoOp, Result};
use crate::report::metrics_log::StepMetrics;

/// The prefix of every event file name.
pub(super) const FILE_PREFIX: &str = "events.out.tfevents.";

/// The `file_version` of the first event.
pub(super) const FILE_VERSION: &str = "brain.Event:2";

/// The TensorBoard tag of a `metrics.jsonl` key: `train/<key>`, as Hugging Face's
/// `TensorBoardCallback` rewrites the logs of a training step.
pub(super) fn tag(metric: &str) -> String {
    format!("train/{metric}")
}

/// CRC-32C (Castagnoli, reflected polynomial `0x82F63B78`), as TFRecord checksums use.
pub(super) fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82F6_3B78
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !data.iter().fold(!0u32, |crc, &b| {
        TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8)
    })
}

/// The masked CRC-32C a TFRecord stores: rotated right by 15 bits plus `0xA282EAD8`.
pub(super) fn masked_crc32c(data: &[u8]) -> u32 {
    crc32c(data).rotate_right(15).wrapping_add(0xA282_EAD8)
}

/// One TFRecord around `data`.
pub(super) fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

/// What an event carries besides its time and step.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum EventBody {
    /// The first event of a file.
    FileVersion(String),
    /// Scalars: tag → value.
    Scalars(Vec<(String, f32)>),
}

/// A TensorBoard `Event`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Event {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    /// The training step.
    pub step: i64,
    /// The payload.
    pub body: EventBody,
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited protobuf field (wire type 2).
fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl Event {
    /// The event's protobuf encoding: `wall_time` (field 1, double), `step` (2, int64), then
    /// `file_version` (3, string) or `summary` (5: `Summary { repeated Value value = 1 }`,
    /// `Value { string tag = 1; float simple_value = 2 }`).
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.push((1 << 3) | 1);
        out.extend_from_slice(&self.wall_time.to_le_bytes());
        out.push(2 << 3);
        // int64 fields are varints of the two's-complement value.
        varint(&mut out, self.step as u64);
        match &self.body {
            EventBody::FileVersion(version) => bytes_field(&mut out, 3, version.as_bytes()),
            EventBody::Scalars(values) => {
                let mut summary = Vec::new();
                for (tag, value) in values {
                    let mut v = Vec::new();
                    bytes_field(&mut v, 1, tag.as_bytes());
                    v.push((2 << 3) | 5);
                    v.extend_from_slice(&value.to_le_bytes());
                    bytes_field(&mut summary, 1, &v);
                }
                bytes_field(&mut out, 5, &summary);
            }
        }
        out
    }
}

/// The scalars event of one `metrics.jsonl` line.
pub(super) fn step_event(metrics: &StepMetrics, wall_time: f64) -> Event {
    Event {
        wall_time,
        step: i64::try_from(metrics.step).unwrap_or(i64::MAX),
        body: EventBody::Scalars(
            metrics
                .values
                .iter()
                .map(|(name, value)| (tag(name), *value as f32))
                .collect(),
        ),
    }
}

/// An event file being written; every event is flushed as it is written, so that TensorBoard
/// shows a run while it goes.
#[derive(Debug)]
pub(super) struct EventWriter {
    path: PathBuf,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This machine's name for event file names (`/proc/sys/kernel/hostname`, else `$HOSTNAME`,
/// else `localhost`), with characters other than letters, digits, `.`, `_` and `-` replaced.
fn hostname() -> String {
    let name = fs_err::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The event files (`events.out.tfevents.*`) in `dir`, sorted by name.
pub(super) fn event_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Ok(files);
    }
    for entry in fs_err::read_dir(dir).map_err(|e| Error::io(IoOp::ListDir, dir, e))? {
        let entry = entry.map_err(|e| Error::io(IoOp::ListDir, dir, e))?;
        if entry.file_name().to_string_lossy().starts_with(FILE_PREFIX) {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

impl EventWriter {
    /// Starts a new event file in `dir` holding `kept` (the steps a resumed run keeps), written
    /// whole, then removes the event files that were there.
    pub(super) fn create(dir: &Path, kept: &[StepMetrics]) -> Result<Self> {
        let old = event_files(dir)?;
        let wall_time = now();
        let path = dir.join(format!(
            "{FILE_PREFIX}{}.{}",
            wall_time.floor() as u64,
            hostname()
        ));
        let mut bytes = record(
            &Event {
                wall_time,
                step: 0,
                body: EventBody::FileVersion(FILE_VERSION.to_owned()),
            }
            .encode(),
        );
        for metrics in kept {
            bytes.extend(record(&step_event(metrics, wall_time).encode()));
        }
        swerve_cache::write_atomic(&path, bytes).map_err(|e| Error::io(IoOp::Write, &path, e))?;
        // A file of the same second and host was just replaced.
        for old in old.iter().filter(|&old| *old != path) {
            fs_err::remove_file(old).map_err(|e| Error::io(IoOp::Remove, old, e))?;
        }
        Ok(Self { path })
    }

    /// Appends one step's scalars.
    pub(super) fn append(&mut self, metrics: &StepMetrics) -> Result<()> {
        let mut file = fs_err::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| Error::io(IoOp::Append, &self.path, e))?;
        file.write_all(&record(&step_event(metrics, now()).encode()))
            .map_err(|e| Error::io(IoOp::Append, &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn crc32c_check_value() {
        // The check value of the CRC-32C catalogue entry (RFC 3720, appendix B.4).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn record_frames_length_and_data_with_masked_crcs() {
        let framed = record(b"abc");
        assert_eq!(framed.len(), 8 + 4 + 3 + 4);
        assert_eq!(&framed[..8], &3u64.to_le_bytes());
        assert_eq!(
            &framed[8..12],
            &masked_crc32c(&3u64.to_le_bytes()).to_le_bytes()
        );
        assert_eq!(&framed[12..15], b"abc");
        assert_eq!(&framed[15..], &masked_crc32c(b"abc").to_le_bytes());
    }

    #[test]
    fn events_encode_as_protobuf() {
        let version = Event {
            wall_time: 1.5,
            step: 0,
            body: EventBody::FileVersion(FILE_VERSION.into()),
        };
        let mut expected = vec![0x09];
        expected.extend_from_slice(&1.5f64.to_le_bytes());
        expected.extend_from_slice(&[0x10, 0x00, 0x1A, 13]);
        expected.extend_from_slice(b"brain.Event:2");
        assert_eq!(version.encode(), expected);

        let metrics = StepMetrics {
            step: 300,
            values: BTreeMap::from([("kl".to_owned(), 0.25)]),
        };
        let encoded = step_event(&metrics, 2.0).encode();
        let mut expected = vec![0x09];
        expected.extend_from_slice(&2.0f64.to_le_bytes());
        // 300 as a varint; summary (5) of one value (1) of tag (1) and simple_value (2).
        expected.extend_from_slice(&[0x10, 0xAC, 0x02, 0x2A, 17, 0x0A, 15, 0x0A, 8]);
        expected.extend_from_slice(b"train/kl");
        expected.push(0x15);
        expected.extend_from_slice(&0.25f32.to_le_bytes());
        assert_eq!(encoded, expected);
    }

    #[test]
    fn a_new_writer_replaces_old_files_and_keeps_given_steps() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(format!("{FILE_PREFIX}1.old"));
        fs_err::write(&stale, b"x").unwrap();
        let kept = [StepMetrics {
            step: 1,
            values: BTreeMap::from([("loss".to_owned(), 1.0)]),
        }];
        let writer = EventWriter::create(dir.path(), &kept).unwrap();
        assert!(!stale.exists());
        assert_eq!(
            event_files(dir.path()).unwrap(),
            vec![writer.path.to_owned()]
        );
        let bytes = fs_err::read(&writer.path).unwrap();
        let first = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(
            bytes.len(),
            2 * 16 + first + step_event(&kept[0], 0.0).encode().len()
        );
    }
}
