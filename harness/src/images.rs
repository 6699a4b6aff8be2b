//! From dataset rows and their environment specs to sandbox image layers (`harness images
//! build`): one env image per (repository, version), one instance image per row holding the
//! repository at its base commit with no later history; rows that only name a prebuilt `image`
//! (v5) use it as it is (local, else pulled).
//!
//! Built instance images are content-addressed (`swerve-eval.<id>:<recipe hash>`) and also
//! carry a stable name, the row's `image` (by default [`stable_image_name`],
//! `swerve/sweb.eval.x86_64.<id, '__' → '_1776_'>:latest`), so that SWE-bench's own harness
//! finds them by the name in an exported row. `harness run` uses a row's `image` when it is
//! present locally and builds (then tags) it only when it is missing; `harness images build`
//! always builds from the recipe and moves the tag.
//!
//! Environment specs come from an `environments.json` in the shape of SWE-bench's per-repo
//! table (`MAP_REPO_VERSION_TO_SPECS`). swerve's images have no conda: the env layer makes a
//! virtual environment (first on `PATH`) and installs a `/opt/miniconda3/bin/activate` shim that
//! defines a no-op `conda`, so that SWE-bench eval scripts (`source /opt/miniconda3/bin/activate`,
//! `conda activate testbed`) run unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use swerve_sandbox::{BaseRecipe, EnvSpec, ImageInfo, InstanceSpec, RepoSource, Sandbox};

use crate::run::source::DatasetSource;
use swerve_swebench::dataset::Instance;

/// A test command: one string, or several commands whose last one gets the test directives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TestCmd {
    /// `pytest -rA`.
    One(String),
    /// Several commands run in order.
    Many(Vec<String>),
}

impl TestCmd {
    /// The commands joined by newlines (each its own eval-script line).
    pub fn as_script_text(&self) -> String {
        match self {
            TestCmd::One(c) => c.clone(),
            TestCmd::Many(cs) => cs.join("\n"),
        }
    }
}

/// A string or a list of strings (SWE-bench's `install` may be either).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Lines {
    /// No commands.
    #[default]
    None,
    /// One command.
    One(String),
    /// Several commands.
    Many(Vec<String>),
}

impl Lines {
    /// The commands, empty strings dropped.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Lines::None => Vec::new(),
            Lines::One(s) => vec![s.clone()],
            Lines::Many(v) => v.clone(),
        }
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect()
    }
}

/// One (repository, version) environment spec, as in SWE-bench's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoEnv {
    /// Python version wanted: `3.13` runs on a Debian 13 base, anything else on Debian 12's
    /// 3.11 ([`PYTHONS`]).
    #[serde(default)]
    pub python: Option<String>,
    /// Extra packages installed with pip in the env layer (`requirements.txt` and
    /// `environment.yml` forms are not supported offline).
    #[serde(default)]
    pub packages: Option<String>,
    /// Commands run in the repository before `install` (instance layer).
    #[serde(default)]
    pub pre_install: Lines,
    /// Install commands (instance layer; the eval script runs them again).
    #[serde(default)]
    pub install: Lines,
    /// pip requirements of the env layer.
    #[serde(default)]
    pub pip_packages: Vec<String>,
    /// Commands run near the top of the eval script.
    #[serde(default)]
    pub eval_commands: Vec<String>,
    /// The test command.
    pub test_cmd: TestCmd,
    /// The SWE-bench parser name for the repository's logs.
    #[serde(default)]
    pub log_parser: Option<String>,
}

/// `environments.json`: repository → version → spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Environments(pub BTreeMap<String, BTreeMap<String, RepoEnv>>);

/// Why images could not be planned or built.
#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    /// `environments.json` could not be read.
    #[error("cannot read environment specs {}", path.display())]
    Environments {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `environments.json` is not specs by repository and version (the cause names the field).
    #[error("invalid environment specs {}", path.display())]
    EnvironmentsJson {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_path_to_error::Error<serde_json::Error>,
    },
    /// A row has neither an environment spec nor a prebuilt image.
    #[error("no environment spec for {instance_id} ({repo} {version}) and no `image` in its row")]
    NoSpec {
        /// The instance.
        instance_id: String,
        /// Its repository.
        repo: String,
        /// Its version.
        version: String,
    },
    /// A row to build has no base commit.
    #[error("{instance_id} has no base_commit")]
    NoBaseCommit {
        /// The instance.
        instance_id: String,
    },
    /// No clone source for a repository.
    #[error("no repository source for {repo} under {}", dir.display())]
    NoRepo {
        /// The repository.
        repo: String,
        /// The folder searched.
        dir: PathBuf,
    },
    /// The base image a row's spec needs was not made for this run.
    #[error("{instance_id}: no base image of Debian {suite} was made")]
    NoBase {
        /// The instance.
        instance_id: String,
        /// The suite its spec's Python needs.
        suite: String,
    },
    /// The sandbox failed.
    #[error("image {image}")]
    Sandbox {
        /// The image being made.
        image: String,
        /// The sandbox error.
        #[source]
        source: swerve_sandbox::Error,
    },
}

