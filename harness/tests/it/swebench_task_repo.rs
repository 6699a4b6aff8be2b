//! Task repositories both ways with SWE-bench 5.0.2 itself: `harness dataset export --task-repo`
//! writes one that `swebench dataset check` accepts, and `swebench eval OUT --gold --task-repo
//! OUT` and `harness run --task-repo OUT -p gold` (each building the images from the task
//! Dockerfiles) write the same `report.json` files. Two swerve-mini rows, on the images the
//! other Docker tests share.
//!
//! SWE-bench's image builder runs `docker buildx build`; where the Docker CLI has no buildx
//! plugin (Debian's docker.io here: no package, no registry to fetch one), the test gives the
//! SWE-bench process a Docker config folder of its own whose `docker-buildx` plugin runs the same
//! build with the engine's classic builder (`DOCKER_BUILDKIT=0 docker build`, dropping only
//! `--platform`, `--progress` and `--load`, which that builder does not take or need here).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::harness;

const IDS: [&str; 2] = ["swerve__spans-2", "swerve__inicfg-7"];

fn run(command: &mut Command) -> Output {
    let out = command.output().expect("the command starts");
    run_checked(command, out)
}

/// `out` of `command`, which must have succeeded.
fn run_checked(command: &Command, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `docker-buildx` CLI plugin of [`buildx_config`]: its metadata, and `buildx build` as a
/// classic build.
const BUILDX_PLUGIN: &str = r#"#!/bin/bash
if [ "$1" = docker-cli-plugin-metadata ]; then
    echo '{"SchemaVersion":"0.1.0","Vendor":"swerve tests","Version":"v0.0.0","ShortDescription":"buildx build through the classic builder"}'
    exit 0
fi
shift
[ "$1" = build ] || { echo "only buildx build" >&2; exit 2; }
shift
args=()
for a in "$@"; do
    case "$a" in
        --platform=*|--progress=*|--load) ;;
        *) args+=("$a") ;;
    esac
done
DOCKER_BUILDKIT=0 exec docker build "${args[@]}"
"#;

/// A Docker config folder for SWE-bench when the CLI has no buildx (see the module
/// documentation); `None` when it has one.
fn buildx_config(dir: &Path) -> Option<std::path::PathBuf> {
    let has_buildx = Command::new("docker")
        .args(["buildx", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_buildx {
        return None;
    }
    let config = dir.join("docker-config");
    let plugins = config.join("cli-plugins");
    std::fs::create_dir_all(&plugins).expect("plugin folder");
    let plugin = plugins.join("docker-buildx");
    std::fs::write(&plugin, BUILDX_PLUGIN).expect("plugin");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    Some(config)
}

#[test]
fn swebench_and_harness_agree_on_an_exported_task_repository() {
    let Some(venv) = swerve_tests::swebench_venv("SWE-bench 5.0.2 on a task repository") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("task-repo");
    let repo_arg = repo.display().to_string();
    let mut only = vec!["-i"];
    only.extend(IDS);
    // The images the task Dockerfiles start from.
    let mut build = vec!["images", "build", "-d", "swerve-mini"];
    build.extend(&only);
    harness(dir.path(), &build);
    let mut export = vec!["dataset", "export", "swerve-mini", "--task-repo", &repo_arg];
    export.extend(&only);
    harness(dir.path(), &export);

    let check = run(Command::new(venv.join("bin/swebench"))
        .args(["dataset", "check"])
        .arg(&repo));
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.contains("looks well formed"), "{stdout}");

    let theirs = dir.path().join("swebench");
    std::fs::create_dir_all(&theirs).expect("folder");
    let mut swebench = Command::new(venv.join("bin/swebench"));
    if let Some(config) = buildx_config(dir.path()) {
        swebench.env("DOCKER_CONFIG", config);
    }
    swebench
        .arg("eval")
        .arg(&repo)
        .args(["--gold", "--task-repo"])
        .arg(&repo)
        .args(["--run-id", "gold", "-j", "2", "-t", "300"])
        .current_dir(&theirs);
    // SWE-bench's run report lists every container on the engine, then inspects each: one that
    // another test removed in between makes it fail with a 404 after the instances ran. That
    // race is the reference's, with the other tests' containers; the same command again reuses
    // the instances' results and writes the report.
    let first = swebench.output().expect("the command starts");
    let raced = !first.status.success()
        && String::from_utf8_lossy(&first.stderr).contains("in make_run_report")
        && String::from_utf8_lossy(&first.stderr).contains("404 Client Error");
    let eval = if raced {
        run(&mut swebench)
    } else {
        run_checked(&swebench, first)
    };
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&eval.stdout),
        String::from_utf8_lossy(&eval.stderr)
    );

    let ours = dir.path().join("harness");
    std::fs::create_dir_all(&ours).expect("folder");
    harness(
        &ours,
        &[
            "run",
            "--task-repo",
            &repo_arg,
            "-p",
            "gold",
            "--run-id",
            "gold",
            "--mode",
            "compat",
        ],
    );
    for id in IDS {
        let read = |root: &Path| {
            std::fs::read_to_string(
                root.join(format!("logs/run_evaluation/gold/gold/{id}/report.json")),
            )
        };
        let swebench = read(&theirs).unwrap_or_else(|e| panic!("{id}: {e}\n{log}"));
        let harness = read(&ours).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(harness, swebench, "{id}: the reports differ");
        assert!(harness.contains("\"resolved\": true"), "{id}: {harness}");
    }
}
