#!/usr/bin/env python3
"""Worked GRPO cases and sampling cases computed by TRL 1.16.0 and transformers themselves.

What it does
------------
1. Creates (or reuses) a virtual environment at ``--venv`` and installs pinned ``trl``, ``torch``,
   ``transformers`` and ``accelerate`` into it: torch from the CPU wheel index
   (https://download.pytorch.org/whl/cpu) when that host answers, else plain PyPI torch.
2. Re-runs itself with the venv's Python and writes, into ``--out``:

   * ``grpo-*.json``: GRPO case files in swerve's ``CaseFile`` layout (see
     ``trainer/src/grpo/case.rs``), one generation batch per file and one case per objective
     setting. Every expected number comes out of TRL's own code: an instance of
     ``trl.GRPOTrainer`` is made with ``object.__new__`` and given only the attributes its
     methods read (values taken from a real ``trl.GRPOConfig``, assigned as
     ``GRPOTrainer.__init__`` assigns them); the batch is produced by TRL's
     ``_prepare_inputs`` -> ``_generate_and_score_completions`` (with a ``rollout_func``
     returning fixed token ids and reward functions returning fixed rewards, ``None``
     included), and each micro-batch loss by TRL's ``compute_loss`` -> ``_compute_loss``,
     with ``_get_per_token_logps_and_entropies`` replaced on the instance by a stub that
     returns rows of fixed matrices (the current log-probs are one float64 leaf tensor, so
     ``torch.autograd`` gives d loss / d per-token log-prob). The logged metrics are those of
     TRL's ``GRPOTrainer.log`` (its averaging over micro-batches).
   * ``sampling.json``: logits processed by transformers' own ``MinPLogitsWarper``,
     ``RepetitionPenaltyLogitsProcessor`` and by the processor list that
     ``GenerationMixin._get_logits_processor`` builds for TRL's generation settings.

No TRL or transformers math is reimplemented here: the script only feeds tensors in and reads
results out. The only TRL behaviour changed is ``shuffle_sequence_dict`` (set to the identity in
``trl.trainer.grpo_trainer``), so that micro-batches are contiguous row ranges as in swerve's
case layout.

How to run
----------
    python3 generate.py --venv /tmp/trl-venv --out .

Python >= 3.10 is needed to create the venv. A fresh venv takes a few minutes (PyPI torch
brings CUDA wheels, about 3 GB); reruns reuse it. ``--no-install`` skips pip entirely
(the venv must already hold the pinned versions).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

PINS = {
    "trl": "1.16.0",
    "torch": "2.15.0",
    "transformers": "5.25.0",
    "accelerate": "1.16.0",
}
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


# --------------------------------------------------------------------------------------------
# Part 1: the virtual environment (runs with any python3)
# --------------------------------------------------------------------------------------------


def cpu_index_reachable() -> bool:
    try:
        with urllib.request.urlopen(CPU_INDEX + "/torch/", timeout=10) as response:
            return response.status == 200
    except Exception:
        return False


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_versions(python: Path) -> dict:
    code = (
        "import json, importlib.metadata as m\n"
        "out = {}\n"
        f"for name in {sorted(PINS)!r}:\n"
        "    try:\n"
        "        out[name] = m.version(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        out[name] = None\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def pins_satisfied(versions: dict) -> bool:
    # "2.15.0+cpu" satisfies torch==2.15.0, as pip's version matching does.
    return all((versions.get(name) or "").split("+")[0] == pin for name, pin in PINS.items())


def ensure_venv(venv: Path, install: bool) -> None:
    python = venv_python(venv)
    if not python.exists():
        print(f"creating venv {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if not install:
        return
    if pins_satisfied(installed_versions(python)):
        print(f"venv {venv} already holds {PINS}", flush=True)
        return
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    if cpu_index_reachable():
        print(f"installing torch=={PINS['torch']} from {CPU_INDEX}", flush=True)
        subprocess.run(pip + ["--index-url", CPU_INDEX, f"torch=={PINS['torch']}"], check=True)
    else:
        print(f"{CPU_INDEX} is not reachable: torch comes from PyPI", flush=True)
    subprocess.run(pip + [f"{name}=={pin}" for name, pin in PINS.items()], check=True)
    versions = installed_versions(python)
    if not pins_satisfied(versions):
        raise SystemExit(f"the venv holds {versions}, not the pinned {PINS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/trl-venv"))
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--no-install", action="store_true", help="do not run pip")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        generate(args.out.resolve())
        return
    venv = args.venv.resolve()
    ensure_venv(venv, install=not args.no_install)
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TRL_EXPERIMENTAL_SILENCE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    command = [str(venv_python(venv)), str(Path(__file__).resolve()), "--inside", "--out", str(args.out.resolve())]
    raise SystemExit(subprocess.run(command, env=env).returncode)


# --------------------------------------------------------------------------------------------
# Part 2: the generation batch (plain Python numbers)
# --------------------------------------------------------------------------------------------

PROMPT_BASE = 100  # prompt token id of row i is PROMPT_BASE + i: the stub reads rows from it
PAD, EOS = 0, 1
NUM_PROMPTS, G, L = 3, 4, 6
ROWS = NUM_PROMPTS * G

REWARD_NAMES = ["correct", "format", "brevity"]
REWARD_WEIGHTS = [1.0, 0.5, 0.25]  # exact in float32 (TRL stores the weights as float32)
# Rewards are exact in float32 too (TRL converts each reward function's output with dtype=float32).
# Group 0 varied with one None; group 1 identical (std 0); group 2 varied with Nones and row 11
# unscorable (every function None).
REWARDS = [
    [1.0, 1.0, 0.5],
    [0.0, 1.0, 0.25],
    [1.0, 0.0, 0.75],
    [0.0, None, 0.0],
    [1.0, 1.0, 0.5],
    [1.0, 1.0, 0.5],
    [1.0, 1.0, 0.5],
    [1.0, 1.0, 0.5],
    [1.0, None, 0.25],
    [1.0, 0.5, 0.5],
    [0.0, 1.0, 0.0],
    [None, None, None],
]
# Completion lengths and truncation: a truncated completion has L tokens and no EOS; row 7 has L
# tokens ending with EOS (full length but terminated).
LENGTHS = [6, 3, 5, 2, 4, 6, 1, 6, 2, 6, 3, 4]
TRUNCATED = [True, False, False, False, False, True, False, False, False, True, False, False]
# Per-row shift of the current log-probs from the old ones, so that some sequences move a lot:
# positive-advantage rows up (high clipping) and down, negative-advantage rows up (row 1: `delta`
# matters only there) and down (rows 3 and 10: the off-policy mask drops them).
ROW_SHIFT = [0.25, 0.3, 0.0, -0.35, 0.1, -0.2, 0.0, 0.2, 0.3, -0.3, -0.25, 0.05]


def build_batch() -> dict:
    rng = random.Random(20250116)
    completion_ids, mask, old, cur, ref, ent = [], [], [], [], [], []
    # Entropies are distinct multiples of 1/64, exact in float32 (TRL takes their quantile in
    # float32); distinct values keep quantile thresholds away from ties.
    entropy_values = iter(rng.sample(range(4, 200), sum(LENGTHS)))
    for i in range(ROWS):
        n = LENGTHS[i]
        ids = [rng.randrange(2, 20) for _ in range(n)]
        if not TRUNCATED[i]:
            ids[-1] = EOS
        completion_ids.append(ids)
        mask.append([1.0] * n + [0.0] * (L - n))
        o, c, r, e = [], [], [], []
        for t in range(L):
            if t >= n:
                o.append(0.0), c.append(0.0), r.append(0.0), e.append(0.0)
                continue
            old_lp = -round(rng.uniform(0.05, 2.5), 3)
            cur_lp = min(-0.001, round(old_lp + ROW_SHIFT[i] + rng.uniform(-0.3, 0.3), 3))
            ref_lp = min(-0.001, round(cur_lp + rng.uniform(-0.3, 0.3), 3))
            o.append(old_lp), c.append(cur_lp), r.append(ref_lp)
            e.append(next(entropy_values) / 64.0)
        old.append(o), cur.append(c), ref.append(r), ent.append(e)
    return {
        "completion_ids": completion_ids,
        "completion_lengths": LENGTHS,
        "truncated": TRUNCATED,
        "completion_mask": mask,
        "rewards_per_func": REWARDS,
        "old_logps": old,
        "cur_logps": cur,
        "ref_logps": ref,
        "entropies": ent,
    }


# --------------------------------------------------------------------------------------------
# Part 3: driving TRL (runs inside the venv)
# --------------------------------------------------------------------------------------------

# The objective and sampling keys of GRPOConfig that these files are about (the README lists them
# with their defaults, read from GRPOConfig itself).
OBJECTIVE_KEYS = [
    "loss_type",
    "beta",
    "use_bias_correction_kl",
    "epsilon",
    "epsilon_high",
    "delta",
    "sapo_temperature_pos",
    "sapo_temperature_neg",
    "vespo_k_pos",
    "vespo_lambda_pos",
    "vespo_k_neg",
    "vespo_lambda_neg",
    "importance_sampling_level",
    "off_policy_mask_threshold",
    "scale_rewards",
    "multi_objective_aggregation",
    "reward_weights",
    "mask_truncated_completions",
    "top_entropy_quantile",
    "entropy_coef",
    "use_adaptive_entropy",
    "entropy_coef_min",
    "entropy_coef_max",
    "entropy_coef_delta",
    "entropy_target",
    "num_iterations",
    "num_generations",
    "max_completion_length",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "generation_batch_size",
    "per_device_train_batch_size",
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_min",
    "vllm_importance_sampling_clip_max",
    "vllm_importance_sampling_cap",
    "sync_ref_model",
    "ref_model_mixup_alpha",
    "ref_model_sync_steps",
    "router_aux_loss_coef",
    "cast_lm_head_to_fp32",
    "num_generations_eval",
]
SAMPLING_KEYS = ["temperature", "top_p", "top_k", "min_p", "repetition_penalty", "generation_kwargs",
                 "cache_implementation"]

# Metrics whose value TRL computes in float32 whatever the input dtype (`.float()` on a boolean or
# integer tensor): float32 roundings of a ratio of counts (or of a mean of integer lengths).
FLOAT32_METRICS = [
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "completions/mean_terminated_length",
    "completions/min_terminated_length",
    "completions/max_terminated_length",
    "clip_ratio/low_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_mean",
    "clip_ratio/high_max",
    "clip_ratio/region_mean",
    "cispo_clip_ratio",
]
COMPUTED_BY = {
    "expected.advantages, expected.num_items_in_batch": "GRPOTrainer._prepare_inputs -> "
    "_generate_and_score_completions (-> _generate with a rollout_func, _calculate_rewards with the reward "
    "functions); advantages read from GRPOTrainer._logs['advantages'] (the whole batch), N from the "
    "batch's num_items_in_batch",
    "expected.metrics": "what _generate and _generate_and_score_completions logged, through GRPOTrainer.log",
    "cases[].expected.loss, micro_batch_losses": "GRPOTrainer.compute_loss -> _compute_loss, once per "
    "micro-batch as _prepare_inputs buffers them (split_tensor_dict, no shuffling); loss is their sum",
    "cases[].expected.grad_wrt_cur_logps": "torch.autograd: loss.backward() per micro-batch, accumulated on "
    "the float64 leaf tensor whose rows the stubbed _get_per_token_logps_and_entropies returns",
    "cases[].expected.metrics": "GRPOTrainer.log's average of what _compute_loss appended to "
    "GRPOTrainer._metrics['train'] (one value per micro-batch: micro_batch_metrics)",
    "cases[].expected.entropy_mask, off_policy_mask, phi_seq": "return values of "
    "GRPOTrainer.get_high_entropy_mask, get_off_policy_mask and get_gamma_weights as _compute_loss called "
    "them, rows concatenated over the micro-batches",
    "cases[].old_logps_from": "old_logps when TRL itself computed old_per_token_logps at generation time "
    "(gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0), cur_logps otherwise",
}



def clean(value):
    """JSON-safe: NaN and infinities become null; tensors become lists."""
    import torch

    if isinstance(value, torch.Tensor):
        return clean(value.detach().cpu().tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


class Harness:
    """Builds GRPOTrainer instances over one generation batch and runs TRL's methods on them."""

    def __init__(self, batch: dict, out_dir: Path):
        import torch
        from accelerate import Accelerator
        from torch import nn

        import trl.trainer.grpo_trainer as grpo_module

        torch.set_default_dtype(torch.float64)
        # Contiguous micro-batches: swerve's case files give micro-batches as row ranges.
        grpo_module.shuffle_sequence_dict = lambda seq_dict: seq_dict

        self.torch = torch
        self.batch = batch
        self.tmp = tempfile.mkdtemp(prefix="trl-cases-")
        self.Accelerator = Accelerator

        class PolicyStub(nn.Module):
            """Stands for the policy: TRL reads `.training` and `.is_gradient_checkpointing`."""

            is_gradient_checkpointing = False

        class RefStub(nn.Module):
            """Stands for the reference model (`self.ref_model`)."""

        class TokenizerStub:
            """TRL reads pad_token_id and calls batch_decode (for the reward functions' text)."""

            pad_token_id = PAD
            eos_token_id = EOS
            bos_token_id = None

            def batch_decode(self, ids, skip_special_tokens=True):
                return [" ".join(str(i) for i in row if i not in (PAD, EOS)) for row in ids]

        self.policy = PolicyStub().train()
        self.ref = RefStub()
        self.tokenizer = TokenizerStub()
        dtype = torch.float64
        self.old = torch.tensor(batch["old_logps"], dtype=dtype)
        self.ref_logps = torch.tensor(batch["ref_logps"], dtype=dtype)
        self.entropies = torch.tensor(batch["entropies"], dtype=dtype)
        self.cur = None  # the leaf tensor of the current case

        def make_reward(k, name):
            def reward(prompts, completions, completion_ids, **kwargs):
                return [REWARDS[int(p.split()[1])][k] for p in prompts]

            reward.__name__ = name
            return reward

        self.reward_funcs = [make_reward(k, name) for k, name in enumerate(REWARD_NAMES)]

    # --- the stubs TRL calls -----------------------------------------------------------------

    def rollout_func(self, prompts, trainer):
        rows = [int(p.split()[1]) for p in prompts]
        return {
            "prompt_ids": [[PROMPT_BASE + i] for i in rows],
            "completion_ids": [list(self.batch["completion_ids"][i]) for i in rows],
            "logprobs": None,
        }

    def per_token_logps_stub(self, trainer):
        harness = self

        def stub(model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
                 compute_aux_loss=False, **kwargs):
            rows = (input_ids[:, 0] - PROMPT_BASE).tolist()
            if model is harness.ref:
                source = harness.ref_logps
            elif trainer._harness_phase == "generate":
                source = harness.old  # the sampling policy, before any optimiser step
            else:
                source = harness.cur
            logps = source[rows, :logits_to_keep]
            entropies = harness.entropies[rows, :logits_to_keep] if compute_entropy else None
            trainer._harness_calls.append((trainer._harness_phase, "ref" if model is harness.ref else "policy"))
            return logps, entropies, None

        return stub

    # --- a trainer for one setting -----------------------------------------------------------

    def make_trainer(self, settings: dict):
        from collections import defaultdict, deque

        from transformers import TrainerState
        from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback, TrainerControl

        from trl import GRPOConfig, GRPOTrainer

        torch = self.torch
        config = {
            "output_dir": self.tmp,
            "report_to": "none",
            "use_cpu": True,
            "bf16": False,
            "logging_steps": 1,
            "num_generations": G,
            "max_completion_length": L,
            "reward_weights": list(REWARD_WEIGHTS),
        }
        config.update(settings)
        spg = config.get("steps_per_generation") or config.get("gradient_accumulation_steps", 1)
        config["per_device_train_batch_size"] = ROWS // spg
        args = GRPOConfig(**config)

        t = object.__new__(GRPOTrainer)
        t.args = args
        # TrainingArguments resets the accelerate state, so the accelerator comes after GRPOConfig.
        t.accelerator = self.Accelerator(cpu=True)
        t.model = self.policy
        t.processing_class = self.tokenizer
        t._tokenizer = self.tokenizer
        t._is_vlm = False
        t.eos_token_ids = [EOS]
        t._image_pad_token_id = None
        t._video_pad_token_id = None
        # Reward functions, as GRPOTrainer.__init__ sets them up.
        t.reward_funcs = list(self.reward_funcs)
        t.reward_func_names = [f.__name__ for f in self.reward_funcs]
        t.reward_weights = torch.tensor(args.reward_weights, dtype=torch.float32)
        t.reward_processing_classes = [None] * len(self.reward_funcs)
        t.rollout_func = self.rollout_func
        t._standalone_tools = []
        t._multi_environment = False
        t.environment_factories = None
        t.environments = None
        t.tools = []
        t._has_async_funcs = False
        t.chat_template = None
        # The rest of __init__'s assignments from args, in its order.
        t.max_completion_length = args.max_completion_length
        t.num_generations = args.num_generations
        t.max_tool_calling_iterations = args.max_tool_calling_iterations
        t.num_generations_eval = args.num_generations_eval or t.num_generations
        t.chat_template_kwargs = args.chat_template_kwargs or {}
        t.temperature = args.temperature
        t.top_p = args.top_p
        t.top_k = args.top_k
        t.min_p = args.min_p
        t.repetition_penalty = args.repetition_penalty
        t.use_transformers_continuous_batching = args.use_transformers_continuous_batching
        t.pad_to_multiple_of = args.pad_to_multiple_of
        t.use_vllm = args.use_vllm
        t.vllm_mode = args.vllm_mode
        t.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
        t.vllm_importance_sampling_mode = args.vllm_importance_sampling_mode
        t.vllm_importance_sampling_clip_max = args.vllm_importance_sampling_clip_max
        t.vllm_importance_sampling_clip_min = args.vllm_importance_sampling_clip_min
        t.loss_type = args.loss_type
        t.multi_objective_aggregation = args.multi_objective_aggregation
        t.router_aux_loss_coef = 0.0
        t.aux_loss_enabled = False  # not a Mixture-of-Experts model
        t.scale_rewards = args.scale_rewards
        t.importance_sampling_level = args.importance_sampling_level
        t.off_policy_mask_threshold = args.off_policy_mask_threshold
        t.mask_truncated_completions = args.mask_truncated_completions
        t.top_entropy_quantile = args.top_entropy_quantile
        t.entropy_coef = args.entropy_coef
        t.use_adaptive_entropy = args.use_adaptive_entropy
        t._entropy_bonus_enabled = t.entropy_coef != 0.0 or t.use_adaptive_entropy
        t._last_world_entropy = float("inf")
        t._entropy_window_stats = None
        t.shuffle_dataset = args.shuffle_dataset
        t.num_iterations = args.num_iterations
        t.epsilon_low = args.epsilon
        t.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
        t._step = 0
        t._buffered_inputs = None
        t.beta = args.beta
        t.ref_model = self.ref if t.beta != 0.0 else None
        t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        t._total_train_tokens = 0
        t._current_train_step_time = 0.0
        t.log_completions = False
        t.log_multimodal = args.log_multimodal
        t.log_unique_prompts = args.log_unique_prompts
        t.num_completions_to_print = args.num_completions_to_print
        t._logs = {
            "images": deque(maxlen=args.generation_batch_size),
            "prompt": deque(maxlen=args.generation_batch_size),
            "completion": deque(maxlen=args.generation_batch_size),
            "rewards": defaultdict(lambda: deque(maxlen=args.generation_batch_size)),
            "advantages": deque(maxlen=args.generation_batch_size),
            "extra": defaultdict(lambda: deque(maxlen=args.generation_batch_size)),
        }
        t._pending_extra_logs = defaultdict(list)
        t._pending_metrics = defaultdict(list)
        # What transformers.Trainer sets up and TRL reads.
        t.state = TrainerState()
        t.control = TrainerControl()
        t.callback_handler = CallbackHandler([DefaultFlowCallback], self.policy, self.tokenizer, None, None)
        t.current_gradient_accumulation_steps = args.gradient_accumulation_steps
        # The model stub.
        t._harness_phase = "generate"
        t._harness_calls = []
        t._get_per_token_logps_and_entropies = self.per_token_logps_stub(t)
        return t

    # --- one case ----------------------------------------------------------------------------

    def run(self, settings: dict) -> dict:
        """Runs one generation batch and all its micro-batches through TRL."""
        torch = self.torch
        t = self.make_trainer(settings)
        args = t.args
        spg = args.steps_per_generation
        self.cur = torch.tensor(self.batch["cur_logps"], dtype=torch.float64, requires_grad=True)

        captured = {"entropy_mask": [], "off_policy_mask": [], "phi_seq": []}
        cls = type(t)
        original_entropy_mask = cls.get_high_entropy_mask
        original_off_policy_mask = cls.get_off_policy_mask
        original_gamma = cls.get_gamma_weights

        def get_high_entropy_mask(entropies, mask, threshold):
            result = original_entropy_mask(t, entropies, mask, threshold)
            captured["entropy_mask"].append(result.detach().clone())
            return result

        def get_off_policy_mask(**kwargs):
            result = original_off_policy_mask(**kwargs)
            captured["off_policy_mask"].append(result.detach().clone())
            return result

        def get_gamma_weights(**kwargs):
            result = original_gamma(**kwargs)
            captured["phi_seq"].append(result.detach().clone())
            return result

        t.get_high_entropy_mask = get_high_entropy_mask
        t.get_off_policy_mask = get_off_policy_mask
        t.get_gamma_weights = get_gamma_weights

        generation_batch = [{"prompt": f"row {i}"} for i in range(ROWS)]
        micro_losses, micro_metrics, micro_batches = [], [], []
        generation = None
        for step in range(spg):
            t._step = step
            t._harness_phase = "generate"
            inputs = t._prepare_inputs(generation_batch)
            if generation is None:
                generation = {
                    "advantages": list(t._logs["advantages"]),
                    "num_items_in_batch": float(inputs["num_items_in_batch"]),
                    "completion_mask": torch.cat([b["completion_mask"] for b in t._buffered_inputs]).tolist(),
                    "old_logps_computed": "old_per_token_logps" in inputs,
                    "metrics": {k: list(v) for k, v in t._metrics["train"].items()},
                }
                t._metrics["train"].clear()
            start = step * args.per_device_train_batch_size
            rows = (inputs["prompt_ids"][:, 0] - PROMPT_BASE).tolist()
            assert rows == list(range(start, start + len(rows))), rows
            micro_batches.append([rows[0], rows[-1] + 1])
            t._harness_phase = "loss"
            before = {k: len(v) for k, v in t._metrics["train"].items()}
            loss = t.compute_loss(t.model, inputs)
            loss.backward()
            micro_losses.append(loss.item())
            micro_metrics.append(
                {k: v[before.get(k, 0):][0] for k, v in t._metrics["train"].items() if len(v) > before.get(k, 0)}
            )

        # TRL's own averaging of what it logged over the step(s).
        logged_loss_metrics = {k: list(v) for k, v in t._metrics["train"].items()}
        t._metrics["train"].update({k: v for k, v in generation["metrics"].items()})
        t.log({})
        logged = dict(t.state.log_history[-1])
        logged.pop("step", None)
        logged.pop("num_tokens", None)  # counts the stub's one-token prompts: meaningless here

        def rows_matrix(chunks):
            return [row for chunk in chunks for row in chunk.tolist()]

        result = {
            "advantages": generation["advantages"],
            "num_items_in_batch": generation["num_items_in_batch"],
            "completion_mask": generation["completion_mask"],
            "old_logps_computed": generation["old_logps_computed"],
            "micro_batches": micro_batches,
            "loss": sum(micro_losses),
            "micro_batch_losses": micro_losses,
            "grad": self.cur.grad.tolist(),
            "loss_metrics": {k: logged[k] for k in logged_loss_metrics if k in logged},
            "micro_batch_metrics": micro_metrics,
            "generation_metrics": {k: logged[k] for k in generation["metrics"] if k in logged and k != "num_tokens"},
            "model_calls": sorted(set(t._harness_calls)),
            "args": args,
        }
        if captured["entropy_mask"]:
            result["entropy_mask"] = [[1.0 if x else 0.0 for x in row] for row in rows_matrix(captured["entropy_mask"])]
        if captured["off_policy_mask"]:
            result["off_policy_mask"] = [row[0] for row in rows_matrix(captured["off_policy_mask"])]
        if captured["phi_seq"]:
            result["phi_seq"] = [row[0] for row in rows_matrix(captured["phi_seq"])]
        return result


