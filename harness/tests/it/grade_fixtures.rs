//! Conformance: grading each real SWE-bench 5.0.2 log in the shared `swebench-logs/` folder with
//! its dataset row must reproduce the official `report.json` byte for byte. The logs are
//! third-party and not in the repository; without them the test says so and passes
//! (`swerve_tests::shared_data`).

use std::path::{Path, PathBuf};

use swerve_swebench::dataset::Instance;
use swerve_swebench::grading::{PatchState, grade};
use swerve_swebench::report::render_instance_report;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn reports_match_the_python_harness_byte_for_byte() {
    let Some(dir) = swerve_tests::shared_data("swebench-logs", "report conformance") else {
        return;
    };
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 4,
        "expected the 4 fixture cases in {}",
        dir.display()
    );

    let mut mismatches = Vec::new();
    for case in &cases {
        let instance = Instance::from_json(&read(&case.join("instance.json")))
            .unwrap_or_else(|err| panic!("{}: {err}", case.display()));
        let log = read(&case.join("test_output.txt"));
        let expected = read(&case.join("report.json"));
        // Every fixture is a gold or no-op prediction: the patch is a string.
        let grading = grade(&instance, &log, PatchState::Present)
            .unwrap_or_else(|err| panic!("{}: {err}", case.display()));
        let rendered = render_instance_report(&instance.instance_id, &grading.report);
        if rendered != expected {
            mismatches.push(format!(
                "{}:\n--- expected\n{expected}\n--- got\n{rendered}\n--- outcome\n{:?}",
                case.display(),
                grading.outcome
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}
