//! Calling evaluator plugins: a test log in, per-test statuses out, in a fresh store per call.

use std::sync::Arc;

use crate::bindings::{self, evaluator::EvaluatorPre};
use crate::error::HostError;
use crate::outcome::{Failure, FailureClass};
use crate::plugin::{Loaded, PluginReport};
use crate::store::{PluginState, PluginStore};
use swerve_log_parsers::StatusMap;

use crate::types::{LogContext, PluginInfo};

/// A loaded evaluator plugin. Cheap to clone; share it across threads.
#[derive(Clone)]
pub struct EvaluatorPlugin {
    loaded: Arc<Loaded>,
    pre: EvaluatorPre<PluginState>,
    report: PluginReport,
}

impl EvaluatorPlugin {
    pub(crate) fn new(loaded: Arc<Loaded>) -> Result<EvaluatorPlugin, HostError> {
        let pre = EvaluatorPre::new(loaded.pre.clone()).map_err(|e| HostError::InvalidPlugin {
            plugin: loaded.name.clone(),
            reason: format!("its exports do not match the `evaluator` world: {e:#}"),
        })?;
        let mut plugin = EvaluatorPlugin {
            report: loaded.report.clone(),
            loaded,
            pre,
        };
        let mut ps = PluginStore::new(&plugin.loaded.engine, &plugin.loaded.budgets, 1);
        let info = plugin
            .pre
            .instantiate(&mut ps.store)
            .and_then(|w| w.call_info(&mut ps.store))
            .map_err(|e| HostError::InvalidPlugin {
                plugin: plugin.loaded.name.clone(),
                reason: format!("`info` failed: {}", ps.failure(&e).message),
            })?;
        plugin.report.info = info.into();
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

    /// Parses a test log into a status map, in the plugin's order (a later result for the same
    /// name overrides an earlier one and keeps its place, as in SWE-bench's status maps).
    pub fn parse(&self, log: &str, context: &LogContext) -> Result<StatusMap, Failure> {
        let mut ps = PluginStore::new(&self.loaded.engine, &self.loaded.budgets, 1);
        let ctx = bindings::log_context_to_wit(context);
        let result = self
            .pre
            .instantiate(&mut ps.store)
            .and_then(|w| w.call_parse(&mut ps.store, log, &ctx));
        match result {
            Ok(Ok(list)) => Ok(bindings::statuses_from_wit(list)),
            Ok(Err(message)) => {
                let (message, truncated) = bindings::plugin_message(message);
                Err(Failure {
                    class: FailureClass::PluginError,
                    message,
                    stderr_tail: ps.output_tail(),
                    fuel_consumed: ps.fuel_consumed(),
                    truncated,
                })
            }
            Err(e) => Err(ps.failure(&e)),
        }
    }
}
