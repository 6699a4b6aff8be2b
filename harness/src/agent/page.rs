//! The HTML page of an agent run, `<model>.<run_id>.html` beside the predictions file: the
//! endings, a table of episodes, and each episode turn by turn (the model's reply, the commands
//! or tool calls it made, what it was told back), with its submitted patch. One self-contained
//! file in the style of `harness run`'s page; every piece of text from a dataset, a model or a
//! command is HTML-escaped.

use std::fmt::Write as _;

use crate::html::{STYLE, anchor, escape, render_patch};

use super::trajectory::Trajectory;

/// The most characters of one observation or reply shown (the trajectory file has them whole).
const TEXT_LIMIT: usize = 20_000;

fn clipped(text: &str) -> String {
    match text.char_indices().nth(TEXT_LIMIT) {
        Some((at, _)) => format!(
            "{}\n[… {} more characters in trajectory.json]",
            &text[..at],
            text[at..].chars().count()
        ),
        None => text.to_owned(),
    }
}

/// The page of `episodes` (dataset order).
pub(crate) fn render(
    run_id: &str,
    model: &str,
    protocol: &str,
    episodes: &[&Trajectory],
) -> String {
    let mut h = String::new();
    let title = format!("swerve agent run {run_id} · {model}");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}\
         details{{margin:.3rem 0}}summary{{cursor:pointer}}.turn{{border-left:3px solid #d0d7de;\
         padding-left:.6rem;margin:.6rem 0}}</style>\n</head>\n<body>\n<h1>{t}</h1>\n\
         <p>Protocol <code>{}</code></p>\n",
        escape(protocol),
        t = escape(&title),
    );
    h.push_str("<h2 id=\"summary\">Endings</h2>\n<table class=\"summary\">\n");
    for reason in super::EndReason::ALL {
        let n = episodes.iter().filter(|t| t.reason == reason).count();
        if n > 0 {
            let _ = writeln!(
                h,
                "<tr data-key=\"{reason}\"><th>{reason}</th><td class=\"count\">{n}</td></tr>"
            );
        }
    }
    h.push_str(
        "</table>\n<h2 id=\"episodes\">Episodes</h2>\n<table>\n<tr><th>instance</th>\
                <th>ending</th><th>turns</th><th>wall</th><th>model</th><th>sandbox</th>\
                <th>context tokens</th></tr>\n",
    );
    for t in episodes {
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td class=\"count\">{}</td>\
             <td class=\"count\">{:.1} s</td><td class=\"count\">{:.1} s</td>\
             <td class=\"count\">{:.1} s</td><td class=\"count\">{}</td></tr>",
            anchor(&t.instance_id),
            escape(&t.instance_id),
            t.reason,
            t.steps,
            t.wall_ms as f64 / 1000.0,
            t.model_ms as f64 / 1000.0,
            t.sandbox_ms as f64 / 1000.0,
            t.context_tokens
        );
    }
    h.push_str("</table>\n");
    for t in episodes {
        render_episode(&mut h, t);
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn render_episode(h: &mut String, t: &Trajectory) {
    let _ = writeln!(
        h,
        "<section class=\"instance\" id=\"{}\" data-reason=\"{}\">\n<h3>{} · {}</h3>",
        anchor(&t.instance_id),
        t.reason,
        escape(&t.instance_id),
        t.reason
    );
    if let Some(detail) = &t.detail {
        let _ = writeln!(h, "<p>{}</p>", escape(detail));
    }
    if let Some(note) = &t.history_check {
        let _ = writeln!(h, "<p><em>{}</em></p>", escape(note));
    }
    if let Some(task) = t.messages.get(1) {
        let _ = writeln!(
            h,
            "<details><summary>Task</summary><pre>{}</pre></details>",
            escape(&clipped(&task.content))
        );
    }
    for (i, turn) in t.turns.iter().enumerate() {
        let _ = writeln!(
            h,
            "<div class=\"turn\" data-turn=\"{}\"><h4>Turn {}{}</h4>",
            i + 1,
            i + 1,
            if turn.format_error {
                " · format error"
            } else {
                ""
            }
        );
        if !turn.reply.content.is_empty() {
            let _ = writeln!(
                h,
                "<pre class=\"reply\">{}</pre>",
                escape(&clipped(&turn.reply.content))
            );
        }
        for call in &turn.reply.tool_calls {
            let _ = writeln!(
                h,
                "<p>calls <code>{}</code> <code>{}</code></p>",
                escape(&call.name),
                escape(&clipped(&call.arguments))
            );
        }
        for action in &turn.actions {
            let code = action
                .returncode
                .map_or_else(|| "killed".to_owned(), |c| c.to_string());
            let _ = writeln!(
                h,
                "<p>{} exited {} after {} ms{}</p>",
                escape(&action.tool),
                escape(&code),
                action.elapsed_ms,
                if action.timed_out { " (timed out)" } else { "" }
            );
        }
        if !turn.observation.is_empty() {
            let _ = writeln!(
                h,
                "<details><summary>Observation</summary><pre class=\"observation\">{}</pre></details>",
                escape(&clipped(&turn.observation))
            );
        }
        h.push_str("</div>\n");
    }
    h.push_str("<h4>Submitted patch</h4>\n");
    if t.patch.is_empty() {
        h.push_str("<p>none</p>\n");
    } else {
        render_patch(h, &t.patch);
    }
    h.push_str("</section>\n");
}
