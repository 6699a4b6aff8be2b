//! Writes the fixture `curate validate` is tested on into a folder, for trying it (and for its
//! benchmark, `benches/curate/validate.sh`): `cargo run -p swerve-tests --example
//! validate-fixture -- DIR`, then `curate validate --tasks DIR/tasks.jsonl --repos DIR/repos
//! --output DIR/out` (or `curate run --events DIR/events --repos DIR/repos` first).

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: validate-fixture DIR (an empty or new folder)");
        return std::process::ExitCode::from(2);
    };
    if dir.join("repos").exists() || dir.join("work").exists() {
        eprintln!(
            "error: {} already holds repos/ or work/; give an empty or new folder",
            dir.display()
        );
        return std::process::ExitCode::FAILURE;
    }
    let fixture = swerve_tests::environments::build(&dir);
    let kept = fixture
        .expected
        .iter()
        .filter(|(_, e)| matches!(e, swerve_tests::environments::Expected::Kept { .. }))
        .count();
    eprintln!(
        "wrote {}: {} tasks ({kept} executable by their author's account), {}, {}/events",
        fixture.tasks.display(),
        fixture.expected.len(),
        fixture.repos.display(),
        dir.display(),
    );
    println!("{}", dir.display());
    std::process::ExitCode::SUCCESS
}