def case_record(name: str, settings: dict, result: dict) -> dict:
    """One case in swerve's layout, plus TRL's own keys for the options swerve lacks."""
    args = result["args"]
    loss_type = args.loss_type
    record = {
        "name": name,
        "old_logps_from": "old_logps" if result["old_logps_computed"] else "cur_logps",
        "loss_type": loss_type,
        "scale_rewards": settings.get("scale_rewards", args.scale_rewards),
        "epsilon": args.epsilon,
        "epsilon_high": args.epsilon_high,
        "beta": args.beta,
        "use_bias_correction_kl": args.use_bias_correction_kl,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "steps_per_generation": args.steps_per_generation,
        "num_iterations": args.num_iterations,
        "micro_batches": result["micro_batches"],
        "importance_sampling_level": args.importance_sampling_level,
        "delta": args.delta,
        "off_policy_mask_threshold": args.off_policy_mask_threshold,
        "top_entropy_quantile": args.top_entropy_quantile,
        "entropy_coef": args.entropy_coef,
    }
    if loss_type == "sapo":
        record["sapo_temperature_pos"] = args.sapo_temperature_pos
        record["sapo_temperature_neg"] = args.sapo_temperature_neg
    if loss_type == "vespo":
        for key in ("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"):
            record[key] = getattr(args, key)
    expected = {
        "loss": {loss_type: result["loss"]},
        "micro_batch_losses": {loss_type: result["micro_batch_losses"]},
        "grad_wrt_cur_logps": {loss_type: result["grad"]},
        "metrics": result["loss_metrics"],
    }
    if len(result["micro_batch_losses"]) > 1:
        # What each micro-batch logged; `metrics` is TRL's mean of these (GRPOTrainer.log).
        expected["micro_batch_metrics"] = result["micro_batch_metrics"]
    if result["generation_metrics_differing"]:
        expected["generation_metrics"] = result["generation_metrics_differing"]
    for key in ("entropy_mask", "off_policy_mask", "phi_seq"):
        if key in result:
            expected[key] = result[key]
    record["expected"] = expected
    return record