impl ImagesError {
    /// The end of the build log when a command of the recipe itself failed (an install step
    /// of an env or instance layer exited non-zero): the environment's fault, not the engine's.
    pub(crate) fn install_log(&self) -> Option<&str> {
        match self {
            ImagesError::Sandbox {
                source: swerve_sandbox::Error::BuildStep { log_tail, .. },
                ..
            } => Some(log_tail),
            _ => None,
        }
    }
}

impl Environments {
    /// Reads `environments.json`.
    pub(crate) fn read(path: &Path) -> Result<Environments, ImagesError> {
        let text = fs_err::read_to_string(path).map_err(|source| ImagesError::Environments {
            path: path.to_owned(),
            source,
        })?;
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&text)).map_err(
            |source| ImagesError::EnvironmentsJson {
                path: path.to_owned(),
                source,
            },
        )
    }

    /// The spec of a row's (repository, version).
    pub(crate) fn get(&self, row: &Instance) -> Option<&RepoEnv> {
        self.0.get(&row.repo)?.get(row.version.as_deref()?)
    }
}

/// Whether an install line needs the repository (a `.` path, an editable install), and so
/// cannot run in the shared env layer.
fn needs_repo(line: &str) -> bool {
    line.split_whitespace()
        .any(|w| w == "." || w == "-e" || w.starts_with("./") || w.starts_with(".["))
}

/// The shell lines that put the conda shim in place.
const CONDA_SHIM: [&str; 2] = [
    "mkdir -p /opt/miniconda3/bin",
    "printf '%s\\n' 'conda() { return 0; }' > /opt/miniconda3/bin/activate",
];

/// The env layer for a spec: shim, `packages`, `pip_packages`, and the `install` lines that do
/// not need the repository (so that instances share them; the instance layer runs `install`
/// again, a no-op for what is already satisfied).
pub(crate) fn env_spec(repo: &str, version: &str, env: &RepoEnv, base_image: &str) -> EnvSpec {
    let mut install: Vec<String> = CONDA_SHIM.iter().map(|s| (*s).to_owned()).collect();
    if let Some(p) = env.packages.as_deref().filter(|p| !p.trim().is_empty()) {
        install.push(format!("python -m pip install {p}"));
    }
    if !env.pip_packages.is_empty() {
        install.push(format!(
            "python -m pip install {}",
            env.pip_packages.join(" ")
        ));
    }
    install.extend(env.install.to_vec().into_iter().filter(|l| !needs_repo(l)));
    EnvSpec {
        repo: repo.to_owned(),
        version: version.to_owned(),
        base_image: base_image.to_owned(),
        install,
    }
}

/// Where a repository's clone source is under `repos_dir`: `<name>.bundle`,
/// `<owner>__<name>.bundle`, a git folder `<name>/` or `<owner>__<name>/`, or the bare mirror
/// `<owner>/<name>.git` that `curate` reads.
pub(crate) fn repo_source(repos_dir: &Path, repo: &str) -> Result<RepoSource, ImagesError> {
    let mirror = repos_dir.join(format!("{repo}.git"));
    if repo.contains('/') && mirror.join("HEAD").is_file() {
        return Ok(RepoSource::Path(mirror));
    }
    let name = repo.rsplit('/').next().unwrap_or(repo);
    let flat = repo.replace('/', "__");
    for stem in [name, flat.as_str()] {
        let bundle = repos_dir.join(format!("{stem}.bundle"));
        if bundle.is_file() {
            return Ok(RepoSource::Bundle(bundle));
        }
        let dir = repos_dir.join(stem);
        if dir.join(".git").exists() || dir.join("HEAD").is_file() {
            return Ok(RepoSource::Path(dir));
        }
    }
    Err(ImagesError::NoRepo {
        repo: repo.to_owned(),
        dir: repos_dir.to_owned(),
    })
}

