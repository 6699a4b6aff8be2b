//! Between the stages, data waits on disk, partitioned by repository, so that a run's memory is
//! bounded by one partition and not by the corpus. The event stage appends every kept event to
//! its repository's partition (`events-K.jsonl`); the clone stage then loads one partition at a
//! time, folds it ([`crate::aggregate`]), reads its clones and writes its rows, sorted, to
//! `rows-K.jsonl`; the output is a k-way merge of the partitions' rows. A repository's events
//! and rows are all in one partition (its name's hash decides), so a partition holds whole pull
//! requests and whole issue lists.
//!
//! The folder is a `.curate-<pid>@<host>-*` directory inside the output folder, removed when the
//! run ends. A killed run leaves it behind: the next run on that machine in that folder removes
//! every such folder whose process is gone (and never reads one).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use sha2::Digest;

use crate::aggregate::Aggregate;
use crate::error::CurateError;
use crate::events::Kept;
use crate::output::{EventCounts, Row};

/// At most this many partitions (each is an open file while events are read).
pub(crate) const MAX_PARTITIONS: usize = 256;

/// Input bytes (event files as stored) per partition when the count is automatic.
pub(crate) const AUTO_PARTITION_BYTES: u64 = 16 << 20;

/// How many partitions a run over `input_bytes` of event files uses: `setting` when it is not 0,
/// else one per [`AUTO_PARTITION_BYTES`]; between 1 and [`MAX_PARTITIONS`].
pub(crate) fn partitions_for(input_bytes: u64, setting: usize) -> usize {
    let count = if setting > 0 {
        setting
    } else {
        input_bytes.div_ceil(AUTO_PARTITION_BYTES) as usize
    };
    count.clamp(1, MAX_PARTITIONS)
}

/// The partition of repository `name` among `count`. SHA-256 of the lower-case name, bytes 8 to
/// 16 (bytes 0 to 8 choose the shard, so a shard's repositories still spread over partitions).
pub(crate) fn partition_of(name: &str, count: usize) -> usize {
    let digest = sha2::Sha256::digest(name.to_ascii_lowercase().as_bytes());
    let word = u64::from_be_bytes(digest[8..16].try_into().expect("8 bytes"));
    (word % count as u64) as usize
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> CurateError + '_ {
    move |source| CurateError::Write {
        path: path.to_owned(),
        source,
    }
}

fn read_error(path: &Path) -> impl Fn(std::io::Error) -> CurateError + '_ {
    move |source| CurateError::Read {
        path: path.to_owned(),
        source,
    }
}

/// Kept events encoded for their partitions, one buffer per partition (built by the workers
/// that read the files, appended by one thread in file order).
pub(crate) type Encoded = Vec<Vec<u8>>;

/// The start of a spill folder's name, before its process id.
const SPILL_PREFIX: &str = ".curate-";

/// This run's spill folder name up to its random part: `.curate-<pid>@<host>-`.
fn spill_prefix() -> String {
    format!("{SPILL_PREFIX}{}@{}-", std::process::id(), host_name())
}

/// This machine's name (the kernel's), or `unknown`.
fn host_name() -> String {
    fs_err::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Removes the spill folders in `output` that killed runs of this machine left: those whose
/// process is gone. A folder of another machine (an output folder on a shared file system) is
/// left alone, since whether its process lives cannot be seen from here; one whose name holds
/// no process id (an older swerve's) is removed. Failures are logged: a leftover costs disk,
/// not correctness.
fn remove_dead_spills(output: &Path) {
    let Ok(entries) = fs_err::read_dir(output) else {
        return;
    };
    let host = host_name();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SPILL_PREFIX)) else {
            continue;
        };
        let owner = rest.split_once('@').and_then(|(pid, rest)| {
            let pid = pid.parse::<u32>().ok()?;
            let (owner_host, _) = rest.rsplit_once('-')?;
            Some((pid, owner_host))
        });
        let keep = match owner {
            Some((pid, owner_host)) => {
                owner_host != host
                    || pid == std::process::id()
                    || Path::new("/proc").join(pid.to_string()).exists()
            }
            None => false,
        };
        if keep || !entry.path().is_dir() {
            continue;
        }
        match fs_err::remove_dir_all(entry.path()) {
            Ok(()) => tracing::info!(
                "removed {}, left by an interrupted run",
                entry.path().display()
            ),
            Err(e) => tracing::warn!("cannot remove an interrupted run's spill folder: {e}"),
        }
    }
}

/// The spill folder of one run.
pub(crate) struct Spill {
    dir: tempfile::TempDir,
    count: usize,
    events: Vec<BufWriter<fs_err::File>>,
}

