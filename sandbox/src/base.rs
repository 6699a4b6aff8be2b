//! The base image, built offline from Debian packages: no container registry is needed.
//!
//! The build commands are documented on [`BaseRecipe`], the type the crate exports.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::host::{HostCommand, find_program};
use crate::image::{ImageInfo, recipe_hash, temp_dir};
use crate::sandbox::Sandbox;

/// Bumped when the build steps below change, so that old base images are not reused.
const BASE_RECIPE_VERSION: &str = "swerve-base-1";

/// What goes into the base image.
///
/// The root filesystem is made with `debootstrap` from the Debian mirror the host's apt already
/// uses, cleaned of package caches, tarred and imported as an image. The commands, for a default
/// [`BaseRecipe`] and the mirror `http://deb.debian.org/debian`, are:
///
/// ```text
/// apt-get install -y --no-install-recommends debootstrap      # only if it is missing
/// debootstrap --variant=minbase \
///     --include=python3,python3-pip,python3-venv,git,patch,ca-certificates \
///     bookworm <tmp>/rootfs http://deb.debian.org/debian
/// rm -f <tmp>/rootfs/var/cache/apt/archives/*.deb; rm -rf <tmp>/rootfs/var/lib/apt/lists/*
/// tar --numeric-owner -C <tmp>/rootfs -cf <tmp>/rootfs.tar .
/// docker import \
///     -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
///     -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' \
///     <tmp>/rootfs.tar swerve-base:<first 16 hex of the recipe hash>
/// ```
///
/// (the import goes through the engine API, not the CLI). It needs root (debootstrap chroots)
/// and takes about two minutes; the image is about 290 MB. The tag is a hash of the recipe
/// (suite, variant, packages, mirror), so the image is built once per machine and reused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRecipe {
    /// Debian suite. Default: `bookworm`.
    pub suite: String,
    /// debootstrap variant. Default: `minbase` (essential packages and apt only).
    pub variant: String,
    /// Extra packages. Default: `python3 python3-pip python3-venv git patch ca-certificates`.
    pub include: Vec<String>,
    /// Debian mirror URL; `None` (the default) reads it from the host's apt configuration, see
    /// [`apt_mirror`].
    pub mirror: Option<String>,
}

impl Default for BaseRecipe {
    fn default() -> Self {
        Self {
            suite: "bookworm".to_owned(),
            variant: "minbase".to_owned(),
            include: [
                "python3",
                "python3-pip",
                "python3-venv",
                "git",
                "patch",
                "ca-certificates",
            ]
            .map(str::to_owned)
            .to_vec(),
            mirror: None,
        }
    }
}

impl BaseRecipe {
    /// The default recipe on another Debian suite (`trixie` for Debian 13's Python 3.13).
    pub fn for_suite(suite: &str) -> Self {
        Self {
            suite: suite.to_owned(),
            ..Self::default()
        }
    }

    /// The mirror to use: the configured one, or the host's apt mirror for the suite.
    pub fn resolve_mirror(&self) -> Result<String> {
        match &self.mirror {
            Some(m) => Ok(m.clone()),
            None => apt_mirror(Path::new("/etc/apt"), &self.suite),
        }
    }

    /// The content-addressed image name for this recipe with `mirror`: `swerve-base:<hash>`.
    pub fn image_name(&self, mirror: &str) -> String {
        let include = self.include.join(",");
        let hash = recipe_hash(&[
            BASE_RECIPE_VERSION,
            &self.suite,
            &self.variant,
            &include,
            mirror,
        ]);
        format!("swerve-base:{}", &hash[..16])
    }

    /// The debootstrap arguments that make the root filesystem in `target`.
    pub fn debootstrap_args(&self, target: &Path, mirror: &str) -> Vec<String> {
        let mut args = vec![format!("--variant={}", self.variant)];
        if !self.include.is_empty() {
            args.push(format!("--include={}", self.include.join(",")));
        }
        args.push(self.suite.clone());
        args.push(target.display().to_string());
        args.push(mirror.to_owned());
        args
    }
}

