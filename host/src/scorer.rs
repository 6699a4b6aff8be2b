//! Scoring many samples with several weighted reward plugins, spread over worker threads.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};

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

    /// Scores batches while `input` is still producing them, and hands each one back to
    /// `output` with its scores, in input order.
    ///
    /// `input` runs on the calling thread (reading and parsing a file, say), `jobs` workers
    /// score, and `output` runs on a thread of its own (writing the results, say), so the three
    /// overlap. Each batch carries a `tag` of the caller's that comes back with it. At most
    /// `2 × jobs + 1` batches are between `input` and `output` at any time, so memory is bounded
    /// by the batch size, not by the input's length. The first error `output` returns stops
    /// the run and is returned; batches after it are neither scored nor output.
    pub fn score_stream<T, E>(
        &self,
        input: impl Iterator<Item = (T, Vec<Sample>)>,
        output: impl FnMut(T, Vec<Sample>, Vec<SampleScores>) -> Result<(), E> + Send,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Result<(), E>, HostError>
    where
        T: Send,
        E: Send,
    {
        let jobs = self.config.jobs.max(1);
        let in_flight = 2 * jobs + 1;
        let (work_tx, work_rx) = mpsc::sync_channel::<(usize, T, Vec<Sample>)>(jobs);
        let work_rx = Mutex::new(work_rx);
        let (done_tx, done_rx) = mpsc::channel::<(usize, T, Vec<Sample>, Vec<SampleScores>)>();
        // One token per batch between `input` and `output`: taken before a batch is sent,
        // given back once it has been output.
        let (token_tx, token_rx) = mpsc::sync_channel::<()>(in_flight);
        for _ in 0..in_flight {
            token_tx.send(()).expect("the receiver is alive");
        }
        std::thread::scope(|scope| {
            for i in 0..jobs {
                let done_tx = done_tx.clone();
                let work_rx = &work_rx;
                std::thread::Builder::new()
                    .name(format!("swerve-score-{i}"))
                    .stack_size(WORKER_STACK_BYTES)
                    .spawn_scoped(scope, move || {
                        loop {
                            // The lock is held only while waiting for the next batch.
                            let next = work_rx.lock().expect("no worker panics").recv();
                            let Ok((index, tag, samples)) = next else {
                                break;
                            };
                            let scores = self.score_chunk(&samples);
                            progress(samples.len());
                            if done_tx.send((index, tag, samples, scores)).is_err() {
                                break;
                            }
                        }
                    })
                    .map_err(HostError::Thread)?;
            }
            drop(done_tx);
            let writer = std::thread::Builder::new()
                .name("swerve-score-output".into())
                .spawn_scoped(scope, move || {
                    let mut output = output;
                    let mut pending = BTreeMap::new();
                    let mut next = 0;
                    for (index, tag, samples, scores) in done_rx {
                        pending.insert(index, (tag, samples, scores));
                        while let Some((tag, samples, scores)) = pending.remove(&next) {
                            output(tag, samples, scores)?;
                            next += 1;
                            // Fails only once the input side has stopped.
                            let _ = token_tx.send(());
                        }
                    }
                    Ok(())
                })
                .map_err(HostError::Thread)?;
            for (index, (tag, samples)) in input.enumerate() {
                // No token: the output side has stopped (an error), so stop reading.
                if token_rx.recv().is_err() || work_tx.send((index, tag, samples)).is_err() {
                    break;
                }
            }
            drop(work_tx);
            Ok(writer.join().expect("the output thread does not panic"))
        })
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
