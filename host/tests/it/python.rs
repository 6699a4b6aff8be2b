//! The Python example plugin (componentize-py) runs in the host like any other.

use std::collections::BTreeMap;

use swerve_host::{BudgetOverrides, FailureClass, Host, HostConfig, Isolation, Sample};

fn sample(id: &str, completion: &str, changed: &[&str]) -> Sample {
    let mut s = Sample {
        id: id.into(),
        completion: completion.into(),
        ..Sample::default()
    };
    for path in ["a.py", "b.py"] {
        s.code_context.insert(path.into(), "old\n".into());
        let new = if changed.contains(&path) {
            "new\n"
        } else {
            "old\n"
        };
        s.oracle_new_content.insert(path.into(), new.into());
    }
    s
}

#[test]
fn python_plugin_scores_with_none_semantics() {
    let path = swerve_host::bundled::require("python-keywords").unwrap();
    assert!(
        path.is_file(),
        "{} was not built: install componentize-py (pip install componentize-py==0.25.1) and rebuild",
        path.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new(HostConfig {
        cache_dir: Some(dir.path().to_owned()),
        ..HostConfig::default()
    })
    .unwrap();
    let plugin = host
        .load_reward(&path, &BudgetOverrides::default())
        .unwrap();
    assert_eq!(plugin.info().name, "python-keywords");
    // Built with --stub-wasi: the component imports nothing but the world's own types.
    assert!(
        plugin
            .report()
            .imports
            .iter()
            .all(|i| i.starts_with("swerve:plugin/")),
        "{:?}",
        plugin.report().imports
    );

    let mut failing = sample("fail", "", &["a.py"]);
    failing.metadata = BTreeMap::from([("fail".to_owned(), "1".to_owned())]);
    let samples = [
        sample("both", "I edit a.py and b.py", &["a.py", "b.py"]),
        sample("half", "only a.py", &["a.py", "b.py"]),
        sample("none", "nothing to do", &[]),
        failing,
    ];
    for isolation in [Isolation::Batch, Isolation::Strict] {
        let out = plugin.score(&samples, isolation);
        assert_eq!(out[0].as_ref().unwrap().reward, Some(1.0));
        assert_eq!(out[1].as_ref().unwrap().reward, Some(0.5));
        assert_eq!(out[1].as_ref().unwrap().metrics["files_named"], 1.0);
        assert_eq!(out[2].as_ref().unwrap().reward, None);
        let f = out[3].as_ref().unwrap_err();
        assert_eq!(f.class, FailureClass::PluginError);
        assert_eq!(f.message, "sample fail asked to fail");
    }
}
