//! The HTML page of a run: `harness report --html`, and written by `harness run` unless
//! `--no-html`, beside the run report as `<model>.<run_id>.html`.
//!
//! One self-contained file (inline CSS, no scripts, no external assets, nothing fetched): the
//! summary counts as SWE-bench prints them, a table of instances (resolved; unresolved with the
//! FAIL_TO_PASS / PASS_TO_PASS tests that failed; errors with their class), the hardening
//! findings (test files a patch touched that were undone, the exit code of the tests, changes
//! outside the repository at install time, tamper signals), and per
//! instance, under the anchor `#<instance id>`, its patch and test log. Everything the page
//! shows comes from the run report and the files of each instance folder (`report.json`,
//! `swerve.json`, `test_output.txt`, `run_instance.log`); every piece of text from a dataset,
//! a model or a test run is HTML-escaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use swerve_swebench::predictions::Prediction;
use swerve_swebench::report::{InstanceReport, RunResults};

use crate::run::cache::{self, InstanceMeta, OutcomeKind};
use crate::run::{RunConfig, RunError, run_dir};

/// The most bytes of one log shown on the page; a longer log is cut at the front (the end of a
/// test log holds the results) with a note naming the file.
pub(crate) const LOG_LIMIT: usize = 256 * 1024;

/// How an instance ended, as the page shows it: the run report's list it is in (SWE-bench's
/// classes), and for an error the outcome `swerve.json` recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Resolved.
    Resolved,
    /// Graded, not resolved.
    Unresolved,
    /// No usable `report.json`: the recorded outcome that says why (`patch_apply_failed`,
    /// `timed_out`, `evaluator_failed`, `infra_error`), `None` when nothing recorded one.
    Error(Option<OutcomeKind>),
    /// The patch was `""` or null: not run.
    EmptyPatch,
    /// No prediction for this instance.
    NoPrediction,
}

impl Status {
    /// The name in the page's `data-status` attributes and badges.
    pub(crate) fn name(&self) -> &str {
        match self {
            Status::Resolved => "resolved",
            Status::Unresolved => "unresolved",
            Status::Error(_) => "error",
            Status::EmptyPatch => "empty_patch",
            Status::NoPrediction => "no_prediction",
        }
    }
}

/// One instance on the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstanceEntry {
    /// The instance id.
    pub instance_id: String,
    /// How it ended.
    pub status: Status,
    /// The failure signature of its logs (the run report's `failure_reasons`).
    pub failure_reason: Option<String>,
    /// Its `report.json`, when readable.
    pub report: Option<InstanceReport>,
    /// Its `swerve.json`, when readable.
    pub meta: Option<InstanceMeta>,
    /// The prediction's patch.
    pub patch: Option<String>,
    /// `test_output.txt`.
    pub test_output: Option<String>,
    /// `run_instance.log`.
    pub run_log: Option<String>,
    /// The instance folder.
    pub dir: PathBuf,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunPage {
    /// The run id.
    pub run_id: String,
    /// The model's folder name (`model_name_or_path`, `/` as `__`).
    pub model: String,
    /// The dataset as given.
    pub dataset: String,
    /// The run report file.
    pub report_file: PathBuf,
    /// The summary's lines as `harness run` prints them, without `Report written to`.
    pub summary: Vec<(String, usize)>,
    /// The instances in dataset order.
    pub instances: Vec<InstanceEntry>,
}

/// The summary counts with the labels SWE-bench prints.
fn summary_counts(results: &RunResults) -> Vec<(String, usize)> {
    results
        .summary("")
        .lines()
        .filter_map(|line| {
            let (label, count) = line.rsplit_once(": ")?;
            Some((label.to_owned(), count.parse().ok()?))
        })
        .collect()
}