def case_file(harness: Harness, name: str, description: str, file_settings: dict, cases: list,
              versions: dict) -> dict:
    batch = harness.batch
    # The reward side under every scale_rewards value, for the file's aggregation and masking.
    by_mode, aliases, metrics, num_items = {}, {}, None, None
    for value in ("group", "batch", "none", True, False):
        result = harness.run({**file_settings, "scale_rewards": value})
        if value is True or value is False:
            aliases[str(value).lower()] = result["advantages"]
        else:
            by_mode[value] = result["advantages"]
        if value == "group":
            metrics, num_items = result["generation_metrics"], result["num_items_in_batch"]
            mask_after = result["completion_mask"]
    records = []
    for case_name, settings in cases:
        print(f"  {name}/{case_name}", flush=True)
        settings = {**file_settings, **settings}
        expected_old = settings.pop("_expect_old", None)
        result = harness.run(settings)
        # The reward side of a case is the file's: same advantages (for its scale_rewards) and N.
        mode = {True: "group", False: "none"}.get(settings.get("scale_rewards", "group"),
                                                  settings.get("scale_rewards", "group"))
        assert result["advantages"] == by_mode[mode], case_name
        assert result["num_items_in_batch"] == num_items, case_name
        result["generation_metrics_differing"] = {
            k: v for k, v in result["generation_metrics"].items() if metrics.get(k) != v
        }
        if expected_old is not None:
            assert result["old_logps_computed"] == expected_old, (case_name, result["old_logps_computed"])
        records.append(case_record(case_name, settings, result))
    return {
        "name": name,
        "description": description,
        "generated_by": versions,
        "computed_by": COMPUTED_BY,
        "dtype": {
            "torch_default_dtype": "float64",
            "inputs": "float64 tensors (log-probs, entropies); rewards and reward weights pass through TRL's "
            "float32 conversions exactly (they are dyadic)",
            "float32_metrics": FLOAT32_METRICS,
            "note": "TRL computes the metrics listed in float32_metrics in float32 (`.float()` on a boolean or "
            "integer tensor) whatever the input dtype, so they are float32 roundings (compare them at about "
            "1e-7 relative, or round the exact value to f32); its entropy quantile threshold is float32 too. "
            "Everything else is float64.",
        },
        "config": {
            "num_prompts": NUM_PROMPTS,
            "num_generations": G,
            "max_completion_length": L,
            "reward_names": REWARD_NAMES,
            "reward_weights": REWARD_WEIGHTS,
            "multi_objective_aggregation": file_settings.get("multi_objective_aggregation", "sum_then_normalize"),
            "std_eps": 1e-4,
            "mask_truncated_completions": file_settings.get("mask_truncated_completions", False),
            "num_processes": 1,
        },
        "inputs": {
            "completion_lengths": batch["completion_lengths"],
            "truncated": batch["truncated"],
            "completion_mask": batch["completion_mask"],
            "rewards_per_func": batch["rewards_per_func"],
            "old_logps": batch["old_logps"],
            "cur_logps": batch["cur_logps"],
            "ref_logps": batch["ref_logps"],
            "entropies": batch["entropies"],
            "completion_ids": batch["completion_ids"],
        },
        "expected": {
            "advantages": by_mode,
            "advantages_scale_rewards_bool": aliases,
            "num_items_in_batch": num_items,
            "completion_mask_after_masking": mask_after,
            "metrics": metrics,
        },
        "cases": records,
    }


