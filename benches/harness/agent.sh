#!/usr/bin/env bash
# `harness agent` beside mini-swe-agent 2.4.6 on the same image and commands, episodes per
# hour, and `trainer serve` under concurrent clients, in one run:
#
#   benches/harness/agent.sh [BIN_DIR]     (default: target/release; holds harness, trainer)
#
# 1. Per action: the same 60 shell commands in a container of swerve-mini's swerve__inicfg-3
#    image, run by `harness agent` (a scripted policy: each reply one command) and by
#    mini-swe-agent's own DockerEnvironment (`docker exec` per action). For swerve: each
#    command's round trip through the episode's shell session (output captured, head and tail)
#    and each turn's whole cost between model replies (the command, the container's liveness
#    and disk checks), from the trajectory; for mini-swe-agent: each `execute()` call, timed
#    around it.
# 2. Episodes per hour: swerve-mini's 13 gold episodes (3 turns each) with 1, 2 and 4 workers
#    (containers at once).
# 3. `trainer serve` on the tiny chat checkpoint (`tiny-chat-model` example): 32 chat requests
#    of 32 new tokens at 1, 4 and 8 concurrent clients (openai client, threads): requests/s and
#    completion tokens/s.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/target/release}"
venv="$("$root/scripts/agent-venv.sh")"
work="$(mktemp -d)"
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
cd "$work"
id=swerve__inicfg-3
image=swerve/sweb.eval.x86_64.swerve_1776_inicfg-3:latest
"$bin/harness" images build -d swerve-mini -q >/dev/null

python3 - "$id" <<'PY'
import json, sys
commands = ["true", "ls", "cat inicfg/parser.py", "git status --short", "python3 -c 'print(1)'",
            "grep -rn parse inicfg | head -5"] * 10
reply = lambda c: f"THOUGHT: next.\n\n```mswea_bash_command\n{c}\n```"
submit = reply("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached")
json.dump(commands, open("commands.json", "w"))
with open("actions.jsonl", "w") as f:
    f.write(json.dumps({"instance_id": sys.argv[1], "replies": [reply(c) for c in commands] + [submit]}) + "\n")
PY
"$bin/harness" agent -d swerve-mini -i "$id" --script actions.jsonl --run-id warm-up -q >/dev/null
"$bin/harness" agent -d swerve-mini -i "$id" --script actions.jsonl --run-id actions -q >/dev/null
"$venv/bin/python" - "$image" <<'PY'
import json, statistics, sys, time, os
os.environ["MSWEA_SILENT_STARTUP"] = "1"
from minisweagent.environments.docker import DockerEnvironment
commands = json.load(open("commands.json"))
t = json.load(open("logs/agent/actions/scripted/swerve__inicfg-3/trajectory.json"))
turns = t["turns"][:len(commands)]
swerve_exec = [u["actions"][0]["elapsed_ms"] for u in turns]
per_turn = t["wall_ms"] / t["steps"]
env = DockerEnvironment(image=sys.argv[1], cwd="/testbed", timeout=60,
                        run_args=["--rm", "--network", "none"])
env.execute({"command": "true"})
mswea = []
for c in commands:
    start = time.perf_counter()
    env.execute({"command": c})
    mswea.append((time.perf_counter() - start) * 1000)
env.cleanup()
m = statistics.median
print("per action, 60 commands (ms)      median   mean")
print(f"harness agent: command          {m(swerve_exec):6.1f} {statistics.mean(swerve_exec):6.1f}")
print(f"harness agent: whole turn        {'':6} {per_turn:6.1f}   (episode wall / turns, container start and removal included)")
print(f"mini-swe-agent: execute()        {m(mswea):6.1f} {statistics.mean(mswea):6.1f}")
print(f"ratio (swerve whole turn / mini-swe-agent mean): {per_turn / statistics.mean(mswea):.2f}")
PY

rows="$root/harness/datasets/swerve-mini/swerve-mini.jsonl"
python3 - "$rows" <<'PY'
import json, sys
reply = lambda c: f"THOUGHT: next.\n\n```mswea_bash_command\n{c}\n```"
with open("gold.jsonl", "w") as f:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        apply = f"cat > /tmp/fix.diff <<'SWERVE_EOF'\n{r['patch']}SWERVE_EOF\ngit apply /tmp/fix.diff"
        submit = reply("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached")
        f.write(json.dumps({"instance_id": r["instance_id"], "replies": [reply("git status"), reply(apply), submit]}) + "\n")
PY
echo
echo "gold episodes (13, 3 turns each)   wall    episodes/hour"
for workers in 1 2 4; do
    start=$(date +%s.%N)
    "$bin/harness" agent -d swerve-mini --script gold.jsonl --run-id "gold-$workers" --max-workers "$workers" -q >/dev/null
    end=$(date +%s.%N)
    python3 -c "w = $end - $start; print(f'  {$workers} worker(s)                      {w:5.1f} s  {13 / w * 3600:8.0f}')"
done

profile=(); [ "$(basename "$bin")" = release ] && profile=(--release)
model="$(cd "$root" && cargo run -q "${profile[@]}" -p swerve-tests --example tiny-chat-model -- "$work")"
"$bin/trainer" serve --model "$model" --served-model-name tiny --port 0 -q >serve.url 2>serve.log &
for _ in $(seq 100); do [ -s serve.url ] && break; sleep 0.2; done
echo
"$venv/bin/python" - "$(head -1 serve.url)" <<'PY'
import concurrent.futures, sys, time, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key="unused")
messages = [{"role": "user", "content": "Write a shell command that lists the files."}]
def one(seed):
    r = c.chat.completions.create(model="tiny", messages=messages, max_tokens=32, seed=seed,
                                  temperature=1.0)
    return r.usage.completion_tokens
one(0)
print("trainer serve, 32 requests         requests/s   completion tokens/s")
for clients in (1, 4, 8):
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        tokens = sum(pool.map(one, range(32)))
    wall = time.perf_counter() - start
    print(f"  {clients} concurrent client(s)          {32 / wall:8.1f}   {tokens / wall:10.0f}")
PY
