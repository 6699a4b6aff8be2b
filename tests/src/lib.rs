//! Shared fixtures for swerve's end-to-end tests and benchmarks: where the repository and the
//! optional shared data folder are, and the SWE-RL development vectors (the repository's copy in
//! `guest-plugins/swe-rl/tests/data/`), and the curation inputs the project writes itself
//! ([`curation`]) and the repositories `curate validate` is tested on ([`environments`]). Test code only; nothing here ships.

use std::path::PathBuf;

use serde::Deserialize;

pub mod cli;
pub mod curation;
pub mod environments;

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the repository")
        .to_owned()
}

/// Set (CI sets it, where every optional tool is installed) to make a test that would be
/// skipped fail instead.
pub const NO_SKIP_VAR: &str = "SWERVE_NO_SKIP";

/// The one skip policy of swerve's tests: a test that needs an optional tool or data this
/// machine lacks (a Slurm controller, the shared data folder, a Python package) calls this and
/// returns early. It prints one line, `skipped: <what>: <why>`, on stderr; with
/// [`NO_SKIP_VAR`] set it panics with the same words instead.
pub fn skip(what: &str, why: &str) {
    assert!(
        std::env::var_os(NO_SKIP_VAR).is_none(),
        "{NO_SKIP_VAR} is set, but {what} cannot run: {why}"
    );
    eprintln!("skipped: {what}: {why}");
}

/// Whether a Slurm controller answers (`scontrol ping`; `scripts/slurm-local.sh up` starts
/// one); when none does, `what` is [`skip`]ped.
pub fn slurm_up(what: &str) -> bool {
    let up = std::process::Command::new("scontrol")
        .arg("ping")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("is UP"));
    if !up {
        skip(
            what,
            "no Slurm controller answers (start one with scripts/slurm-local.sh up)",
        );
    }
    up
}

/// SWE-bench 5.0.2 from PyPI in a virtual environment of its own, `target/swebench-venv`, made
/// when missing by `scripts/swebench-venv.sh` (which the interop script and CI use too): the
/// environment's folder, or `None` when it cannot be made here (`what` is [`skip`]ped).
pub fn swebench_venv(what: &str) -> Option<PathBuf> {
    venv("swebench-venv", "swebench==5.0.2", what)
}

/// Harbor 0.26.0 from PyPI in a virtual environment of its own, `target/harbor-venv`, made when
/// missing by `scripts/harbor-venv.sh` (which CI runs too), with the `docker compose` v2
/// plugin it needs in its `docker-config` folder (name it with `DOCKER_CONFIG`): the
/// environment's folder, or `None` when it cannot be made here (`what` is [`skip`]ped).
pub fn harbor_venv(what: &str) -> Option<PathBuf> {
    venv("harbor-venv", "harbor==0.26.0", what)
}

/// mini-swe-agent 2.4.6 and the `openai` client 3.63.0 from PyPI in a virtual environment of
/// their own, `target/agent-venv`, made when missing by `scripts/agent-venv.sh` (which CI runs
/// too): the environment's folder, or `None` when it cannot be made here (`what` is
/// [`skip`]ped).
pub fn agent_venv(what: &str) -> Option<PathBuf> {
    venv("agent-venv", "mini-swe-agent==2.4.6 openai==3.63.0", what)
}

/// `scripts/<name>.sh target/<name>`: the folder it prints, or `None` (`what` skipped).
fn venv(name: &str, package: &str, what: &str) -> Option<PathBuf> {
    let made = std::process::Command::new(repo_root().join(format!("scripts/{name}.sh")))
        .arg(repo_root().join("target").join(name))
        .output();
    match made {
        Ok(out) if out.status.success() => Some(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        )),
        Ok(out) => {
            skip(
                what,
                &format!(
                    "cannot install {package} from PyPI into target/{name}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            );
            None
        }
        Err(e) => {
            skip(what, &format!("cannot run scripts/{name}.sh: {e}"));
            None
        }
    }
}

/// The variable naming the shared `data` folder (third-party data the repository never carries,
/// such as real SWE-bench logs).
pub const SHARED_DATA_VAR: &str = "SWERVE_SHARED_DATA";

/// `name` under the shared `data` folder that `$SWERVE_SHARED_DATA` names: third-party data
/// the repository does not carry and never looks for on its own. The variable unset, nothing
/// was asked for: `what` is skipped (one `skipped:` line) even under [`NO_SKIP_VAR`], since a
/// clone has no such folder. The variable set and `name` absent, `what` is [`skip`]ped (a
/// failure under [`NO_SKIP_VAR`]). Either way this returns None and the caller returns early.
pub fn shared_data(name: &str, what: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os(SHARED_DATA_VAR).filter(|dir| !dir.is_empty()) else {
        eprintln!("skipped: {what}: {SHARED_DATA_VAR} names no shared data folder");
        return None;
    };
    let path = PathBuf::from(dir).join(name);
    if path.exists() {
        return Some(path);
    }
    skip(what, &format!("{} not found", path.display()));
    None
}

/// One SWE-RL development vector's inputs and expected reward bits.
#[derive(Debug, Clone, Deserialize)]
pub struct DevVector {
    /// The vector's id.
    pub id: String,
    /// path → original text.
    pub code_context: std::collections::BTreeMap<String, String>,
    /// path → the oracle's text.
    pub oracle_new_content: std::collections::BTreeMap<String, String>,
    /// The completion.
    pub output: String,
    /// The reference's results.
    pub expected: serde_json::Value,
}

impl DevVector {
    /// Every reward value the reference accepts for this vector (several for order-sensitive
    /// vectors), as f64 bits.
    pub fn accepted_bits(&self) -> Vec<u64> {
        let bits = |v: &serde_json::Value| {
            u64::from_str_radix(v.as_str().expect("hex bits"), 16).expect("hex bits")
        };
        let e = &self.expected;
        let mut out = vec![bits(&e["reward_bits"])];
        if let Some(all) = e.get("reward_all_orders_bits").and_then(|v| v.as_array()) {
            out.extend(all.iter().map(bits));
        }
        if let Some(f) = e.get("reward_fsum_mean_bits") {
            out.push(bits(f));
        }
        out
    }
}

/// The SWE-RL development vectors.
pub fn dev_vectors() -> Vec<DevVector> {
    let path = repo_root().join("guest-plugins/swe-rl/tests/data/swerl-dev-vectors.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a development vector"))
        .collect()
}

/// Each runner log of `guest-plugins/log-parsers/tests/runner-logs/` with the parser its
/// runner's rows name (`parsers.tsv` there), for the parsers' and the reports' differential
/// tests.
pub fn runner_parsers() -> Vec<(String, String)> {
    let path = repo_root().join("guest-plugins/log-parsers/tests/runner-logs/parsers.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (runner, parser) = l.split_once('\t').expect("runner<TAB>parser");
            (runner.to_owned(), parser.to_owned())
        })
        .collect()
}
