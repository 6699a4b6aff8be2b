//! Runtime-shaped parameters of a Llama/Qwen2 causal LM, their Hugging Face names, and AdamW.
//!
//! dfdx 0.13's `nn` modules need compile-time sizes, so the weights live in plain
//! `(usize,)`/`(usize, usize)` tensors held by these structs (one build serves every
//! `config.json`), and parameter iteration, initialisation and the optimiser step are written
//! here instead of dfdx's `TensorCollection` machinery.

use std::collections::BTreeMap;

use dfdx::prelude::{Device, Dtype, Gradients, HasShape, Shape, Tensor};
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::config::ModelConfig;
use super::kernels::{AdamScalars, KernelMode, Kernels};

/// A 1-D parameter (norm weights, biases).
pub type Vector<E, D> = Tensor<(usize,), E, D>;
/// A 2-D parameter, stored as Hugging Face stores it: `(out_features, in_features)` for linear
/// layers, `(vocab, hidden)` for embeddings.
pub type Matrix<E, D> = Tensor<(usize, usize), E, D>;

/// One parameter seen through [`ModelParams::named`] or [`ModelParams::named_mut`]: `V` and `M`
/// are references to a [`Vector`] or a [`Matrix`].
#[derive(Debug)]
pub enum Param<V, M> {
    /// A 1-D parameter.
    Vector(V),
    /// A 2-D parameter.
    Matrix(M),
}

/// A linear layer `y = x Wᵀ + b`.
#[derive(Debug, Clone)]
pub struct Linear<E: Dtype, D: Device<E>> {
    /// `(out_features, in_features)`.
    pub weight: Matrix<E, D>,
    /// `(out_features,)`, when the layer has a bias.
    pub bias: Option<Vector<E, D>>,
}

/// The parameters of one decoder layer.
#[derive(Debug, Clone)]
pub struct LayerParams<E: Dtype, D: Device<E>> {
    /// RMSNorm weight before attention.
    pub input_layernorm: Vector<E, D>,
    /// Query projection, `num_heads · head_dim` outputs.
    pub q_proj: Linear<E, D>,
    /// Key projection, `num_kv_heads · head_dim` outputs.
    pub k_proj: Linear<E, D>,
    /// Value projection, `num_kv_heads · head_dim` outputs.
    pub v_proj: Linear<E, D>,
    /// Output projection back to `hidden_size`.
    pub o_proj: Linear<E, D>,
    /// RMSNorm weight before the MLP.
    pub post_attention_layernorm: Vector<E, D>,
    /// SwiGLU gate, `(intermediate, hidden)`.
    pub gate_proj: Matrix<E, D>,
    /// SwiGLU up projection, `(intermediate, hidden)`.
    pub up_proj: Matrix<E, D>,
    /// SwiGLU down projection, `(hidden, intermediate)`.
    pub down_proj: Matrix<E, D>,
}

/// All parameters of the model.
#[derive(Debug, Clone)]
pub struct ModelParams<E: Dtype, D: Device<E>> {
    /// Token embeddings, `(vocab, hidden)`.
    pub embed_tokens: Matrix<E, D>,
    /// Decoder layers, bottom to top.
    pub layers: Vec<LayerParams<E, D>>,
    /// Final RMSNorm weight.
    pub norm: Vector<E, D>,
    /// LM head `(vocab, hidden)`; `None` when tied to `embed_tokens`.
    pub lm_head: Option<Matrix<E, D>>,
}

