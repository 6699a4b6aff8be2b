//! Calling reward plugins: a fresh store per batch (or per sample in strict mode), failures
//! classified per sample, and a failed batch re-scored sample by sample so that one hostile
//! sample never costs the others their scores.

use std::sync::Arc;

use crate::bindings::{self, reward::RewardPre};
use crate::error::HostError;
use crate::outcome::Failure;
use crate::plugin::{Loaded, PluginReport};
use crate::store::{PluginState, PluginStore};
use crate::types::{PluginInfo, Sample, Score};

/// How samples are isolated from each other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// One store and one `score` call per batch, with the batch's samples' fuel and wall-clock
    /// budgets pooled. If the call fails, the batch is scored again in strict mode, so a failing
    /// sample gets its own classified failure and every other sample its score.
    #[default]
    Batch,
    /// A fresh store for every sample, with the sample's own budgets.
    Strict,
}

/// The outcome of one sample under one plugin.
pub type SampleOutcome = Result<Score, Failure>;

/// A loaded reward plugin. Cheap to clone; share it across threads.
#[derive(Clone)]
pub struct RewardPlugin {
    loaded: Arc<Loaded>,
    pre: RewardPre<PluginState>,
    report: PluginReport,
}

impl RewardPlugin {
    pub(crate) fn new(loaded: Arc<Loaded>) -> Result<RewardPlugin, HostError> {
        let pre = RewardPre::new(loaded.pre.clone()).map_err(|e| HostError::InvalidPlugin {
            plugin: loaded.name.clone(),
            reason: format!("its exports do not match the `reward` world: {e:#}"),
        })?;
        let mut plugin = RewardPlugin {
            report: loaded.report.clone(),
            loaded,
            pre,
        };
        plugin.report.info = plugin.call_info()?;
        Ok(plugin)
    }

    /// The plugin's own description.
    pub fn info(&self) -> &PluginInfo {
        &self.report.info
    }

    /// What the host knows about the plugin.
    pub fn report(&self) -> &PluginReport {
        &self.report
    }

    fn call_info(&self) -> Result<PluginInfo, HostError> {
        let mut ps = PluginStore::new(&self.loaded.engine, &self.loaded.budgets, 1);
        let run = |ps: &mut PluginStore| -> wasmtime::Result<PluginInfo> {
            let world = self.pre.instantiate(&mut ps.store)?;
            Ok(world.call_info(&mut ps.store)?.into())
        };
        run(&mut ps).map_err(|e| HostError::InvalidPlugin {
            plugin: self.loaded.name.clone(),
            reason: format!("`info` failed: {}", ps.failure(&e).message),
        })
    }

    /// Scores samples; the result has one outcome per sample, in order.
    pub fn score(&self, samples: &[Sample], isolation: Isolation) -> Vec<SampleOutcome> {
        match isolation {
            Isolation::Strict => samples.iter().map(|s| self.score_one(s)).collect(),
            Isolation::Batch if samples.len() <= 1 => {
                samples.iter().map(|s| self.score_one(s)).collect()
            }
            Isolation::Batch => match self.call(samples) {
                Ok(outcomes) => outcomes,
                Err(failure) => {
                    tracing::debug!(plugin = %self.loaded.name, class = %failure.class, "batch failed; scoring its samples one by one");
                    samples.iter().map(|s| self.score_one(s)).collect()
                }
            },
        }
    }

    fn score_one(&self, sample: &Sample) -> SampleOutcome {
        match self.call(std::slice::from_ref(sample)) {
            Ok(mut v) => v.pop().expect("call returns one outcome per sample"),
            Err(failure) => Err(failure),
        }
    }

    /// One store, one instance, one `score` call for all `samples`. `Err` when the call itself
    /// failed (trap, budget, bad result count); per-sample errors are in the `Ok` vector.
    fn call(&self, samples: &[Sample]) -> Result<Vec<SampleOutcome>, Failure> {
        let wit: Vec<_> = samples.iter().map(bindings::sample_to_wit).collect();
        let mut ps = PluginStore::new(&self.loaded.engine, &self.loaded.budgets, samples.len());
        let result = self
            .pre
            .instantiate(&mut ps.store)
            .and_then(|world| world.call_score(&mut ps.store, &wit));
        let fuel = ps.fuel_consumed();
        let results = result.map_err(|e| ps.failure(&e))?;
        if results.len() != samples.len() {
            let mut f = Failure::invalid(format!(
                "`score` returned {} results for {} samples",
                results.len(),
                samples.len()
            ));
            f.fuel_consumed = fuel;
            return Err(f);
        }
        let tail = ps.output_tail();
        Ok(results
            .into_iter()
            .map(|r| match r {
                Ok(score) => bindings::score_from_wit(score).map_err(|m| Failure {
                    fuel_consumed: fuel,
                    ..Failure::invalid(m)
                }),
                Err(message) => {
                    let (message, truncated) = bindings::plugin_message(message);
                    Err(Failure {
                        class: crate::FailureClass::PluginError,
                        message,
                        stderr_tail: tail.clone(),
                        fuel_consumed: fuel,
                        truncated,
                    })
                }
            })
            .collect())
    }
}
