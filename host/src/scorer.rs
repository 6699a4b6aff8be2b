//! Scoring many samples with several weighted reward plugins, spread over worker threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::combine::{combine, effective_reward};
use crate::error::HostError;
use crate::outcome::{Failure, Fallbacks};
use crate::reward::{Isolation, RewardPlugin};
use crate::types::{Sample, Score};

/// Native stack of every thread that calls into plugins: well above the largest wasm stack
/// budget ([`crate::MAX_WASM_STACK_BYTES`]) so that wasm stack exhaustion is a trap, never a
/// native stack overflow.
pub const WORKER_STACK_BYTES: usize = 16 << 20;

/// A reward plugin and its weight in the combined reward.
#[derive(Clone)]
pub struct WeightedPlugin {
    /// The plugin.
    pub plugin: RewardPlugin,
    /// Its weight (TRL's `reward_weights`).
    pub weight: f64,
}

/// How a [`Scorer`] runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScorerConfig {
    /// Worker threads. Default: the number of available cores.
    pub jobs: usize,
    /// Samples per batch (per store). Default 16.
    pub batch_size: usize,
    /// Batch or strict isolation. Default batch.
    pub isolation: Isolation,
    /// Fallback reward per failure class. Default: none (not applicable).
    pub fallbacks: Fallbacks,
}

impl Default for ScorerConfig {
    fn default() -> Self {
        ScorerConfig {
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            batch_size: 16,
            isolation: Isolation::Batch,
            fallbacks: Fallbacks::default(),
        }
    }
}

/// One plugin's result for one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginResult {
    /// The plugin's name (from its `info`).
    pub plugin: String,
    /// Its weight.
    pub weight: f64,
    /// What it returned, or how it failed.
    pub outcome: Result<Score, Failure>,
    /// The reward it contributes: its own, or its failure class's fallback.
    pub reward: Option<f64>,
}

/// Every plugin's result for one sample and the combined reward.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleScores {
    /// The weighted combination (`None` when no plugin gave a reward).
    pub reward: Option<f64>,
    /// Per plugin, in the order the plugins were given.
    pub plugins: Vec<PluginResult>,
}

/// Scores samples with weighted reward plugins on a pool of threads.
pub struct Scorer {
    plugins: Vec<WeightedPlugin>,
    config: ScorerConfig,
}

impl Scorer {
    /// A scorer for these plugins.
    pub fn new(plugins: Vec<WeightedPlugin>, config: ScorerConfig) -> Scorer {
        Scorer { plugins, config }
    }

    /// The plugins, in order.
    pub fn plugins(&self) -> &[WeightedPlugin] {
        &self.plugins
    }

    /// Scores every sample; the result is in input order. `progress` is called with the number
    /// of samples finished after each batch.
    pub fn score(
        &self,
        samples: &[Sample],
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<SampleScores>, HostError> {
        let batch = self.config.batch_size.max(1);
        let chunks: Vec<&[Sample]> = samples.chunks(batch).collect();
        let next = AtomicUsize::new(0);
        let jobs = self.config.jobs.clamp(1, chunks.len().max(1));
        let mut done: Vec<(usize, Vec<SampleScores>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..jobs)
                .map(|i| {
                    std::thread::Builder::new()
                        .name(format!("swerve-score-{i}"))
                        .stack_size(WORKER_STACK_BYTES)
                        .spawn_scoped(scope, || {
                            let mut out = Vec::new();
                            loop {
                                let c = next.fetch_add(1, Ordering::Relaxed);
                                let Some(chunk) = chunks.get(c) else { break };
                                out.push((c, self.score_chunk(chunk)));
                                progress(chunk.len());
                            }
                            out
                        })
                        .map_err(HostError::Thread)
                })
                .collect::<Result<_, _>>()?;
            Ok::<_, HostError>(
                workers
                    .into_iter()
                    .flat_map(|w| w.join().expect("scoring threads do not panic"))
                    .collect(),
            )
        })?;
        done.sort_by_key(|(c, _)| *c);
        Ok(done.into_iter().flat_map(|(_, s)| s).collect())
    }

    /// Scores one batch with every plugin on the calling thread (which must have a large
    /// stack; see [`WORKER_STACK_BYTES`]).
    pub fn score_chunk(&self, chunk: &[Sample]) -> Vec<SampleScores> {
        let per_plugin: Vec<Vec<Result<Score, Failure>>> = self
            .plugins
            .iter()
            .map(|p| p.plugin.score(chunk, self.config.isolation))
            .collect();
        (0..chunk.len())
            .map(|i| {
                let plugins: Vec<PluginResult> = self
                    .plugins
                    .iter()
                    .zip(&per_plugin)
                    .map(|(p, outcomes)| {
                        let outcome = outcomes[i].clone();
                        PluginResult {
                            plugin: p.plugin.info().name.clone(),
                            weight: p.weight,
                            reward: effective_reward(&outcome, &self.config.fallbacks),
                            outcome,
                        }
                    })
                    .collect();
                SampleScores {
                    reward: combine(plugins.iter().map(|p| (p.weight, p.reward))),
                    plugins,
                }
            })
            .collect()
    }
}