impl Spill {
    /// Creates the folder inside `output` (created when missing) with `count` partitions.
    pub(crate) fn create(output: &Path, count: usize) -> Result<Spill, CurateError> {
        fs_err::create_dir_all(output).map_err(write_error(output))?;
        remove_dead_spills(output);
        let dir = tempfile::Builder::new()
            .prefix(&spill_prefix())
            .tempdir_in(output)
            .map_err(write_error(output))?;
        let events = (0..count)
            .map(|k| {
                let path = dir.path().join(format!("events-{k}.jsonl"));
                fs_err::File::create(&path)
                    .map(|f| BufWriter::with_capacity(1 << 16, f))
                    .map_err(write_error(&path))
            })
            .collect::<Result<_, _>>()?;
        Ok(Spill { dir, count, events })
    }

    /// How many partitions.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    fn path(&self, kind: &str, k: usize) -> PathBuf {
        self.dir.path().join(format!("{kind}-{k}.jsonl"))
    }

    /// Encodes `events` into per-partition buffers (one JSON line per event).
    pub(crate) fn encode(count: usize, events: impl IntoIterator<Item = Kept>) -> Encoded {
        let mut out = vec![Vec::new(); count];
        for event in events {
            let buf = &mut out[partition_of(event.repo(), count)];
            serde_json::to_writer(&mut *buf, &event).expect("events serialise");
            buf.push(b'\n');
        }
        out
    }

    /// Appends encoded events to their partitions.
    pub(crate) fn append(&mut self, encoded: &Encoded) -> Result<(), CurateError> {
        for (k, bytes) in encoded.iter().enumerate() {
            if !bytes.is_empty()
                && let Err(error) = self.events[k].write_all(bytes)
            {
                return Err(write_error(&self.path("events", k))(error));
            }
        }
        Ok(())
    }

    /// Closes the event files; call once every event is appended.
    pub(crate) fn seal(&mut self) -> Result<(), CurateError> {
        for (k, mut out) in std::mem::take(&mut self.events).into_iter().enumerate() {
            out.flush().map_err(write_error(&self.path("events", k)))?;
        }
        Ok(())
    }

    /// Folds partition `k`'s events (repeated event ids once) into an aggregate, counting the
    /// distinct events into `counts`.
    pub(crate) fn load(
        &self,
        k: usize,
        counts: &mut EventCounts,
    ) -> Result<Aggregate, CurateError> {
        let path = self.path("events", k);
        let file = fs_err::File::open(&path).map_err(read_error(&path))?;
        let mut aggregate = Aggregate::default();
        let mut seen: HashSet<String> = HashSet::new();
        for (i, line) in BufReader::with_capacity(1 << 16, file).lines().enumerate() {
            let line = line.map_err(read_error(&path))?;
            let event: Kept = serde_json::from_str(&line).map_err(|source| CurateError::Row {
                path: path.clone(),
                line: i + 1,
                source,
            })?;
            // Events without an id cannot be told apart: each is kept.
            if !event.id().is_empty() && !seen.insert(event.id().to_owned()) {
                counts.duplicate_events += 1;
                continue;
            }
            match event {
                Kept::PullRequest(e) => {
                    counts.pull_request_events += 1;
                    counts.trimmed_pull_request_events += u64::from(e.pull_request.is_trimmed());
                    aggregate.add_pull_request(*e);
                }
                Kept::IssueOpened(e) => {
                    counts.opened_issues += 1;
                    aggregate.add_issue(e);
                }
            }
        }
        Ok(aggregate)
    }

    /// Writes partition `k`'s rows (sorted by repository and number).
    pub(crate) fn write_rows(&self, k: usize, rows: &[Row]) -> Result<(), CurateError> {
        let path = self.path("rows", k);
        let file = fs_err::File::create(&path).map_err(write_error(&path))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        for row in rows {
            serde_json::to_writer(&mut out, row).map_err(|e| write_error(&path)(e.into()))?;
            out.write_all(b"\n").map_err(write_error(&path))?;
        }
        out.flush().map_err(write_error(&path))
    }

    /// Every partition's rows as one stream sorted by repository and number.
    pub(crate) fn rows(&self) -> Result<MergedRows, CurateError> {
        MergedRows::new(
            (0..self.count)
                .map(|k| RowSource::new(self.path("rows", k), RowKind::Row))
                .collect::<Result<_, _>>()?,
        )
    }
}

/// How the lines of a row file read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RowKind {
    /// [`Row`] lines (spilled partitions).
    Row,
    /// `tasks.jsonl` lines.
    Task,
    /// `rejected.jsonl` lines.
    Rejected,
}

/// A file of rows sorted by repository and number, read one line at a time.
pub(crate) struct RowSource {
    path: PathBuf,
    kind: RowKind,
    lines: std::io::Lines<BufReader<fs_err::File>>,
    line: usize,
}