# --------------------------------------------------------------------------------------------
# Part 4: the case lists
# --------------------------------------------------------------------------------------------

# Off-policy in TRL: the old log-probs are computed at generation time when
# gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0; num_iterations = 2
# is the simplest way there with GAS = SPG.
OFF = {"num_iterations": 2, "_expect_old": True}
ON = {"num_iterations": 1, "_expect_old": False}
TWO_MB = {"gradient_accumulation_steps": 2, "steps_per_generation": 2}
THREE_MB = {"gradient_accumulation_steps": 3, "steps_per_generation": 3}


def c(name, **settings):
    base = dict(OFF)
    if settings.pop("on_policy", False):
        base = dict(ON)
    base.update(settings)
    return name, base


LOSS_TYPE_CASES = [
    c("cispo_default", loss_type="cispo"),
    c("cispo_eps_high_5", loss_type="cispo", epsilon_high=5.0),
    c("cispo_eps_high_1.2", loss_type="cispo", epsilon_high=1.2),
    c("cispo_eps_high_5_on_policy", loss_type="cispo", epsilon_high=5.0, on_policy=True),
    c("cispo_eps_high_5_two_micro_batches", loss_type="cispo", epsilon_high=5.0, **TWO_MB),
    c("cispo_eps_high_5_beta", loss_type="cispo", epsilon_high=5.0, beta=0.04),
    c("cispo_eps_high_1.2_sequence", loss_type="cispo", epsilon_high=1.2, importance_sampling_level="sequence"),
    c("sapo_default", loss_type="sapo"),
    c("sapo_temperatures", loss_type="sapo", sapo_temperature_pos=0.5, sapo_temperature_neg=2.0),
    c("sapo_default_on_policy", loss_type="sapo", on_policy=True),
    c("sapo_default_two_micro_batches", loss_type="sapo", **TWO_MB),
    c("sapo_sequence_beta", loss_type="sapo", importance_sampling_level="sequence", beta=0.04),
    c("luspo_default_token_level", loss_type="luspo"),
    c("luspo_sequence", loss_type="luspo", importance_sampling_level="sequence"),
    c("luspo_sequence_epsilons", loss_type="luspo", importance_sampling_level="sequence", epsilon=0.1,
      epsilon_high=0.15),
    c("luspo_sequence_on_policy", loss_type="luspo", importance_sampling_level="sequence", on_policy=True),
    c("luspo_sequence_two_micro_batches", loss_type="luspo", importance_sampling_level="sequence", **TWO_MB),
    c("luspo_sequence_beta", loss_type="luspo", importance_sampling_level="sequence", beta=0.04),
    c("vespo_default", loss_type="vespo"),
    c("vespo_params", loss_type="vespo", vespo_k_pos=1.5, vespo_lambda_pos=2.0, vespo_k_neg=2.5,
      vespo_lambda_neg=1.0),
    c("vespo_default_on_policy", loss_type="vespo", on_policy=True),
    c("vespo_default_two_micro_batches", loss_type="vespo", **TWO_MB),
    c("vespo_default_beta", loss_type="vespo", beta=0.04),
]

