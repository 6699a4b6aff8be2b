//! The `swebench-parsers` evaluator component: every parser of this crate (all 57 names of
//! SWE-bench 5.0.2) behind the `swerve:plugin/evaluator` world, chosen by the context's `parser`
//! (a dataset row's `log_parser`) or else by its `repo`; a `parser` of the form
//! `swe-rebench-v2:<name>` picks one of SWE-rebench V2's parsers instead (its names normalised
//! as its evaluation does). A parse that raises upstream is an
//! `Err` naming the exception.

use swerve_plugin_kit::evaluator::{LogContext, PluginInfo, TestResult, TestStatus};

use crate::{Parser, Status};

struct SwebenchParsers;

impl swerve_plugin_kit::EvaluatorPlugin for SwebenchParsers {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "swebench-parsers".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description:
                "SWE-bench 5 log parsers for every language (pytest, jest, gotest, cargo, ...)"
                    .into(),
        }
    }

    fn parse(log: &str, context: &LogContext) -> Result<Vec<TestResult>, String> {
        if let Some(name) = context.parser.strip_prefix(crate::REBENCH_PARSER_PREFIX) {
            let parser = crate::RebenchParser::from_name(name)
                .ok_or_else(|| format!("no SWE-rebench V2 log parser named `{name}`"))?;
            return Ok(parser
                .try_parse(log)
                .map_err(|err| format!("{name}: {err}"))?
                .iter()
                .map(|(name, status)| TestResult {
                    name: name.to_owned(),
                    status: to_wit(status),
                })
                .collect());
        }
        let parser = if context.parser.is_empty() {
            Parser::for_repo(&context.repo).ok_or_else(|| {
                format!("no SWE-bench log parser for repository `{}`", context.repo)
            })?
        } else {
            Parser::from_log_parser_name(&context.parser)
                .ok_or_else(|| format!("no SWE-bench log parser named `{}`", context.parser))?
        };
        let ctx = crate::LogContext {
            repo: context.repo.clone(),
            instance_id: context.instance_id.clone(),
            test_command: context.test_command.clone(),
            version: context.version.clone(),
        };
        Ok(parser
            .try_parse(log, &ctx)
            .map_err(|err| format!("{}: {err}", parser.name()))?
            .iter()
            .map(|(name, status)| TestResult {
                name: name.to_owned(),
                status: to_wit(status),
            })
            .collect())
    }
}

fn to_wit(status: &Status) -> TestStatus {
    use crate::TestStatus as T;
    match status {
        Status::Known(T::Passed) => TestStatus::Passed,
        Status::Known(T::Failed) => TestStatus::Failed,
        Status::Known(T::Skipped) => TestStatus::Skipped,
        Status::Known(T::Error) => TestStatus::Error,
        Status::Known(T::Xfail) => TestStatus::Xfail,
        Status::Other(token) => TestStatus::Other(token.clone()),
    }
}

swerve_plugin_kit::export_evaluator!(SwebenchParsers);