/// Reads what the page shows of each instance in `ids` from `model_dir/<id>/`.
pub(crate) fn collect(
    model_dir: &Path,
    ids: &[String],
    predictions: &[Prediction],
    results: &RunResults,
) -> Vec<InstanceEntry> {
    let r = &results.report;
    let has = |list: &[String], id: &str| list.iter().any(|x| x == id);
    let patches: BTreeMap<&str, Option<&str>> = predictions
        .iter()
        .map(|p| (p.instance_id.as_str(), p.model_patch.as_deref()))
        .collect();
    ids.iter()
        .map(|id| {
            let dir = model_dir.join(id);
            let read = |name: &str| fs_err::read_to_string(dir.join(name)).ok();
            let meta = cache::read_meta(&dir);
            let report = read("report.json").and_then(|text| {
                let mut map: BTreeMap<String, InstanceReport> = serde_json::from_str(&text).ok()?;
                map.remove(id)
            });
            let status = if has(&r.resolved_ids, id) {
                Status::Resolved
            } else if has(&r.unresolved_ids, id) {
                Status::Unresolved
            } else if has(&r.empty_patch_ids, id) {
                Status::EmptyPatch
            } else if has(&r.incomplete_ids, id) {
                Status::NoPrediction
            } else {
                Status::Error(
                    meta.as_ref()
                        .map(|m| m.outcome)
                        .filter(|o| !matches!(o, OutcomeKind::Resolved | OutcomeKind::Unresolved)),
                )
            };
            InstanceEntry {
                instance_id: id.clone(),
                status,
                failure_reason: r.failure_reasons.get(id).cloned(),
                report,
                meta,
                patch: patches
                    .get(id.as_str())
                    .copied()
                    .flatten()
                    .map(str::to_owned),
                test_output: read("test_output.txt"),
                run_log: read("run_instance.log"),
                dir,
            }
        })
        .collect()
}

/// The page's file: the run report's path with `.html` for `.json`.
pub(crate) fn page_path(report_file: &Path) -> PathBuf {
    report_file.with_extension("html")
}

