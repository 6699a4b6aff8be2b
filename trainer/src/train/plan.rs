//! The memory plan: before a run starts, an estimate of its peak memory on the chosen device,
//! item by item, compared with what the device has (`trainer plan` prints it alone).
//!
//! Everything is counted in f32 (the trainer's only training dtype). The items:
//! - **weights**, **gradients** (one buffer per parameter, kept across micro-batches) and the
//!   **optimizer** (AdamW's two moments);
//! - the **reference** model, only when β > 0 (GRPO);
//! - **activations** of one micro-batch's forward and backward pass: per decoder layer what the
//!   kernels keep for the backward pass (with `gradient_checkpointing`, only each layer's input,
//!   plus one layer's worth recomputed at a time), and the LM head's logits and log-softmax
//!   (chunked: one chunk at a time);
//! - **generation** (GRPO): the KV cache of a whole generation batch and, where the kernels
//!   decode on host buffers (the fused CPU kernels), their copy of the weights;
//! - on CUDA, two items measured on an H200 (`trainer/examples/gpu_parity.rs`, docs/gpu.md):
//!   what is **retained between steps** beyond weights and moments, and
//!   the LM head's per-chunk **weight gradient** in the backward pass.
//!
//! The per-layer counts follow the code: the fused CPU kernels keep a handful of `[tokens,
//! width]` buffers and one `[rows, heads, s, s]` probability tensor per layer; dfdx's own
//! operations (the reference path, which CUDA runs) keep every operation's output, and dfdx's
//! gradient store keeps every intermediate gradient until the backward pass ends, so about
//! twice as much. The estimate is checked against the measured peak RSS of training steps on
//! the CPU (`cargo bench -p swerve-trainer --bench train_step -- --plan`,
//! docs/benchmarks.md).

use std::fmt::Write as _;

use crate::device::DeviceSpec;
use crate::model::{KernelMode, LOGITS_CHUNK_ELEMENTS, ModelConfig};

const F32: u64 = 4;
const GIB: f64 = (1u64 << 30) as f64;

/// What a run will hold, in the terms of its settings. The training phase's peak is what the
/// layers keep plus the larger of the LM head's buffers and one layer's backward pass: the
/// head's are freed by its backward pass before the first layer's runs.
#[derive(Debug, Clone)]
pub struct PlanInputs {
    /// The model's shape.
    pub model: ModelConfig,
    /// Where it runs.
    pub device: DeviceSpec,
    /// Which kernels run (the CPU's fused ones, or dfdx's operations as on CUDA).
    pub kernels: KernelMode,
    /// Sequences per micro-batch of training.
    pub rows: usize,
    /// Tokens per sequence (prompt and completion).
    pub seq: usize,
    /// Completion tokens per sequence (whose log-probabilities are computed).
    pub completion: usize,
    /// Recompute each decoder layer in the backward pass.
    pub gradient_checkpointing: bool,
    /// Rows of the LM head computed at once (0: the model's default).
    pub logits_chunk_rows: usize,
    /// A frozen reference model is kept (GRPO with β > 0).
    pub reference: bool,
    /// Generation: sequences sampled together and their longest total length (GRPO).
    pub generation: Option<(usize, usize)>,
}

/// One line of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanItem {
    /// What it is.
    pub name: &'static str,
    /// Bytes at the peak.
    pub bytes: u64,
}

/// The estimate: what is held throughout, what each phase adds, and the peak, in bytes.
#[derive(Debug, Clone)]
pub struct MemoryPlan {
    /// The inputs it was made from.
    pub inputs: PlanInputs,
    /// Held throughout the run (weights, gradients, optimizer, reference, runtime).
    pub persistent: Vec<PlanItem>,
    /// Added while a micro-batch trains.
    pub training: Vec<PlanItem>,
    /// Added while completions are sampled (GRPO).
    pub generation: Vec<PlanItem>,
    /// The estimated peak: the persistent items and the larger phase.
    pub peak: u64,
}

fn total(items: &[PlanItem]) -> u64 {
    items.iter().map(|i| i.bytes).sum()
}

/// Bytes in MiB below a GiB, else in GiB.
fn size(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", bytes as f64 / GIB)
    }
}

/// The process itself on the CPU (its resident memory before any model was loaded, as
/// [`crate::runtime::init`] measured it; 64 MiB when it did not run) and a CUDA context with
/// cuBLAS's workspace on a GPU.
fn runtime_bytes(device: DeviceSpec) -> u64 {
    match device {
        DeviceSpec::Cpu => crate::runtime::baseline_rss().unwrap_or(64 << 20),
        DeviceSpec::Cuda(_) => 768 << 20,
    }
}

