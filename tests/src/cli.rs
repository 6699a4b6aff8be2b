//! What the binaries print, for snapshot tests: every `--help` of a binary, its subcommands'
//! included, and a command's exit status with its output, run in a fixed environment (no
//! colour, no `RUST_LOG`, a cache folder and an empty Hugging Face cache of the test's own) so
//! that only the binary decides what appears.

use std::path::Path;
use std::process::Command;

/// `bin --help`, then `bin SUB --help` for every subcommand clap lists (depth first, `help`
/// itself left out), each under a `$ bin … --help` line.
pub fn help_tree(bin: &Path) -> String {
    let name = name(bin);
    let mut out = String::new();
    help_of(bin, &name, &mut Vec::new(), &mut out);
    out
}

fn help_of(bin: &Path, name: &str, path: &mut Vec<String>, out: &mut String) {
    let mut args = path.clone();
    args.push("--help".into());
    let output = command(bin).args(&args).output().expect("run the binary");
    assert!(output.status.success(), "{name} {args:?} failed");
    let text = String::from_utf8(output.stdout).expect("UTF-8 help");
    out.push_str(&format!("$ {name} {}\n{text}\n", args.join(" ")));
    for sub in subcommands(&text) {
        path.push(sub);
        help_of(bin, name, path, out);
        path.pop();
    }
}

/// The names under a help text's `Commands:` heading.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Runs `bin args` in `dir` and writes what a user sees: the command, its exit status and its
/// standard error (and standard output, when there is any).
pub fn run(bin: &Path, args: &[&str], dir: &Path) -> String {
    run_env(bin, args, dir, &[])
}

/// [`run`] with these environment variables set as well.
pub fn run_env(bin: &Path, args: &[&str], dir: &Path, vars: &[(&str, &str)]) -> String {
    let output = command(bin)
        .args(args)
        .envs(vars.iter().copied())
        .current_dir(dir)
        .output()
        .expect("run the binary");
    transcript(&format!("$ {} {}", name(bin), args.join(" ")), &output)
}

/// A command line as the user typed it, then its exit status, standard output (when there is
/// any) and standard error.
fn transcript(typed: &str, output: &std::process::Output) -> String {
    let mut out = format!(
        "{typed}\nexit {}\n",
        output
            .status
            .code()
            .map_or_else(|| "by a signal".to_owned(), |c| c.to_string())
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !stdout.is_empty() {
        out.push_str(&format!("--- stdout\n{stdout}"));
    }
    out.push_str(&format!(
        "--- stderr\n{}",
        String::from_utf8_lossy(&output.stderr)
    ));
    out
}

/// Runs `bin args` in `dir` with its standard input an open pipe (a command reading it waits),
/// sends it `signal` (`"INT"`, `"TERM"`) once it catches that signal, and writes what a user
/// sees, as [`run`] does. Waiting on the process's caught-signal mask (`SigCgt` in
/// `/proc/PID/status`) rather than on a delay, and holding the pipe open until the process
/// ended, make it deterministic: the signal arrives after the binary's handler is in place, and
/// the command cannot finish its work before the signal is handled, however slow the machine.
pub fn run_signalled(bin: &Path, args: &[&str], dir: &Path, signal: &str) -> String {
    run_signalled_when(bin, args, dir, signal, None)
}

/// [`run_signalled`], the signal sent only once `ready` says so as well (a state the command
/// reaches after it installs its handler and sets its resume hint, such as a file of its output
/// created). Fails after a minute.
pub fn run_signalled_when(
    bin: &Path,
    args: &[&str],
    dir: &Path,
    signal: &str,
    ready: Option<&dyn Fn() -> bool>,
) -> String {
    let number = signal_number(signal);
    let mut child = command(bin)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the binary");
    wait_until_catching(&child, number, &format!("{} {args:?}", name(bin)));
    if let Some(ready) = ready {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ready() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} {args:?}: not ready within a minute",
                name(bin)
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    // Held until the process ended: an end of input would let it finish instead.
    let input = child.stdin.take();
    let sent = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal} failed");
    let output = child.wait_with_output().expect("wait for the binary");
    drop(input);
    let typed = format!("$ {} {} (then SIG{signal})", name(bin), args.join(" "));
    transcript(&typed, &output)
}

/// The number of the signal named `signal` (`"INT"`, `"TERM"`).
pub fn signal_number(signal: &str) -> u32 {
    match signal {
        "INT" => 2,
        "TERM" => 15,
        other => panic!("no such signal in these tests: {other}"),
    }
}

/// Waits until `child` catches signal `number` (its `SigCgt` mask in `/proc/PID/status`): from
/// then on the signal reaches the binary's handler, not the default action. Fails after a minute.
pub fn wait_until_catching(child: &std::process::Child, number: u32, what: &str) {
    let status = format!("/proc/{}/status", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let caught = std::fs::read_to_string(&status)
            .ok()
            .and_then(|text| {
                let mask = text.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            .is_some_and(|mask| mask & (1 << (number - 1)) != 0);
        if caught {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never caught signal {number}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A binary of the workspace, `target/<profile>/<name>`, beside the test binary's `deps`
/// folder. `cargo test` (and `cargo nextest run`) at the workspace's root, what the README's
/// test command runs, builds every package's binaries before any test runs; a test of this
/// package alone (`-p swerve-tests`) needs them built first (`cargo build --bins`).
pub fn workspace_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps");
    let bin = profile_dir.join(name);
    assert!(
        bin.is_file(),
        "{} is not built: run the tests from the workspace's root (scripts/test.sh), or \
         `cargo build --bins` first",
        bin.display()
    );
    bin
}

/// The binary's file name, as a user types it.
fn name(bin: &Path) -> String {
    bin.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A [`Command`] for `bin` in the tests' fixed environment (the module documentation).
pub fn command(bin: &Path) -> Command {
    let mut command = Command::new(bin);
    command
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("CLICOLOR_FORCE")
        .env(
            "SWERVE_CACHE_DIR",
            std::env::temp_dir().join("swerve-cli-snapshots-cache"),
        )
        // Hugging Face datasets are looked up in a cache folder that is never there (relative
        // to the test's folder), not in the machine's, whose path the errors name.
        .env("HF_HUB_CACHE", "hf-hub");
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_come_from_the_commands_heading() {
        let help = "Usage: x <COMMAND>\n\nCommands:\n  run    Run\n  clean  Clean\n  help   Print\n\nOptions:\n  -h\n";
        assert_eq!(subcommands(help), ["run", "clean"]);
        assert!(subcommands("Usage: x\n\nOptions:\n  -h\n").is_empty());
    }
}
