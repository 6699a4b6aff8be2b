//! `harness agent` against the real Docker engine on the bundled swerve-mini rows: scripted
//! policies that apply the gold fix resolve every row when `harness run` grades their
//! predictions and empty submissions resolve none (both protocols); commands that try to see
//! later history or the hidden tests, reach the network, fork without bound, write or print
//! without end, or kill the container's init are contained; each limit ends an episode with its
//! reason; a killed run resumes without repeating finished episodes; an OpenAI-compatible
//! server drives episodes, its token ids and log-probs kept.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::BIN;

const SENTINEL: &str = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

fn rows() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/swerve-mini/swerve-mini.jsonl");
    std::fs::read_to_string(path)
        .expect("rows")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect()
}

/// A reply of the text protocol running `command`.
fn block(command: &str) -> Value {
    json!(format!(
        "THOUGHT: next step.\n\n```mswea_bash_command\n{command}\n```"
    ))
}

/// The command that writes `patch` to a file and applies it.
fn apply(patch: &str) -> String {
    format!("cat > /tmp/fix.diff <<'SWERVE_EOF'\n{patch}SWERVE_EOF\ngit apply /tmp/fix.diff")
}

fn submit() -> Value {
    block(&format!(
        "echo {SENTINEL} && git add -A && git diff --cached"
    ))
}

struct Ctx {
    dir: tempfile::TempDir,
    run_id: String,
}