impl PlanInputs {
    fn params(&self) -> u64 {
        let c = &self.model;
        let (d, hd, f, v) = (
            c.hidden_size as u64,
            c.head_dim as u64,
            c.intermediate_size as u64,
            c.vocab_size as u64,
        );
        let (qw, kw) = (c.num_heads as u64 * hd, c.num_kv_heads as u64 * hd);
        let bias = if c.qkv_bias { qw + 2 * kw } else { 0 } + if c.o_bias { d } else { 0 };
        let layer = 2 * d + d * qw + 2 * d * kw + qw * d + bias + 3 * d * f;
        let head = if c.tie_word_embeddings { 0 } else { v * d };
        v * d + c.num_layers as u64 * layer + d + head
    }

    /// Floats one decoder layer keeps for its backward pass, and the extra floats its backward
    /// pass allocates while it runs.
    fn layer_floats(&self) -> (u64, u64) {
        let c = &self.model;
        let (b, s) = (self.rows as u64, self.seq as u64);
        let n = b * s;
        let (d, hd, f) = (
            c.hidden_size as u64,
            c.head_dim as u64,
            c.intermediate_size as u64,
        );
        let heads = c.num_heads as u64;
        let (qw, kw) = (heads * hd, c.num_kv_heads as u64 * hd);
        let scores = b * heads * s * s;
        match self.kernels {
            // blocks.rs: attention keeps h, q, k, v, the probabilities and its output before
            // o_proj; the MLP keeps h, gate, up and their product; each half's output is the
            // next one's input.
            KernelMode::Fused if self.device == DeviceSpec::Cpu => {
                let kept = n * (4 * d + 2 * qw + 2 * kw + 3 * f) + scores;
                let backward = n * (2 * d + 2 * qw + 2 * kw + 2 * f) + scores;
                (kept, backward)
            }
            // reference.rs: every operation's output (norms 3·d, projections and their biases,
            // RoPE 4 per rotated width, the attention's score, scaled, masked and softmax
            // tensors, the SwiGLU products), and as many gradients, which dfdx's store keeps.
            // The backward pass frees each operation's saved tensors as it runs it, so its
            // gradients overlap with about half of what the layer kept (measured on the CPU's
            // reference path).
            _ => {
                let kept = n * (8 * d + 7 * qw + 10 * kw + 5 * f) + 5 * scores;
                (kept, kept / 2)
            }
        }
    }

    /// Floats of the LM head and log-softmax with gradients over `rows` completion positions.
    fn head_floats(&self, rows: u64) -> u64 {
        let v = self.model.vocab_size as u64;
        match self.kernels {
            // logits, their host copy for the backward pass, and their gradient
            KernelMode::Fused if self.device == DeviceSpec::Cpu => 3 * rows * v,
            // logits, scaled, log-softmax, exp for the entropy, and their gradients
            _ => 8 * rows * v,
        }
    }

    fn chunk_rows(&self) -> u64 {
        match self.logits_chunk_rows {
            0 => (LOGITS_CHUNK_ELEMENTS / self.model.vocab_size).max(1) as u64,
            n => n as u64,
        }
    }

    /// The items of one training micro-batch's forward and backward pass.
    fn training(&self) -> Vec<PlanItem> {
        let c = &self.model;
        let (b, s, layers) = (self.rows as u64, self.seq as u64, c.num_layers as u64);
        let n = b * s;
        let d = c.hidden_size as u64;
        let (kept, backward) = self.layer_floats();
        let rows = b * self.completion as u64;
        let chunk = self.chunk_rows();
        let head = if rows <= chunk {
            self.head_floats(rows)
        } else {
            self.head_floats(chunk) + 2 * rows * d
        };
        // The head's buffers are freed by its backward pass before the first layer's runs: the
        // peak is the larger of the two on top of what the layers keep.
        let (layers_floats, layer_backward) = if self.gradient_checkpointing {
            // each layer's input, and one layer live at a time; each layer's output gradient
            // too where the device cannot free it (Kernels::release_grad: all but the CPU)
            let boundaries = if self.device == DeviceSpec::Cpu { 1 } else { 2 };
            (boundaries * layers * n * d, kept + backward)
        } else {
            (layers * kept, backward)
        };
        let transient = if head >= layer_backward {
            PlanItem {
                name: "LM head and log-softmax",
                bytes: head * F32,
            }
        } else {
            PlanItem {
                name: "a layer's backward pass",
                bytes: layer_backward * F32,
            }
        };
        let mut items = vec![
            PlanItem {
                name: "activations kept",
                bytes: (layers_floats + n * d) * F32,
            },
            transient,
        ];
        if let DeviceSpec::Cuda(_) = self.device {
            // The LM head's weight gradient of one chunk, allocated whole beside the
            // accumulated one: the backward pass's peak on an H200 was one vocabulary × hidden
            // buffer above the count (docs/gpu.md, "Memory").
            items.push(PlanItem {
                name: "LM head weight-gradient chunk",
                bytes: c.vocab_size as u64 * d * F32,
            });
        }
        items
    }

