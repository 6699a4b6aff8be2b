//! A streamed output that an interrupted run leaves in a state a rerun continues from.
//!
//! A command that writes one line per unit of work (a scored sample, a prediction) writes them
//! to `<path>.partial`, beside a `<path>.partial.key` file holding the run's *key*: what must be
//! equal for a later run to continue it (the input, its size and time, the settings that change
//! a line). Lines are kept in memory until [`PartialLines::flush`] hands a batch of them to the
//! file in one write, so that a process ended at any point leaves whole lines;
//! [`PartialLines::commit`] renames the finished file over `path` and removes the key. So an
//! interruption at any point leaves:
//!
//! - at `path`, the previous complete output (or none), untouched;
//! - at `<path>.partial`, whole lines of this run's work (a line torn by a kill is cut off when
//!   the file is opened again), which a rerun with the same key continues: it keeps them, and
//!   the caller skips that much work ([`PartialLines::done`]). A rerun with another key starts
//!   over, and says why ([`Reopened::Restarted`]).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// How [`PartialLines::open`] found the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reopened {
    /// No partial output: the run starts from its first line.
    Fresh,
    /// A partial output of the same key: its whole lines are kept, the run continues after them.
    Continued {
        /// Lines kept.
        lines: usize,
    },
    /// A partial output of another run (another input or settings): it was discarded.
    Restarted,
}

/// A JSONL (or any line-oriented) output written as work finishes (see the module
/// documentation).
pub struct PartialLines {
    path: PathBuf,
    partial: PathBuf,
    key_file: PathBuf,
    out: std::fs::File,
    /// Lines written since the last flush.
    pending: Vec<u8>,
    done: usize,
}

impl PartialLines {
    /// Opens the output `path` for a run whose key is `key`: continues `<path>.partial` when its
    /// key file holds the same key, else starts it afresh.
    pub fn open(path: &Path, key: &str) -> std::io::Result<(PartialLines, Reopened)> {
        let partial = sibling(path, ".partial");
        let key_file = sibling(path, ".partial.key");
        let same_key = fs_err::read_to_string(&key_file).is_ok_and(|k| k == key);
        let exists = partial.exists();
        let (done, reopened) = if same_key && exists {
            let lines = cut_torn_line(&partial)?;
            (lines, Reopened::Continued { lines })
        } else {
            fs_err::File::create(&partial)?;
            crate::write_atomic(&key_file, key)?;
            let reopened = if exists {
                Reopened::Restarted
            } else {
                Reopened::Fresh
            };
            (0, reopened)
        };
        let file = fs_err::OpenOptions::new()
            .append(true)
            .open(&partial)?
            .into_parts()
            .0;
        let output = PartialLines {
            path: path.to_owned(),
            partial,
            key_file,
            out: file,
            pending: Vec::new(),
            done,
        };
        Ok((output, reopened))
    }

    /// Lines the output held when it was opened: the work a continued run skips.
    pub fn done(&self) -> usize {
        self.done
    }

    /// The partial file (what an interrupted run leaves, and the message says).
    pub fn partial_path(&self) -> &Path {
        &self.partial
    }

    /// The lines kept from an earlier run, in order (for totals over the whole output).
    pub fn kept_lines(&self) -> std::io::Result<Vec<String>> {
        let file = fs_err::File::open(&self.partial)?;
        std::io::BufReader::new(file)
            .lines()
            .take(self.done)
            .collect()
    }

    /// Appends one line (`line` without its newline) to the batch in memory.
    pub fn write_line(&mut self, line: &[u8]) {
        self.pending.extend_from_slice(line);
        self.pending.push(b'\n');
    }

    /// Hands the batch's lines to the system in one write: every line written so far survives
    /// this process ending (not a power cut: [`sync`](Self::sync)). Call after a batch of lines.
    /// A Ctrl-C or SIGTERM during the write takes effect after it
    /// ([`swerve_interrupt::shielded`]), so that a stop leaves whole lines.
    pub fn flush(&mut self) -> std::io::Result<()> {
        swerve_interrupt::shielded(|| self.out.write_all(&self.pending))?;
        self.pending.clear();
        Ok(())
    }

    /// [`flush`](Self::flush), then waits until the lines are on disk.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.flush()?;
        self.out.sync_data()
    }

    /// Finishes the output: the partial file becomes `path` (replacing the previous output) and
    /// its key file goes.
    pub fn commit(mut self) -> std::io::Result<()> {
        self.sync()?;
        fs_err::rename(&self.partial, &self.path)?;
        match fs_err::remove_file(&self.key_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// `path` with `suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    path.with_file_name(name)
}

/// Cuts a torn last line (no newline after it: what a kill while appending leaves) off `path`;
/// returns the whole lines that remain.
fn cut_torn_line(path: &Path) -> std::io::Result<usize> {
    let bytes = fs_err::read(path)?;
    let whole = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |newline| newline + 1);
    if whole < bytes.len() {
        fs_err::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(whole as u64)?;
    }
    Ok(bytes[..whole].iter().filter(|&&b| b == b'\n').count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(path: &Path) -> String {
        fs_err::read_to_string(path).unwrap()
    }

    #[test]
    fn an_interrupted_output_is_continued_with_the_same_key_and_restarted_with_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        crate::write_atomic(&path, "previous complete output\n").unwrap();

        let (mut out, reopened) = PartialLines::open(&path, "input a").unwrap();
        assert_eq!((reopened, out.done()), (Reopened::Fresh, 0));
        out.write_line(b"1");
        out.write_line(b"2");
        out.flush().unwrap();
        out.write_line(b"3 never flushed");
        // A kill: the batch in memory is lost; a torn line (a write cut off) is cut off too.
        std::mem::forget(out);
        let partial = dir.path().join("out.jsonl.partial");
        fs_err::OpenOptions::new()
            .append(true)
            .open(&partial)
            .unwrap()
            .write_all(b"3 to")
            .unwrap();
        assert_eq!(contents(&path), "previous complete output\n");

        let (mut out, reopened) = PartialLines::open(&path, "input a").unwrap();
        assert_eq!(reopened, Reopened::Continued { lines: 2 });
        assert_eq!(out.kept_lines().unwrap(), ["1", "2"]);
        out.write_line(b"3");
        out.commit().unwrap();
        assert_eq!(contents(&path), "1\n2\n3\n");
        let names: Vec<_> = fs_err::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.jsonl"]);

        // Another input's partial output is not continued.
        let (mut out, _) = PartialLines::open(&path, "input a").unwrap();
        out.write_line(b"x");
        out.sync().unwrap();
        drop(out);
        let (out, reopened) = PartialLines::open(&path, "input b").unwrap();
        assert_eq!((reopened, out.done()), (Reopened::Restarted, 0));
        assert_eq!(contents(&partial), "");
        assert_eq!(contents(&path), "1\n2\n3\n");
    }
}
