//! The environment and instance layers, built with Dockerfiles from the base image: an env
//! image per (repository, version) holding a virtual environment, an instance image per task
//! holding the repository cut at its base commit.
//!
//! Each Dockerfile step costs a container create and commit (several seconds on
//! fuse-overlayfs), so each layer copies everything it needs in one `COPY fs/ /` and runs one
//! script. Images carry no labels (each label is a step too): the name prefix says the kind
//! (`swerve-base`, `swerve-env.*`, `swerve-eval.*`) and the tag is the recipe hash.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::Result;
use crate::image::{ImageInfo, name_component, recipe_hash, temp_dir};
use crate::repo::{self, RepoSource};
use crate::sandbox::Sandbox;

/// Bumped when the way layers are built changes, so that old images are not reused.
const LAYER_RECIPE_VERSION: &str = "swerve-layers-1";

/// Where the environment layer's virtual environment lives; it is first on `PATH` in env and
/// instance images, like SWE-bench's conda env `testbed`.
pub const VENV: &str = "/opt/testbed";

/// Where the repository lives in instance images, as in SWE-bench.
pub const TESTBED: &str = "/testbed";

/// Where build scripts and the host CA bundle are copied in image builds.
const SWERVE_DIR: &str = "/etc/swerve";
/// The CA bundle in images.
const CA_IN_IMAGE: &str = "/etc/swerve/ca-bundle.crt";

/// An environment layer: the Python environment of one (repository, version), built from the
/// base image by running `install` in bash with a fresh virtual environment at [`VENV`] active.
///
/// The network is available during the build only (containers from the image get whatever
/// [`crate::Limits`] says). Example `install`: `["pip install pytest==8.3.3"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSpec {
    /// Repository, e.g. `pytest-dev/pytest`; only names the image.
    pub repo: String,
    /// Version, e.g. `8.3`; only names the image.
    pub version: String,
    /// The image to build from, normally [`crate::BaseRecipe`]'s.
    pub base_image: String,
    /// Shell lines run in order (under `set -euxo pipefail`) to install the environment.
    pub install: Vec<String>,
}

/// An instance layer: the task repository at its base commit in [`TESTBED`], with nothing after
/// the base commit reachable or stored, and the instance's own install lines run in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSpec {
    /// Instance id, e.g. `django__django-11099`; names the image.
    pub instance_id: String,
    /// The environment image to build from.
    pub env_image: String,
    /// Where to clone the repository from.
    pub source: RepoSource,
    /// The commit (hash or any revision the source resolves) to cut the history at.
    pub base_commit: String,
    /// Shell lines run in [`TESTBED`] after the copy (e.g. `pip install -e .`).
    pub install: Vec<String>,
}

impl EnvSpec {
    /// The content-addressed image name: `swerve-env.<repo>.<version>:<hash>`.
    pub fn image_name(&self) -> String {
        format!(
            "swerve-env.{}.{}:{}",
            name_component(&self.repo),
            name_component(&self.version),
            &self.recipe_hash()[..16]
        )
    }

    /// Hash of the generated Dockerfile and script (which hold the base image and the install
    /// lines), so that any change to how layers are made also changes the name.
    fn recipe_hash(&self) -> String {
        recipe_hash(&[
            LAYER_RECIPE_VERSION,
            "env",
            &self.dockerfile(),
            &self.setup_script(),
        ])
    }

    fn setup_script(&self) -> String {
        let mut script = format!(
            "#!/bin/bash\nset -euxo pipefail\npython3 -m venv {VENV}\nsource {VENV}/bin/activate\n"
        );
        for line in &self.install {
            script.push_str(line);
            script.push('\n');
        }
        script
    }

    fn dockerfile(&self) -> String {
        format!(
            "FROM {base}\n\
             COPY fs/ /\n\
             RUN {ca_env} /bin/bash {SWERVE_DIR}/setup_env.sh\n\
             ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n\
             WORKDIR {TESTBED}\n",
            base = self.base_image,
            ca_env = ca_env(),
        )
    }
}

impl InstanceSpec {
    /// The content-addressed image name: `swerve-eval.<instance id>:<hash>`.
    ///
    /// The hash covers the generated Dockerfile (which names the env image, itself
    /// content-addressed), the setup script (which holds the install lines) and the base commit
    /// as given; the repository contents are identified by the commit.
    pub fn image_name(&self) -> String {
        let hash = recipe_hash(&[
            LAYER_RECIPE_VERSION,
            "instance",
            &self.dockerfile(),
            &self.setup_script(),
            &self.base_commit,
        ]);
        format!(
            "swerve-eval.{}:{}",
            name_component(&self.instance_id),
            &hash[..16]
        )
    }

    fn setup_script(&self) -> String {
        let mut script = format!(
            "#!/bin/bash\nset -euxo pipefail\ncd {TESTBED}\n{check}\n",
            check = repo::IN_IMAGE_CHECK
        );
        for line in &self.install {
            script.push_str(line);
            script.push('\n');
        }
        script
    }

