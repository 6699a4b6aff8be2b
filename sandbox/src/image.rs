//! Images: look-up and pull, push, tag, remove, import, and the content-addressed build
//! machinery (recipe hashes, build lock, build from a context) the layers use.
//!
//! Every built image is tagged with a hash of its recipe (what goes into it, not when it was
//! built), so a second request for the same recipe reuses the image, and builds of one recipe are
//! serialised across processes with a lock file in the temp directory.

use std::path::Path;

use bollard::query_parameters::{
    BuildImageOptions, CreateImageOptions, PushImageOptions, RemoveImageOptions, TagImageOptions,
};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::context::open_body;
use crate::error::{DockerError, Error, Result, tail};
use crate::sandbox::{Sandbox, is_not_found, within};

/// What is known about a local image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// The name it was asked for by (`repo:tag`).
    pub name: String,
    /// The engine's image id (`sha256:...`).
    pub id: String,
    /// Size of the image with all its layers, in bytes (layers shared with other images are
    /// counted here too).
    pub size_bytes: u64,
    /// How the image came to be there in this call.
    pub origin: ImageOrigin,
}

/// How an image requested from the sandbox was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageOrigin {
    /// It was already present.
    Local,
    /// It was pulled from a registry.
    Pulled,
    /// It was built (or imported) now.
    Built,
}

/// Hex sha256 of the parts, each length-prefixed so that part boundaries count.
pub(crate) fn recipe_hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// A valid image repository path component from free text: lower case, runs of anything but
/// `[a-z0-9]` turned into one `-`, no leading or trailing `-`.
pub(crate) fn name_component(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() { "x".to_owned() } else { out }
}

/// Split `repo[:tag]` (or `repo@digest`) into the repository and the tag the engine needs; a
/// missing tag means `latest`, as in the docker CLI (the API would otherwise pull every tag).
pub(crate) fn split_reference(name: &str) -> (&str, Option<&str>) {
    if name.contains('@') {
        return (name, None);
    }
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, Some("latest")),
    }
}

/// Exclusive cross-process lock for building one recipe; released when the file is dropped.
pub(crate) async fn build_lock(image: &str) -> Result<std::fs::File> {
    // Lock files are kept: deleting one while another process waits on it would let a third
    // process lock a new file of the same name.
    let dir = std::env::temp_dir().join("swerve-build-locks");
    let path = dir.join(format!("{}.lock", &recipe_hash(&[image])[..16]));
    tokio::task::spawn_blocking(move || {
        let file = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::File::create(&path))
            .and_then(|f| f.lock().map(|()| f));
        file.map_err(|source| Error::Io { path, source })
    })
    .await
    .expect("the lock task does not panic")
}

impl Sandbox {
    /// Inspect a local image; `None` when it is not present.
    pub async fn image_info(&self, name: &str) -> Result<Option<ImageInfo>> {
        let docker = &self.client.docker;
        match within(
            self.client.config.timeouts.api,
            "inspect image",
            name,
            docker.inspect_image(name),
        )
        .await?
        {
            Ok(inspect) => Ok(Some(ImageInfo {
                name: name.to_owned(),
                id: inspect.id.unwrap_or_default(),
                size_bytes: inspect.size.unwrap_or(0).max(0) as u64,
                origin: ImageOrigin::Local,
            })),
            Err(e) => {
                let e = DockerError::from(e);
                if is_not_found(&e) {
                    Ok(None)
                } else {
                    Err(Error::ImageInspect {
                        image: name.to_owned(),
                        source: e,
                    })
                }
            }
        }
    }