impl RowSource {
    /// Opens `path`, whose lines are `kind` rows.
    pub(crate) fn new(path: PathBuf, kind: RowKind) -> Result<RowSource, CurateError> {
        let file = fs_err::File::open(&path).map_err(read_error(&path))?;
        Ok(RowSource {
            lines: BufReader::with_capacity(1 << 16, file).lines(),
            path,
            kind,
            line: 0,
        })
    }

    /// The next row, if any.
    pub(crate) fn next_row(&mut self) -> Result<Option<Row>, CurateError> {
        loop {
            let Some(line) = self.lines.next() else {
                return Ok(None);
            };
            self.line += 1;
            let line = line.map_err(read_error(&self.path))?;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |source| CurateError::Row {
                path: self.path.clone(),
                line: self.line,
                source,
            };
            let row = match self.kind {
                RowKind::Row => serde_json::from_str(&line).map_err(bad)?,
                RowKind::Task => Row::Task(serde_json::from_str(&line).map_err(bad)?),
                RowKind::Rejected => Row::Rejected(serde_json::from_str(&line).map_err(bad)?),
            };
            return Ok(Some(row));
        }
    }
}

/// A k-way merge of sorted row sources.
pub(crate) struct MergedRows {
    sources: Vec<RowSource>,
    heads: Vec<Option<Row>>,
    heap: BinaryHeap<Reverse<(String, u64, usize)>>,
}

impl MergedRows {
    /// Merges `sources`, each sorted by repository and number.
    pub(crate) fn new(mut sources: Vec<RowSource>) -> Result<MergedRows, CurateError> {
        let mut heads = Vec::with_capacity(sources.len());
        let mut heap = BinaryHeap::new();
        for (i, source) in sources.iter_mut().enumerate() {
            let head = source.next_row()?;
            if let Some(row) = &head {
                let (repo, number) = row.order();
                heap.push(Reverse((repo.to_owned(), number, i)));
            }
            heads.push(head);
        }
        Ok(MergedRows {
            sources,
            heads,
            heap,
        })
    }

    /// The next row in order, if any.
    pub(crate) fn next_row(&mut self) -> Result<Option<Row>, CurateError> {
        let Some(Reverse((_, _, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let row = self.heads[i].take().expect("a queued source has a head");
        let next = self.sources[i].next_row()?;
        if let Some(next) = &next {
            let (repo, number) = next.order();
            self.heap.push(Reverse((repo.to_owned(), number, i)));
        }
        self.heads[i] = next;
        Ok(Some(row))
    }
}

#[cfg(test)]
mod tests {
    use super::{partition_of, partitions_for};
    use crate::config::Shard;

    #[test]
    fn partitions_grow_with_input_and_are_capped() {
        assert_eq!(partitions_for(0, 0), 1);
        assert_eq!(partitions_for(16 << 20, 0), 1);
        assert_eq!(partitions_for((16 << 20) + 1, 0), 2);
        assert_eq!(partitions_for(u64::MAX / 2, 0), super::MAX_PARTITIONS);
        assert_eq!(partitions_for(u64::MAX / 2, 7), 7);
        assert_eq!(partitions_for(0, 1000), super::MAX_PARTITIONS);
    }

    #[test]
    fn a_shard_spreads_over_partitions() {
        let shard = Shard::parse("0/4").unwrap();
        let names: Vec<String> = (0..400)
            .map(|i| format!("owner{i}/repo{i}"))
            .filter(|n| shard.contains(n))
            .collect();
        let used: std::collections::BTreeSet<usize> =
            names.iter().map(|n| partition_of(n, 4)).collect();
        assert_eq!(
            used.len(),
            4,
            "every partition gets repositories of shard 0"
        );
        assert_eq!(partition_of("A/B", 7), partition_of("a/b", 7));
    }

    #[test]
    fn a_new_run_removes_what_dead_runs_left_and_nothing_else() {
        let out = tempfile::tempdir().unwrap();
        let host = super::host_name();
        // A process id no process has (above the kernel's largest) on this machine, an older
        // name without one, this process's own folder, another machine's folder with the same
        // dead id, and a user's folder.
        let dead = out.path().join(format!(".curate-4294967295@{host}-abc"));
        let old = out.path().join(".curate-Xyz123");
        let mine = out.path().join(format!("{}def", super::spill_prefix()));
        let elsewhere = out.path().join(".curate-4294967295@other-host.example-ghi");
        let users = out.path().join("curate-notes");
        for dir in [&dead, &old, &mine, &elsewhere, &users] {
            fs_err::create_dir_all(dir.join("x")).unwrap();
        }
        let spill = super::Spill::create(out.path(), 2).unwrap();
        assert!(!dead.exists() && !old.exists());
        assert!(mine.exists() && elsewhere.exists() && users.exists());
        assert!(spill.dir.path().exists());
        let name = spill
            .dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(&super::spill_prefix()), "{name}");
    }
}
