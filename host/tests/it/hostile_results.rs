//! Results as large as a plugin's memory budget allows are capped by the host before anyone
//! sees them. A file of its own: the lifted 40 MiB message would disturb the memory checks of
//! the other hostile tests if they shared a process.

use crate::support::{hostile, sample};
use swerve_host::{FailureClass, Host, HostConfig, Isolation, limits};

#[test]
fn huge_results_are_capped_and_marked() {
    let host = Host::new(HostConfig::default()).unwrap();
    let plugin = hostile(&host);
    let out = plugin.score(
        &[sample("huge-error", Some("huge-error"))],
        Isolation::Strict,
    );
    let f = out[0].clone().expect_err("an error");
    assert_eq!(f.class, FailureClass::PluginError);
    assert!(f.truncated);
    assert!(
        f.message.len() < limits::MAX_MESSAGE_BYTES + 64,
        "{}",
        f.message.len()
    );
    assert!(f.message.ends_with("more bytes cut by the host]"));
    assert!(f.message.contains(&format!(
        "{} more bytes",
        (40 << 20) - limits::MAX_MESSAGE_BYTES
    )));

    let out = plugin.score(
        &[sample("huge-score", Some("huge-score"))],
        Isolation::Strict,
    );
    let score = out[0].as_ref().unwrap();
    assert!(score.truncated);
    assert_eq!(score.reward, Some(0.25));
    assert_eq!(score.metrics.len(), limits::MAX_METRICS);
    assert!(
        score
            .metrics
            .keys()
            .all(|name| name.len() < limits::MAX_METRIC_NAME_BYTES + 64)
    );
    let message = score.message.as_deref().unwrap();
    assert!(message.len() < limits::MAX_MESSAGE_BYTES + 64);

    // A well-behaved result is passed on whole and not marked.
    let ok = plugin.score(&[sample("fine", None)], Isolation::Strict);
    assert!(!ok[0].as_ref().unwrap().truncated);
}