    /// Use the local image `name` if present, else pull it (with the configured retries and
    /// platform). A registry that does not have it gives [`Error::ImageNotFound`].
    pub async fn ensure_image(&self, name: &str) -> Result<ImageInfo> {
        if let Some(info) = self.image_info(name).await? {
            return Ok(info);
        }
        let config = &self.client.config;
        let mut attempt = 0;
        loop {
            match self.pull_once(name).await {
                Ok(()) => break,
                Err(Error::ImageNotFound { image, source }) => {
                    return Err(Error::ImageNotFound { image, source });
                }
                Err(e) if attempt < config.pull_retries => {
                    attempt += 1;
                    let wait = std::time::Duration::from_secs(1 << attempt.min(6));
                    tracing::warn!(image = name, attempt, error = %e, ?wait, "pull failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e),
            }
        }
        let mut info = self
            .image_info(name)
            .await?
            .ok_or_else(|| Error::ImageNotFound {
                image: name.to_owned(),
                source: DockerError::other("the pull finished but the image is not present"),
            })?;
        info.origin = ImageOrigin::Pulled;
        Ok(info)
    }

    async fn pull_once(&self, name: &str) -> Result<()> {
        let config = &self.client.config;
        let (repository, tag) = split_reference(name);
        let options = CreateImageOptions {
            from_image: Some(repository.to_owned()),
            tag: tag.map(str::to_owned),
            platform: config.platform.clone().unwrap_or_default(),
            ..Default::default()
        };
        tracing::info!(image = name, "pulling image");
        let mut stream = self.client.docker.create_image(Some(options), None, None);
        let drain = async {
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        };
        match within(config.timeouts.pull, "pull", name, drain).await? {
            Ok(()) => Ok(()),
            Err(e) => {
                let missing = match &e {
                    bollard::errors::Error::DockerStreamError { error } => {
                        error.contains("not found") || error.contains("manifest unknown")
                    }
                    _ => false,
                };
                let e = DockerError::from(e);
                if missing || is_not_found(&e) {
                    Err(Error::ImageNotFound {
                        image: name.to_owned(),
                        source: e,
                    })
                } else {
                    Err(Error::Pull {
                        image: name.to_owned(),
                        source: e,
                    })
                }
            }
        }
    }

    /// Push the local image `name` (`registry/repo:tag`) to its registry, without credentials.
    pub async fn push_image(&self, name: &str) -> Result<()> {
        let (repository, tag) = split_reference(name);
        let options = PushImageOptions {
            tag: tag.map(str::to_owned),
            ..Default::default()
        };
        let mut stream = self
            .client
            .docker
            .push_image(repository, Some(options), None);
        let drain = async {
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        };
        within(self.client.config.timeouts.transfer, "push", name, drain)
            .await?
            .map_err(|e| Error::Push {
                image: name.to_owned(),
                source: e.into(),
            })
    }

    /// Give the image `source` the additional name `target` (`repo:tag`).
    pub async fn tag_image(&self, source: &str, target: &str) -> Result<()> {
        let (repo, tag) = split_reference(target);
        let options = TagImageOptions {
            repo: Some(repo.to_owned()),
            tag: tag.map(str::to_owned),
        };
        within(
            self.client.config.timeouts.api,
            "tag image",
            source,
            self.client.docker.tag_image(source, Some(options)),
        )
        .await?
        .map_err(|e| Error::ImageManage {
            action: "tag",
            image: source.to_owned(),
            source: e.into(),
        })
    }

    /// Remove the name `name`, and the image if no other name refers to it. Fails if a container
    /// uses it.
    pub async fn remove_image(&self, name: &str) -> Result<()> {
        within(
            self.client.config.timeouts.api,
            "remove image",
            name,
            self.client
                .docker
                .remove_image(name, None::<RemoveImageOptions>, None),
        )
        .await?
        .map(drop)
        .map_err(|e| Error::ImageManage {
            action: "remove",
            image: name.to_owned(),
            source: e.into(),
        })
    }

    /// Import a root filesystem tar (as made by `tar -C rootfs -cf rootfs.tar .`) as the image
    /// `name`, applying Dockerfile `changes` such as `ENV PATH=...` or `CMD ["/bin/bash"]`.
    pub async fn import_rootfs(
        &self,
        rootfs_tar: &Path,
        name: &str,
        changes: &[String],
    ) -> Result<ImageInfo> {
        // The whole reference in `repo` (the API allows a tag there): Podman's service ignores
        // a separate `tag` on import and would name the image `:latest`.
        let options = CreateImageOptions {
            from_src: Some("-".to_owned()),
            repo: Some(name.to_owned()),
            changes: changes.to_vec(),
            ..Default::default()
        };
        let body = bollard::body_try_stream(open_body(rootfs_tar).await?);
        let mut stream = self
            .client
            .docker
            .create_image(Some(options), Some(body), None);
        let drain = async {
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        };
        within(self.client.config.timeouts.build, "import", name, drain)
            .await?
            .map_err(|e| Error::Import {
                image: name.to_owned(),
                source: e.into(),
            })?;
        self.built(name).await
    }

    /// Look up an image just built; its absence is an engine inconsistency.
    pub(crate) async fn built(&self, name: &str) -> Result<ImageInfo> {
        let mut info = self.image_info(name).await?.ok_or_else(|| Error::Build {
            image: name.to_owned(),
            log_tail: String::new(),
            source: DockerError::other("the build finished but the image is not present"),
        })?;
        info.origin = ImageOrigin::Built;
        Ok(info)
    }

    /// Build `image` from a context tar holding a `Dockerfile`.
    pub(crate) async fn build_context(&self, image: &str, context: &Path) -> Result<ImageInfo> {
        let options = BuildImageOptions {
            dockerfile: "Dockerfile".to_owned(),
            t: Some(image.to_owned()),
            rm: true,
            forcerm: true,
            ..Default::default()
        };
        let body = bollard::body_try_stream(open_body(context).await?);
        let mut stream = self.client.docker.build_image(options, None, Some(body));
        let mut log = String::new();
        let drain = async {
            while let Some(item) = stream.next().await {
                let info = item?;
                if let Some(text) = info.stream {
                    tracing::debug!(target: "swerve_sandbox::build", image, "{}", text.trim_end());
                    log.push_str(&text);
                }
            }
            Ok::<(), bollard::errors::Error>(())
        };
        let outcome = within(self.client.config.timeouts.build, "build", image, drain).await?;
        outcome.map_err(|e| {
            let step = match &e {
                bollard::errors::Error::DockerStreamError { error } => step_exit_code(error),
                _ => None,
            };
            match step {
                Some(exit_code) => Error::BuildStep {
                    image: image.to_owned(),
                    exit_code,
                    log_tail: tail(&log, 40),
                },
                None => Error::Build {
                    image: image.to_owned(),
                    log_tail: tail(&log, 40),
                    source: e.into(),
                },
            }
        })?;
        self.built(image).await
    }

    /// Reuse the image `name` if present; otherwise take the build lock, look again (another
    /// process may have built it meanwhile) and run `build`.
    pub(crate) async fn ensure_built<F, Fut>(&self, name: &str, build: F) -> Result<ImageInfo>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ImageInfo>>,
    {
        if let Some(info) = self.image_info(name).await? {
            return Ok(info);
        }
        let _lock = build_lock(name).await?;
        if let Some(info) = self.image_info(name).await? {
            return Ok(info);
        }
        let started = std::time::Instant::now();
        let info = build().await?;
        tracing::info!(image = name, elapsed = ?started.elapsed(), size = info.size_bytes, "built image");
        Ok(info)
    }
}

pub(crate) fn temp_dir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })
}

