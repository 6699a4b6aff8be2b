//! How long a container's file-system changes take to list, read from its upper layer on this
//! host ([`Container::changes`]) and from the engine's diff ([`Container::engine_changes`]),
//! side by side on the same containers, and whether the two lists agree:
//!
//! ```sh
//! cargo run --release -p swerve-sandbox --example changes_latency -- IMAGE [ROUNDS] [SETUP]
//! ```
//!
//! Each round starts a container of IMAGE, runs SETUP in it (default: the hardened eval
//! script's kind of setup, an editable reinstall of `/testbed` when the image has one), and
//! times both listings. `benches/curate/validate.sh` runs it on a validated instance image.

use std::time::{Duration, Instant};

use swerve_sandbox::{Container, ContainerSpec, ExecRequest, Sandbox, SandboxConfig};

const DEFAULT_SETUP: &str = "cd /testbed 2>/dev/null && \
    (python -m pip install --no-build-isolation --no-deps --no-index -e . >/dev/null 2>&1 || true); \
    echo hi > /tmp/x; true";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(image) = args.next() else {
        eprintln!("usage: changes_latency IMAGE [ROUNDS] [SETUP]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    let setup = args.next().unwrap_or_else(|| DEFAULT_SETUP.to_owned());
    let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
    let (mut upper, mut engine) = (Vec::new(), Vec::new());
    let mut listed = 0;
    for round in 0..rounds {
        let spec = ContainerSpec::new(&image, "bench-changes", format!("round-{round}"));
        let container: Container = sandbox.start(&spec).await?;
        let out = container.exec(&ExecRequest::shell(&setup)).await?;
        assert!(out.success(), "setup failed: {}", out.text());
        let started = Instant::now();
        let mut ours = container.changes().await?;
        upper.push(started.elapsed());
        let started = Instant::now();
        let mut theirs = container.engine_changes().await?;
        engine.push(started.elapsed());
        ours.sort();
        theirs.sort();
        assert_eq!(ours, theirs, "the two listings differ");
        listed = ours.len();
        container.remove().await?;
    }
    println!(
        "{image}: {listed} changed paths, {rounds} rounds; upper layer median {:.1} ms (max {:.1} ms), \
         engine diff median {:.1} ms (max {:.1} ms); lists equal",
        median(upper.clone()).as_secs_f64() * 1e3,
        upper.iter().max().unwrap().as_secs_f64() * 1e3,
        median(engine.clone()).as_secs_f64() * 1e3,
        engine.iter().max().unwrap().as_secs_f64() * 1e3,
    );
    Ok(())
}