/// How one instance's image is obtained.
// One recipe per row, made once per run: the size of the built variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImageRecipe {
    /// Built locally: env layer, then instance layer.
    Built {
        /// The env layer.
        env: EnvSpec,
        /// The instance layer.
        instance: InstanceSpec,
        /// The stable name the built image also gets (the row's `image`); `None`: only the
        /// content-addressed name.
        tag: Option<String>,
    },
    /// The row's prebuilt image (v5), local or pulled.
    Prebuilt(String),
    /// A SWE-bench 5 task folder's `Dockerfile`, built with the folder as context into the
    /// row's image name (`harness run --task-repo`).
    Dockerfile {
        /// The image it builds.
        image: String,
        /// The task folder.
        folder: PathBuf,
    },
}

impl ImageRecipe {
    /// The image name the instance runs in: the stable name when there is one.
    pub(crate) fn image_name(&self) -> String {
        match self {
            ImageRecipe::Built { tag: Some(tag), .. } => tag.clone(),
            ImageRecipe::Built { instance, .. } => instance.image_name(),
            ImageRecipe::Prebuilt(name) => name.clone(),
            ImageRecipe::Dockerfile { image, .. } => image.clone(),
        }
    }

    /// The recipe with a stable name: the row's `image`, else [`stable_image_name`]. Used by
    /// `harness images build` so that every image it makes can be named by an exported row.
    pub(crate) fn with_stable_name(self, instance_id: &str) -> ImageRecipe {
        match self {
            ImageRecipe::Built { env, instance, tag } => ImageRecipe::Built {
                env,
                instance,
                tag: Some(tag.unwrap_or_else(|| stable_image_name(instance_id, swebench_arch()))),
            },
            other @ (ImageRecipe::Prebuilt(_) | ImageRecipe::Dockerfile { .. }) => other,
        }
    }
}

/// The architecture as SWE-bench spells it in image names (`x86_64`, `arm64`).
pub fn swebench_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        other => other,
    }
}

/// The stable name swerve gives the instance image of a row that does not name one:
/// SWE-bench's namespaced image name under the `swerve` namespace,
/// `swerve/sweb.eval.<arch>.<instance id lower-cased, '__' → '_1776_'>:latest`, with `arch`
/// as SWE-bench spells it ([`swebench_arch`] for this machine).
pub fn stable_image_name(instance_id: &str, arch: &str) -> String {
    swerve_swebench::dataset::instance_image_name("swerve", arch, instance_id)
}

/// The recipe of a row's image: built from its environment spec when there is one (and its
/// repository is under `repos_dir`), else the row's `image`.
pub(crate) fn recipe(
    row: &Instance,
    envs: &Environments,
    repos_dir: &Path,
    bases: &BaseImages,
) -> Result<ImageRecipe, ImagesError> {
    let Some(env) = envs.get(row) else {
        return match row.prebuilt_image() {
            Some(image) => Ok(ImageRecipe::Prebuilt(image)),
            None => Err(ImagesError::NoSpec {
                instance_id: row.instance_id.clone(),
                repo: row.repo.clone(),
                version: row.version.clone().unwrap_or_default(),
            }),
        };
    };
    let version = row.version.clone().unwrap_or_default();
    let suite = base_suite(env.python.as_deref());
    let base_image = bases.for_env(env).ok_or_else(|| ImagesError::NoBase {
        instance_id: row.instance_id.clone(),
        suite: suite.to_owned(),
    })?;
    let env_spec = env_spec(&row.repo, &version, env, base_image);
    let base_commit = row
        .base_commit
        .clone()
        .ok_or_else(|| ImagesError::NoBaseCommit {
            instance_id: row.instance_id.clone(),
        })?;
    // A row that names its image runs in it when the repository is not at hand to build it
    // (`curate validate`'s rows, which name the images the validation made).
    let source = match (repo_source(repos_dir, &row.repo), &row.image) {
        (Ok(source), _) => source,
        (Err(ImagesError::NoRepo { .. }), Some(image)) => {
            return Ok(ImageRecipe::Prebuilt(image.clone()));
        }
        (Err(e), _) => return Err(e),
    };
    let mut install = env.pre_install.to_vec();
    install.extend(env.install.to_vec());
    Ok(ImageRecipe::Built {
        instance: InstanceSpec {
            instance_id: row.instance_id.clone(),
            env_image: env_spec.image_name(),
            source,
            base_commit,
            install,
        },
        env: env_spec,
        tag: row.image.clone(),
    })
}