/// The exit code of a build step's command that failed, from the engine's message: "The command
/// '…' returned a non-zero code: N" (the classic builder), "… did not complete successfully:
/// exit code: N" (BuildKit). `None` for any other build failure.
fn step_exit_code(message: &str) -> Option<i64> {
    [
        "returned a non-zero code: ",
        "did not complete successfully: exit code: ",
    ]
    .iter()
    .find_map(|marker| {
        let (_, rest) = message.rsplit_once(marker)?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_is_told_from_other_build_failures() {
        assert_eq!(
            step_exit_code("The command '/bin/sh -c pip install x' returned a non-zero code: 1"),
            Some(1)
        );
        assert_eq!(
            step_exit_code(
                "process \"/bin/sh -c pip install x\" did not complete successfully: exit code: 2"
            ),
            Some(2)
        );
        assert_eq!(step_exit_code("no space left on device"), None);
    }

    #[test]
    fn references_split_like_the_cli() {
        let cases = [
            ("ubuntu", ("ubuntu", Some("latest"))),
            ("ubuntu:22.04", ("ubuntu", Some("22.04"))),
            ("127.0.0.1:5000/x/y", ("127.0.0.1:5000/x/y", Some("latest"))),
            ("127.0.0.1:5000/x/y:t", ("127.0.0.1:5000/x/y", Some("t"))),
            ("r/x@sha256:abc", ("r/x@sha256:abc", None)),
        ];
        for (input, expected) in cases {
            assert_eq!(split_reference(input), expected, "{input}");
        }
    }

    #[test]
    fn name_components_are_valid() {
        let cases = [
            ("django__django-11099", "django-django-11099"),
            ("Pytest-Dev/Pytest", "pytest-dev-pytest"),
            ("8.3", "8-3"),
            ("__", "x"),
        ];
        for (input, expected) in cases {
            assert_eq!(name_component(input), expected, "{input}");
        }
    }

    #[test]
    fn recipe_hash_separates_parts() {
        assert_ne!(recipe_hash(&["ab", "c"]), recipe_hash(&["a", "bc"]));
        assert_eq!(recipe_hash(&["a"]), recipe_hash(&["a"]));
    }
}