CLIPPING_CASES = [
    *[c(f"delta_{lt}", loss_type=lt, delta=1.25) for lt in ("grpo", "bnpo", "dr_grpo", "dapo")],
    c("delta_dapo_eps_high", loss_type="dapo", delta=1.25, epsilon_high=0.28),
    c("delta_luspo_sequence", loss_type="luspo", importance_sampling_level="sequence", delta=1.1),
    *[c(f"off_policy_mask_{lt}", loss_type=lt, off_policy_mask_threshold=0.1) for lt in ("grpo", "dapo")],
    c("off_policy_mask_dapo_on_policy", loss_type="dapo", off_policy_mask_threshold=0.1, on_policy=True),
    c("off_policy_mask_cispo", loss_type="cispo", epsilon_high=5.0, off_policy_mask_threshold=0.1),
    c("off_policy_mask_vespo", loss_type="vespo", off_policy_mask_threshold=0.1),
    *[c(f"sequence_{lt}", loss_type=lt, importance_sampling_level="sequence") for lt in
      ("grpo", "bnpo", "dr_grpo", "dapo")],
    c("sequence_grpo_on_policy", loss_type="grpo", importance_sampling_level="sequence", on_policy=True),
    c("sequence_dapo_two_micro_batches", loss_type="dapo", importance_sampling_level="sequence", **TWO_MB),
    *[c(f"sequence_delta_beta_{lt}", loss_type=lt, importance_sampling_level="sequence", delta=1.25, beta=0.04)
      for lt in ("grpo", "bnpo", "dapo")],
    c("sequence_delta_beta_grpo_no_bias_correction", loss_type="grpo", importance_sampling_level="sequence",
      delta=1.25, beta=0.04, use_bias_correction_kl=False),
    c("sequence_mask_beta_dapo_three_micro_batches", loss_type="dapo", importance_sampling_level="sequence",
      off_policy_mask_threshold=0.1, beta=0.04, **THREE_MB),
    *[c(f"token_beta_{lt}", loss_type=lt, beta=0.04, epsilon_high=0.28) for lt in ("grpo", "dapo")],
    c("token_beta_dapo_no_bias_correction", loss_type="dapo", beta=0.04, epsilon_high=0.28,
      use_bias_correction_kl=False),
    c("token_beta_dapo_on_policy", loss_type="dapo", beta=0.04, on_policy=True),
    # GAS = 1, SPG = 2: two optimiser steps per generation batch, so TRL computes old log-probs,
    # and the dapo normaliser is N / P * GAS / SPG = N / 2.
    c("dapo_gas1_spg2", loss_type="dapo", num_iterations=1, gradient_accumulation_steps=1,
      steps_per_generation=2),
    c("grpo_gas1_spg2", loss_type="grpo", num_iterations=1, gradient_accumulation_steps=1,
      steps_per_generation=2),
    *[c(f"{lt}_two_micro_batches", loss_type=lt, **TWO_MB) for lt in ("grpo", "bnpo", "dr_grpo", "dapo")],
]

