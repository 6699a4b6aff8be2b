//! Writes curate's own corpus into a folder, for trying `curate run` on history the project
//! wrote itself: `cargo run -p swerve-tests --example curation-corpus -- DIR`, then
//! `curate run --events DIR/events --repos DIR/repos --output DIR/out`.

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: curation-corpus DIR (an empty or new folder)");
        return std::process::ExitCode::from(2);
    };
    if dir.join("events").exists() || dir.join("repos").exists() {
        eprintln!(
            "error: {} already holds events/ or repos/; give an empty or new folder",
            dir.display()
        );
        return std::process::ExitCode::FAILURE;
    }
    let built = swerve_tests::curation::corpus::build(&dir);
    let tasks = built.expected.values().filter(|r| r.is_none()).count();
    eprintln!(
        "wrote {}/events and {}/repos: {} pull requests, {tasks} of them tasks, {} rejected",
        dir.display(),
        dir.display(),
        built.expected.len(),
        built.expected.len() - tasks
    );
    println!("{}", dir.display());
    std::process::ExitCode::SUCCESS
}
