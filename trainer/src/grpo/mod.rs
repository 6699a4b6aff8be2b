//! The GRPO objective as exact, tested `f64` math, following TRL 1.16.0's `GRPOTrainer`.
//!
//! The flow of one generation batch, each step a module:
//!
//! 1. `aggregation`: several reward functions' answers (None allowed) → one reward per completion.
//! 2. `advantages`: group means and stds → one advantage per completion.
//! 3. [`loss`]: per-token ratio, clipped surrogate and k3 KL → per-token loss and gradient, reduced
//!    per micro-batch by one of four [`LossType`]s; plus the clip and KL metrics.
//! 4. `metrics`: reward and completion metrics under TRL's names.
//!
//! `config` reads TRL's settings from TOML; [`case`] evaluates worked-example files (its
//! module docs give their layout). Nothing here depends on dfdx: the training step mirrors these
//! formulas and takes its per-token weights from [`loss::Normalisation::token_weights`].

pub(crate) mod advantages;
pub(crate) mod aggregation;
pub mod case;
mod config;
mod error;
pub mod loss;
pub(crate) mod metrics;
pub(crate) mod stats;

pub use advantages::{Advantages, GroupStats, ScaleRewards};
pub use config::{GrpoConfig, MultiObjectiveAggregation};
pub use error::GrpoError;
pub use loss::{LossType, Normalisation, ObjectiveParams};