/// Lists every parameter with its Hugging Face name; `$($m)?` is `mut` for the mutable variant.
/// One listing serves both so that the names cannot drift apart.
macro_rules! named_params {
    ($p:expr, $($m:ident)?) => {{
        let p = $p;
        let mut out = Vec::new();
        out.push(("model.embed_tokens.weight".to_owned(), Param::Matrix(& $($m)? p.embed_tokens)));
        for (i, layer) in (& $($m)? p.layers).into_iter().enumerate() {
            let pre = format!("model.layers.{i}.");
            out.push((format!("{pre}input_layernorm.weight"), Param::Vector(& $($m)? layer.input_layernorm)));
            for (proj, lin) in [
                ("q_proj", & $($m)? layer.q_proj),
                ("k_proj", & $($m)? layer.k_proj),
                ("v_proj", & $($m)? layer.v_proj),
                ("o_proj", & $($m)? layer.o_proj),
            ] {
                out.push((format!("{pre}self_attn.{proj}.weight"), Param::Matrix(& $($m)? lin.weight)));
                if let Some(bias) = & $($m)? lin.bias {
                    out.push((format!("{pre}self_attn.{proj}.bias"), Param::Vector(bias)));
                }
            }
            out.push((format!("{pre}post_attention_layernorm.weight"), Param::Vector(& $($m)? layer.post_attention_layernorm)));
            out.push((format!("{pre}mlp.gate_proj.weight"), Param::Matrix(& $($m)? layer.gate_proj)));
            out.push((format!("{pre}mlp.up_proj.weight"), Param::Matrix(& $($m)? layer.up_proj)));
            out.push((format!("{pre}mlp.down_proj.weight"), Param::Matrix(& $($m)? layer.down_proj)));
        }
        out.push(("model.norm.weight".to_owned(), Param::Vector(& $($m)? p.norm)));
        if let Some(head) = & $($m)? p.lm_head {
            out.push(("lm_head.weight".to_owned(), Param::Matrix(head)));
        }
        out
    }};
}

/// A parameter by reference.
pub type ParamRef<'a, E, D> = Param<&'a Vector<E, D>, &'a Matrix<E, D>>;
/// A parameter by mutable reference.
pub(crate) type ParamMut<'a, E, D> = Param<&'a mut Vector<E, D>, &'a mut Matrix<E, D>>;

/// The shape every parameter must have for `config`, by Hugging Face name, in
/// [`ModelParams::named`] order.
pub fn expected_shapes(config: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (h, hd, inter) = (
        config.hidden_size,
        config.head_dim,
        config.intermediate_size,
    );
    let (q_out, kv_out) = (config.num_heads * hd, config.num_kv_heads * hd);
    let mut out = vec![(
        "model.embed_tokens.weight".to_owned(),
        vec![config.vocab_size, h],
    )];
    for i in 0..config.num_layers {
        let pre = format!("model.layers.{i}.");
        out.push((format!("{pre}input_layernorm.weight"), vec![h]));
        for (proj, rows, cols, bias) in [
            ("q_proj", q_out, h, config.qkv_bias),
            ("k_proj", kv_out, h, config.qkv_bias),
            ("v_proj", kv_out, h, config.qkv_bias),
            ("o_proj", h, q_out, config.o_bias),
        ] {
            out.push((format!("{pre}self_attn.{proj}.weight"), vec![rows, cols]));
            if bias {
                out.push((format!("{pre}self_attn.{proj}.bias"), vec![rows]));
            }
        }
        out.push((format!("{pre}post_attention_layernorm.weight"), vec![h]));
        out.push((format!("{pre}mlp.gate_proj.weight"), vec![inter, h]));
        out.push((format!("{pre}mlp.up_proj.weight"), vec![inter, h]));
        out.push((format!("{pre}mlp.down_proj.weight"), vec![h, inter]));
    }
    out.push(("model.norm.weight".to_owned(), vec![h]));
    if !config.tie_word_embeddings {
        out.push(("lm_head.weight".to_owned(), vec![config.vocab_size, h]));
    }
    out
}

impl<E: Dtype, D: Device<E>> ModelParams<E, D> {
    /// Every parameter with its Hugging Face name (`model.layers.0.self_attn.q_proj.weight`), in
    /// a fixed order: embeddings, layers bottom-up, final norm, LM head.
    pub fn named(&self) -> Vec<(String, ParamRef<'_, E, D>)> {
        named_params!(self,)
    }