SCALE_REWARDS_CASES = [
    c(f"scale_{str(value).lower()}_{lt}", loss_type=lt, scale_rewards=value)
    for value in ("group", "batch", "none", True, False)
    for lt in ("grpo", "dapo")
]

GDPO_CASES = [
    c(f"gdpo_scale_{value}_{lt}", loss_type=lt, scale_rewards=value)
    for value in ("group", "batch", "none")
    for lt in ("grpo", "dapo")
] + [
    c("gdpo_sequence_cispo", loss_type="cispo", epsilon_high=5.0, importance_sampling_level="sequence"),
    c("gdpo_two_micro_batches_dapo", loss_type="dapo", **TWO_MB),
]

MASK_TRUNCATED_CASES = [
    *[c(f"masked_{lt}", loss_type=lt) for lt in ("grpo", "bnpo", "dr_grpo", "dapo")],
    c("masked_dapo_two_micro_batches", loss_type="dapo", **TWO_MB),
    c("masked_sequence_grpo", loss_type="grpo", importance_sampling_level="sequence"),
    c("masked_cispo", loss_type="cispo", epsilon_high=5.0),
    c("masked_sapo", loss_type="sapo"),
    c("masked_luspo_sequence", loss_type="luspo", importance_sampling_level="sequence"),
    c("masked_vespo", loss_type="vespo"),
    c("masked_top_entropy_0.2_dapo", loss_type="dapo", top_entropy_quantile=0.2),
    c("masked_beta_dapo", loss_type="dapo", beta=0.04),
]

