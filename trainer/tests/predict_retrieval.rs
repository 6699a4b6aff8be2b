//! `trainer predict --retriever` on rows without `code_context`: swerve-mini's rows with their
//! context removed, the repositories as bare mirrors (cloned from the dataset's bundles, the
//! layout `curate` reads), BM25 and oracle retrieval within a token budget, a per-row report
//! with recall@k, bad rows predicted with an empty patch; then `harness run` evaluates the
//! predictions in Docker. The model retriever (localise, then repair) runs end to end on the
//! fixture model, and through the library with a scripted localiser.

use std::path::{Path, PathBuf};
use std::process::Command;

use swerve_trainer::data::{PromptStyle, Prompter};
use swerve_trainer::predict::retrieval::{ContextSettings, Localize, Retriever, fill_context};
use swerve_trainer::prompt::PromptFormat;
use swerve_trainer::tokenizer::Tokenizer;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Bare mirrors `<dir>/swerve/<name>.git` of swerve-mini's repositories.
fn mirrors(dir: &Path) -> PathBuf {
    let repos = dir.join("repos");
    for name in ["inicfg", "spans", "textkit"] {
        let bundle = root().join(format!("harness/datasets/swerve-mini/repos/{name}.bundle"));
        let status = Command::new("git")
            .args(["clone", "-q", "--mirror"])
            .arg(&bundle)
            .arg(repos.join(format!("swerve/{name}.git")))
            .status()
            .expect("git runs");
        assert!(status.success(), "cannot mirror {}", bundle.display());
    }
    repos
}

/// swerve-mini's rows without `code_context`, plus a row whose repository has no mirror.
fn rows(dir: &Path) -> PathBuf {
    let text =
        std::fs::read_to_string(root().join("harness/datasets/swerve-mini/swerve-mini.jsonl"))
            .unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut row: serde_json::Value = serde_json::from_str(line).unwrap();
        row.as_object_mut().unwrap().remove("code_context");
        out.push_str(&row.to_string());
        out.push('\n');
    }
    let path = dir.join("rows.jsonl");
    std::fs::write(&path, out).unwrap();
    path
}

fn predict(dir: &Path, retriever: &str, extra: &[&str]) -> (String, Vec<serde_json::Value>) {
    predict_to(dir, &long_context_model(dir), retriever, retriever, extra)
}

/// The fixture model as it is (128 positions).
fn fixture_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2")
}

/// The fixture model with a context of 4096 positions instead of its 128 (its rotary positions
/// go on past them): retrieval's prompts here are longer than 128 tokens, and generation refuses
/// a prompt past the model's context. Copied into `dir` once.
fn long_context_model(dir: &Path) -> PathBuf {
    let model = dir.join("tiny-qwen2-4k");
    if !model.exists() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
        std::fs::create_dir(&model).unwrap();
        for file in [
            "model.safetensors",
            "tokenizer.json",
            "generation_config.json",
        ] {
            std::fs::copy(fixture.join(file), model.join(file)).unwrap();
        }
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture.join("config.json")).unwrap())
                .unwrap();
        config["max_position_embeddings"] = 4096.into();
        std::fs::write(model.join("config.json"), config.to_string()).unwrap();
    }
    model
}