    /// [`ModelParams::named`] with mutable references.
    pub fn named_mut(&mut self) -> Vec<(String, ParamMut<'_, E, D>)> {
        named_params!(self, mut)
    }

    /// Moves `target` towards these parameters: `target ← (1 − α) · target + α · self`, tensor
    /// by tensor (TR-DPO's reference update, TRL's `sync_ref_model`). Both must have the same
    /// shapes (the same model).
    pub fn mix_into(&self, target: &mut ModelParams<E, D>, alpha: f64) {
        let keep = E::from_f64(1.0 - alpha).expect("a finite weight");
        let take = E::from_f64(alpha).expect("a finite weight");
        let mix = |t: &mut Vec<E>, s: Vec<E>| {
            for (t, s) in t.iter_mut().zip(s) {
                *t = *t * keep + s * take;
            }
        };
        for ((_, source), (_, dest)) in self.named().into_iter().zip(target.named_mut()) {
            match (source, dest) {
                (Param::Vector(s), Param::Vector(d)) => {
                    let mut values = d.as_vec();
                    mix(&mut values, s.as_vec());
                    d.copy_from(&values);
                }
                (Param::Matrix(s), Param::Matrix(d)) => {
                    let mut values = d.as_vec();
                    mix(&mut values, s.as_vec());
                    d.copy_from(&values);
                }
                _ => unreachable!("the same model has the same parameter kinds"),
            }
        }
    }

    /// Builds parameters from host values by name; `values(name, shape)` returns the row-major
    /// data of each tensor listed by [`expected_shapes`].
    pub fn from_host<F>(config: &ModelConfig, dev: &D, mut values: F) -> crate::error::Result<Self>
    where
        F: FnMut(&str, &[usize]) -> crate::error::Result<Vec<E>>,
    {
        let mut host = HostValues {
            dev,
            values: BTreeMap::new(),
        };
        for (name, shape) in expected_shapes(config) {
            let data = values(&name, &shape)?;
            host.values.insert(name, (shape, data));
        }
        let mut layers = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let pre = format!("model.layers.{i}.");
            let mut linear = |proj: &str| Linear {
                weight: host.matrix(&format!("{pre}self_attn.{proj}.weight")),
                bias: host.maybe_vector(&format!("{pre}self_attn.{proj}.bias")),
            };
            let (q_proj, k_proj, v_proj, o_proj) = (
                linear("q_proj"),
                linear("k_proj"),
                linear("v_proj"),
                linear("o_proj"),
            );
            layers.push(LayerParams {
                input_layernorm: host.vector(&format!("{pre}input_layernorm.weight")),
                q_proj,
                k_proj,
                v_proj,
                o_proj,
                post_attention_layernorm: host
                    .vector(&format!("{pre}post_attention_layernorm.weight")),
                gate_proj: host.matrix(&format!("{pre}mlp.gate_proj.weight")),
                up_proj: host.matrix(&format!("{pre}mlp.up_proj.weight")),
                down_proj: host.matrix(&format!("{pre}mlp.down_proj.weight")),
            });
        }
        Ok(Self {
            embed_tokens: host.matrix("model.embed_tokens.weight"),
            layers,
            norm: host.vector("model.norm.weight"),
            lm_head: (!config.tie_word_embeddings).then(|| host.matrix("lm_head.weight")),
        })
    }

    /// Random parameters for tests and from-scratch runs: matrices and biases drawn from
    /// N(0, `std`²), norm weights from 1 + N(0, `std`²) so that tests see non-trivial norms.
    /// Drawn on the host from a seeded generator, so every device gets the same numbers.
    pub fn random(config: &ModelConfig, dev: &D, seed: u64, std: f64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        Self::from_host(config, dev, |name, shape| {
            let n: usize = shape.iter().product();
            let offset = if name.ends_with("layernorm.weight") || name == "model.norm.weight" {
                1.0
            } else {
                0.0
            };
            Ok((0..n)
                .map(|_| E::from_f64(offset + std * standard_normal(&mut rng)).expect("finite"))
                .collect())
        })
        .expect("random values never fail")
    }

    /// A fresh, empty gradient store for [`crate::model::CausalLm::token_logps`].
    ///
    /// dfdx keeps every intermediate gradient in it after `backward`; call
    /// [`ModelParams::keep_param_grads`] right after each backward pass to drop them. (dfdx's
    /// own way, `retain_leafs`, needs tensor ids, which dfdx 0.13 does not expose outside its
    /// `nn` modules.)
    pub fn alloc_grads(&self) -> Gradients<E, D> {
        Gradients::leaky()
    }

    /// Moves this model's parameter gradients out of `grads` into a new store and drops the
    /// rest (activation gradients). Pass the result to the next micro-batch's forward to
    /// accumulate, or to [`AdamW::step`].
    pub fn keep_param_grads(&self, mut grads: Gradients<E, D>) -> Gradients<E, D> {
        let mut kept = Gradients::leaky();
        for (_, p) in self.named() {
            match p {
                Param::Vector(t) => move_grad(&mut grads, &mut kept, t),
                Param::Matrix(t) => move_grad(&mut grads, &mut kept, t),
            }
        }
        kept
    }

    /// Total number of scalar parameters.
    pub fn num_parameters(&self) -> usize {
        self.named()
            .into_iter()
            .map(|(_, p)| match p {
                Param::Vector(v) => v.shape().num_elements(),
                Param::Matrix(m) => m.shape().num_elements(),
            })
            .sum()
    }
}