ENTROPY_CASES = [
    *[c(f"top_entropy_{q}_{lt}", loss_type=lt, top_entropy_quantile=q) for q in (0.2, 0.5)
      for lt in ("grpo", "dapo")],
    c("top_entropy_0.0_dapo", loss_type="dapo", top_entropy_quantile=0.0),
    c("top_entropy_0.2_dapo_two_micro_batches", loss_type="dapo", top_entropy_quantile=0.2, **TWO_MB),
    c("top_entropy_0.5_dapo_beta", loss_type="dapo", top_entropy_quantile=0.5, beta=0.04),
    c("top_entropy_0.2_cispo", loss_type="cispo", epsilon_high=5.0, top_entropy_quantile=0.2),
    c("top_entropy_0.5_sequence_grpo", loss_type="grpo", top_entropy_quantile=0.5,
      importance_sampling_level="sequence"),
    c("entropy_coef_0.01_dapo", loss_type="dapo", entropy_coef=0.01),
    c("entropy_coef_0.01_top_entropy_0.5_grpo_two_micro_batches", loss_type="grpo", entropy_coef=0.01,
      top_entropy_quantile=0.5, **TWO_MB),
]

FILES = [
    ("grpo-loss-types", "The loss types swerve lacks: cispo, sapo, luspo, vespo, with default and non-default "
     "parameters, on- and off-policy, one and two micro-batches, with and without a KL term.", {},
     LOSS_TYPE_CASES),
    ("grpo-clipping", "Two-sided clipping (delta), the off-policy sequence mask (off_policy_mask_threshold), "
     "sequence-level importance sampling (GSPO) with grpo/bnpo/dr_grpo/dapo, their combinations with beta, "
     "and the micro-batch normalisers (GAS, SPG).", {}, CLIPPING_CASES),
    ("grpo-scale-rewards", "Every scale_rewards value TRL accepts (group, batch, none, True, False) under "
     "sum_then_normalize.", {}, SCALE_REWARDS_CASES),
    ("grpo-gdpo", "multi_objective_aggregation = normalize_then_sum (GDPO): each reward function normalised "
     "per group, weighted sum, then normalised over the batch; scale_rewards has no effect there.",
     {"multi_objective_aggregation": "normalize_then_sum"}, GDPO_CASES),
    ("grpo-mask-truncated", "mask_truncated_completions = true: the three truncated completions leave the "
     "loss, the normalisers and the metrics but keep their rewards.", {"mask_truncated_completions": True},
     MASK_TRUNCATED_CASES),
    ("grpo-entropy", "top_entropy_quantile (0.0, 0.2, 0.5) and entropy_coef, from the per-token entropies "
     "in inputs.entropies.", {}, ENTROPY_CASES),
]


# --------------------------------------------------------------------------------------------
# Part 5: sampling (transformers' logits processors)
# --------------------------------------------------------------------------------------------

VOCAB = 20


