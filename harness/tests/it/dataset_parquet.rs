//! Parquet datasets read to the same rows as their JSONL source (fixtures written by pyarrow:
//! `harness/tests/fixtures/datasets/make_parquet.py`), and a broken one is reported by row.

use std::path::PathBuf;

use swerve_swebench::dataset::{DatasetError, read_rows};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/datasets")
        .join(name)
}

#[test]
fn hub_layout_parquet_reads_like_jsonl() {
    let expected = read_rows(&fixture("rows.jsonl")).expect("jsonl rows");
    assert_eq!(expected.len(), 4);
    assert!(expected.iter().all(|r| !r.fail_to_pass.is_empty()));
    // String test columns, snappy, two row groups.
    let hub = read_rows(&fixture("rows-hub.parquet")).expect("hub parquet");
    assert_eq!(hub, expected);
    // list<string> test columns, zstd.
    let lists = read_rows(&fixture("rows-lists.parquet")).expect("list parquet");
    assert_eq!(lists, expected);
}

#[test]
fn parquet_row_errors_name_the_row_and_file() {
    let err = read_rows(&fixture("rows-no-id.parquet")).expect_err("no instance_id column");
    assert!(
        matches!(err, DatasetError::ParquetRow { row: 1, .. }),
        "{err:?}"
    );
    let text = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(text.contains("rows-no-id.parquet"), "{text}");
    assert!(text.contains("instance_id"), "{text}");

    let not_parquet = fixture("rows.jsonl");
    let copy =
        std::env::temp_dir().join(format!("swerve-not-parquet-{}.parquet", std::process::id()));
    std::fs::copy(&not_parquet, &copy).unwrap();
    let err = read_rows(&copy).expect_err("a JSONL file named .parquet");
    std::fs::remove_file(&copy).unwrap();
    assert!(matches!(err, DatasetError::Parquet { .. }), "{err:?}");
}