/// Moves `t`'s gradient buffer from `from` to `to` without copying, allocating zeros on
/// either side where it had none (a tied tensor is moved once). Also how a recomputed block
/// takes its gradients in and out ([`super::recompute`]).
pub(crate) fn move_grad<S: Shape, E: Dtype, D: Device<E>>(
    from: &mut Gradients<E, D>,
    to: &mut Gradients<E, D>,
    t: &Tensor<S, E, D>,
) {
    let src = from.get_or_alloc_mut(t).expect("allocate gradient");
    let dst = to.get_or_alloc_mut(t).expect("allocate gradient");
    std::mem::swap(src, dst);
}

/// Host data by name, moved onto the device one tensor at a time by [`ModelParams::from_host`].
struct HostValues<'d, E, D> {
    dev: &'d D,
    values: BTreeMap<String, (Vec<usize>, Vec<E>)>,
}

impl<E: Dtype, D: Device<E>> HostValues<'_, E, D> {
    fn maybe_vector(&mut self, name: &str) -> Option<Vector<E, D>> {
        let (shape, data) = self.values.remove(name)?;
        Some(self.dev.tensor_from_vec(data, (shape[0],)))
    }

    fn vector(&mut self, name: &str) -> Vector<E, D> {
        self.maybe_vector(name)
            .expect("expected_shapes lists every parameter")
    }

    fn matrix(&mut self, name: &str) -> Matrix<E, D> {
        let (shape, data) = self
            .values
            .remove(name)
            .expect("expected_shapes lists every parameter");
        self.dev.tensor_from_vec(data, (shape[0], shape[1]))
    }
}

/// A standard normal sample by the Box–Muller transform (ten lines instead of a dependency on
/// `rand_distr`).
fn standard_normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.r#gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.r#gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// AdamW settings (PyTorch's `torch.optim.AdamW`, as used by TRL through `TrainingArguments`).
/// Saved with checkpoints, hence serialisable.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    /// Learning rate; default 1e-6 (TRL `GRPOConfig`).
    pub lr: f64,
    /// First-moment decay; default 0.9.
    pub beta1: f64,
    /// Second-moment decay; default 0.999.
    pub beta2: f64,
    /// Denominator epsilon; default 1e-8.
    pub eps: f64,
    /// Decoupled weight decay, applied as `p ← p − lr·wd·p` before the Adam update; default 0.0.
    pub weight_decay: f64,
    /// Clip the global L2 norm of all gradients to this value before the update; default
    /// `Some(1.0)` (`max_grad_norm`). `None` disables clipping.
    pub max_grad_norm: Option<f64>,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 1e-6,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: Some(1.0),
        }
    }
}

