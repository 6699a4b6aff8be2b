//! Tests against the real Docker engine. They build the offline base image once per machine
//! (about two minutes the first time; later runs reuse it), so the first run is slow.
//!
//! Each test connects its own [`Sandbox`]: a client's pooled connections belong to the runtime
//! that opened them, and every `#[tokio::test]` has its own runtime. Only plain data (the base
//! image's name) is shared, through a `OnceCell`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use swerve_sandbox::{
    BaseRecipe, ContainerSpec, EnvSpec, Error, ExecRequest, ImageInfo, ImageOrigin, InstanceSpec,
    Limits, RepoSource, Sandbox, SandboxConfig,
};
use tokio::sync::OnceCell;

static BASE: OnceCell<ImageInfo> = OnceCell::const_new();

async fn sandbox() -> Sandbox {
    Sandbox::connect(SandboxConfig::default())
        .await
        .expect("the Docker engine is reachable")
}

/// The base image, built on first use in this process (or found from an earlier run).
async fn base() -> &'static ImageInfo {
    BASE.get_or_init(|| async {
        let started = Instant::now();
        let info = sandbox()
            .await
            .ensure_base_image(&BaseRecipe::default())
            .await
            .expect("the base image builds");
        eprintln!(
            "base image {} ({:?}): {:.1}s, {} bytes",
            info.name,
            info.origin,
            started.elapsed().as_secs_f64(),
            info.size_bytes
        );
        info
    })
    .await
}

/// A run id unique to this test process and test.
fn run_id(test: &str) -> String {
    format!("test-{}-{test}", std::process::id())
}

async fn start(sandbox: &Sandbox, test: &str, limits: Limits) -> swerve_sandbox::Container {
    let mut spec = ContainerSpec::new(&base().await.name, run_id(test), test);
    spec.limits = limits;
    sandbox.start(&spec).await.expect("the container starts")
}