/// `trainer predict --retriever <retriever>` into `<name>.jsonl`; its stderr and the rows of
/// `<name>.retrieval.jsonl`.
fn predict_to(
    dir: &Path,
    model: &Path,
    retriever: &str,
    name: &str,
    extra: &[&str],
) -> (String, Vec<serde_json::Value>) {
    let output = dir.join(format!("{name}.jsonl"));
    let out = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .current_dir(dir)
        .arg("predict")
        .arg("--model")
        .arg(model)
        .args(["--dataset", "rows.jsonl", "--output"])
        .arg(&output)
        .args(["--retriever", retriever, "--repos", "repos"])
        .args([
            "--prompt-format",
            "bare",
            "--max-new-tokens",
            "4",
            "--batch",
            "4",
        ])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let report = std::fs::read_to_string(dir.join(format!("{name}.retrieval.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (stderr, report)
}

#[test]
fn bm25_and_oracle_contexts_from_mirrors_then_harness_run() {
    let dir = tempfile::tempdir().unwrap();
    mirrors(dir.path());
    rows(dir.path());

    // Oracle: exactly the gold files, recall 1.
    // The fixture model's own context (128 positions) holds no file; these budgets are explicit.
    let wide = ["--max-prompt-tokens", "4096"];
    let (_, oracle) = predict(dir.path(), "oracle", &wide);
    assert_eq!(oracle.len(), 13);
    for row in &oracle {
        assert!(row.get("error").is_none(), "{row}");
        assert_eq!(row["shown"], row["gold_files"], "{row}");
        assert_eq!(row["recall_at_5"], 1.0, "{row}");
    }

    // BM25: every row gets files; recall is measured per row and reported.
    let (stderr, bm25) = predict(dir.path(), "bm25", &wide);
    assert!(
        stderr.contains("retrieval bm25: 13 rows, recall@1 "),
        "{stderr}"
    );
    let recall5: f64 = bm25
        .iter()
        .map(|r| r["recall_at_5"].as_f64().unwrap())
        .sum::<f64>()
        / 13.0;
    assert!(recall5 >= 0.5, "BM25 recall@5 {recall5}: {bm25:?}");
    for row in &bm25 {
        assert!(!row["shown"].as_array().unwrap().is_empty(), "{row}");
        assert!(row["prompt_tokens"].as_u64().unwrap() > 0);
    }

    // A small budget leaves files out and says how many; a budget below the bare prompt gives
    // empty predictions, not a failed run.
    let (_, tight) = predict(dir.path(), "bm25", &["--max-prompt-tokens", "600"]);
    assert!(tight.iter().any(|r| r["left_out"].as_u64().unwrap() > 0));
    assert!(
        tight
            .iter()
            .all(|r| r["prompt_tokens"].as_u64().unwrap() <= 600 || r.get("error").is_some())
    );
    // The default budget is the model's context less --max-new-tokens: 124 for the fixture.
    let (stderr, none) = predict_to(dir.path(), &fixture_model(), "bm25", "bm25", &[]);
    assert!(stderr.contains("(budget 124)"), "{stderr}");
    assert!(none.iter().all(|r| r.get("error").is_some()));
    assert!(stderr.contains("13 rows without a context"), "{stderr}");
    let predictions = std::fs::read_to_string(dir.path().join("bm25.jsonl")).unwrap();
    assert_eq!(predictions.lines().count(), 13);
    assert!(
        predictions
            .lines()
            .all(|l| l.contains("\"model_patch\":\"\""))
    );

    // A row whose repository has no mirror: a message and an empty patch.
    std::fs::remove_dir_all(dir.path().join("repos/swerve/spans.git")).unwrap();
    let (stderr, partial) = predict(dir.path(), "bm25", &wide);
    let missing: Vec<_> = partial
        .iter()
        .filter(|r| r.get("error").is_some())
        .collect();
    assert_eq!(missing.len(), 5, "{stderr}");
    assert!(stderr.contains("no mirror at"), "{stderr}");

    // The predictions evaluate in Docker (the tiny model's patches are empty or do not apply).
    let source =
        swerve_harness::execution::DatasetSource::resolve("swerve-mini", "test", None).unwrap();
    let predictions =
        swerve_swebench::predictions::read_predictions(&dir.path().join("bm25.jsonl")).unwrap();
    assert_eq!(predictions.len(), 13);
    let host = swerve_host::Host::new(swerve_host::HostConfig::default()).unwrap();
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers").unwrap(),
            &Default::default(),
        )
        .unwrap();
    let config = swerve_harness::run::RunConfig {
        run_id: format!("predict-{}", std::process::id()),
        instance_ids: Vec::new(),
        predictions,
        max_workers: 2,
        timeout: std::time::Duration::from_secs(300),
        log_root: dir.path().join("logs"),
        report_dir: dir.path().to_owned(),
        mode: swerve_harness::execution::Mode::Hardened,
        resume: swerve_harness::run::Resume::Content,
        limits: Default::default(),
        verdict: None,
        source,
    };
    struct Quiet;
    impl swerve_harness::run::RunProgress for Quiet {
        fn message(&self, _: &str) {}
        fn start(&self, _: usize, _: usize) {}
        fn done(&self, _: &swerve_harness::run::InstanceResult) {}
    }
    let summary = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(swerve_harness::run::run(&config, "test", evaluator, &Quiet))
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary.report_file).unwrap()).unwrap();
    assert_eq!(report["submitted_instances"], 13, "{report}");
    assert_eq!(
        report["error_instances"].as_u64().unwrap()
            + report["completed_instances"].as_u64().unwrap()
            + report["empty_patch_instances"].as_u64().unwrap(),
        13,
        "{report}"
    );
}