/// The `ENV`/`CMD` changes applied when the root filesystem is imported.
fn import_changes() -> Vec<String> {
    [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        r#"CMD ["/bin/bash"]"#,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The first Debian mirror URL in the apt configuration under `apt_dir` (`sources.list` and
/// `sources.list.d/*.list` in one-line form, `sources.list.d/*.sources` in deb822 form) that
/// serves `suite` itself (not `suite-updates` or `suite-security`) as a `deb` source; when none
/// lists `suite` (a Debian 13 base on a Debian 12 host), the mirror of the host's own release,
/// since a Debian mirror serves every release.
pub fn apt_mirror(apt_dir: &Path, suite: &str) -> Result<String> {
    match apt_mirror_listing(apt_dir, |s| s == suite) {
        Some(url) => Ok(url),
        None => {
            apt_mirror_listing(apt_dir, |s| !s.contains('-')).ok_or_else(|| Error::MirrorNotFound {
                suite: suite.to_owned(),
            })
        }
    }
}

/// The first `deb` source URL whose suite passes `wanted`.
fn apt_mirror_listing(apt_dir: &Path, wanted: impl Fn(&str) -> bool) -> Option<String> {
    let mut files: Vec<PathBuf> = vec![apt_dir.join("sources.list")];
    if let Ok(entries) = fs_err::read_dir(apt_dir.join("sources.list.d")) {
        let mut more: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = fs_err::read_to_string(&file) else {
            continue;
        };
        let found = match file.extension().and_then(|e| e.to_str()) {
            Some("sources") => mirror_in_deb822(&text, &wanted),
            Some("list") => mirror_in_one_line(&text, &wanted),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `deb [options] URI suite components...` lines.
fn mirror_in_one_line(text: &str, wanted: impl Fn(&str) -> bool) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        if words.next() != Some("deb") {
            return None;
        }
        let mut rest: Vec<&str> = words.collect();
        if rest.first().is_some_and(|w| w.starts_with('[')) {
            let end = rest.iter().position(|w| w.ends_with(']'))?;
            rest.drain(..=end);
        }
        match rest.as_slice() {
            [uri, s, ..] if wanted(s) => Some((*uri).to_owned()),
            _ => None,
        }
    })
}

/// deb822 stanzas with `Types: deb`, `URIs:` and `Suites:` fields.
fn mirror_in_deb822(text: &str, wanted: impl Fn(&str) -> bool) -> Option<String> {
    text.split("\n\n").find_map(|stanza| {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_owned())
            })
        };
        let enabled = field("Enabled").is_none_or(|v| v != "no");
        let types = field("Types")?;
        let suites = field("Suites")?;
        let uris = field("URIs")?;
        (enabled
            && types.split_whitespace().any(|t| t == "deb")
            && suites.split_whitespace().any(&wanted))
        .then(|| uris.split_whitespace().next().map(str::to_owned))
        .flatten()
    })
}

/// Install debootstrap with apt when it is missing (refreshing the package lists if the first
/// attempt fails).
async fn ensure_debootstrap(limit: std::time::Duration) -> Result<()> {
    if find_program("debootstrap").is_some() {
        return Ok(());
    }
    tracing::info!("debootstrap is missing; installing it with apt-get");
    let install = || {
        HostCommand::new("apt-get")
            .args([
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "debootstrap",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
    };
    if install().run(limit).await.is_ok() {
        return Ok(());
    }
    HostCommand::new("apt-get")
        .args(["update", "-q"])
        .run(limit)
        .await?;
    install().run(limit).await.map(drop)
}

/// Lazily unmount anything debootstrap left mounted under `root` (it mounts `/proc` and `/sys`
/// in the target and may leave them after a failure), so that deleting the directory is safe.
async fn unmount_under(root: &Path) {
    let Ok(mounts) = fs_err::read_to_string("/proc/mounts") else {
        return;
    };
    let root = root.display().to_string();
    let mut points: Vec<String> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        // /proc/mounts escapes spaces and the like as octal; our paths have none.
        .filter(|p| p.starts_with(&root))
        .map(str::to_owned)
        .collect();
    // Deepest first.
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let outcome = HostCommand::new("umount")
            .args(["-l", &point])
            .run(std::time::Duration::from_secs(30))
            .await;
        if let Err(e) = outcome {
            tracing::warn!(mount = %point, error = %e, "cannot unmount leftover debootstrap mount");
        }
    }
}

/// Delete the package caches debootstrap leaves in the root filesystem.
fn clean_rootfs(rootfs: &Path) -> Result<()> {
    for (dir, only_debs) in [
        ("var/cache/apt/archives", true),
        ("var/lib/apt/lists", false),
    ] {
        let dir = rootfs.join(dir);
        let Ok(entries) = fs_err::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let io = |source| Error::Io {
                path: path.clone(),
                source,
            };
            if path.is_dir() {
                if !only_debs && path.file_name().is_some_and(|n| n != "partial") {
                    fs_err::remove_dir_all(&path).map_err(io)?;
                }
            } else if !only_debs || path.extension().is_some_and(|e| e == "deb") {
                fs_err::remove_file(&path).map_err(io)?;
            }
        }
    }
    Ok(())
}