/// Reads the run's files and writes its page beside `report_file`; returns the page's path.
pub fn write_run_page(
    config: &RunConfig,
    results: &RunResults,
    report_file: &Path,
) -> Result<PathBuf, RunError> {
    let model = config
        .predictions
        .first()
        .map_or_else(|| "None".to_owned(), Prediction::model_dir_name);
    let model_dir = run_dir(&config.log_root, &config.run_id).join(&model);
    let ids: Vec<String> = config
        .source
        .rows
        .iter()
        .map(|r| r.instance_id.clone())
        .collect();
    let page = RunPage {
        run_id: config.run_id.clone(),
        model,
        dataset: config.source.name.clone(),
        report_file: report_file.to_owned(),
        summary: summary_counts(results),
        instances: collect(&model_dir, &ids, &config.predictions, results),
    };
    let path = page_path(report_file);
    swerve_cache::write_atomic(&path, render(&page)).map_err(|source| RunError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, safe in element content and quoted
/// attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The anchor of an instance: its id with characters outside `[A-Za-z0-9._-]` as `_`.
pub(crate) fn anchor(instance_id: &str) -> String {
    instance_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub(crate) const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:72rem;
padding:0 1rem;color:#1b1f24;line-height:1.4}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
h3{font-size:1.05rem}code,pre{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.85rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d7de;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f6f8fa}td.count{text-align:right}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.5rem;overflow:auto;max-height:32rem;
white-space:pre-wrap;word-break:break-all}
.badge{display:inline-block;border-radius:.6rem;padding:0 .5rem;font-size:.8rem;color:#fff}
.resolved{background:#1a7f37}.unresolved{background:#cf222e}.error{background:#9a6700}
.empty_patch,.no_prediction{background:#6e7781}
.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}
section.instance{border-top:1px solid #d0d7de;margin-top:1.5rem}ul.tests{margin:.2rem 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{font-weight:600}dd{margin:0}
";

/// The page.
pub(crate) fn render(page: &RunPage) -> String {
    let mut h = String::new();
    let title = format!("swerve run {} · {}", page.run_id, page.model);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = writeln!(
        h,
        "<p>Dataset <code>{}</code> · run report <code>{}</code></p>",
        escape(&page.dataset),
        escape(&page.report_file.display().to_string())
    );
    render_summary(&mut h, page);
    render_table(&mut h, page);
    render_hardening(&mut h, page);
    h.push_str("<h2 id=\"details\">Instances in detail</h2>\n");
    for entry in &page.instances {
        render_instance(&mut h, entry);
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// A machine-readable key for a summary label: `Instances resolved` → `instances-resolved`.
fn label_key(label: &str) -> String {
    label
        .to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

fn render_summary(h: &mut String, page: &RunPage) {
    h.push_str("<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\">\n");
    for (label, count) in &page.summary {
        let _ = writeln!(
            h,
            "<tr data-key=\"{}\"><th>{}</th><td class=\"count\">{count}</td></tr>",
            label_key(label),
            escape(label)
        );
    }
    h.push_str("</table>\n");
}

fn badge(status: &Status) -> String {
    let text = match status {
        Status::Error(outcome) => format!(
            "error: {}",
            outcome.map_or("no_report", OutcomeKind::as_str)
        ),
        other => other.name().replace('_', " "),
    };
    format!(
        "<span class=\"badge {}\">{}</span>",
        status.name(),
        escape(&text)
    )
}

/// The failed tests of a graded instance: (category, test).
fn failing_tests(report: &InstanceReport) -> Vec<(&'static str, &str)> {
    let Some(status) = &report.tests_status else {
        return Vec::new();
    };
    let f2p = status
        .fail_to_pass
        .failure
        .iter()
        .map(|t| ("FAIL_TO_PASS", t));
    let p2p = status
        .pass_to_pass
        .failure
        .iter()
        .map(|t| ("PASS_TO_PASS", t));
    f2p.chain(p2p).map(|(k, t)| (k, t.as_str())).collect()
}

fn test_counts(report: &InstanceReport) -> String {
    let Some(s) = &report.tests_status else {
        return "no test results in the log".to_owned();
    };
    let count = |o: &swerve_swebench::report::TestOutcomes| {
        format!("{}/{}", o.success.len(), o.success.len() + o.failure.len())
    };
    format!(
        "FAIL_TO_PASS {} passed, PASS_TO_PASS {} passed",
        count(&s.fail_to_pass),
        count(&s.pass_to_pass)
    )
}

/// The most failing tests listed in the table of instances; the instance's own section lists
/// them all.
pub(crate) const TABLE_TESTS: usize = 8;

/// The failed tests of `report`, at most `limit` of them, then a link to the instance's
/// section for the rest.
fn render_failing(h: &mut String, report: &InstanceReport, limit: usize, instance_id: &str) {
    let failing = failing_tests(report);
    if failing.is_empty() {
        return;
    }
    h.push_str("<ul class=\"tests\">");
    for (category, test) in failing.iter().take(limit) {
        let _ = write!(
            h,
            "<li data-category=\"{category}\"><code>{category}</code> <code>{}</code></li>",
            escape(test)
        );
    }
    if failing.len() > limit {
        let _ = write!(
            h,
            "<li><a href=\"#{}\">{} more</a></li>",
            anchor(instance_id),
            failing.len() - limit
        );
    }
    h.push_str("</ul>");
}

fn render_table(h: &mut String, page: &RunPage) {
    h.push_str(
        "<h2 id=\"instances\">Instances</h2>\n<table id=\"instance-table\">\n<thead><tr>\
         <th>instance</th><th>status</th><th>details</th></tr></thead>\n<tbody>\n",
    );
    for e in &page.instances {
        let _ = write!(
            h,
            "<tr data-instance=\"{}\" data-status=\"{}\"><td><a href=\"#{}\">{}</a></td><td>{}</td><td>",
            escape(&e.instance_id),
            e.status.name(),
            anchor(&e.instance_id),
            escape(&e.instance_id),
            badge(&e.status)
        );
        if let Some(report) = &e.report {
            h.push_str(&escape(&test_counts(report)));
            render_failing(h, report, TABLE_TESTS, &e.instance_id);
        }
        if let Some(reason) = &e.failure_reason {
            let _ = write!(h, " <em>likely cause: {}</em>", escape(reason));
        }
        h.push_str("</td></tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// File names as escaped `<code>` elements joined by `separator`.
fn code_list(files: &[String], separator: &str) -> String {
    files
        .iter()
        .map(|f| format!("<code>{}</code>", escape(f)))
        .collect::<Vec<_>>()
        .join(separator)
}

fn render_hardening(h: &mut String, page: &RunPage) {
    h.push_str("<h2 id=\"hardening\">Hardening</h2>\n");
    let undone: Vec<(&InstanceEntry, &cache::InstanceMeta)> = page
        .instances
        .iter()
        .filter_map(|e| e.meta.as_ref().map(|m| (e, m)))
        .filter(|(_, m)| m.undone.as_ref().is_some_and(|u| !u.is_empty()))
        .collect();
    let modes: std::collections::BTreeSet<&str> = page
        .instances
        .iter()
        .filter_map(|e| e.meta.as_ref().map(|m| m.mode.as_str()))
        .collect();
    let _ = writeln!(
        h,
        "<p>Mode: {}. Instances whose patch touched test infrastructure (undone before the \
         tests ran): <span id=\"hardening-count\">{}</span>.</p>",
        escape(&modes.into_iter().collect::<Vec<_>>().join(", ")),
        undone.len()
    );
    if undone.is_empty() {
        return;
    }
    h.push_str(
        "<table id=\"hardening-table\"><thead><tr><th>instance</th><th>restored from the base \
         commit</th><th>removed</th></tr></thead><tbody>\n",
    );
    for (e, m) in undone {
        let u = m.undone.as_ref().expect("filtered on undone");
        let list = |files: &[String]| code_list(files, "<br>");
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            anchor(&e.instance_id),
            escape(&e.instance_id),
            list(&u.restored),
            list(&u.removed)
        );
    }
    h.push_str("</tbody></table>\n");
}

/// A log cut to its last [`LOG_LIMIT`] bytes, with a note when it was cut.
fn shown_log(text: &str, file: &Path) -> (String, Option<String>) {
    if text.len() <= LOG_LIMIT {
        return (text.to_owned(), None);
    }
    let mut start = text.len() - LOG_LIMIT;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let note = format!(
        "The first {start} of {} bytes are not shown; the whole log is {}.",
        text.len(),
        file.display()
    );
    (text[start..].to_owned(), Some(note))
}

/// A unified diff with added, removed and hunk-header lines marked.
pub(crate) fn render_patch(h: &mut String, patch: &str) {
    h.push_str("<pre class=\"patch\">");
    for line in patch.split_inclusive('\n') {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            None
        } else if line.starts_with('+') {
            Some("add")
        } else if line.starts_with('-') {
            Some("del")
        } else if line.starts_with("@@") {
            Some("hunk")
        } else {
            None
        };
        match class {
            Some(class) => {
                let _ = write!(h, "<span class=\"{class}\">{}</span>", escape(line));
            }
            None => h.push_str(&escape(line)),
        }
    }
    h.push_str("</pre>\n");
}

fn render_log(h: &mut String, title: &str, class: &str, text: Option<&str>, file: &Path) {
    let _ = writeln!(h, "<h4>{}</h4>", escape(title));
    match text {
        Some(text) => {
            let (shown, note) = shown_log(text, file);
            if let Some(note) = note {
                let _ = writeln!(h, "<p><em>{}</em></p>", escape(&note));
            }
            let _ = writeln!(h, "<pre class=\"{class}\">{}</pre>", escape(&shown));
        }
        None => h.push_str("<p>none</p>\n"),
    }
}

fn render_instance(h: &mut String, e: &InstanceEntry) {
    let _ = writeln!(
        h,
        "<section class=\"instance\" id=\"{}\" data-status=\"{}\">\n<h3>{} {}</h3>",
        anchor(&e.instance_id),
        e.status.name(),
        escape(&e.instance_id),
        badge(&e.status)
    );
    h.push_str("<dl>");
    if let Some(report) = &e.report {
        let _ = write!(h, "<dt>tests</dt><dd>{}", escape(&test_counts(report)));
        render_failing(h, report, usize::MAX, &e.instance_id);
        h.push_str("</dd>");
    }
    if let Some(reason) = &e.failure_reason {
        let _ = write!(h, "<dt>likely cause</dt><dd>{}</dd>", escape(reason));
    }
    if let Some(meta) = &e.meta {
        let _ = write!(h, "<dt>mode</dt><dd>{}</dd>", escape(&meta.mode));
        if let Some(error) = &meta.error {
            let _ = write!(h, "<dt>error</dt><dd>{}</dd>", escape(error));
        }
        if let Some(region) = &meta.hardened {
            let _ = write!(h, "<dt>test exit code</dt><dd>{}</dd>", region.exit_code);
            if !region.environment_changes.is_empty() {
                let _ = write!(
                    h,
                    "<dt>changed outside the repository at install time</dt><dd>{}</dd>",
                    code_list(&region.environment_changes, "<br>")
                );
            }
        }
        if !meta.tamper_suspected.is_empty() {
            let _ = write!(
                h,
                "<dt>tamper signals</dt><dd>{}</dd>",
                code_list(&meta.tamper_suspected, "<br>")
            );
        }
        if let Some(undone) = meta.undone.as_ref().filter(|u| !u.is_empty()) {
            let files: Vec<String> = undone
                .restored
                .iter()
                .chain(&undone.removed)
                .cloned()
                .collect();
            let _ = write!(
                h,
                "<dt>undone test files</dt><dd>{}</dd>",
                code_list(&files, ", ")
            );
        }
        let _ = write!(
            h,
            "<dt>time</dt><dd>tests {:.1} s, overhead {:.1} s</dd>",
            meta.tests_ms as f64 / 1000.0,
            meta.overhead_ms as f64 / 1000.0
        );
    }
    let _ = write!(
        h,
        "<dt>files</dt><dd><code>{}</code></dd></dl>\n<h4>Patch</h4>\n",
        escape(&e.dir.display().to_string())
    );
    match e.patch.as_deref().filter(|p| !p.is_empty()) {
        Some(patch) => render_patch(h, patch),
        None => h.push_str("<p>none</p>\n"),
    }
    render_log(
        h,
        "Test log",
        "test-log",
        e.test_output.as_deref(),
        &e.dir.join("test_output.txt"),
    );
    h.push_str("<details><summary>run_instance.log</summary>\n");
    render_log(
        h,
        "run_instance.log",
        "run-log",
        e.run_log.as_deref(),
        &e.dir.join("run_instance.log"),
    );
    h.push_str("</details>\n</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::hardening::Undone;
    use swerve_swebench::report::build_run_report;

    const HOSTILE: &str = "<script>alert('x')</script>";

    fn meta(outcome: OutcomeKind, undone: Option<Undone>) -> String {
        serde_json::to_string(&InstanceMeta {
            cache_key: "k".into(),
            image_id: "sha256:i".into(),
            mode: "hardened".into(),
            outcome,
            error: None,
            hardened: None,
            undone,
            tamper_suspected: Vec::new(),
            overhead_ms: 1500,
            tests_ms: 2500,
        })
        .unwrap()
    }

    /// A run of five instances, one of each status, with hostile text in a test name, a patch
    /// and a log; returns the page.
    fn page() -> (tempfile::TempDir, RunPage) {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = dir.path();
        let write = |id: &str, name: &str, text: &str| {
            fs_err::create_dir_all(model_dir.join(id)).unwrap();
            fs_err::write(model_dir.join(id).join(name), text).unwrap();
        };
        let report = |id: &str, resolved: bool, failing: &[&str]| {
            serde_json::json!({ id: {
                "patch_is_None": false, "patch_exists": true, "patch_successfully_applied": true,
                "resolved": resolved, "infra_failure": false,
                "tests_status": {
                    "FAIL_TO_PASS": {"success": ["t::a"], "failure": failing},
                    "PASS_TO_PASS": {"success": ["t::b", "t::c"], "failure": []},
                    "FAIL_TO_FAIL": {"success": [], "failure": []},
                    "PASS_TO_FAIL": {"success": [], "failure": []},
                }
            }})
            .to_string()
        };
        write("r__r-1", "report.json", &report("r__r-1", true, &[]));
        write("r__r-1", "swerve.json", &meta(OutcomeKind::Resolved, None));
        write("r__r-1", "test_output.txt", "PASSED t::a");
        write(
            "u__u-2",
            "report.json",
            &report("u__u-2", false, &[HOSTILE]),
        );
        let undone = Undone {
            restored: vec!["tests/conftest.py".into()],
            removed: vec![],
        };
        let mut unresolved: serde_json::Value =
            serde_json::from_str(&meta(OutcomeKind::Unresolved, Some(undone))).unwrap();
        unresolved["hardened"] = serde_json::json!({
            "start_nonce": "s", "end_nonce": "e", "exit_code": 1,
            "environment_changes": ["A /usr/local/bin/<evil>"],
        });
        unresolved["tamper_suspected"] =
            serde_json::json!(["pkg/core.py: pytest internals (`_pytest`): import _pytest <x>"]);
        write("u__u-2", "swerve.json", &unresolved.to_string());
        write("u__u-2", "test_output.txt", &format!("FAILED {HOSTILE}"));
        write(
            "e__e-3",
            "swerve.json",
            &meta(OutcomeKind::PatchApplyFailed, None),
        );
        write("e__e-3", "run_instance.log", "Patch Apply Failed: & more");
        let ids: Vec<String> = ["r__r-1", "u__u-2", "e__e-3", "m__m-4", "n__n-5"]
            .map(str::to_owned)
            .into();
        let prediction = |id: &str, patch: Option<&str>| Prediction {
            instance_id: id.into(),
            model_name_or_path: Some("m".into()),
            model_patch: patch.map(str::to_owned),
        };
        let predictions = vec![
            prediction(
                "r__r-1",
                Some("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"),
            ),
            prediction("u__u-2", Some("+</pre><img src=x onerror=alert(1)>\n")),
            prediction("e__e-3", Some("junk")),
            prediction("m__m-4", Some("")),
        ];
        let submitted: Vec<_> = predictions
            .iter()
            .map(|p| swerve_swebench::report::SubmittedPrediction {
                instance_id: &p.instance_id,
                model_patch: p.model_patch.as_deref(),
            })
            .collect();
        let results = build_run_report(
            &ids,
            &submitted,
            |id| fs_err::read_to_string(model_dir.join(id).join("report.json")).ok(),
            |_| None,
            None,
        );
        let page = RunPage {
            run_id: "run<1>".into(),
            model: "m".into(),
            dataset: "swerve-mini".into(),
            report_file: PathBuf::from("m.run1.json"),
            summary: summary_counts(&results),
            instances: collect(model_dir, &ids, &predictions, &results),
        };
        (dir, page)
    }

    #[test]
    fn statuses_come_from_the_run_report_and_swerve_json() {
        let (_dir, page) = page();
        let statuses: Vec<&Status> = page.instances.iter().map(|e| &e.status).collect();
        assert_eq!(
            statuses,
            [
                &Status::Resolved,
                &Status::Unresolved,
                &Status::Error(Some(OutcomeKind::PatchApplyFailed)),
                &Status::EmptyPatch,
                &Status::NoPrediction,
            ]
        );
        assert_eq!(
            failing_tests(page.instances[1].report.as_ref().unwrap()),
            [("FAIL_TO_PASS", HOSTILE)]
        );
    }

    #[test]
    fn summary_counts_are_the_printed_ones() {
        let (_dir, page) = page();
        let html = render(&page);
        for (key, count) in [
            ("total-instances", 5),
            ("instances-submitted", 4),
            ("instances-completed", 2),
            ("instances-incomplete", 1),
            ("instances-resolved", 1),
            ("instances-unresolved", 1),
            ("instances-with-empty-patches", 1),
            ("instances-with-errors", 1),
        ] {
            let row = format!(
                "<tr data-key=\"{key}\"><th>{}</th><td class=\"count\">{count}</td></tr>",
                page.summary
                    .iter()
                    .find(|(l, _)| label_key(l) == key)
                    .map(|(l, _)| l.as_str())
                    .unwrap_or("missing")
            );
            assert!(html.contains(&row), "{row}");
        }
        assert_eq!(html.matches("<tr data-instance=").count(), 5);
        assert!(html.contains("<span id=\"hardening-count\">1</span>"));
        assert!(html.contains("<code>tests/conftest.py</code>"));
        assert!(html.contains(
            "<dt>changed outside the repository at install time</dt><dd><code>A /usr/local/bin/&lt;evil&gt;</code>"
        ));
        assert!(html.contains("<dt>tamper signals</dt><dd><code>pkg/core.py: pytest internals"));
    }

    #[test]
    fn text_from_models_and_tests_is_escaped() {
        let (_dir, page) = page();
        let html = render(&page);
        assert!(!html.contains("<script"), "a script element");
        assert!(!html.contains("<img"), "an image element");
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(html.contains(
            "<span class=\"add\">+&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;\n</span>"
        ));
        assert!(html.contains("<title>swerve run run&lt;1&gt; · m</title>"));
        assert!(html.contains("Patch Apply Failed: &amp; more"));
        // Self-contained: nothing to fetch.
        for needle in [
            "http://",
            "https://",
            " src=\"",
            " href=\"h",
            "<link",
            "url(",
        ] {
            assert!(!html.contains(needle), "{needle}");
        }
    }

    #[test]
    fn every_instance_has_its_anchor_and_failing_tests_are_listed() {
        let (_dir, page) = page();
        let html = render(&page);
        for e in &page.instances {
            let id = anchor(&e.instance_id);
            assert!(html.contains(&format!("<a href=\"#{id}\">")), "{id}");
            assert!(
                html.contains(&format!("<section class=\"instance\" id=\"{id}\"")),
                "{id}"
            );
        }
        assert!(html.contains("FAIL_TO_PASS 1/2 passed, PASS_TO_PASS 2/2 passed"));
        assert!(html.contains("<span class=\"badge error\">error: patch_apply_failed</span>"));
        assert_eq!(anchor("a b/c"), "a_b_c");
    }

    #[test]
    fn the_table_lists_a_few_failing_tests_and_links_to_the_rest() {
        let (_dir, mut page) = page();
        let report = page.instances[1].report.as_mut().unwrap();
        let status = report.tests_status.as_mut().unwrap();
        status.pass_to_pass.failure = (0..20).map(|i| format!("t::p{i}")).collect();
        let html = render(&page);
        let table = &html
            [html.find("id=\"instance-table\"").unwrap()..html.find("id=\"hardening\"").unwrap()];
        assert_eq!(table.matches("<li data-category=").count(), TABLE_TESTS);
        assert!(table.contains("<li><a href=\"#u__u-2\">13 more</a></li>"));
        let section = &html[html
            .find("<section class=\"instance\" id=\"u__u-2\"")
            .unwrap()..];
        let section = &section[..section.find("</section>").unwrap()];
        assert_eq!(section.matches("<li data-category=").count(), 21);
    }

    #[test]
    fn long_logs_keep_their_end() {
        let text = format!("{}END", "x".repeat(LOG_LIMIT));
        let (shown, note) = shown_log(&text, Path::new("t.txt"));
        assert!(shown.ends_with("END") && shown.len() == LOG_LIMIT);
        assert!(note.unwrap().contains("first 3 of"));
    }
}