    fn dockerfile(&self) -> String {
        format!(
            "FROM {env}\n\
             COPY fs/ /\n\
             RUN {ca_env} /bin/bash {SWERVE_DIR}/setup_repo.sh\n",
            env = self.env_image,
            ca_env = ca_env(),
        )
    }
}

/// Environment assignments that point pip, requests, git and OpenSSL at the copied CA bundle for
/// one `RUN` line only, so that images do not carry them.
fn ca_env() -> String {
    [
        "PIP_CERT",
        "REQUESTS_CA_BUNDLE",
        "SSL_CERT_FILE",
        "GIT_SSL_CAINFO",
        "CURL_CA_BUNDLE",
    ]
    .map(|k| format!("{k}={CA_IN_IMAGE}"))
    .join(" ")
}

/// Add `fs/etc/swerve/{ca-bundle.crt, <script_name>}` for a `COPY fs/ /`.
///
/// Everything a layer needs goes through one `COPY` because each Dockerfile step costs a
/// container create and commit, several seconds on fuse-overlayfs. The directory entries
/// carry the modes `/` and `/etc` already have, so the copy leaves them as they are.
fn add_swerve_files(
    ctx: &mut Context,
    ca_bundle: &Path,
    script_name: &str,
    script: &str,
) -> Result<()> {
    for dir in ["fs", "fs/etc", &format!("fs{SWERVE_DIR}")] {
        ctx.add_dir_entry(dir)?;
    }
    ctx.add_file(&format!("fs{CA_IN_IMAGE}"), ca_bundle)?;
    ctx.add_bytes(
        &format!("fs{SWERVE_DIR}/{script_name}"),
        script.as_bytes(),
        0o755,
    )
}

impl Sandbox {
    /// The image `name` built from `folder`'s `Dockerfile` with the folder as its build context
    /// (a SWE-bench 5 task folder), if not present. The build has the engine's default network,
    /// as the Dockerfile installs what the task needs; of the host it sees only the folder
    /// (symbolic links go in as links, never followed).
    pub async fn ensure_dockerfile_image(&self, name: &str, folder: &Path) -> Result<ImageInfo> {
        self.ensure_built(name, || async {
            let dir = temp_dir("swerve-task-")?;
            let context_path = dir.path().join("context.tar");
            let folder = folder.to_owned();
            let context = tokio::task::spawn_blocking(move || {
                let mut ctx = Context::create(context_path)?;
                ctx.add_dir(".", &folder)?;
                ctx.finish()
            })
            .await
            .expect("the context task does not panic")?;
            self.build_context(name, &context).await
        })
        .await
    }

    /// The environment image for `spec`, built from its base image if not present.
    pub async fn ensure_env_image(&self, spec: &EnvSpec) -> Result<ImageInfo> {
        let name = spec.image_name();
        self.ensure_built(&name, || async {
            let dir = temp_dir("swerve-env-")?;
            let mut ctx = Context::create(dir.path().join("context.tar"))?;
            ctx.add_bytes("Dockerfile", spec.dockerfile().as_bytes(), 0o644)?;
            add_swerve_files(
                &mut ctx,
                &self.client.config.ca_bundle,
                "setup_env.sh",
                &spec.setup_script(),
            )?;
            let context = ctx.finish()?;
            self.build_context(&name, &context).await
        })
        .await
    }

    /// The instance image for `spec`, built from its env image if not present: the repository
    /// is cloned on the host, cut at the base commit and checked (see [`crate::RepoSource`]), copied
    /// to [`TESTBED`], checked again inside the build, and the install lines are run.
    pub async fn ensure_instance_image(&self, spec: &InstanceSpec) -> Result<ImageInfo> {
        let name = spec.image_name();
        self.ensure_built(&name, || async {
            let dir = temp_dir("swerve-instance-")?;
            let testbed = dir.path().join("testbed");
            let limit = self.client.config.timeouts.build;
            repo::prepare(
                &spec.source,
                &spec.base_commit,
                &testbed,
                &spec.instance_id,
                limit,
            )
            .await?;
            let context_path = dir.path().join("context.tar");
            let dockerfile = spec.dockerfile();
            let script = spec.setup_script();
            let ca_bundle = self.client.config.ca_bundle.clone();
            let context = tokio::task::spawn_blocking(move || {
                let mut ctx = Context::create(context_path)?;
                ctx.add_bytes("Dockerfile", dockerfile.as_bytes(), 0o644)?;
                add_swerve_files(&mut ctx, &ca_bundle, "setup_repo.sh", &script)?;
                ctx.add_dir("fs/testbed", &testbed)?;
                ctx.finish()
            })
            .await
            .expect("the context task does not panic")?;
            self.build_context(&name, &context).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_name_changes_with_install_lines() {
        let spec = EnvSpec {
            repo: "pytest-dev/pytest".into(),
            version: "8.3".into(),
            base_image: "swerve-base:0123".into(),
            install: vec!["pip install pytest==8.3.3".into()],
        };
        let mut other = spec.clone();
        other.install.push("pip install six".into());
        assert!(
            spec.image_name()
                .starts_with("swerve-env.pytest-dev-pytest.8-3:")
        );
        assert_ne!(spec.image_name(), other.image_name());
    }
}