/// What making one image took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageTiming {
    /// `base`, `env`, `instance`, `prebuilt` or `task` (a task folder's Dockerfile).
    pub layer: String,
    /// The image.
    pub info: ImageInfo,
    /// Wall-clock time of the ensure call (near zero when it was present).
    pub elapsed: Duration,
}

/// The Python versions the base images offer, newest first, with the Debian suite whose
/// `python3` each is: Debian 13's 3.13 and Debian 12's 3.11.
pub const PYTHONS: [(&str, &str); 2] = [("3.13", "trixie"), ("3.11", "bookworm")];

/// The Debian suite of the base image a spec's `python` runs on: the suite whose Python it
/// names, else Debian 12 (3.11), where SWE-bench's specs of other versions have always run.
pub(crate) fn base_suite(python: Option<&str>) -> &'static str {
    PYTHONS
        .iter()
        .find(|(version, _)| python.is_some_and(|p| p.trim() == *version))
        .map_or(PYTHONS[1].1, |(_, suite)| suite)
}

/// The base images a run has made, by Debian suite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BaseImages(BTreeMap<String, String>);

impl BaseImages {
    /// The base image for a spec.
    pub(crate) fn for_env(&self, env: &RepoEnv) -> Option<&str> {
        self.0
            .get(base_suite(env.python.as_deref()))
            .map(String::as_str)
    }

    /// Makes (or finds) the base image of every suite that `rows`' specs need; returns what
    /// each took.
    pub(crate) async fn ensure<'a>(
        sandbox: &Sandbox,
        envs: &Environments,
        rows: impl IntoIterator<Item = &'a Instance>,
    ) -> Result<(BaseImages, Vec<ImageTiming>), ImagesError> {
        let suites: std::collections::BTreeSet<&str> = rows
            .into_iter()
            .filter_map(|row| envs.get(row))
            .map(|env| base_suite(env.python.as_deref()))
            .collect();
        let mut bases = BaseImages::default();
        let mut timings = Vec::new();
        for suite in suites {
            let timing = ensure_base(sandbox, suite).await?;
            bases.0.insert(suite.to_owned(), timing.info.name.clone());
            timings.push(timing);
        }
        Ok((bases, timings))
    }

    /// Notes the base image of `suite`.
    pub(crate) fn insert(&mut self, suite: &str, image: String) {
        self.0.insert(suite.to_owned(), image);
    }
}

/// The base image of the default recipe on `suite`, built with debootstrap if missing.
pub(crate) async fn ensure_base(
    sandbox: &Sandbox,
    suite: &str,
) -> Result<ImageTiming, ImagesError> {
    let started = Instant::now();
    let info = sandbox
        .ensure_base_image(&BaseRecipe::for_suite(suite))
        .await
        .map_err(|source| ImagesError::Sandbox {
            image: format!("swerve-base ({suite})"),
            source,
        })?;
    Ok(ImageTiming {
        layer: "base".to_owned(),
        info,
        elapsed: started.elapsed(),
    })
}

fn sandbox_error(image: String) -> impl FnOnce(swerve_sandbox::Error) -> ImagesError {
    move |source| ImagesError::Sandbox { image, source }
}

/// Makes one instance's image present for a run; returns what each step took. A prebuilt image
/// is used if local, else pulled; a built recipe whose stable name is already present locally
/// is used as it is (the row names that image, as in SWE-bench 5), otherwise its layers are
/// built (or reused) and the stable name is put on the instance image.
pub(crate) async fn ensure(
    sandbox: &Sandbox,
    recipe: &ImageRecipe,
) -> Result<Vec<ImageTiming>, ImagesError> {
    if let ImageRecipe::Built { tag: Some(tag), .. } = recipe {
        let started = Instant::now();
        if let Some(info) = sandbox
            .image_info(tag)
            .await
            .map_err(sandbox_error(tag.clone()))?
        {
            return Ok(vec![ImageTiming {
                layer: "instance".to_owned(),
                info,
                elapsed: started.elapsed(),
            }]);
        }
    }
    build(sandbox, recipe).await
}