    /// The items of generation, when the run generates.
    fn generation(&self) -> Vec<PlanItem> {
        let Some((rows, len)) = self.generation else {
            return Vec::new();
        };
        let c = &self.model;
        let kw = (c.num_kv_heads * c.head_dim) as u64;
        let cache = 2 * c.num_layers as u64 * rows as u64 * len as u64 * kw;
        let mut items = vec![PlanItem {
            name: "generation KV cache",
            // the cache doubles its capacity as it grows (host buffers) or is concatenated
            // anew each step (dfdx's operations): twice its final size at the peak
            bytes: 2 * cache * F32,
        }];
        if self.kernels == KernelMode::Fused && self.device == DeviceSpec::Cpu {
            items.push(PlanItem {
                name: "generation weight copy",
                // HostWeights: every matrix in both layouts
                bytes: 2 * self.params() * F32,
            });
        }
        items
    }

    /// The plan for these inputs.
    pub fn plan(&self) -> MemoryPlan {
        let p = self.params() * F32;
        let mut items = vec![
            PlanItem {
                name: "weights",
                bytes: p,
            },
            PlanItem {
                name: "gradients",
                bytes: p,
            },
            PlanItem {
                name: "optimizer (AdamW moments)",
                bytes: 2 * p,
            },
        ];
        if self.reference {
            items.push(PlanItem {
                name: "reference model",
                bytes: p,
            });
        }
        items.push(PlanItem {
            name: "runtime",
            bytes: runtime_bytes(self.device),
        });
        if let DeviceSpec::Cuda(_) = self.device {
            // In use between steps beyond the context, weights and AdamW's moments: 0.32 × the
            // weights for 3B, 0.36 × for 0.5B, measured on an H200 (the same with dfdx's
            // allocation cache disabled; docs/gpu.md, "Memory").
            items.push(PlanItem {
                name: "retained between steps",
                bytes: p / 3,
            });
        }
        let training = self.training();
        let generation = self.generation();
        let peak = total(&items) + total(&training).max(total(&generation));
        MemoryPlan {
            inputs: self.clone(),
            persistent: items,
            training,
            generation,
            peak,
        }
    }
}

impl MemoryPlan {
    /// The plan as a table, with the device's memory when known.
    pub fn render(&self, available: Option<u64>) -> String {
        let i = &self.inputs;
        let mut out = format!(
            "memory plan on {} ({} parameters; {} × {} tokens per micro-batch, {} completion; \
             gradient checkpointing {}):\n",
            i.device,
            i.params(),
            i.rows,
            i.seq,
            i.completion,
            if i.gradient_checkpointing {
                "on"
            } else {
                "off"
            },
        );
        let mut section = |title: &str, items: &[PlanItem]| {
            if items.is_empty() {
                return;
            }
            let _ = writeln!(out, "  {title}:");
            for item in items {
                let _ = writeln!(out, "    {:<34} {:>11}", item.name, size(item.bytes));
            }
        };
        section("held throughout", &self.persistent);
        section("while a micro-batch trains", &self.training);
        section("while completions are sampled", &self.generation);
        let phase = if total(&self.generation) > total(&self.training) {
            "sampling"
        } else {
            "training"
        };
        let _ = write!(out, "  peak ({phase}) {:>28}", size(self.peak));
        if let Some(have) = available {
            let _ = write!(out, " of {}", size(have));
        }
        out
    }

    /// Settings that would fit in `available` bytes, tried in order: gradient checkpointing,
    /// then halving the micro-batch; empty when none does.
    pub fn suggestions(&self, available: u64) -> Vec<String> {
        let mut tried = self.inputs.clone();
        let mut changes = Vec::new();
        if !tried.gradient_checkpointing {
            tried.gradient_checkpointing = true;
            changes.push("gradient_checkpointing = true".to_owned());
            if tried.plan().peak <= available {
                return changes;
            }
        }
        while tried.rows > 1 {
            tried.rows /= 2;
            if tried.plan().peak <= available {
                changes.push(format!(
                    "per_device_train_batch_size = {} (with gradient_accumulation_steps \
                     raised to keep the batch)",
                    tried.rows
                ));
                return changes;
            }
        }
        Vec::new()
    }
}

/// What the device has: the CPU's available memory (`MemAvailable`), a GPU's total memory
/// (`nvidia-smi`); `None` when it cannot be read.
pub fn device_memory(device: DeviceSpec) -> Option<u64> {
    match device {
        DeviceSpec::Cpu => {
            let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
            let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib << 10)
        }
        DeviceSpec::Cuda(n) => {
            let out = std::process::Command::new("nvidia-smi")
                .args([
                    "--query-gpu=memory.total",
                    "--format=csv,noheader,nounits",
                    &format!("--id={n}"),
                ])
                .output()
                .ok()?;
            let mib: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
            Some(mib << 20)
        }
    }
}

