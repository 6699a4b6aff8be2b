//! `tasks.parquet` (written when asked): the rows of `tasks.jsonl`, same order, as one Parquet
//! table that `swerve_swebench::dataset::read_rows`, DuckDB, Polars and pyarrow read. Every
//! [`Task`] field is a column of the same name: text as UTF-8 strings, numbers as 64-bit
//! integers, `merge_commit` as a nullable string, path lists and `issue_numbers` as Parquet
//! `LIST`s, and `code_context` / `oracle_new_content` as `MAP<string, string>` (path → text),
//! which the dataset reader turns into the same objects as in JSON.
//!
//! The file is built with the `parquet` crate's column writers (no Arrow): each leaf column gets
//! its values with Parquet's definition and repetition levels, row group by row group.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, DataType, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::schema::parser::parse_message_type;

use crate::error::CurateError;
use crate::output::Task;

/// The schema; its leaf order is the order [`write_group`] fills the columns in.
const SCHEMA: &str = "
message task {
  required binary instance_id (UTF8);
  required binary repo (UTF8);
  required int64 pull_number;
  required group issue_numbers (LIST) { repeated group list { required int64 element; } }
  required binary base_commit (UTF8);
  required binary head_commit (UTF8);
  optional binary merge_commit (UTF8);
  required binary created_at (UTF8);
  required binary merged_at (UTF8);
  required binary problem_statement (UTF8);
  required group code_context (MAP) {
    repeated group key_value { required binary key (UTF8); required binary value (UTF8); }
  }
  required group oracle_new_content (MAP) {
    repeated group key_value { required binary key (UTF8); required binary value (UTF8); }
  }
  required group edited_files (LIST) { repeated group list { required binary element (UTF8); } }
  required group edited_code_files (LIST) { repeated group list { required binary element (UTF8); } }
  required group edited_test_files (LIST) { repeated group list { required binary element (UTF8); } }
  required group binary_files (LIST) { repeated group list { required binary element (UTF8); } }
  required group relevant_files (LIST) { repeated group list { required binary element (UTF8); } }
  required binary patch (UTF8);
  required binary test_patch (UTF8);
  required binary code_patch_sha256 (UTF8);
}
";

/// Rows per row group: task rows carry whole files, so groups stay a few tens of MB.
const ROWS_PER_GROUP: usize = 256;

/// One leaf column of one row group: values and, for nested or nullable columns, levels.
struct Leaf<T> {
    values: Vec<T>,
    def: Vec<i16>,
    rep: Vec<i16>,
    /// Whether the column has levels at all (a required top-level column has none).
    levels: bool,
}

impl<T> Leaf<T> {
    fn new(levels: bool) -> Leaf<T> {
        Leaf {
            values: Vec::new(),
            def: Vec::new(),
            rep: Vec::new(),
            levels,
        }
    }

    /// Required top-level values, one per row.
    fn required(mut self, rows: impl IntoIterator<Item = T>) -> Leaf<T> {
        self.values.extend(rows);
        self
    }

    /// Nullable top-level values: definition level 1 when present, 0 when null.
    fn optional(mut self, rows: impl IntoIterator<Item = Option<T>>) -> Leaf<T> {
        for value in rows {
            self.def.push(i16::from(value.is_some()));
            self.rep.push(0);
            self.values.extend(value);
        }
        self
    }

    /// The elements of a required list (or one side of a required map) of required elements,
    /// row by row: an empty list is one entry at definition level 0; elements are at level 1,
    /// the first of a row at repetition level 0 and the others at 1.
    fn repeated<I: IntoIterator<Item = T>>(mut self, rows: impl IntoIterator<Item = I>) -> Leaf<T> {
        for items in rows {
            let before = self.values.len();
            for (i, item) in items.into_iter().enumerate() {
                self.values.push(item);
                self.def.push(1);
                self.rep.push(i16::from(i > 0));
            }
            if self.values.len() == before {
                self.def.push(0);
                self.rep.push(0);
            }
        }
        self
    }
}