/// Per-parameter first and second moments.
#[derive(Debug, Clone)]
pub enum Moments<E: Dtype, D: Device<E>> {
    /// Moments of a 1-D parameter.
    Vector(Vector<E, D>, Vector<E, D>),
    /// Moments of a 2-D parameter.
    Matrix(Matrix<E, D>, Matrix<E, D>),
    /// Moments in host memory (row-major, the parameter's `shape`), which the fused CPU
    /// update rewrites in place instead of copying two tensors out and back every step.
    Host {
        /// The parameter's shape.
        shape: Vec<usize>,
        /// First moment.
        m: Vec<E>,
        /// Second moment.
        v: Vec<E>,
    },
}

impl<E: Dtype, D: Device<E>> Moments<E, D> {
    /// Both moments as host vectors with their shape.
    pub(crate) fn to_host(&self) -> (Vec<usize>, Vec<E>, Vec<E>) {
        match self {
            Self::Vector(m, v) => (vec![m.shape().0], m.as_vec(), v.as_vec()),
            Self::Matrix(m, v) => {
                let (r, c) = *m.shape();
                (vec![r, c], m.as_vec(), v.as_vec())
            }
            Self::Host { shape, m, v } => (shape.clone(), m.clone(), v.clone()),
        }
    }
}

/// What one optimiser step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    /// Global L2 norm of the gradients before clipping (TRL's `grad_norm`).
    pub grad_norm: f64,
    /// The factor the gradients were multiplied by (1 when not clipped).
    pub clip_scale: f64,
}

/// AdamW with decoupled weight decay and global-norm gradient clipping, over [`ModelParams`].
#[derive(Debug, Clone)]
pub struct AdamW<E: Dtype, D: Device<E>> {
    /// Settings.
    pub config: AdamWConfig,
    /// Steps taken so far (bias correction uses `step` after increment).
    pub step: u64,
    /// Moments by parameter name; created lazily at the first step.
    pub moments: BTreeMap<String, Moments<E, D>>,
    /// Which implementation of the update runs (fused on the CPU unless a test asks for the
    /// reference).
    pub kernels: KernelMode,
}

impl<E: Dtype, D: Device<E>> AdamW<E, D> {
    /// A fresh optimiser.
    pub fn new(config: AdamWConfig) -> Self {
        Self {
            config,
            step: 0,
            moments: BTreeMap::new(),
            kernels: KernelMode::Fused,
        }
    }
}

impl<E: Dtype, D: Kernels<E>> AdamW<E, D> {
    /// Global L2 norm of the gradients of `params` held in `grads` (missing gradients count as
    /// zero).
    pub fn grad_norm(&self, params: &ModelParams<E, D>, grads: &mut Gradients<E, D>) -> f64 {
        let mut total = 0.0;
        for (_, p) in params.named() {
            total += match p {
                Param::Vector(v) => D::grad_sq_sum(grads, v, self.kernels),
                Param::Matrix(m) => D::grad_sq_sum(grads, m, self.kernels),
            };
        }
        total.sqrt()
    }