/// The plan as text, for the run to print before it starts; an error naming settings that fit
/// when it exceeds what the device has, unless `force`.
pub fn check(plan: &MemoryPlan, force: bool) -> crate::error::Result<String> {
    let available = device_memory(plan.inputs.device);
    match available {
        Some(have) if plan.peak > have && !force => {
            let fits = plan.suggestions(have);
            let advice = if fits.is_empty() {
                "no smaller micro-batch fits either; use a smaller model or a larger device".into()
            } else {
                format!("settings that would fit: {}", fits.join(", "))
            };
            Err(crate::error::Error::MemoryPlan {
                plan: format!(
                    "{}\nthe estimated peak exceeds the device's memory; {advice} (--force runs \
                     anyway)",
                    plan.render(available)
                ),
            })
        }
        _ => Ok(plan.render(available)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn qwen05b() -> ModelConfig {
        ModelConfig::from_json(json!({
            "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
            "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
            "tie_word_embeddings": true
        }))
        .unwrap()
    }

    fn inputs(checkpointing: bool) -> PlanInputs {
        PlanInputs {
            model: qwen05b(),
            device: DeviceSpec::Cuda(0),
            kernels: KernelMode::Fused,
            rows: 8,
            seq: 1024,
            completion: 512,
            gradient_checkpointing: checkpointing,
            logits_chunk_rows: 0,
            reference: false,
            generation: Some((8, 1024)),
        }
    }

    #[test]
    fn counts_qwen_parameters_and_the_persistent_items() {
        let i = inputs(true);
        // Qwen2.5-0.5B: 494,032,768 parameters (q/k/v biases, tied embeddings).
        assert_eq!(i.params(), 494_032_768);
        let plan = i.plan();
        let items = &plan.persistent;
        let bytes = |name: &str| items.iter().find(|x| x.name == name).unwrap().bytes;
        assert_eq!(bytes("weights"), 494_032_768 * 4);
        assert_eq!(bytes("optimizer (AdamW moments)"), 2 * 494_032_768 * 4);
        assert!(!items.iter().any(|x| x.name == "reference model"));
        let phase = total(&plan.training).max(total(&plan.generation));
        assert_eq!(plan.peak, total(items) + phase);
    }

    #[test]
    fn checkpointing_and_chunking_shrink_the_activations() {
        let off = inputs(false).plan().peak;
        let on = inputs(true).plan().peak;
        assert!(on * 2 < off, "checkpointing: {on} vs {off}");
        let mut whole = inputs(true);
        whole.logits_chunk_rows = usize::MAX / 2;
        assert!(whole.plan().peak > on, "chunked head");
    }

    /// The peaks measured on an H200 (`examples/gpu_parity.rs`, docs/gpu.md "Memory against
    /// the plan"): the CUDA plan stays within −5 % and +20 % of each, erring high.
    #[test]
    fn cuda_plan_matches_the_peaks_measured_on_an_h200() {
        let qwen3b = ModelConfig::from_json(json!({
            "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 2048,
            "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
            "tie_word_embeddings": true
        }))
        .unwrap();
        let measured = [
            (qwen05b(), 1, 1024, 10_577.0),
            (qwen05b(), 2, 1024, 10_929.0),
            (qwen05b(), 4, 1024, 12_081.0),
            (qwen05b(), 1, 4096, 15_185.0),
            (qwen3b, 8, 1024, 65_041.0),
        ];
        for (model, rows, seq, mib) in measured {
            let plan = PlanInputs {
                model,
                device: DeviceSpec::Cuda(0),
                kernels: KernelMode::Reference,
                rows,
                seq,
                completion: seq - seq / 2,
                gradient_checkpointing: true,
                logits_chunk_rows: 0,
                reference: false,
                generation: None,
            }
            .plan();
            let ratio = plan.peak as f64 / (mib * (1u64 << 20) as f64);
            assert!(
                (0.95..1.2).contains(&ratio),
                "{rows}×{seq}: plan/measured {ratio:.3}"
            );
        }
    }

    #[test]
    fn refuses_what_does_not_fit_and_names_settings_that_do() {
        let plan = inputs(false).plan();
        let fits = plan.suggestions(plan.peak / 2);
        assert_eq!(
            fits.first().map(String::as_str),
            Some("gradient_checkpointing = true")
        );
        assert!(plan.suggestions(1 << 20).is_empty());
        let text = plan.render(Some(1 << 30));
        assert!(
            text.contains("peak (training)") && text.contains("of 1.00 GiB"),
            "{text}"
        );
    }
}