fn text(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

fn number(n: u64) -> Result<i64, ParquetError> {
    i64::try_from(n).map_err(|_| ParquetError::General(format!("{n} does not fit an int64")))
}

fn put<T: DataType, W: std::io::Write + Send>(
    group: &mut SerializedRowGroupWriter<'_, W>,
    leaf: Leaf<T::T>,
) -> Result<(), ParquetError> {
    let mut column = group
        .next_column()?
        .ok_or_else(|| ParquetError::General("more leaves than schema columns".into()))?;
    let (def, rep) = if leaf.levels {
        (Some(leaf.def.as_slice()), Some(leaf.rep.as_slice()))
    } else {
        (None, None)
    };
    column.typed::<T>().write_batch(&leaf.values, def, rep)?;
    column.close()
}

fn put_text<'a, W: std::io::Write + Send>(
    group: &mut SerializedRowGroupWriter<'_, W>,
    rows: &'a [Task],
    value: impl Fn(&'a Task) -> &'a str,
) -> Result<(), ParquetError> {
    let leaf = Leaf::new(false).required(rows.iter().map(|t| text(value(t))));
    put::<ByteArrayType, _>(group, leaf)
}

fn put_list<'a, W: std::io::Write + Send>(
    group: &mut SerializedRowGroupWriter<'_, W>,
    rows: &'a [Task],
    list: impl Fn(&'a Task) -> &'a [String],
) -> Result<(), ParquetError> {
    let leaf = Leaf::new(true).repeated(rows.iter().map(|t| list(t).iter().map(|s| text(s))));
    put::<ByteArrayType, _>(group, leaf)
}

fn put_map<'a, W: std::io::Write + Send>(
    group: &mut SerializedRowGroupWriter<'_, W>,
    rows: &'a [Task],
    map: impl Fn(&'a Task) -> &'a BTreeMap<String, String>,
) -> Result<(), ParquetError> {
    let keys = Leaf::new(true).repeated(rows.iter().map(|t| map(t).keys().map(|k| text(k))));
    put::<ByteArrayType, _>(group, keys)?;
    let values = Leaf::new(true).repeated(rows.iter().map(|t| map(t).values().map(|v| text(v))));
    put::<ByteArrayType, _>(group, values)
}

/// Writes one row group, leaf by leaf in [`SCHEMA`] order.
fn write_group<W: std::io::Write + Send>(
    group: &mut SerializedRowGroupWriter<'_, W>,
    rows: &[Task],
) -> Result<(), ParquetError> {
    put_text(group, rows, |t| &t.instance_id)?;
    put_text(group, rows, |t| &t.repo)?;
    let pull_numbers = rows
        .iter()
        .map(|t| number(t.pull_number))
        .collect::<Result<Vec<_>, _>>()?;
    put::<Int64Type, _>(group, Leaf::new(false).required(pull_numbers))?;
    let issues = rows
        .iter()
        .map(|t| t.issue_numbers.iter().map(|&n| number(n)).collect())
        .collect::<Result<Vec<Vec<_>>, _>>()?;
    put::<Int64Type, _>(group, Leaf::new(true).repeated(issues))?;
    put_text(group, rows, |t| &t.base_commit)?;
    put_text(group, rows, |t| &t.head_commit)?;
    let merge_commits = rows.iter().map(|t| t.merge_commit.as_deref().map(text));
    put::<ByteArrayType, _>(group, Leaf::new(true).optional(merge_commits))?;
    put_text(group, rows, |t| &t.created_at)?;
    put_text(group, rows, |t| &t.merged_at)?;
    put_text(group, rows, |t| &t.problem_statement)?;
    put_map(group, rows, |t| &t.code_context)?;
    put_map(group, rows, |t| &t.oracle_new_content)?;
    put_list(group, rows, |t| &t.edited_files)?;
    put_list(group, rows, |t| &t.edited_code_files)?;
    put_list(group, rows, |t| &t.edited_test_files)?;
    put_list(group, rows, |t| &t.binary_files)?;
    put_list(group, rows, |t| &t.relevant_files)?;
    put_text(group, rows, |t| &t.patch)?;
    put_text(group, rows, |t| &t.test_patch)?;
    put_text(group, rows, |t| &t.code_patch_sha256)
}

/// `tasks.parquet` written as rows arrive: one row group per 256 rows.
pub(crate) struct TableWriter {
    path: PathBuf,
    writer: SerializedFileWriter<swerve_cache::AtomicFile>,
    pending: Vec<Task>,
}

impl TableWriter {
    /// Creates `dir/tasks.parquet`.
    pub(crate) fn create(dir: &Path) -> Result<TableWriter, CurateError> {
        let path = dir.join("tasks.parquet");
        let open = || -> Result<_, ParquetError> {
            let schema = Arc::new(parse_message_type(SCHEMA)?);
            let props = Arc::new(
                WriterProperties::builder()
                    .set_compression(Compression::ZSTD(Default::default()))
                    .set_created_by("swerve-curate".into())
                    .build(),
            );
            // Whole or not at all: the table appears when its footer is written.
            let file = swerve_cache::AtomicFile::create(&path)?;
            SerializedFileWriter::new(file, schema, props)
        };
        match open() {
            Ok(writer) => Ok(TableWriter {
                path,
                writer,
                pending: Vec::with_capacity(ROWS_PER_GROUP),
            }),
            Err(source) => Err(CurateError::Parquet { path, source }),
        }
    }

    fn error(&self) -> impl Fn(ParquetError) -> CurateError + '_ {
        |source| CurateError::Parquet {
            path: self.path.clone(),
            source,
        }
    }

    fn flush_group(&mut self) -> Result<(), ParquetError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        write_group(&mut group, &self.pending)?;
        group.close()?;
        self.pending.clear();
        Ok(())
    }

    /// Adds one row (rows come sorted).
    pub(crate) fn push(&mut self, task: Task) -> Result<(), CurateError> {
        self.pending.push(task);
        if self.pending.len() >= ROWS_PER_GROUP {
            self.flush_group().map_err(|e| self.error()(e))?;
        }
        Ok(())
    }

    /// Writes the last row group and the footer, and puts the file at its path.
    pub(crate) fn finish(mut self) -> Result<(), CurateError> {
        self.flush_group().map_err(|e| self.error()(e))?;
        let path = self.path;
        let file = self
            .writer
            .into_inner()
            .map_err(|source| CurateError::Parquet {
                path: path.clone(),
                source,
            })?;
        file.commit()
            .map_err(|source| CurateError::Write { path, source })
    }
}