def sampling_file(versions: dict) -> dict:
    import torch
    import transformers
    from transformers import GenerationConfig, LogitsProcessorList, MinPLogitsWarper, Qwen2Config, \
        Qwen2ForCausalLM, RepetitionPenaltyLogitsProcessor

    from trl import GRPOConfig

    torch.manual_seed(0)
    rng = random.Random(7)
    # Three rows: logits with a clear leader, a flat-ish row, and a row with a tie at the top.
    logits = [
        [round(rng.gauss(0.0, 2.0), 3) for _ in range(VOCAB)],
        [round(rng.gauss(0.0, 0.5), 3) for _ in range(VOCAB)],
        [round(rng.gauss(0.0, 1.5), 3) for _ in range(VOCAB)],
    ]
    logits[0][3] = 6.5
    logits[2][5] = logits[2][11] = 3.25
    # Previous token ids (prompt + completion so far), left-padded with PAD = 0 as generate sees them.
    input_ids = [
        [4, 7, 7, 12, 3, 19],
        [0, 0, 2, 5, 9, 2],
        [0, 11, 5, 5, 16, 8],
    ]
    attention_mask = [[0 if (i < 2 and row[i] == 0 and all(x == 0 for x in row[: i + 1])) else 1
                       for i in range(len(row))] for row in input_ids]
    scores = torch.tensor(logits, dtype=torch.float64)
    ids = torch.tensor(input_ids, dtype=torch.long)
    mask = torch.tensor(attention_mask, dtype=torch.long)

    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, pad_token_id=PAD,
                                         eos_token_id=EOS))
    defaults = GRPOConfig(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False)

    def trl_generation_config(settings):
        """The GenerationConfig GRPOTrainer.__init__ builds (transformers backend), then generate's preparation."""
        kwargs = {
            "max_new_tokens": 8,
            "do_sample": True,
            "pad_token_id": PAD,
            "bos_token_id": None,
            "eos_token_id": [EOS],
            "temperature": settings.get("temperature", defaults.temperature),
            "top_p": settings.get("top_p", defaults.top_p),
            "top_k": settings.get("top_k", defaults.top_k),
            "min_p": settings.get("min_p", defaults.min_p),
            "repetition_penalty": settings.get("repetition_penalty", defaults.repetition_penalty),
            "cache_implementation": defaults.cache_implementation,
        }
        config = GenerationConfig(**kwargs, disable_compile=True)
        config, _ = model._prepare_generation_config(config)
        return config

    def processors_for(settings):
        config = trl_generation_config(settings)
        return model._get_logits_processor(
            generation_config=config,
            input_ids_seq_length=ids.shape[1],
            encoder_input_ids=ids,
            prefix_allowed_tokens_fn=None,
            logits_processor=LogitsProcessorList(),
            device="cpu",
            model_kwargs={"attention_mask": mask},
        )

    def describe(processor):
        entry = {"class": type(processor).__name__}
        for attr in ("temperature", "top_k", "top_p", "min_p", "penalty", "min_tokens_to_keep"):
            if hasattr(processor, attr):
                entry[attr] = getattr(processor, attr)
        if hasattr(processor, "prompt_ignore_length") and processor.prompt_ignore_length is not None:
            entry["prompt_ignore_length"] = clean(processor.prompt_ignore_length)
        return entry

    def outputs(processed):
        return {
            "processed_logits": clean(processed),  # null = -inf (filtered out)
            "probs": clean(torch.softmax(processed, dim=-1)),  # generate samples from softmax(processed)
        }

    cases = []
    for min_p in (0.0, 0.05, 0.1, 0.3, 1.0):
        processed = MinPLogitsWarper(min_p=min_p)(ids, scores.clone())
        cases.append({"name": f"min_p_{min_p}", "processor": "MinPLogitsWarper", "min_p": min_p,
                      "min_tokens_to_keep": 1, **outputs(processed)})
    padding_lengths = (mask != 0).int().argmax(dim=1)
    for penalty in (1.1, 1.3, 2.0, 0.8):
        if penalty == 1.3:  # without prompt_ignore_length the left padding id 0 is penalised too
            processed = RepetitionPenaltyLogitsProcessor(penalty)(ids, scores.clone())
            cases.append({"name": f"repetition_penalty_{penalty}_whole_input", "processor":
                          "RepetitionPenaltyLogitsProcessor", "repetition_penalty": penalty,
                          "prompt_ignore_length": None, **outputs(processed)})
        processed = RepetitionPenaltyLogitsProcessor(penalty, prompt_ignore_length=padding_lengths)(ids, scores.clone())
        cases.append({"name": f"repetition_penalty_{penalty}", "processor": "RepetitionPenaltyLogitsProcessor",
                      "repetition_penalty": penalty, "prompt_ignore_length": clean(padding_lengths),
                      **outputs(processed)})

    generate_settings = [
        {},
        {"min_p": 0.1},
        {"repetition_penalty": 1.2},
        {"temperature": 0.7, "min_p": 0.1},
        {"temperature": 1.3, "min_p": 0.2},
        {"top_k": 5, "min_p": 0.2},
        {"top_p": 0.8, "min_p": 0.05},
        {"temperature": 0.7, "top_k": 8, "top_p": 0.9, "min_p": 0.1, "repetition_penalty": 1.2},
        {"temperature": 1.5, "top_k": 12, "top_p": 0.95, "min_p": 0.02, "repetition_penalty": 0.9},
        {"temperature": 0.5, "top_p": 0.7, "repetition_penalty": 1.5},
    ]
    order = None
    for settings in generate_settings:
        processors = processors_for(settings)
        processed = processors(ids, scores.clone())
        name = "generate_" + ("_".join(f"{k}_{v}" for k, v in settings.items()) or "trl_defaults")
        config = trl_generation_config(settings)
        cases.append({
            "name": name,
            "processor": "GenerationMixin._get_logits_processor",
            "settings": {k: getattr(config, k) for k in ("temperature", "top_k", "top_p", "min_p",
                                                         "repetition_penalty")},
            "processors": [describe(p) for p in processors],
            **outputs(processed),
        })
        if len(settings) == 5:
            order = [type(p).__name__ for p in processors]

    return {
        "name": "sampling",
        "description": "Logits processed by transformers' MinPLogitsWarper, RepetitionPenaltyLogitsProcessor and "
        "by the list GenerationMixin._get_logits_processor builds from GRPOTrainer's generation settings "
        "(the transformers backend of GRPOTrainer._generate_single_turn). null in processed_logits is -inf.",
        "generated_by": versions,
        "dtype": "float64 here; generate itself casts the logits to float32 before the processors "
        "(GenerationMixin._sample: outputs.logits[:, -1].to(dtype=torch.float32))",
        "processor_order": order,
        "processor_order_note": "generate applies the processors in list order: RepetitionPenaltyLogitsProcessor "
        "first (with the other non-sampling processors), then the sampling warpers TemperatureLogitsWarper, "
        "TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper, each only when enabled (temperature != 1.0, "
        "top_k != 0, top_p < 1.0, min_p is not None, repetition_penalty != 1.0); then softmax and sampling. "
        "The repetition penalty counts every previous token id (prompt included) except left padding "
        "(prompt_ignore_length = the attention mask's padding length per row) and applies once per distinct id: "
        "logit * penalty if logit < 0, else logit / penalty.",
        "transformers_generate_source": f"transformers {transformers.__version__}, "
        "generation/utils.py GenerationMixin._get_logits_processor",
        "inputs": {
            "vocab_size": VOCAB,
            "logits": logits,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
        },
        "cases": cases,
    }


# --------------------------------------------------------------------------------------------
# Part 6: output
# --------------------------------------------------------------------------------------------


def dumps(value, indent=0) -> str:
    """JSON with lists of scalars on one line (the matrices stay readable and the files small)."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f'{pad} {json.dumps(k)}: {dumps(v, indent + 1)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            return "[" + ", ".join(json.dumps(v, allow_nan=False) for v in value) + "]"
        if all(isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v) for v in value):
            rows = [pad + "  " + dumps(v) for v in value]
            return "[\n" + ",\n".join(rows) + "\n" + pad + " ]"
        items = [pad + " " + dumps(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, allow_nan=False)


def objective_defaults() -> dict:
    from trl import GRPOConfig

    config = GRPOConfig(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False)
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    out = {}
    for key in OBJECTIVE_KEYS + SAMPLING_KEYS:
        if key not in fields:
            out[key] = "absent from GRPOConfig"
            continue
        declared = fields[key].default
        out[key] = {"declared_default": declared if declared is not dataclasses.MISSING else None,
                    "after_post_init": getattr(config, key)}
    return out


def generate(out: Path) -> None:
    import importlib.metadata as metadata
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)
    # The unscorable row (every reward None) makes TRL warn on every batch, as intended.
    logging.getLogger("trl.trainer.grpo_trainer").setLevel(logging.ERROR)

    versions = {name: metadata.version(name) for name in ("trl", "torch", "transformers", "accelerate")}
    versions["python"] = sys.version.split()[0]
    print(f"generating with {versions}", flush=True)
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    batch = build_batch()
    harness = Harness(batch, out)
    written = []
    for name, description, file_settings, cases in FILES:
        data = case_file(harness, name, description, file_settings, cases, versions)
        path = out / f"{name}.json"
        path.write_text(dumps(clean(data)) + "\n")
        written.append(path)
    path = out / "sampling.json"
    path.write_text(dumps(clean(sampling_file(versions))) + "\n")
    written.append(path)
    # Not named grpo*.json: swerve's test reads every tests/data/grpo*.json as a case file.
    path = out / "trl-grpo-config-defaults.json"
    defaults = {"generated_by": versions, "grpo_config": objective_defaults()}
    path.write_text(dumps(clean(defaults)) + "\n")
    written.append(path)
    for path in written:
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