impl Sandbox {
    /// The base image for `recipe`, built with debootstrap and imported if not present (see the
    /// module docs for the exact commands). Needs root on the host.
    pub async fn ensure_base_image(&self, recipe: &BaseRecipe) -> Result<ImageInfo> {
        let mirror = recipe.resolve_mirror()?;
        let name = recipe.image_name(&mirror);
        let limit = self.client.config.timeouts.build;
        self.ensure_built(&name, || async {
            ensure_debootstrap(limit).await?;
            let dir = temp_dir("swerve-base-")?;
            let rootfs = dir.path().join("rootfs");
            tracing::info!(image = %name, %mirror, "building base image with debootstrap");
            let outcome = HostCommand::new("debootstrap")
                .args(recipe.debootstrap_args(&rootfs, &mirror))
                .env("DEBIAN_FRONTEND", "noninteractive")
                .run(limit)
                .await;
            unmount_under(&rootfs).await;
            outcome?;
            let tar_path = dir.path().join("rootfs.tar");
            let clean_root = rootfs.clone();
            tokio::task::spawn_blocking(move || clean_rootfs(&clean_root))
                .await
                .expect("the clean-up task does not panic")?;
            HostCommand::new("tar")
                .arg("--numeric-owner")
                .arg("-C")
                .arg(&rootfs)
                .arg("-cf")
                .arg(&tar_path)
                .arg(".")
                .run(limit)
                .await?;
            self.import_rootfs(&tar_path, &name, &import_changes())
                .await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_sources() {
        let text = "# comment\n\
                    deb http://security.debian.org/ bookworm-security main\n\
                    deb-src http://src.example/ bookworm main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n";
        assert_eq!(
            mirror_in_one_line(text, |s| s == "bookworm").as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(mirror_in_one_line(text, |s| s == "trixie"), None);
    }

    #[test]
    fn deb822_sources() {
        let text = "Types: deb\n# http://snapshot.example/\nURIs: http://deb.debian.org/debian\n\
                    Suites: bookworm bookworm-updates\nComponents: main\n\n\
                    Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n";
        assert_eq!(
            mirror_in_deb822(text, |s| s == "bookworm").as_deref(),
            Some("http://deb.debian.org/debian")
        );
        let disabled = "Enabled: no\nTypes: deb\nURIs: http://x/\nSuites: bookworm\n";
        assert_eq!(mirror_in_deb822(disabled, |s| s == "bookworm"), None);
    }

    #[test]
    fn apt_dir_scan_skips_other_extensions() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir(dir.path().join("sources.list.d")).unwrap();
        fs_err::write(
            dir.path().join("sources.list.d/a.list.disabled"),
            "deb http://wrong/ bookworm main\n",
        )
        .unwrap();
        fs_err::write(
            dir.path().join("sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://right/debian\nSuites: bookworm\n",
        )
        .unwrap();
        assert_eq!(
            apt_mirror(dir.path(), "bookworm").unwrap(),
            "http://right/debian"
        );
        // No source lists trixie: the mirror of the host's own release serves it.
        assert_eq!(
            apt_mirror(dir.path(), "trixie").unwrap(),
            "http://right/debian"
        );
        let security = tempfile::tempdir().unwrap();
        fs_err::write(
            security.path().join("sources.list"),
            "deb http://security/ bookworm-security main\n",
        )
        .unwrap();
        assert!(matches!(
            apt_mirror(security.path(), "trixie"),
            Err(Error::MirrorNotFound { .. })
        ));
    }

    #[test]
    fn recipe_names_and_args() {
        let recipe = BaseRecipe::default();
        let name = recipe.image_name("http://m/debian");
        assert!(name.starts_with("swerve-base:") && name.len() == "swerve-base:".len() + 16);
        assert_ne!(name, recipe.image_name("http://other/debian"));
        assert_eq!(
            recipe.debootstrap_args(Path::new("/t/rootfs"), "http://m/debian"),
            [
                "--variant=minbase",
                "--include=python3,python3-pip,python3-venv,git,patch,ca-certificates",
                "bookworm",
                "/t/rootfs",
                "http://m/debian",
            ]
        );
    }
}