impl Ctx {
    fn new(name: &str) -> Ctx {
        Ctx {
            dir: tempfile::tempdir().expect("temp dir"),
            run_id: format!("a-{name}-{}", std::process::id()),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn script(&self, name: &str, episodes: &[(&str, Vec<Value>)]) -> PathBuf {
        let path = self.path().join(name);
        let text: String = episodes
            .iter()
            .map(|(id, replies)| json!({"instance_id": id, "replies": replies}).to_string() + "\n")
            .collect();
        std::fs::write(&path, text).expect("script");
        path
    }

    fn agent_command(&self, run_id: &str, extra: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(self.path())
            .args(["agent", "-d", "swerve-mini", "--run-id", run_id, "-q"])
            .args(extra);
        cmd
    }

    fn agent(&self, run_id: &str, extra: &[&str]) -> Output {
        let out = self
            .agent_command(run_id, extra)
            .output()
            .expect("harness agent");
        assert!(
            out.status.success(),
            "harness agent failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn trajectory(&self, run_id: &str, model: &str, id: &str) -> Value {
        let path = self
            .path()
            .join("logs/agent")
            .join(run_id)
            .join(model)
            .join(id)
            .join("trajectory.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).expect("trajectory is JSON")
    }

    /// A run's `agent.json`.
    fn summary(&self, run_id: &str, model: &str) -> Value {
        let path = self
            .path()
            .join("logs/agent")
            .join(run_id)
            .join(model)
            .join("agent.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("agent.json")).expect("json")
    }

    /// Grades a predictions file with `harness run`; returns the run report.
    fn grade(&self, predictions: &str, model: &str, run_id: &str) -> Value {
        crate::support::harness(
            self.path(),
            &[
                "run",
                "-d",
                "swerve-mini",
                "-p",
                predictions,
                "--run-id",
                run_id,
                "--max-workers",
                "2",
                "-q",
                "--no-html",
            ],
        );
        let report = self.path().join(format!("{model}.{run_id}.json"));
        serde_json::from_str(&std::fs::read_to_string(report).expect("run report")).expect("json")
    }

    fn leftover_containers(&self, run_id: &str) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-a", "-q", "--filter"])
            .arg(format!("label=swerve.run-id={run_id}"))
            .output()
            .expect("docker ps");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn observation(trajectory: &Value, turn: usize) -> String {
    trajectory["turns"][turn]["observation"]
        .as_str()
        .expect("observation")
        .to_owned()
}

#[test]
fn scripted_gold_episodes_resolve_in_harness_run_and_empty_ones_do_not() {
    let ctx = Ctx::new("gold");
    let rows = rows();
    // Gold: a reply with no command (a format error, answered), the fix, the submission.
    let gold: Vec<(&str, Vec<Value>)> = rows
        .iter()
        .map(|r| {
            let id = r["instance_id"].as_str().expect("id");
            let patch = r["patch"].as_str().expect("patch");
            (
                id,
                vec![
                    json!("Let me think about it."),
                    block(&apply(patch)),
                    submit(),
                ],
            )
        })
        .collect();
    let script = ctx.script("gold.jsonl", &gold);
    let out = ctx.agent(
        &ctx.run_id,
        &[
            "--script",
            script.to_str().expect("utf-8"),
            "--model",
            "gold-agent",
            "-o",
            "gold.jsonl",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "gold.jsonl");
    for (id, _) in &gold {
        let t = ctx.trajectory(&ctx.run_id, "gold-agent", id);
        assert_eq!(t["reason"], "submitted", "{id}: {t}");
        assert_eq!(t["steps"], 3);
        assert_eq!(t["turns"][0]["format_error"], true);
        assert!(observation(&t, 0).starts_with("Format error: your reply had no command block"));
        assert_eq!(t["turns"][1]["actions"][0]["returncode"], 0);
        assert!(
            t["patch"]
                .as_str()
                .expect("patch")
                .starts_with("diff --git")
        );
    }
    // The run's page shows every episode turn by turn, escaped.
    let page = std::fs::read_to_string(ctx.path().join("gold.html")).expect("the agent's page");
    assert!(
        page.contains("<tr data-key=\"submitted\"><th>submitted</th><td class=\"count\">13</td>")
    );
    for (id, _) in &gold {
        assert!(
            page.contains(&format!("id=\"{id}\" data-reason=\"submitted\"")),
            "{id}"
        );
    }
    assert!(page.contains("<div class=\"turn\" data-turn=\"3\">"));
    assert!(page.contains("Turn 1 · format error"));
    assert!(
        page.contains("&lt;&lt;&#39;SWERVE_EOF&#39;"),
        "heredocs are escaped"
    );
    let report = ctx.grade("gold.jsonl", "gold-agent", &ctx.run_id);
    assert_eq!(report["resolved_instances"], rows.len(), "{report}");

    // Empty: submit at once.
    let empty: Vec<(&str, Vec<Value>)> = gold.iter().map(|(id, _)| (*id, vec![submit()])).collect();
    let script = ctx.script("empty.jsonl", &empty);
    let run_id = format!("{}-empty", ctx.run_id);
    ctx.agent(
        &run_id,
        &[
            "--script",
            script.to_str().expect("utf-8"),
            "--model",
            "empty-agent",
            "-o",
            "empty.jsonl",
        ],
    );
    let report = ctx.grade("empty.jsonl", "empty-agent", &run_id);
    assert_eq!(report["resolved_instances"], 0, "{report}");
    assert_eq!(report["empty_patch_instances"], rows.len(), "{report}");
    assert!(ctx.leftover_containers(&ctx.run_id).is_empty());
}

#[test]
fn tool_calls_view_edit_search_and_submit_the_fix() {
    let ctx = Ctx::new("tools");
    let rows = rows();
    let second = rows
        .iter()
        .find(|r| r["instance_id"] == "swerve__textkit-6")
        .expect("row");
    let call = |name: &str, arguments: Value| json!({"tool_calls": [{"name": name, "arguments": arguments}]});
    let editor = vec![
        call("search", json!({"search_term": "line.split(\"=\")"})),
        call(
            "str_replace_editor",
            json!({"command": "view", "path": "inicfg/parser.py", "view_range": [28, 34]}),
        ),
        call(
            "str_replace_editor",
            json!({"command": "str_replace", "path": "inicfg/parser.py",
            "old_str": "key, value = line.split(\"=\")", "new_str": "key, _, value = line.partition(\"=\")"}),
        ),
        call(
            "str_replace_editor",
            json!({"command": "create", "path": "scratch.txt", "file_text": "notes\n"}),
        ),
        call(
            "str_replace_editor",
            json!({"command": "undo_edit", "path": "scratch.txt"}),
        ),
        json!({"content": "No tool this time."}),
        call("submit", json!({})),
    ];
    let bash = vec![
        call(
            "bash",
            json!({"command": apply(second["patch"].as_str().expect("patch"))}),
        ),
        call("submit", json!({})),
    ];
    let script = ctx.script(
        "tools.jsonl",
        &[("swerve__inicfg-3", editor), ("swerve__textkit-6", bash)],
    );
    ctx.agent(
        &ctx.run_id,
        &[
            "-i",
            "swerve__inicfg-3",
            "swerve__textkit-6",
            "--protocol",
            "tools",
            "--script",
            script.to_str().expect("utf-8"),
            "--model",
            "tool-agent",
            "-o",
            "tools.jsonl",
        ],
    );
    let t = ctx.trajectory(&ctx.run_id, "tool-agent", "swerve__inicfg-3");
    assert_eq!(t["reason"], "submitted", "{t}");
    assert!(
        observation(&t, 0).contains("inicfg/parser.py:32:"),
        "{}",
        observation(&t, 0)
    );
    assert!(observation(&t, 1).contains("    32\t        key, value = line.split(\"=\")"));
    assert!(observation(&t, 2).starts_with("Edited /testbed/inicfg/parser.py"));
    assert!(observation(&t, 4).starts_with("Undid the last edit of /testbed/scratch.txt"));
    assert_eq!(t["turns"][5]["format_error"], true);
    assert!(observation(&t, 2).ends_with("[Steps remaining: 247]"));
    let patch = t["patch"].as_str().expect("patch");
    assert!(
        patch.contains("+        key, _, value = line.partition(\"=\")"),
        "{patch}"
    );
    assert!(
        !patch.contains("scratch.txt"),
        "the undone file is not in the patch: {patch}"
    );
    // Tool messages answer their calls.
    let messages = t["messages"].as_array().expect("messages");
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_0")
    );
    let report = ctx.grade("tools.jsonl", "tool-agent", &ctx.run_id);
    assert_eq!(report["resolved_instances"], 2, "{report}");
}

#[test]
fn agent_commands_are_contained_and_cannot_reach_the_fix() {
    let ctx = Ctx::new("contain");
    let commands = [
        // Later history: nothing past the base commit, no remotes, no stray commit objects.
        "test \"$(git rev-list --all --reflog | sort)\" = \"$(git rev-list HEAD | sort)\" && test -z \"$(git remote)\" && echo HISTORY_CUT",
        "test \"$(git cat-file --batch-all-objects --batch-check | grep -c ' commit ')\" = \"$(git rev-list HEAD | wc -l)\" && echo NO_STRAY_COMMITS",
        // The hidden tests (the row's test patch adds this test) are not in the image.
        "grep -c test_value_may_contain_equals_sign tests/test_parser.py; echo HIDDEN_$?",
        "timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/53' && echo NET_OPEN || echo NET_BLOCKED",
        "yes swerve-flood",
        "head -c 100M /dev/zero > big.bin; echo rc=$?; stat -c %s big.bin",
        "bomb() { bomb | bomb & }; bomb; sleep 100",
        "echo ALIVE_AFTER_BOMB",
        "kill 1; sleep 2",
        "echo ALIVE_AFTER_INIT; ls big.bin",
        // The shell that runs the commands (the parent of the command's `timeout`).
        "kill -9 $(cut -d' ' -f4 /proc/$PPID/stat)",
        "echo ALIVE_AFTER_SHELL",
        "for i in $(seq 1 12); do head -c 7M /dev/urandom > f$i.bin; done; echo wrote",
        "echo never-run",
    ];
    let replies: Vec<Value> = commands.iter().map(|c| block(c)).collect();
    let script = ctx.script("contain.jsonl", &[("swerve__inicfg-3", replies)]);
    ctx.agent(
        &ctx.run_id,
        &[
            "-i",
            "swerve__inicfg-3",
            "--script",
            script.to_str().expect("utf-8"),
            "--command-timeout",
            "5",
            "--file-limit-mib",
            "8",
            "--disk-limit-mib",
            "64",
        ],
    );
    let t = ctx.trajectory(&ctx.run_id, "scripted", "swerve__inicfg-3");
    let obs = |turn| observation(&t, turn);
    assert!(obs(0).contains("HISTORY_CUT"), "{}", obs(0));
    assert!(obs(1).contains("NO_STRAY_COMMITS"), "{}", obs(1));
    assert!(obs(2).contains("\n0\nHIDDEN_1"), "{}", obs(2));
    assert!(obs(3).contains("NET_BLOCKED"), "{}", obs(3));
    // The flood: killed at its limit, head and tail kept, the rest counted.
    let flood = &t["turns"][4]["actions"][0];
    assert_eq!(flood["timed_out"], true);
    assert!(
        flood["elided_bytes"].as_u64().expect("count") > 1_000_000,
        "{flood}"
    );
    assert!(
        flood["elapsed_ms"].as_u64().expect("ms") < 20_000,
        "{flood}"
    );
    assert!(
        obs(4).contains("<output_head>\nswerve-flood\n"),
        "{}",
        &obs(4)[..400]
    );
    assert!(obs(4).contains("characters left out</elided_chars>"));
    // The big write stops at the file limit.
    assert!(
        obs(5).contains("rc=153") && obs(5).contains("\n8388608\n"),
        "{}",
        obs(5)
    );
    assert!(obs(7).contains("ALIVE_AFTER_BOMB"), "{}", obs(7));
    // Killing the container's init stops it: it is started again (files kept) and the agent told;
    // the next command runs.
    assert!(
        obs(8).contains("It was started again: files are kept"),
        "{}",
        obs(8)
    );
    assert!(obs(9).contains("ALIVE_AFTER_INIT\nbig.bin"), "{}", obs(9));
    assert!(
        obs(10).contains("The command ended the shell"),
        "{}",
        obs(10)
    );
    assert!(obs(11).contains("ALIVE_AFTER_SHELL"), "{}", obs(11));
    assert_eq!(t["reason"], "disk_limit", "{}", t["detail"]);
    assert_eq!(t["steps"], 13);
    assert!(ctx.leftover_containers(&ctx.run_id).is_empty());
}

#[test]
fn each_limit_ends_its_episode_with_its_reason() {
    let ctx = Ctx::new("limits");
    let script = ctx.script(
        "limits.jsonl",
        &[
            (
                "swerve__inicfg-3",
                vec![json!("a"), json!("b"), json!("c"), block("echo unreached")],
            ),
            (
                "swerve__inicfg-7",
                vec![
                    block("echo 1"),
                    block("echo 2"),
                    block("echo 3"),
                    block("echo 4"),
                ],
            ),
            ("swerve__inicfg-12", vec![block("echo only one")]),
            ("swerve__inicfg-15", vec![block("sleep 30")]),
        ],
    );
    let script = script.to_str().expect("utf-8");
    let args = [
        "-i",
        "swerve__inicfg-3",
        "swerve__inicfg-7",
        "swerve__inicfg-12",
        "swerve__inicfg-15",
        "--script",
        script,
        "--step-limit",
        "3",
        "--wall-limit",
        "4",
    ];
    ctx.agent(&ctx.run_id, &args);
    let reason = |id| ctx.trajectory(&ctx.run_id, "scripted", id)["reason"].clone();
    assert_eq!(reason("swerve__inicfg-3"), "format_errors");
    assert_eq!(reason("swerve__inicfg-7"), "step_limit");
    assert_eq!(reason("swerve__inicfg-12"), "env_error");
    assert_eq!(reason("swerve__inicfg-15"), "timeout");
    // Run again: the three endings of the model's doing or its limits are reused; the
    // environment's failure runs again.
    let before = ctx.trajectory(&ctx.run_id, "scripted", "swerve__inicfg-7");
    ctx.agent(&ctx.run_id, &args);
    let summary = ctx.summary(&ctx.run_id, "scripted");
    assert_eq!(summary["reused"], 3, "{summary}");
    assert_eq!(
        ctx.trajectory(&ctx.run_id, "scripted", "swerve__inicfg-7"),
        before
    );
    let slept = ctx.trajectory(&ctx.run_id, "scripted", "swerve__inicfg-15");
    assert!(
        slept["wall_ms"].as_u64().expect("ms") < 15_000,
        "{}",
        slept["wall_ms"]
    );
    // A context limit below the prompts: the episode ends before the first request.
    let run_id = format!("{}-ctx", ctx.run_id);
    ctx.agent(
        &run_id,
        &[
            "-i",
            "swerve__inicfg-7",
            "--script",
            script,
            "--context-tokens",
            "100",
        ],
    );
    let t = ctx.trajectory(&run_id, "scripted", "swerve__inicfg-7");
    assert_eq!(
        (t["reason"].as_str(), t["steps"].as_u64()),
        (Some("context"), Some(0))
    );
    // Every ending is in the predictions file, with an empty patch unless submitted.
    let predictions: Vec<Value> =
        std::fs::read_to_string(ctx.path().join(format!("scripted.{}.jsonl", ctx.run_id)))
            .expect("predictions")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
    assert_eq!(predictions.len(), 4);
    assert!(
        predictions
            .iter()
            .all(|p| p["model_patch"] == "" && p["model_name_or_path"] == "scripted")
    );
}

#[test]
fn a_killed_run_resumes_without_repeating_finished_episodes() {
    let ctx = Ctx::new("resume");
    let ids = ["swerve__spans-2", "swerve__spans-5", "swerve__spans-8"];
    let script = ctx.script(
        "resume.jsonl",
        &[
            (ids[0], vec![block("echo one"), submit()]),
            (ids[1], vec![block("echo two"), submit()]),
            (ids[2], vec![block("sleep 20"), submit()]),
        ],
    );
    let script = script.to_str().expect("utf-8");
    let args = [
        "-i",
        ids[0],
        ids[1],
        ids[2],
        "--script",
        script,
        "--max-workers",
        "1",
    ];
    let trajectory_file = |id: &str| {
        ctx.path()
            .join("logs/agent")
            .join(&ctx.run_id)
            .join("scripted")
            .join(id)
            .join("trajectory.json")
    };
    let mut child = ctx
        .agent_command(&ctx.run_id, &args)
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !trajectory_file(ids[1]).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "two episodes did not finish"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The third episode is in its `sleep`: kill the run there.
    std::thread::sleep(std::time::Duration::from_secs(2));
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(!trajectory_file(ids[2]).exists());
    let before: Vec<Vec<u8>> = ids[..2]
        .iter()
        .map(|id| std::fs::read(trajectory_file(id)).expect("kept"))
        .collect();
    let out = ctx.agent(&ctx.run_id, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Removed 1 containers left by an earlier run"),
        "{stderr}"
    );
    let summary = ctx.summary(&ctx.run_id, "scripted");
    assert_eq!(summary["reused"], 2, "{summary}");
    assert_eq!(summary["endings"], json!({"submitted": 3}), "{summary}");
    for (id, bytes) in ids[..2].iter().zip(&before) {
        assert_eq!(
            &std::fs::read(trajectory_file(id)).expect("kept"),
            bytes,
            "{id} was run again"
        );
    }
    assert_eq!(
        ctx.trajectory(&ctx.run_id, "scripted", ids[2])["reason"],
        "submitted"
    );
    assert!(ctx.leftover_containers(&ctx.run_id).is_empty());
}

/// A chat completions server answering with `replies` in order and recording each request.
fn serve(replies: Vec<(u16, Value)>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut replies = replies.into_iter();
        for stream in listener.incoming() {
            let mut stream = stream.expect("connection");
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0;
            let mut line = String::new();
            reader.read_line(&mut line).expect("request line");
            assert!(line.starts_with("POST /v1/chat/completions "), "{line}");
            loop {
                line.clear();
                reader.read_line(&mut line).expect("header");
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().expect("length");
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            record
                .lock()
                .expect("lock")
                .push(serde_json::from_slice(&body).expect("json body"));
            let (status, reply) = replies
                .next()
                .unwrap_or((500, json!({"error": "no more replies"})));
            let text = reply.to_string();
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            )
            .expect("answer");
        }
    });
    (url, seen)
}

fn completion(content: &str, ids: &[u32], prompt_tokens: u64) -> (u16, Value) {
    let logprobs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"token": format!("token_id:{id}"), "logprob": -0.25}))
        .collect();
    (
        200,
        json!({
            "choices": [{"message": {"role": "assistant", "content": content},
                         "logprobs": {"content": logprobs}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": ids.len()}
        }),
    )
}

#[test]
fn an_openai_endpoint_drives_episodes_and_its_token_ids_are_kept() {
    let ctx = Ctx::new("endpoint");
    let look = block("ls inicfg").as_str().expect("text").to_owned();
    let done = submit().as_str().expect("text").to_owned();
    let (url, seen) = serve(vec![
        completion(&look, &[11, 12, 13], 900),
        completion(&done, &[21, 22], 960),
        (
            400,
            json!({"error": {"message": "This model's maximum context length is 4096 tokens"}}),
        ),
    ]);
    ctx.agent(
        &ctx.run_id,
        &[
            "-i",
            "swerve__inicfg-3",
            "swerve__inicfg-7",
            "--max-workers",
            "1",
            "--endpoint",
            &url,
            "--model",
            "org/served",
            "--token-ids",
            "--temperature",
            "0.7",
            "--seed",
            "5",
        ],
    );
    let t = ctx.trajectory(&ctx.run_id, "org__served", "swerve__inicfg-3");
    assert_eq!(t["reason"], "submitted", "{t}");
    assert_eq!(t["turns"][0]["reply"]["token_ids"], json!([11, 12, 13]));
    assert_eq!(
        t["turns"][0]["reply"]["logprobs"],
        json!([-0.25, -0.25, -0.25])
    );
    assert_eq!(t["context_tokens"], 962);
    assert!(observation(&t, 0).contains("parser.py"));
    let second = ctx.trajectory(&ctx.run_id, "org__served", "swerve__inicfg-7");
    assert_eq!(second["reason"], "context", "{second}");
    let requests = seen.lock().expect("lock");
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    assert_eq!(first["model"], "org/served");
    assert_eq!(
        (first["temperature"].as_f64(), first["seed"].as_u64()),
        (Some(0.7), Some(5))
    );
    assert_eq!(
        (
            first["logprobs"].as_bool(),
            first["return_tokens_as_token_ids"].as_bool()
        ),
        (Some(true), Some(true))
    );
    let roles: Vec<&str> = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().expect("role"))
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(requests[1]["messages"][2]["content"], look);
    let predictions =
        std::fs::read_to_string(ctx.path().join(format!("org__served.{}.jsonl", ctx.run_id)))
            .expect("predictions");
    assert!(
        predictions.contains("\"model_name_or_path\":\"org/served\""),
        "{predictions}"
    );
}
