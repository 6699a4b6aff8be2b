//! SWE-bench 5's patch assets: binary files a text patch cannot carry (rendering baselines such
//! as `expected.png`), declared in a row's `image_assets` (`{"test_patch": [{"path", "url"}],
//! "patch": [...]}`, a JSON string in the Hugging Face datasets) and kept in a task repository
//! under `tasks/<instance_id>/test_assets/<path>`.
//!
//! As SWE-bench 5.0.2 stages them: each asset goes into the container as
//! `/image_assets/<path with '/' → '__'>` (and into the instance's log folder under
//! `image_assets/`), and the eval script restores it with `mkdir -p $(dirname P) && cp
//! /image_assets/F P`, inserted just before the line holding the start-of-tests marker, so it
//! arrives after the test patch is applied and is never baked into the image. An asset swerve
//! has no file for is skipped with a warning, as SWE-bench skips one it cannot fetch; swerve
//! downloads nothing (a URL-only asset needs its file in the task repository).

use std::path::Path;

use sha2::{Digest as _, Sha256};
use swerve_log_parsers::START_TEST_OUTPUT;
use swerve_swebench::Instance;

/// The folder of a task holding its assets (SWE-bench's `ASSETS_SUBDIR`).
pub(super) const ASSETS_SUBDIR: &str = "test_assets";

/// The container folder the assets are copied into.
pub(super) const CONTAINER_DIR: &str = "/image_assets";

/// One asset ready to stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asset {
    /// Its path in the repository (as declared).
    pub path: String,
    /// Its file name under [`CONTAINER_DIR`] and the log folder's `image_assets/`.
    pub flat: String,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// A row's assets and what could not be staged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Staging {
    /// The assets found, in declaration order (`test_patch`'s, then `patch`'s).
    pub assets: Vec<Asset>,
    /// One line per declared asset left out, for the instance log.
    pub warnings: Vec<String>,
}

impl Staging {
    /// The eval script with the restore commands inserted before the start-marker line (after
    /// the script when it has none), as SWE-bench does; unchanged without assets.
    pub(crate) fn inject(&self, script: &str) -> String {
        if self.assets.is_empty() {
            return script.to_owned();
        }
        let restore: Vec<String> = self
            .assets
            .iter()
            .map(|a| {
                format!(
                    "mkdir -p $(dirname {p}) && cp {CONTAINER_DIR}/{f} {p}",
                    p = a.path,
                    f = a.flat
                )
            })
            .collect();
        let lines: Vec<&str> = script.split('\n').collect();
        match lines.iter().position(|l| l.contains(START_TEST_OUTPUT)) {
            Some(at) => {
                let mut out: Vec<&str> = lines[..at].to_vec();
                out.extend(restore.iter().map(String::as_str));
                out.extend(&lines[at..]);
                out.join("\n")
            }
            None => format!("{script}\n{}", restore.join("\n")),
        }
    }

    /// A digest of every asset's path and contents, for the result cache's key (empty without
    /// assets, so that keys of rows without them do not change).
    pub(crate) fn digest(&self) -> String {
        if self.assets.is_empty() {
            return String::new();
        }
        let mut hasher = Sha256::new();
        for a in &self.assets {
            for part in [a.path.as_bytes(), &a.bytes] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part);
            }
        }
        hex::encode(hasher.finalize())
    }
}

