//! The plugin kit: write a swerve plugin in Rust by implementing one trait and calling one macro.
//!
//! A reward plugin implements [`RewardPlugin::score`] for one sample; an evaluator plugin
//! implements [`EvaluatorPlugin::parse`]. The kit generates the bindings of the
//! `swerve:plugin@0.1.0` worlds (from the repository's `wit/` folder, with wit-bindgen) and
//! [`export_reward!`] / [`export_evaluator!`] turn the implementation into the component's
//! exports. Build the crate as a `cdylib` for `wasm32-wasip2` and rustc emits the component.
//!
//! This crate is for plugin authors (it is compiled into guests); it is not the host, and it
//! grants a plugin nothing: what a plugin may do is decided by the host at run time.
//!
//! ```ignore
//! use swerve_plugin_kit::reward::{PluginInfo, Sample, Score};
//!
//! struct Length;
//!
//! impl swerve_plugin_kit::RewardPlugin for Length {
//!     fn info() -> PluginInfo {
//!         PluginInfo { name: "length".into(), version: "0.1.0".into(), description: "...".into() }
//!     }
//!     fn score(sample: &Sample) -> Result<Score, String> {
//!         Ok(Score::reward(sample.completion.chars().count() as f64))
//!     }
//! }
//!
//! swerve_plugin_kit::export_reward!(Length);
//! ```

#![allow(missing_docs)] // the generated bindings carry the WIT documentation

/// Bindings of the `reward` world: the records a reward plugin receives and returns.
pub mod reward {
    wit_bindgen::generate!({
        world: "reward",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_reward_world",
        default_bindings_module: "swerve_plugin_kit::reward",
    });

    // `PluginInfo`, `Sample` and `Score` are already at this module's root (the world `use`s them).
    pub use self::swerve::plugin::reward_types::{Execution, Metric, TestOutcome};
    pub use self::swerve::plugin::types::{File, Pair, TestResult, TestStatus};

    impl Score {
        /// A score with a reward and nothing else.
        pub fn reward(value: f64) -> Self {
            Score {
                reward: Some(value),
                metrics: Vec::new(),
                message: None,
            }
        }

        /// "Not applicable": the sample is left out of the weighted sum (TRL's `None`).
        pub fn not_applicable(message: impl Into<String>) -> Self {
            Score {
                reward: None,
                metrics: Vec::new(),
                message: Some(message.into()),
            }
        }

        /// Adds a named metric.
        pub fn with_metric(mut self, name: impl Into<String>, value: f64) -> Self {
            self.metrics.push(Metric {
                name: name.into(),
                value,
            });
            self
        }

        /// Sets the message.
        pub fn with_message(mut self, message: impl Into<String>) -> Self {
            self.message = Some(message.into());
            self
        }
    }

    impl Sample {
        /// The metadata value for `key`, if any.
        pub fn meta(&self, key: &str) -> Option<&str> {
            self.metadata
                .iter()
                .find(|p| p.key == key)
                .map(|p| p.value.as_str())
        }
    }
}

/// Bindings of the `evaluator` world: the records a log-parser plugin receives and returns.
#[allow(clippy::too_many_arguments)] // generated constructors mirror the WIT records
pub mod evaluator {
    wit_bindgen::generate!({
        world: "evaluator",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_evaluator_world",
        default_bindings_module: "swerve_plugin_kit::evaluator",
    });

    // `PluginInfo`, `LogContext` and `StatusMap` are already at this module's root.
    pub use self::swerve::plugin::types::{TestResult, TestStatus};
}

/// A reward plugin: scores one sample at a time.
pub trait RewardPlugin {
    /// Who the plugin is.
    fn info() -> reward::PluginInfo;

    /// Scores one sample; `Err(message)` fails this sample only.
    fn score(sample: &reward::Sample) -> Result<reward::Score, String>;

    /// Scores a batch; the default scores each sample in turn. Override it to share work
    /// across the samples of a batch.
    fn score_batch(samples: Vec<reward::Sample>) -> Vec<Result<reward::Score, String>> {
        samples.iter().map(Self::score).collect()
    }
}

/// An evaluator plugin: parses a test log into per-test statuses.
pub trait EvaluatorPlugin {
    /// Who the plugin is.
    fn info() -> evaluator::PluginInfo;

    /// Parses the test section of a log.
    fn parse(
        log: &str,
        context: &evaluator::LogContext,
    ) -> Result<Vec<evaluator::TestResult>, String>;
}

/// Exports a [`RewardPlugin`] implementation as the component's `reward` world.
#[macro_export]
macro_rules! export_reward {
    ($plugin:ty) => {
        #[doc(hidden)]
        pub struct SwerveRewardExport;

        impl $crate::reward::Guest for SwerveRewardExport {
            fn info() -> $crate::reward::PluginInfo {
                <$plugin as $crate::RewardPlugin>::info()
            }

            fn score(
                samples: ::std::vec::Vec<$crate::reward::Sample>,
            ) -> ::std::vec::Vec<::std::result::Result<$crate::reward::Score, ::std::string::String>>
            {
                <$plugin as $crate::RewardPlugin>::score_batch(samples)
            }
        }

        // The generated export glue is `unsafe extern "C"` by nature; it is wit-bindgen's, not ours.
        #[allow(unsafe_code)]
        const _: () = {
            $crate::reward::export_reward_world!(SwerveRewardExport with_types_in $crate::reward);
        };
    };
}

/// Exports an [`EvaluatorPlugin`] implementation as the component's `evaluator` world.
#[macro_export]
macro_rules! export_evaluator {
    ($plugin:ty) => {
        #[doc(hidden)]
        pub struct SwerveEvaluatorExport;

        impl $crate::evaluator::Guest for SwerveEvaluatorExport {
            fn info() -> $crate::evaluator::PluginInfo {
                <$plugin as $crate::EvaluatorPlugin>::info()
            }

            fn parse(
                log: ::std::string::String,
                context: $crate::evaluator::LogContext,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::evaluator::TestResult>,
                ::std::string::String,
            > {
                <$plugin as $crate::EvaluatorPlugin>::parse(&log, &context)
            }
        }

        #[allow(unsafe_code)]
        const _: () = {
            $crate::evaluator::export_evaluator_world!(SwerveEvaluatorExport with_types_in $crate::evaluator);
        };
    };
}