async fn sh(container: &swerve_sandbox::Container, script: &str) -> swerve_sandbox::ExecOutput {
    container
        .exec(&ExecRequest::shell(script).with_timeout(Duration::from_secs(120)))
        .await
        .expect("the exec runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn base_image_has_the_tools_and_is_reused() {
    let sandbox = sandbox().await;
    let first = base().await;
    let again = sandbox
        .ensure_base_image(&BaseRecipe::default())
        .await
        .unwrap();
    assert_eq!(again.origin, ImageOrigin::Local);
    assert_eq!(again.id, first.id);
    let c = start(&sandbox, "tools", Limits::default()).await;
    let out = sh(
        &c,
        "python3 --version && git --version && patch --version | head -1 && \
         python3 -m venv /tmp/v && test -f /etc/ssl/certs/ca-certificates.crt",
    )
    .await;
    assert!(out.success(), "{}", out.text());
    assert!(out.text().contains("Python 3.11"), "{}", out.text());
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_returns_output_and_exit_status() {
    let sandbox = sandbox().await;
    let c = start(&sandbox, "echo", Limits::default()).await;
    let out = c
        .exec(&ExecRequest::new(["echo", "hello sandbox"]))
        .await
        .unwrap();
    assert_eq!(out.text(), "hello sandbox\n");
    assert_eq!(out.exit_code, Some(0));
    assert!(out.success());

    let out = sh(&c, "echo out; echo err >&2; exit 3").await;
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.timed_out);
    assert!(out.text().contains("out\n") && out.text().contains("err\n"));

    let out = c
        .exec(
            &ExecRequest::shell("pwd; echo $GREETING")
                .with_workdir("/tmp")
                .with_env("GREETING", "hi"),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "/tmp\nhi\n");
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_the_whole_process_tree_promptly() {
    let sandbox = sandbox().await;
    let c = start(&sandbox, "timeout", Limits::default()).await;
    let started = Instant::now();
    // A background child in the same group, one that cleared its environment, one that
    // detached into its own session, and the foreground sleep: all must die, and all hold the
    // output pipe open.
    let out = c
        .exec(
            &ExecRequest::shell(
                "echo begun; sleep 1000 & env -i /bin/sleep 1003 & setsid sleep 1001 & sleep 1002",
            )
            .with_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(out.timed_out, "{out:?}");
    assert!(!out.success());
    assert!(out.text().contains("begun"), "{}", out.text());
    assert!(took < Duration::from_secs(12), "took {took:?}");

    let survivors = sh(
        &c,
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep 'sleep 100[0-3]' || true",
    )
    .await;
    assert_eq!(survivors.text(), "", "processes survived the timeout");

    // A command that finishes in time is untouched by the limit.
    let out = c
        .exec(&ExecRequest::shell("sleep 1; echo done").with_timeout(Duration::from_secs(20)))
        .await
        .unwrap();
    assert!(out.success() && out.text() == "done\n", "{out:?}");
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn network_is_off_by_default() {
    let sandbox = sandbox().await;
    let c = start(&sandbox, "network", Limits::default()).await;
    let out = sh(
        &c,
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
    )
    .await;
    assert_ne!(
        out.exit_code,
        Some(0),
        "egress was possible: {}",
        out.text()
    );
    let interfaces = sh(&c, "ls /sys/class/net").await;
    assert_eq!(
        interfaces.text().split_whitespace().collect::<Vec<_>>(),
        ["lo"]
    );
    c.remove().await.unwrap();

    // The compatibility profile has the bridge network.
    let c = start(&sandbox, "network-bridge", Limits::unlimited()).await;
    let interfaces = sh(&c, "ls /sys/class/net").await;
    assert!(interfaces.text().contains("eth0"), "{}", interfaces.text());
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_limit_kills_with_137() {
    let sandbox = sandbox().await;
    let limits = Limits {
        memory_bytes: Some(128 << 20),
        ..Limits::default()
    };
    let c = start(&sandbox, "memory", limits).await;
    let out = sh(&c, "python3 -c \"b = b'x' * (512 << 20); print(len(b))\"").await;
    assert_eq!(out.exit_code, Some(137), "{out:?}");
    assert!(!out.timed_out);
    let small = sh(&c, "python3 -c \"b = b'x' * (16 << 20); print(len(b))\"").await;
    assert!(small.success(), "{}", small.text());
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn pids_limit_stops_fork_bombs() {
    let sandbox = sandbox().await;
    let limits = Limits {
        pids: Some(40),
        ..Limits::default()
    };
    let c = start(&sandbox, "pids", limits).await;
    let script = "import subprocess\n\
                  ps = []\n\
                  try:\n    \
                      for _ in range(200):\n        \
                          ps.append(subprocess.Popen(['sleep', '30'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))\n\
                  except OSError as e:\n    \
                      print('fork refused after', len(ps), e)\n    \
                      raise SystemExit(7)\n";
    c.write_file("/tmp/fork.py", script.as_bytes())
        .await
        .unwrap();
    let out = c
        .exec(&ExecRequest::new(["python3", "/tmp/fork.py"]).with_timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(7), "{}", out.text());
    assert!(out.text().contains("fork refused after"), "{}", out.text());
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_are_the_engines_diff_against_the_image() {
    use swerve_sandbox::{FsChange, FsChangeKind};
    let sandbox = sandbox().await;
    let c = start(&sandbox, "changes", Limits::default()).await;
    // Every kind of change: new folders and files, a changed file, a changed mode, deletions of a
    // file and of a folder, a folder deleted and made again (opaque), a symbolic link, a file
    // whose name looks like a whiteout's.
    let out = sh(
        &c,
        "mkdir -p /opt/planted && echo x > /opt/planted/hook.pth && rm /etc/issue \
         && echo >> /etc/passwd && chmod 700 /usr/share/doc \
         && rm -rf /usr/share/common-licenses \
         && rm -rf /var/lib/dpkg/alternatives && mkdir /var/lib/dpkg/alternatives \
         && touch /var/lib/dpkg/alternatives/new && ln -s /etc/passwd /usr/local/bin/link \
         && touch /usr/local/.wh.x; true",
    )
    .await;
    assert!(out.success(), "{}", out.text());
    let changes = c.changes().await.unwrap();
    let has = |path: &str, kind| {
        changes.contains(&FsChange {
            path: path.to_owned(),
            kind,
        })
    };
    assert!(
        has("/opt/planted/hook.pth", FsChangeKind::Added),
        "{changes:?}"
    );
    assert!(has("/opt", FsChangeKind::Modified), "{changes:?}");
    assert!(has("/etc/issue", FsChangeKind::Deleted), "{changes:?}");
    // Whether read from the upper layer or not, the list is the engine's own.
    let mut engine = c.engine_changes().await.unwrap();
    engine.sort();
    let mut ours = changes.clone();
    ours.sort();
    assert_eq!(ours, engine);
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_in_and_out_round_trips() {
    let sandbox = sandbox().await;
    let c = start(&sandbox, "copy", Limits::default()).await;
    let host = tempfile::tempdir().unwrap();
    let payload = host.path().join("payload");
    std::fs::create_dir_all(payload.join("sub")).unwrap();
    std::fs::write(payload.join("a.txt"), "alpha\n").unwrap();
    let binary: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    std::fs::write(payload.join("sub/b.bin"), &binary).unwrap();

    c.copy_in(&payload, "/work/in").await.unwrap();
    let out = sh(
        &c,
        "cat /work/in/payload/a.txt && wc -c < /work/in/payload/sub/b.bin",
    )
    .await;
    assert_eq!(out.text(), "alpha\n100000\n");

    sh(&c, "echo changed > /work/in/payload/a.txt").await;
    let back = tempfile::tempdir().unwrap();
    let copied = c.copy_out("/work/in/payload", back.path()).await.unwrap();
    assert_eq!(copied, back.path().join("payload"));
    assert_eq!(
        std::fs::read_to_string(copied.join("a.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(std::fs::read(copied.join("sub/b.bin")).unwrap(), binary);

    c.write_file("/tmp/deep/patch.diff", b"diff --git a b\n")
        .await
        .unwrap();
    let file = c
        .copy_out("/tmp/deep/patch.diff", back.path())
        .await
        .unwrap();
    assert_eq!(std::fs::read(file).unwrap(), b"diff --git a b\n");
    c.remove().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn drop_removes_the_container_in_every_context() {
    let sandbox = sandbox().await;
    let run = run_id("drop");
    let listed = || async { sandbox.list(Some(&run)).await.unwrap() };

    // Dropped inside a multi-threaded runtime.
    let c = start(&sandbox, "drop", Limits::default()).await;
    assert_eq!(listed().await, [c.id().to_owned()]);
    drop(c);
    assert!(
        listed().await.is_empty(),
        "drop in async context did not remove"
    );

    // Dropped on a thread with no runtime at all.
    let c = start(&sandbox, "drop", Limits::default()).await;
    std::thread::spawn(move || drop(c)).join().unwrap();
    assert!(
        listed().await.is_empty(),
        "drop without a runtime did not remove"
    );

    // Dropped inside a current-thread runtime, whose only thread is the one dropping.
    let c = start(&sandbox, "drop", Limits::default()).await;
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move { drop(c) });
    })
    .join()
    .unwrap();
    assert!(
        listed().await.is_empty(),
        "drop in a current-thread runtime did not remove"
    );

    // Dropped while unwinding from a panic.
    let c = start(&sandbox, "drop", Limits::default()).await;
    let panicked = std::thread::spawn(move || {
        let _held = c;
        panic!("test panic while holding a container");
    })
    .join();
    assert!(panicked.is_err());
    assert!(
        listed().await.is_empty(),
        "drop during unwinding did not remove"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sweep_removes_one_runs_labelled_containers() {
    let sandbox = sandbox().await;
    let a1 = start(&sandbox, "sweep-a", Limits::default()).await;
    let a2 = start(&sandbox, "sweep-a", Limits::default()).await;
    let b = start(&sandbox, "sweep-b", Limits::default()).await;
    let mut removed = sandbox.sweep(Some(&run_id("sweep-a"))).await.unwrap();
    removed.sort();
    let mut expected = vec![a1.id().to_owned(), a2.id().to_owned()];
    expected.sort();
    assert_eq!(removed, expected);
    assert!(
        sandbox
            .list(Some(&run_id("sweep-a")))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        sandbox.list(Some(&run_id("sweep-b"))).await.unwrap(),
        [b.id().to_owned()]
    );
    // Handles of swept containers drop quietly (the engine answers 404, which counts as removed).
    drop((a1, a2));
    assert_eq!(
        sandbox.sweep(Some(&run_id("sweep-b"))).await.unwrap().len(),
        1
    );
    b.remove().await.unwrap();
}

/// A sweep that meets a removal already under way (a killed harness's last request, a second
/// sweeper) waits for it instead of failing with the engine's 409 "already in progress".
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_removals_all_succeed() {
    let sandbox = sandbox().await;
    for round in 0..3 {
        let test = format!("race-{round}");
        let c = start(&sandbox, &test, Limits::default()).await;
        let id = run_id(&test);
        let (removed, swept_a, swept_b) = tokio::join!(
            c.remove(),
            sandbox.sweep(Some(&id)),
            sandbox.sweep(Some(&id))
        );
        removed.expect("remove");
        swept_a.expect("first sweep");
        swept_b.expect("second sweep");
        assert!(sandbox.list(Some(&id)).await.unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_runtime_falls_back_to_the_default() {
    let config = SandboxConfig {
        runtime: Some("no-such-runtime".to_owned()),
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::connect(config).await.unwrap();
    assert_eq!(sandbox.runtime(), None);
    let c = start(&sandbox, "runtime", Limits::default()).await;
    assert!(sh(&c, "true").await.success());
    c.remove().await.unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // Fixed identity and dates: the same commits (and so the same image names) every run.
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A repository with three commits, tags on the first and the third, a later branch and a remote.
fn three_commit_repo(dir: &Path) -> [String; 3] {
    git(dir, &["init", "-q", "-b", "main"]);
    let mut commits = Vec::new();
    for n in 1..=3 {
        std::fs::write(dir.join("file.txt"), format!("version {n}\n")).unwrap();
        git(dir, &["add", "file.txt"]);
        git(dir, &["commit", "-q", "-m", &format!("commit {n}")]);
        commits.push(git(dir, &["rev-parse", "HEAD"]));
    }
    git(dir, &["tag", "v1", &commits[0]]);
    git(dir, &["tag", "-a", "v3", "-m", "future", &commits[2]]);
    git(dir, &["branch", "feature", &commits[2]]);
    git(
        dir,
        &[
            "remote",
            "add",
            "origin",
            "https://example.invalid/repo.git",
        ],
    );
    commits.try_into().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn instance_layer_has_no_future_commits() {
    let sandbox = sandbox().await;
    let base = base().await;

    let env = EnvSpec {
        repo: "swerve/test-repo".into(),
        version: "1.0".into(),
        base_image: base.name.clone(),
        install: vec!["pip install pytest==8.3.3".into()],
    };
    let started = Instant::now();
    let env_image = sandbox.ensure_env_image(&env).await.unwrap();
    eprintln!(
        "env image {} ({:?}): {:.1}s, {} bytes",
        env_image.name,
        env_image.origin,
        started.elapsed().as_secs_f64(),
        env_image.size_bytes
    );

    let repo = tempfile::tempdir().unwrap();
    let [c1, c2, c3] = three_commit_repo(repo.path());
    let bundle = repo.path().join("repo.bundle");
    git(
        repo.path(),
        &["bundle", "create", bundle.to_str().unwrap(), "--all"],
    );

    for (id, source) in [
        ("swerve__test-1", RepoSource::Path(repo.path().to_owned())),
        ("swerve__test-1-bundle", RepoSource::Bundle(bundle.clone())),
    ] {
        let spec = InstanceSpec {
            instance_id: id.into(),
            env_image: env_image.name.clone(),
            source,
            base_commit: c2.clone(),
            install: vec!["python -c 'import pytest'".into()],
        };
        // Exercise the build every run: drop the image a previous run left.
        let _ = sandbox.remove_image(&spec.image_name()).await;
        let started = Instant::now();
        let image = sandbox.ensure_instance_image(&spec).await.unwrap();
        eprintln!(
            "instance image {} ({:?}): {:.1}s, {} bytes",
            image.name,
            image.origin,
            started.elapsed().as_secs_f64(),
            image.size_bytes
        );
        assert_eq!(image.origin, ImageOrigin::Built);
        let again = sandbox.ensure_instance_image(&spec).await.unwrap();
        assert_eq!((again.origin, &again.id), (ImageOrigin::Local, &image.id));

        let c = sandbox
            .start(&ContainerSpec::new(&image.name, run_id("instance"), id))
            .await
            .unwrap();
        let out = sh(&c, "git rev-list --all").await;
        assert_eq!(
            out.text().split_whitespace().collect::<Vec<_>>(),
            [c2.as_str(), c1.as_str()]
        );
        let out = sh(&c, &format!("git cat-file -t {c3}")).await;
        assert_ne!(out.exit_code, Some(0), "commit 3 is stored: {}", out.text());
        let out = sh(
            &c,
            "git remote; git tag; git branch --format='%(refname:short)'; git reflog | wc -l",
        )
        .await;
        assert_eq!(
            out.text(),
            "v1\nmain\n0\n",
            "remotes, tags, branches, reflog"
        );
        let out = sh(
            &c,
            "pwd; cat file.txt; git status --porcelain; pytest --version",
        )
        .await;
        assert!(out.success(), "{}", out.text());
        assert!(
            out.text().starts_with("/testbed\nversion 2\n"),
            "{}",
            out.text()
        );
        assert!(out.text().contains("pytest 8.3.3"), "{}", out.text());
        c.remove().await.unwrap();
        sandbox.remove_image(&image.name).await.unwrap();
    }
}

/// A prebuilt image whose repository still holds the fix (a later branch, an annotated tag, a
/// remote, ORIG_HEAD, the reflog) is found to leak, and its scrubbed image is clean, with the
/// working tree, the old tag and the base commit as they were.
#[tokio::test(flavor = "multi_thread")]
async fn a_prebuilt_images_later_history_is_found_and_scrubbed() {
    let sandbox = sandbox().await;
    let folder = tempfile::tempdir().unwrap();
    let repo = folder.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let [c1, c2, c3] = three_commit_repo(&repo);
    // At the base as a prebuilt image is: main reset to commit 2 (which leaves ORIG_HEAD and a
    // reflog), a file of the environment's setup beside the tracked ones.
    git(&repo, &["reset", "-q", "--hard", &c2]);
    std::fs::write(repo.join("setup.log"), "installed\n").unwrap();
    std::fs::write(
        folder.path().join("Dockerfile"),
        format!("FROM {}\nCOPY repo /app\n", base().await.name),
    )
    .unwrap();
    let image = format!("swerve-test-prebuilt:{}", &c2[..12]);
    let _ = sandbox.remove_image(&image).await;
    sandbox
        .ensure_dockerfile_image(&image, folder.path())
        .await
        .unwrap();

    let leaks = sandbox.history_leaks(&image, "/app", &c2).await.unwrap();
    assert_eq!(leaks.base, c2);
    assert_eq!(leaks.future_commits, 1, "{leaks:?}");
    assert_eq!(leaks.remotes, ["origin"]);
    assert_eq!(leaks.refs, ["refs/heads/feature", "refs/tags/v3"]);
    assert_eq!(leaks.heads, ["ORIG_HEAD"]);
    assert!(leaks.reflog_entries > 0 && !leaks.is_clean(), "{leaks:?}");

    let scrubbed = format!("{image}-scrubbed");
    let _ = sandbox.remove_image(&scrubbed).await;
    let (_, after) = sandbox
        .scrubbed_image(&image, "/app", &c2, &scrubbed)
        .await
        .unwrap();
    assert!(after.is_clean(), "{after:?}");
    let c = sandbox
        .start(&ContainerSpec::new(
            &scrubbed,
            run_id("scrubbed"),
            "prebuilt",
        ))
        .await
        .unwrap();
    let out = sh(
        &c,
        &format!(
            "cd /app && git rev-list --all && git tag && cat file.txt setup.log && \
             git cat-file -t {c3} 2>/dev/null || echo gone"
        ),
    )
    .await;
    assert_eq!(
        out.text(),
        format!("{c2}\n{c1}\nv1\nversion 2\ninstalled\ngone\n"),
        "history, tags, working tree"
    );

    // A missing folder or commit is an error naming it, not a clean report.
    for (dir, commit, says) in [
        ("/nowhere", c2.as_str(), "no folder /nowhere"),
        ("/app", c3.as_str(), "has no commit"),
    ] {
        let error = sandbox
            .history_leaks(&scrubbed, dir, commit)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_base_commit_is_an_error() {
    let sandbox = sandbox().await;
    let repo = tempfile::tempdir().unwrap();
    three_commit_repo(repo.path());
    let spec = InstanceSpec {
        instance_id: "swerve__missing".into(),
        env_image: base().await.name.clone(),
        source: RepoSource::Path(repo.path().to_owned()),
        base_commit: "0123456789abcdef0123456789abcdef01234567".into(),
        install: vec![],
    };
    let err = sandbox.ensure_instance_image(&spec).await.unwrap_err();
    assert!(matches!(err, Error::HostCommand { .. }), "{err:?}");
}

/// A `docker-registry` (the CNCF distribution registry, Debian package `docker-registry`) on a
/// free loopback port; killed on drop. The engine treats 127.0.0.0/8 registries as insecure, so
/// plain HTTP works without engine configuration.
struct Registry {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_registry() -> Registry {
    if Command::new("docker-registry")
        .arg("--version")
        .output()
        .is_err()
    {
        let installed = Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "docker-registry",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            let _ = Command::new("apt-get").args(["update", "-q"]).status();
            let ok = Command::new("apt-get")
                .args([
                    "install",
                    "-y",
                    "-q",
                    "--no-install-recommends",
                    "docker-registry",
                ])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "cannot install the docker-registry package");
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docker-registry starts");
    let registry = Registry {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the registry did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    registry
}

#[tokio::test(flavor = "multi_thread")]
async fn ensure_image_pulls_from_a_registry() {
    let sandbox = sandbox().await;
    let registry = start_registry();
    let name = format!(
        "127.0.0.1:{}/swerve-test/tiny:{}",
        registry.port,
        std::process::id()
    );

    // A one-file image, imported from a rootfs tar made here.
    let dir = tempfile::tempdir().unwrap();
    let tar_path = dir.path().join("rootfs.tar");
    let mut builder = tar::Builder::new(std::fs::File::create(&tar_path).unwrap());
    let mut header = tar::Header::new_gnu();
    header.set_size(6);
    header.set_mode(0o644);
    header.set_cksum();
    builder
        .append_data(&mut header, "hello.txt", &b"hello\n"[..])
        .unwrap();
    builder.into_inner().unwrap();
    let imported = sandbox.import_rootfs(&tar_path, &name, &[]).await.unwrap();
    assert_eq!(imported.origin, ImageOrigin::Built);

    sandbox.push_image(&name).await.unwrap();
    sandbox.remove_image(&name).await.unwrap();
    assert!(sandbox.image_info(&name).await.unwrap().is_none());

    let pulled = sandbox.ensure_image(&name).await.unwrap();
    assert_eq!(pulled.origin, ImageOrigin::Pulled);
    assert_eq!(pulled.id, imported.id);
    let local = sandbox.ensure_image(&name).await.unwrap();
    assert_eq!(local.origin, ImageOrigin::Local);

    let missing = format!("127.0.0.1:{}/swerve-test/absent:1", registry.port);
    let err = sandbox.ensure_image(&missing).await.unwrap_err();
    assert!(matches!(err, Error::ImageNotFound { .. }), "{err:?}");
    sandbox.remove_image(&name).await.unwrap();
}