/// Why a row's `image_assets` cannot be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum AssetsError {
    /// Not JSON, or not an object of lists of objects.
    #[error("image_assets of {instance_id}: {reason}")]
    Malformed {
        /// The row.
        instance_id: String,
        /// What is wrong.
        reason: String,
    },
    /// A declared path that would leave the task's `test_assets/` or the repository.
    #[error(
        "image_assets of {instance_id}: path {path:?} is not a relative path inside the repository"
    )]
    UnsafePath {
        /// The row.
        instance_id: String,
        /// The declared path.
        path: String,
    },
    /// The file exists but cannot be read.
    #[error("image_assets of {instance_id}: cannot read {}: {source}", file.display())]
    Read {
        /// The row.
        instance_id: String,
        /// The file.
        file: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The row's declared assets, read from `task_dir/test_assets/` when the row comes from a task
/// repository.
pub(super) fn stage(row: &Instance, task_dir: Option<&Path>) -> Result<Staging, AssetsError> {
    let id = &row.instance_id;
    let malformed = |reason: String| AssetsError::Malformed {
        instance_id: id.clone(),
        reason,
    };
    let declared = match &row.image_assets {
        None | Some(serde_json::Value::Null) => return Ok(Staging::default()),
        Some(serde_json::Value::String(s)) if s.is_empty() => return Ok(Staging::default()),
        Some(serde_json::Value::String(s)) => {
            serde_json::from_str(s).map_err(|e| malformed(format!("not JSON: {e}")))?
        }
        Some(v) => v.clone(),
    };
    let Some(declared) = declared.as_object() else {
        return Err(malformed("not an object".into()));
    };
    let mut staging = Staging::default();
    for key in ["test_patch", "patch"] {
        let entries = match declared.get(key) {
            None | Some(serde_json::Value::Null) => continue,
            Some(serde_json::Value::Array(a)) => a,
            Some(_) => return Err(malformed(format!("`{key}` is not a list"))),
        };
        for entry in entries {
            let Some(entry) = entry.as_object() else {
                return Err(malformed(format!("an entry of `{key}` is not an object")));
            };
            let path = match entry.get("path") {
                Some(serde_json::Value::String(p)) if !p.is_empty() => p.clone(),
                _ => continue,
            };
            if !safe_relative(&path) {
                return Err(AssetsError::UnsafePath {
                    instance_id: id.clone(),
                    path,
                });
            }
            let file = task_dir.map(|d| d.join(ASSETS_SUBDIR).join(&path));
            match file {
                Some(file) if file.is_file() => {
                    let bytes = fs_err::read(&file).map_err(|source| AssetsError::Read {
                        instance_id: id.clone(),
                        file: file.clone(),
                        source,
                    })?;
                    staging.assets.push(Asset {
                        flat: path.replace('/', "__"),
                        path,
                        bytes,
                    });
                }
                _ => {
                    let url = entry.get("url").and_then(|u| u.as_str()).unwrap_or("");
                    staging.warnings.push(if url.is_empty() {
                        format!("No asset for {id} at {path}")
                    } else {
                        format!(
                            "Could not fetch image asset {url}: swerve downloads no assets; \
                             put the file at tasks/{id}/{ASSETS_SUBDIR}/{path} of a task \
                             repository (--task-repo)"
                        )
                    });
                }
            }
        }
    }
    Ok(staging)
}

/// A relative path of plain components: it stays inside `test_assets/` on the host and inside
/// the repository in the container, and it is one word in the restore command.
fn safe_relative(path: &str) -> bool {
    !path.starts_with('/')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
        && path.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | '@' | ',')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(assets: serde_json::Value) -> Instance {
        serde_json::from_value(json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "patch": "",
            "test_patch": "", "problem_statement": "", "FAIL_TO_PASS": [], "PASS_TO_PASS": [],
            "image_assets": assets
        }))
        .unwrap()
    }

    fn task_dir(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, bytes) in files {
            let file = dir.path().join(ASSETS_SUBDIR).join(path);
            fs_err::create_dir_all(file.parent().unwrap()).unwrap();
            fs_err::write(file, bytes).unwrap();
        }
        dir
    }

    #[test]
    fn reads_declared_assets_from_the_task_folder_in_order() {
        let dir = task_dir(&[("test/fixtures/expected.png", b"\x89PNG"), ("b.bin", b"\0")]);
        let declared = json!({
            "test_patch": [{"path": "test/fixtures/expected.png", "url": "https://x/e.png"}],
            "patch": [{"path": "b.bin"}, {"path": "missing.png", "url": "https://x/m.png"},
                      {"path": "gone.png"}, {"url": "no path"}]
        });
        // The Hugging Face datasets carry it as a JSON string; local rows as an object.
        for value in [declared.clone(), json!(declared.to_string())] {
            let s = stage(&row(value), Some(dir.path())).unwrap();
            let flat: Vec<_> = s.assets.iter().map(|a| a.flat.as_str()).collect();
            assert_eq!(flat, ["test__fixtures__expected.png", "b.bin"]);
            assert_eq!(s.assets[0].bytes, b"\x89PNG");
            assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
            assert!(s.warnings[0].contains("https://x/m.png"));
            assert_eq!(s.warnings[1], "No asset for o__r-1 at gone.png");
        }
        // Without a task folder every declared asset is a warning.
        let s = stage(&row(declared), None).unwrap();
        assert!(s.assets.is_empty() && s.warnings.len() == 4);
    }

    #[test]
    fn restore_commands_go_before_the_start_marker() {
        let dir = task_dir(&[("a/x.png", b"1"), ("y.png", b"2")]);
        let s = stage(
            &row(json!({"test_patch": [{"path": "a/x.png"}, {"path": "y.png"}]})),
            Some(dir.path()),
        )
        .unwrap();
        let script =
            "cd /testbed\ngit apply -v - <<'EOF'\nEOF\n: '>>>>> Start Test Output'\nnpx jest\n";
        assert_eq!(
            s.inject(script),
            "cd /testbed\ngit apply -v - <<'EOF'\nEOF\n\
             mkdir -p $(dirname a/x.png) && cp /image_assets/a__x.png a/x.png\n\
             mkdir -p $(dirname y.png) && cp /image_assets/y.png y.png\n\
             : '>>>>> Start Test Output'\nnpx jest\n"
        );
        assert_eq!(
            s.inject("echo no markers"),
            "echo no markers\nmkdir -p $(dirname a/x.png) && cp /image_assets/a__x.png a/x.png\n\
             mkdir -p $(dirname y.png) && cp /image_assets/y.png y.png"
        );
        assert_eq!(Staging::default().inject(script), script);
        assert_eq!(Staging::default().digest(), "");
        let mut changed = s.clone();
        changed.assets[1].bytes = b"3".to_vec();
        assert_ne!(s.digest(), changed.digest());
    }

    #[test]
    fn refuses_paths_that_leave_the_folder_and_malformed_declarations() {
        for path in [
            "../x.png",
            "/etc/passwd",
            "a/../../b",
            "a b.png",
            "x;rm -rf /",
            "a//b",
        ] {
            let e = stage(&row(json!({"patch": [{"path": path}]})), None).unwrap_err();
            assert!(matches!(e, AssetsError::UnsafePath { .. }), "{path}: {e}");
        }
        for bad in [
            json!("{not json"),
            json!([1]),
            json!({"patch": "x"}),
            json!({"patch": [1]}),
        ] {
            let e = stage(&row(bad.clone()), None).unwrap_err();
            assert!(
                e.to_string().starts_with("image_assets of o__r-1:"),
                "{bad}: {e}"
            );
        }
        for none in [json!(null), json!(""), json!({}), json!({"patch": null})] {
            assert_eq!(stage(&row(none), None).unwrap(), Staging::default());
        }
    }
}
