//! What a run reports: every step's metrics in `metrics.jsonl` ([`metrics_log`]), the same in a
//! TensorBoard event file (`tensorboard`), and PNG curves drawn from the log at the end
//! (`plot`).

pub mod metrics_log;
pub(crate) mod plot;
mod tensorboard;