/// The files of swerve-mini's repository `name` at `commit` (`git ls-tree` of the mirror).
fn tree(repos: &Path, name: &str, commit: &str) -> Vec<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repos.join(format!("swerve/{name}.git")))
        .args(["ls-tree", "-r", "--name-only", commit])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn model_retriever_localises_then_repairs_on_the_fixture_model() {
    let dir = tempfile::tempdir().unwrap();
    let repos = mirrors(dir.path());
    rows(dir.path());
    let rows_by_id: std::collections::BTreeMap<String, serde_json::Value> =
        std::fs::read_to_string(dir.path().join("rows.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let row: serde_json::Value = serde_json::from_str(l).unwrap();
                (row["instance_id"].as_str().unwrap().to_owned(), row)
            })
            .collect();

    let wide = [
        "--max-prompt-tokens",
        "4096",
        "--localize-max-new-tokens",
        "8",
    ];
    let (stderr, model) = predict(dir.path(), "model", &wide);
    assert_eq!(model.len(), 13, "{stderr}");
    for row in &model {
        let id = row["instance_id"].as_str().unwrap();
        assert_eq!(row["retriever"], "model", "{row}");
        assert!(row.get("error").is_none(), "{row}");
        let localization = &row["localization"];
        let name = id.trim_start_matches("swerve__").split('-').next().unwrap();
        let files = tree(
            &repos,
            name,
            rows_by_id[id]["base_commit"].as_str().unwrap(),
        );
        // The whole tree is listed (every file of these repositories is text).
        assert_eq!(localization["paths_listed"], files.len(), "{row}");
        assert_eq!(localization["paths_left_out"], 0, "{row}");
        assert!(localization["prompt_tokens"].as_u64().unwrap() > 0, "{row}");
        assert!(localization["answer"].is_string(), "{row}");
        // The fixture model's 64 words name no path: BM25's ranking, said so; recall is the
        // model's own (nothing named, nothing found).
        assert_eq!(localization["named"], serde_json::json!([]), "{row}");
        assert!(
            row["fallback"].as_str().unwrap().contains("named no file"),
            "{row}"
        );
        assert_eq!(row["recall_at_1"], 0.0, "{row}");
        assert_eq!(row["recall_at_5"], 0.0, "{row}");
        let shown = row["shown"].as_array().unwrap();
        assert!(!shown.is_empty(), "{row}");
        assert!(
            shown
                .iter()
                .all(|p| files.contains(&p.as_str().unwrap().to_owned())),
            "{row}"
        );
    }
    assert!(
        stderr.contains("retrieval model: 13 rows, recall@1 0.000, recall@5 0.000"),
        "{stderr}"
    );
    assert!(stderr.contains("13 rows fell back to BM25"), "{stderr}");
    let predictions: Vec<serde_json::Value> =
        std::fs::read_to_string(dir.path().join("model.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let dataset_order: Vec<String> = std::fs::read_to_string(dir.path().join("rows.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["instance_id"].to_string())
        .collect();
    let ids: Vec<String> = predictions
        .iter()
        .map(|p| p["instance_id"].to_string())
        .collect();
    assert_eq!(ids, dataset_order);
    assert!(predictions.iter().all(|p| p["model_patch"].is_string()));

    // A localisation budget that holds part of the tree lists the first paths and counts the
    // rest; below the prompt without paths, the model is not asked.
    let (stderr, tight) = predict_to(
        dir.path(),
        &long_context_model(dir.path()),
        "model",
        "model-tight",
        &[
            "--max-prompt-tokens",
            "110",
            "--localize-max-new-tokens",
            "4",
        ],
    );
    assert_eq!(tight.len(), 13, "{stderr}");
    assert!(
        tight
            .iter()
            .any(|r| r["localization"]["paths_left_out"].as_u64().unwrap() > 0),
        "{tight:?}"
    );
    for row in &tight {
        let localization = &row["localization"];
        assert!(
            localization["prompt_tokens"].as_u64().unwrap() <= 110,
            "{row}"
        );
    }
    let (stderr, none) = predict_to(
        dir.path(),
        &long_context_model(dir.path()),
        "model",
        "model-none",
        &["--max-prompt-tokens", "10"],
    );
    assert!(stderr.contains("13 rows fell back to BM25"), "{stderr}");
    for row in &none {
        assert_eq!(row["localization"]["prompt_tokens"], 0, "{row}");
        assert!(
            row["fallback"].as_str().unwrap().contains("does not fit"),
            "{row}"
        );
        assert!(row["error"].is_string(), "{row}");
    }
    let predictions = std::fs::read_to_string(dir.path().join("model-none.jsonl")).unwrap();
    assert_eq!(predictions.lines().count(), 13);
}

/// Answers every localisation prompt with the same text, and keeps the prompts it saw.
struct Scripted {
    answer: &'static str,
    prompts: Vec<Vec<u32>>,
}

impl Localize for Scripted {
    fn answer(&mut self, prompt: &[u32]) -> swerve_trainer::error::Result<String> {
        self.prompts.push(prompt.to_vec());
        Ok(self.answer.to_owned())
    }
}

#[test]
fn the_files_the_model_names_are_its_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let repos = mirrors(dir.path());
    let tokenizer = Tokenizer::from_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2/tokenizer.json"),
    )
    .unwrap();
    let prompter = Prompter::from(PromptStyle {
        format: PromptFormat::Plain,
        focus: None,
    });
    let settings = ContextSettings {
        retriever: Retriever::Model,
        repos: &repos,
        prompter: &prompter,
        tokenizer: &tokenizer,
        max_prompt_tokens: 4096,
    };
    let mut task = swerve_trainer::data::read_tasks(
        &root().join("harness/datasets/swerve-mini/swerve-mini.jsonl"),
        "test",
    )
    .unwrap()
    .remove(0);
    assert_eq!(task.instance_id, "swerve__inicfg-3");
    // Gold: inicfg/parser.py. The model names errors.py first (with `./`), a file that does not
    // exist, parser.py (a list item in backticks), and errors.py again.
    let mut scripted = Scripted {
        answer: "./inicfg/errors.py\ninicfg/missing.py\n- `inicfg/parser.py`\ninicfg/errors.py\n",
        prompts: Vec::new(),
    };
    let report = fill_context(&mut task, &settings, Some(&mut scripted)).unwrap();
    assert_eq!(scripted.prompts.len(), 1);
    assert!(report.fallback.is_none(), "{report:?}");
    assert!(report.error.is_none(), "{report:?}");
    let localization = report.localization.as_ref().unwrap();
    assert_eq!(localization.named, ["inicfg/errors.py", "inicfg/parser.py"]);
    assert_eq!(report.shown, localization.named);
    assert_eq!(
        task.code_context.keys().collect::<Vec<_>>(),
        ["inicfg/errors.py", "inicfg/parser.py"]
    );
    assert_eq!(report.gold_files, ["inicfg/parser.py"]);
    assert_eq!(report.recall_at_1, Some(0.0), "the model's order counts");
    assert_eq!(report.recall_at_5, Some(1.0));

    // Without a localiser the model retriever cannot run: an error, not a silent fallback.
    assert!(fill_context(&mut task, &settings, None).is_err());
}