/// Makes one instance's image from its recipe (layers reused when their content-addressed
/// images exist) and points its stable name at the result, even when that name was on another
/// image before (`harness images build`). A prebuilt image is used if local, else pulled.
pub(crate) async fn build(
    sandbox: &Sandbox,
    recipe: &ImageRecipe,
) -> Result<Vec<ImageTiming>, ImagesError> {
    let wrap = sandbox_error;
    let mut timings = Vec::new();
    match recipe {
        ImageRecipe::Prebuilt(name) => {
            let started = Instant::now();
            let info = sandbox
                .ensure_image(name)
                .await
                .map_err(wrap(name.clone()))?;
            timings.push(ImageTiming {
                layer: "prebuilt".to_owned(),
                info,
                elapsed: started.elapsed(),
            });
        }
        ImageRecipe::Dockerfile { image, folder } => {
            let started = Instant::now();
            let info = sandbox
                .ensure_dockerfile_image(image, folder)
                .await
                .map_err(wrap(image.clone()))?;
            timings.push(ImageTiming {
                layer: "task".to_owned(),
                info,
                elapsed: started.elapsed(),
            });
        }
        ImageRecipe::Built { env, instance, tag } => {
            let started = Instant::now();
            let info = sandbox
                .ensure_env_image(env)
                .await
                .map_err(wrap(env.image_name()))?;
            timings.push(ImageTiming {
                layer: "env".to_owned(),
                info,
                elapsed: started.elapsed(),
            });
            let started = Instant::now();
            let info = sandbox
                .ensure_instance_image(instance)
                .await
                .map_err(wrap(instance.image_name()))?;
            let built = info.clone();
            timings.push(ImageTiming {
                layer: "instance".to_owned(),
                info,
                elapsed: started.elapsed(),
            });
            if let Some(tag) = tag {
                let started = Instant::now();
                sandbox
                    .tag_image(&built.name, tag)
                    .await
                    .map_err(wrap(tag.clone()))?;
                timings.push(ImageTiming {
                    layer: "tag".to_owned(),
                    info: ImageInfo {
                        name: tag.clone(),
                        ..built
                    },
                    elapsed: started.elapsed(),
                });
            }
        }
    }
    Ok(timings)
}

/// `harness images build`: the base images `source`'s rows need, then every row's image from
/// its recipe under its stable name, at most `workers` at once. `on_timing` sees the base images'
/// timings, then each row's in row order, up to the first row whose image failed (its error is
/// returned).
pub async fn build_images(
    sandbox: &Sandbox,
    source: &DatasetSource,
    workers: usize,
    mut on_timing: impl FnMut(&ImageTiming),
) -> Result<(), ImagesError> {
    let (bases, timings) = BaseImages::ensure(sandbox, &source.environments, &source.rows).await?;
    for timing in &timings {
        on_timing(timing);
    }
    let recipes = source
        .rows
        .iter()
        .map(|row| {
            source
                .recipe(row, &bases)
                .map(|r| r.with_stable_name(&row.instance_id))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let results: Vec<_> = futures_util::stream::iter(recipes.iter())
        .map(|r| build(sandbox, r))
        .buffer_unordered(workers)
        .collect()
        .await;
    for timings in results {
        for timing in timings? {
            on_timing(&timing);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_environments_plan() {
        let dir = swerve_swebench::names::swerve_mini_dir().expect("bundled dataset");
        let envs = Environments::read(&dir.join("environments.json")).expect("envs");
        let rows =
            swerve_swebench::dataset::read_rows(&dir.join("swerve-mini.jsonl")).expect("rows");
        let mut bases = BaseImages::default();
        assert!(matches!(
            recipe(&rows[0], &envs, &dir.join("repos"), &bases),
            Err(ImagesError::NoBase { .. })
        ));
        bases.insert("bookworm", "swerve-base:x".to_owned());
        let plan = recipe(&rows[0], &envs, &dir.join("repos"), &bases).expect("plan");
        let ImageRecipe::Built { env, instance, .. } = plan else {
            panic!("built recipe expected");
        };
        assert_eq!(env.base_image, "swerve-base:x");
        assert!(env.install.iter().any(|l| l.contains("pytest==8.3.4")));
        assert!(env.install[1].contains("conda() { return 0; }"));
        assert_eq!(instance.env_image, env.image_name());
        assert!(matches!(instance.source, RepoSource::Bundle(_)));
        assert!(needs_repo("python -m pip install -e ."));
        assert!(!needs_repo("python -m pip install pytest==8"));
    }

    #[test]
    fn a_spec_runs_on_the_suite_of_its_python() {
        assert_eq!(base_suite(Some("3.13")), "trixie");
        assert_eq!(base_suite(Some("3.11")), "bookworm");
        // SWE-bench's specs name older versions: they run on Debian 12's Python, as always.
        assert_eq!(base_suite(Some("3.9")), "bookworm");
        assert_eq!(base_suite(None), "bookworm");
    }
}
