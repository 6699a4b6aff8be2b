//! Agents across the crates: `trainer serve` answers the official `openai` client as an
//! OpenAI-compatible server does (models, chat and text completions, `n`, seeds, log-probs and
//! token ids, stop strings, tool calls, the context error, batching that does not change an
//! answer), and drives whole agent episodes on a swerve-mini task image — mini-swe-agent itself
//! (PyPI, through its litellm model class and its own Docker environment) and `harness agent`
//! through both protocols — with a tiny random-weight checkpoint that has a chat template.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use swerve_tests::cli::workspace_binary;

#[path = "../../examples/tiny_chat_model.rs"]
mod tiny_chat_model;
use tiny_chat_model::chat_model;

/// A running `trainer serve`, stopped on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(model: &Path) -> Server {
        let mut child = Command::new(workspace_binary("trainer"))
            .args([
                "serve",
                "--port",
                "0",
                "--served-model-name",
                "tiny",
                "-q",
                "--model",
            ])
            .arg(model)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("trainer serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the URL line");
        assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
        Server {
            child,
            url: line.trim().to_owned(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` with the agent venv's Python (`vars` in its environment); returns the last
/// line of its stdout as JSON (mini-swe-agent prints its own lines before).
fn python(venv: &Path, script: &str, vars: &[(&str, &str)]) -> Value {
    let out = Command::new(venv.join("bin/python"))
        .args(["-c", script])
        .envs(vars.iter().copied())
        .env("MSWEA_SILENT_STARTUP", "1")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the Python client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

const OPENAI_CLIENT: &str = r#"
import concurrent.futures, json, os, openai
c = openai.OpenAI(base_url=os.environ["URL"], api_key="unused")
out = {"models": [m.id for m in c.models.list().data]}
messages = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say something about tests."}]
def chat(seed, max_tokens=12, **extra):
    return c.chat.completions.create(model="tiny", messages=messages, max_tokens=max_tokens,
                                     seed=seed, temperature=1.0, **extra)
r = chat(3, n=2, logprobs=True, top_logprobs=2,
         extra_body={"return_tokens_as_token_ids": True, "return_token_ids": True})
out["chat"] = r.model_dump()
out["chat_again"] = [ch.message.content for ch in chat(3, n=2).choices]
# Concurrent requests are batched; each answer is the one it gets alone.
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    together = list(pool.map(lambda s: chat(s).choices[0].message.content, [11, 12, 13, 14]))
out["together"] = together
out["alone"] = [chat(s).choices[0].message.content for s in [11, 12, 13, 14]]
g = c.completions.create(model="tiny", prompt="def add(a, b):", temperature=0, max_tokens=16)
out["greedy"] = g.model_dump()
text = g.choices[0].text
stop = text[4:7]
s = c.completions.create(model="tiny", prompt="def add(a, b):", temperature=0, max_tokens=16,
                         stop=[stop])
out["stop"] = {"stop": stop, "text": s.choices[0].text, "finish": s.choices[0].finish_reason,
               "expected": text[:text.find(stop)]}
try:
    chat(1, max_tokens=5000)
    out["context_error"] = None
except openai.BadRequestError as e:
    out["context_error"] = str(e)
try:
    c.chat.completions.create(model="other", messages=messages, max_tokens=4)
    out["wrong_model"] = None
except openai.NotFoundError as e:
    out["wrong_model"] = e.status_code
tools = [{"type": "function", "function": {"name": "bash", "description": "Run a command.",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
t = c.chat.completions.create(model="tiny", messages=messages + [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
         "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "README.md"}],
    tools=tools, max_tokens=8, seed=1)
out["tools"] = t.choices[0].finish_reason
print(json.dumps(out))
"#;

#[test]
fn trainer_serve_answers_the_openai_client() {
    let Some(venv) = swerve_tests::agent_venv("trainer serve with the openai client") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let model = chat_model(dir.path());
    let server = Server::start(&model);
    let out = python(&venv, OPENAI_CLIENT, &[("URL", &server.url)]);
    assert_eq!(out["models"], json!(["tiny"]));
    let chat = &out["chat"];
    let choices = chat["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 2);
    let mut total = 0;
    for choice in choices {
        let ids: Vec<u64> = choice["token_ids"]
            .as_array()
            .expect("token ids")
            .iter()
            .map(|v| v.as_u64().expect("id"))
            .collect();
        assert!(!ids.is_empty() && ids.len() <= 12, "{choice}");
        total += ids.len();
        let entries = choice["logprobs"]["content"].as_array().expect("logprobs");
        assert_eq!(entries.len(), ids.len());
        for (entry, id) in entries.iter().zip(&ids) {
            assert_eq!(entry["token"], format!("token_id:{id}"));
            let lp = entry["logprob"].as_f64().expect("logprob");
            assert!(lp <= 0.0 && lp.is_finite(), "{entry}");
            let top = entry["top_logprobs"].as_array().expect("top");
            assert_eq!(top.len(), 2);
            assert!(top[0]["logprob"].as_f64() >= top[1]["logprob"].as_f64());
            assert!(top[0]["logprob"].as_f64().expect("lp") >= lp);
        }
        assert!(["stop", "length"].contains(&choice["finish_reason"].as_str().expect("finish")));
    }
    assert_eq!(chat["usage"]["completion_tokens"], total);
    assert!(
        chat["prompt_token_ids"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    );
    let texts: Vec<&Value> = choices.iter().map(|c| &c["message"]["content"]).collect();
    assert_eq!(
        out["chat_again"],
        json!(texts),
        "a seed gives the same answers"
    );
    assert_ne!(
        texts[0], texts[1],
        "the n choices draw from generators of their own"
    );
    assert_eq!(out["together"], out["alone"], "batching changed an answer");
    // Greedy text completions are `trainer generate`'s.
    let greedy = out["greedy"]["choices"][0]["text"].as_str().expect("text");
    let generated = Command::new(workspace_binary("trainer"))
        .args([
            "generate",
            "--prompt",
            "def add(a, b):",
            "--temperature",
            "0",
        ])
        .args(["--max-new-tokens", "16", "-q", "--model"])
        .arg(&model)
        .output()
        .expect("trainer generate");
    let line: Value = serde_json::from_slice(&generated.stdout).expect("one JSON line");
    assert_eq!(line["completion"], greedy);
    let stop = &out["stop"];
    assert_eq!(stop["text"], stop["expected"], "{stop}");
    assert_eq!(stop["finish"], "stop");
    let context = out["context_error"]
        .as_str()
        .expect("a 400 for a request past the context");
    assert!(
        context.contains("maximum context length is 4096 tokens"),
        "{context}"
    );
    assert_eq!(out["wrong_model"], 404);
    assert!(["stop", "length", "tool_calls"].contains(&out["tools"].as_str().expect("finish")));
}

const MINI_SWE_AGENT: &str = r#"
import json, os, yaml
from importlib import resources
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.docker import DockerEnvironment
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel
config = yaml.safe_load(resources.files("minisweagent.config.benchmarks")
                        .joinpath("swebench_backticks.yaml").read_text())
agent_config = dict(config["agent"], step_limit=4, cost_limit=0)
model = LitellmTextbasedModel(model_name="hosted_vllm/tiny", cost_tracking="ignore_errors",
                              model_kwargs={"api_base": os.environ["URL"], "max_tokens": 24,
                                            "temperature": 1.0, "seed": 5})
env = DockerEnvironment(image=os.environ["IMAGE"], cwd="/testbed", timeout=30,
                        run_args=["--rm", "--network", "none"])
agent = DefaultAgent(model, env, **agent_config)
try:
    result = agent.run(task="Make the parser accept '=' inside values.")
finally:
    env.cleanup()
print(json.dumps({"exit": result.get("exit_status"), "calls": agent.n_calls,
                  "roles": [m["role"] for m in agent.messages]}))
"#;

#[test]
fn mini_swe_agent_and_harness_agent_run_episodes_on_trainer_serve() {
    let Some(venv) = swerve_tests::agent_venv("mini-swe-agent on trainer serve") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let model = chat_model(dir.path());
    let server = Server::start(&model);
    let harness = workspace_binary("harness");
    let id = "swerve__inicfg-3";
    let built = Command::new(&harness)
        .args(["images", "build", "-d", "swerve-mini", "-q", "-i", id])
        .current_dir(dir.path())
        .output()
        .expect("harness images build");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let image = "swerve/sweb.eval.x86_64.swerve_1776_inicfg-3:latest";

    // mini-swe-agent: its own prompts, parser and Docker environment; swerve's model.
    let out = python(
        &venv,
        MINI_SWE_AGENT,
        &[("URL", &server.url), ("IMAGE", image)],
    );
    let calls = out["calls"].as_u64().expect("calls");
    assert!((1..=4).contains(&calls), "{out}");
    assert!(
        ["LimitsExceeded", "RepeatedFormatError", "Submitted"]
            .contains(&out["exit"].as_str().expect("exit")),
        "{out}"
    );
    assert_eq!(out["roles"][0], "system");

    // harness agent on the same server through both protocols, and on the checkpoint itself
    // (`--model DIR`: harness starts its own `trainer serve`).
    let model_dir = model.display().to_string();
    let endpoint = ["--endpoint", &server.url, "--model", "tiny", "--token-ids"];
    let backends: [(&str, &str, &[&str]); 3] = [
        ("text", "tiny", &endpoint),
        ("tools", "tiny", &endpoint),
        ("text", "tiny-chat", &["--model", &model_dir]),
    ];
    for (n, (protocol, name, backend)) in backends.into_iter().enumerate() {
        let run_id = format!("serve-{n}-{}", std::process::id());
        let ran = Command::new(&harness)
            .args([
                "agent",
                "-d",
                "swerve-mini",
                "-i",
                id,
                "--run-id",
                &run_id,
                "-q",
            ])
            .args(backend)
            .args([
                "--max-tokens",
                "24",
                "--seed",
                "1",
                "--step-limit",
                "4",
                "--protocol",
                protocol,
            ])
            .current_dir(dir.path())
            .output()
            .expect("harness agent");
        assert!(
            ran.status.success(),
            "{}",
            String::from_utf8_lossy(&ran.stderr)
        );
        let path = dir
            .path()
            .join("logs/agent")
            .join(&run_id)
            .join(name)
            .join(id)
            .join("trajectory.json");
        let t: Value = serde_json::from_str(&fs_err::read_to_string(&path).expect("trajectory"))
            .expect("json");
        let reason = t["reason"].as_str().expect("reason");
        assert!(
            ["format_errors", "step_limit", "submitted", "context"].contains(&reason),
            "{protocol}: {reason} {}",
            t["detail"]
        );
        let turn = &t["turns"][0]["reply"];
        let ids = turn["token_ids"]
            .as_array()
            .expect("the server's token ids are kept");
        assert_eq!(
            ids.len(),
            turn["logprobs"].as_array().expect("logprobs").len()
        );
        assert_eq!(turn["completion_tokens"].as_u64(), Some(ids.len() as u64));
    }
}

#[test]
fn a_checkpoint_in_process_answers_agent_turns_with_its_sampled_ids() {
    use swerve_harness::agent::{self, AgentConfig, AgentProgress, EndReason, Protocol};
    use swerve_harness::execution::DatasetSource;
    use swerve_trainer::agent::ModelPolicy;
    use swerve_trainer::generate::SamplingConfig;
    struct Silent;
    impl AgentProgress for Silent {
        fn message(&self, _: &str) {}
        fn start(&self, _: usize, _: usize) {}
        fn done(&self, _: &str, _: EndReason) {}
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let model = chat_model(dir.path());
    let sampling = SamplingConfig {
        temperature: 1.0,
        max_new_tokens: 24,
        seed: 3,
        ..SamplingConfig::default()
    };
    let policy = std::sync::Arc::new(
        ModelPolicy::load(
            &model,
            &dfdx::prelude::Cpu::default(),
            "in-process",
            sampling,
        )
        .expect("the checkpoint loads"),
    );
    let tokenizer = swerve_trainer::tokenizer::Tokenizer::from_file(&model.join("tokenizer.json"))
        .expect("tokenizer");
    let id = "swerve__inicfg-3";
    let mut source = DatasetSource::resolve("swerve-mini", "test", None).expect("rows");
    source.filter(&[id.to_owned()]).expect("the row");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut turns = Vec::new();
    for (run, protocol) in [
        ("a", Protocol::Text),
        ("b", Protocol::Text),
        ("c", Protocol::Tools),
    ] {
        let config = AgentConfig {
            run_id: format!("in-process-{run}-{}", std::process::id()),
            source: source.clone(),
            protocol,
            limits: agent::EpisodeLimits {
                steps: 3,
                ..Default::default()
            },
            container: Default::default(),
            max_workers: 1,
            log_root: dir.path().join("logs"),
            predictions: dir.path().join(format!("{run}.jsonl")),
        };
        let summary = runtime
            .block_on(agent::run(&config, policy.clone(), &Silent))
            .expect("the run");
        let episode = &summary.episodes[0];
        assert!(
            [
                EndReason::FormatErrors,
                EndReason::StepLimit,
                EndReason::Submitted
            ]
            .contains(&episode.reason),
            "{episode:?}"
        );
        let path = agent::model_dir(&config.log_root, &config.run_id, "in-process")
            .join(id)
            .join(agent::TRAJECTORY_FILE);
        let t: Value =
            serde_json::from_str(&fs_err::read_to_string(path).expect("trajectory")).expect("json");
        let first = t["turns"][0]["reply"].clone();
        let ids: Vec<u32> = first["token_ids"]
            .as_array()
            .expect("the sampled ids")
            .iter()
            .map(|v| v.as_u64().expect("id") as u32)
            .collect();
        assert_eq!(
            first["logprobs"].as_array().expect("logprobs").len(),
            ids.len()
        );
        if protocol == Protocol::Text {
            // The text is the sampled ids decoded, never ids re-encoded from text.
            assert_eq!(
                first["content"],
                tokenizer.decode(&ids, true).expect("decodes")
            );
        }
        let replies: Vec<Value> = t["turns"]
            .as_array()
            .expect("turns")
            .iter()
            .map(|turn| turn["reply"].clone())
            .collect();
        turns.push(replies);
    }
    assert_eq!(turns[0], turns[1], "an episode replays the same");
}
