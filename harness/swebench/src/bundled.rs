//! The bundled dataset `swerve-mini` (13 instances over three small Python projects), carried by
//! every binary that links this crate: its rows, environment specs and repository bundles, as
//! the files of the folder `harness/datasets/swerve-mini/` holds them. Tools write them out
//! once (`swerve_cache::materialise`) and read the folder like any dataset.

/// The bundled dataset's name, as `--dataset` takes it.
pub const SWERVE_MINI: &str = "swerve-mini";

/// The rows file inside the dataset's folder.
pub const SWERVE_MINI_ROWS: &str = "swerve-mini.jsonl";

/// `swerve-mini`'s files: (path inside the dataset folder, content).
pub static SWERVE_MINI_FILES: &[(&str, &[u8])] = &[
    (
        "swerve-mini.jsonl",
        include_bytes!("../../datasets/swerve-mini/swerve-mini.jsonl"),
    ),
    (
        "environments.json",
        include_bytes!("../../datasets/swerve-mini/environments.json"),
    ),
    (
        "predictions-mixed.jsonl",
        include_bytes!("../../datasets/swerve-mini/predictions-mixed.jsonl"),
    ),
    (
        "repos/inicfg.bundle",
        include_bytes!("../../datasets/swerve-mini/repos/inicfg.bundle"),
    ),
    (
        "repos/spans.bundle",
        include_bytes!("../../datasets/swerve-mini/repos/spans.bundle"),
    ),
    (
        "repos/textkit.bundle",
        include_bytes!("../../datasets/swerve-mini/repos/textkit.bundle"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_rows_parse_and_name_their_repositories() {
        let (_, rows) = SWERVE_MINI_FILES
            .iter()
            .find(|(path, _)| *path == SWERVE_MINI_ROWS)
            .expect("rows");
        let rows =
            crate::dataset::parse_jsonl_rows(std::str::from_utf8(rows).expect("utf-8")).unwrap();
        assert_eq!(rows.len(), 13);
        for row in &rows {
            let name = row.repo.rsplit('/').next().unwrap();
            let bundle = format!("repos/{name}.bundle");
            assert!(
                SWERVE_MINI_FILES.iter().any(|(path, _)| *path == bundle),
                "{} has no {bundle}",
                row.instance_id
            );
        }
    }
}