    /// Clips, then updates every parameter in place from `grads`. The gradient store should be
    /// dropped afterwards (its gradients are keyed by the old tensors; see
    /// [`ModelParams::alloc_grads`]).
    pub fn step(
        &mut self,
        params: &mut ModelParams<E, D>,
        grads: &mut Gradients<E, D>,
    ) -> StepStats {
        let grad_norm = self.grad_norm(params, grads);
        let clip_scale = match self.config.max_grad_norm {
            // torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), at most 1.
            Some(max) => (max / (grad_norm + 1e-6)).min(1.0),
            None => 1.0,
        };
        self.step += 1;
        let h = step_scalars(&self.config, self.step, clip_scale);
        let mode = self.kernels;
        let host = D::host_moments(mode);
        for (name, p) in params.named_mut() {
            let entry = self.moments.entry(name);
            match p {
                Param::Vector(t) => {
                    let moments =
                        entry.or_insert_with(|| fresh_moments(t, vec![t.shape().0], host));
                    place(moments, &t.device().clone(), host);
                    match moments {
                        Moments::Host { m, v, .. } => {
                            D::adamw_update_host(t, grads, m, v, &h, mode)
                        }
                        Moments::Vector(m, v) => D::adamw_update(t, grads, m, v, &h, mode),
                        Moments::Matrix(..) => unreachable!("moment kinds follow parameter kinds"),
                    }
                }
                Param::Matrix(t) => {
                    let (r, c) = *t.shape();
                    let moments = entry.or_insert_with(|| fresh_moments(t, vec![r, c], host));
                    place(moments, &t.device().clone(), host);
                    match moments {
                        Moments::Host { m, v, .. } => {
                            D::adamw_update_host(t, grads, m, v, &h, mode)
                        }
                        Moments::Matrix(m, v) => D::adamw_update(t, grads, m, v, &h, mode),
                        Moments::Vector(..) => unreachable!("moment kinds follow parameter kinds"),
                    }
                }
            }
        }
        StepStats {
            grad_norm,
            clip_scale,
        }
    }
}

/// Zero moments for `t`: in host memory when the device updates them there.
fn fresh_moments<S: Shape, E: Dtype, D: Device<E>>(
    t: &Tensor<S, E, D>,
    shape: Vec<usize>,
    host: bool,
) -> Moments<E, D> {
    let n = t.shape().num_elements();
    if host {
        return Moments::Host {
            shape,
            m: vec![E::default(); n],
            v: vec![E::default(); n],
        };
    }
    let dev = t.device();
    match shape[..] {
        [n] => Moments::Vector(dev.zeros_like(&(n,)), dev.zeros_like(&(n,))),
        [r, c] => Moments::Matrix(dev.zeros_like(&(r, c)), dev.zeros_like(&(r, c))),
        _ => unreachable!("parameters are 1-D or 2-D"),
    }
}

/// Moves `moments` to where the device updates them: host memory for the fused CPU kernels,
/// tensors otherwise. A move happens after a checkpoint load or a change of kernels, never in a
/// steady run.
fn place<E: Dtype, D: Device<E>>(moments: &mut Moments<E, D>, dev: &D, host: bool) {
    if host == matches!(moments, Moments::Host { .. }) {
        return;
    }
    let (shape, m, v) = moments.to_host();
    *moments = if host {
        Moments::Host { shape, m, v }
    } else {
        match shape[..] {
            [n] => Moments::Vector(dev.tensor_from_vec(m, (n,)), dev.tensor_from_vec(v, (n,))),
            [r, c] => Moments::Matrix(
                dev.tensor_from_vec(m, (r, c)),
                dev.tensor_from_vec(v, (r, c)),
            ),
            _ => unreachable!("parameters are 1-D or 2-D"),
        }
    };
}

/// The scalars of one step, computed once.
fn step_scalars(config: &AdamWConfig, step: u64, clip: f64) -> AdamScalars {
    let t = i32::try_from(step).unwrap_or(i32::MAX);
    AdamScalars {
        lr: config.lr,
        beta1: config.beta1,
        beta2: config.beta2,
        eps: config.eps,
        decay: 1.0 - config.lr * config.weight_decay,
        bias1: 1.0 - config.beta1.powi(t),
        bias2: 1.0 - config.beta2.powi(t),
        clip,
    }
}
