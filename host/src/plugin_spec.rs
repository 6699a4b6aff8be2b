//! `--plugin` arguments: `NAME|PATH[=WEIGHT][,KEY=VALUE...]`, validated into a [`PluginSpec`].
//!
//! Keys set per-plugin budgets: `fuel=N` (units, `2e9` accepted), `memory=SIZE` (`256MiB`,
//! `1GiB`, bytes), `timeout=DURATION` (`10s`, `500ms`), `stack=SIZE`, `output=SIZE`. Each value
//! is range-checked here ([`LIMITS`]), so that a budget no plugin could run under is a usage
//! error naming the value, not a failure blamed on the plugin.

use std::path::PathBuf;
use std::time::Duration;

use crate::budget::BudgetOverrides;
use crate::bundled;

/// A validated plugin argument.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSpec {
    /// What the user wrote before `=`/`,` (a bundled name or a path).
    pub name: String,
    /// The component to load.
    pub path: PathBuf,
    /// Weight in the combined reward (default 1).
    pub weight: f64,
    /// Budget overrides.
    pub budgets: BudgetOverrides,
}

/// Why a `--plugin` argument was refused.
#[derive(Debug, thiserror::Error)]
pub enum PluginSpecError {
    /// Neither a file nor a bundled plugin.
    #[error("plugin `{0}` is neither a file nor a bundled plugin (bundled: {bundled})", bundled = bundled::names().collect::<Vec<_>>().join(", "))]
    NotFound(String),
    /// A bundled plugin that could not be written out of the binary.
    #[error("plugin `{name}`: {source}")]
    Bundled {
        /// The plugin.
        name: String,
        /// Why it could not be written.
        #[source]
        source: crate::HostError,
    },
    /// The weight is not a finite number.
    #[error("plugin `{name}`: weight `{value}` is not a finite number")]
    BadWeight {
        /// The plugin.
        name: String,
        /// What was written.
        value: String,
    },
    /// A budget key is unknown.
    #[error(
        "plugin `{name}`: `{option}` is not a budget setting (fuel=N, memory=SIZE, timeout=DURATION, stack=SIZE, output=SIZE)"
    )]
    BadOption {
        /// The plugin.
        name: String,
        /// What was written.
        option: String,
    },
    /// A budget setting's value does not parse or is out of its range.
    #[error("plugin `{name}`: `{option}`: {reason}")]
    BadValue {
        /// The plugin.
        name: String,
        /// What was written (`key=value`).
        option: String,
        /// What is wrong, and what is accepted.
        reason: String,
    },
}

/// The range each budget setting accepts, and why its ends are there.
pub(crate) const LIMITS: [(&str, &str); 5] = [
    (
        "fuel",
        "a whole number of fuel units from 1 to 2^63 (`2e9` and `2_000_000_000` are read)",
    ),
    (
        "memory",
        "a size from 1MiB (the smallest plugin's memory) to 4GiB (wasm32's address space)",
    ),
    (
        "timeout",
        "a duration with its unit, from 1ms to 24h (`500ms`, `10s`, `2m`)",
    ),
    (
        "stack",
        "a size from 64KiB to 4MiB (plugin calls run on 16 MiB native stacks)",
    ),
    ("output", "a size from 1KiB to 1GiB"),
];

/// What [`LIMITS`] says of `key`.
fn accepted(key: &str) -> String {
    LIMITS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or_else(String::new, |(_, what)| format!("expected {what}"))
}

impl std::str::FromStr for PluginSpec {
    type Err = PluginSpecError;

    fn from_str(arg: &str) -> Result<PluginSpec, PluginSpecError> {
        let mut parts = arg.split(',');
        let head = parts.next().unwrap_or_default();
        let (name, weight) = match head.rsplit_once('=') {
            Some((name, w)) => {
                let weight = w
                    .parse::<f64>()
                    .ok()
                    .filter(|w| w.is_finite())
                    .ok_or_else(|| PluginSpecError::BadWeight {
                        name: name.to_owned(),
                        value: w.to_owned(),
                    })?;
                (name, weight)
            }
            None => (head, 1.0),
        };
        let mut budgets = BudgetOverrides::default();
        for option in parts {
            let unknown = || PluginSpecError::BadOption {
                name: name.to_owned(),
                option: option.to_owned(),
            };
            let (key, value) = option.split_once('=').ok_or_else(unknown)?;
            let key = key.trim();
            let bad = |reason: String| PluginSpecError::BadValue {
                name: name.to_owned(),
                option: option.to_owned(),
                reason,
            };
            let within = |n: u64, min: u64, max: u64| {
                (min..=max)
                    .contains(&n)
                    .then_some(n)
                    .ok_or_else(|| bad(accepted(key)))
            };
            let size = |min: u64, max: u64| {
                let n = parse_size(value).ok_or_else(|| bad(accepted(key)))?;
                within(n, min, max)
            };
            match key {
                "fuel" => {
                    let n = parse_count(value).ok_or_else(|| bad(accepted(key)))?;
                    budgets.fuel = Some(within(n, 1, 1 << 63)?);
                }
                "memory" => budgets.memory_bytes = Some(size(1 << 20, 4 << 30)?),
                "timeout" => {
                    let limit = parse_duration(value).ok_or_else(|| {
                        let unitless = value.trim().parse::<f64>().is_ok();
                        bad(if unitless {
                            format!("no unit: write `{0}s`, `{0}ms` or `{0}m`", value.trim())
                        } else {
                            accepted(key)
                        })
                    })?;
                    let range = Duration::from_millis(1)..=Duration::from_secs(24 * 3600);
                    budgets.wall_clock = Some(
                        range
                            .contains(&limit)
                            .then_some(limit)
                            .ok_or_else(|| bad(accepted(key)))?,
                    );
                }
                "stack" => budgets.wasm_stack_bytes = Some(size(64 << 10, 4 << 20)? as usize),
                "output" => budgets.output_bytes = Some(size(1 << 10, 1 << 30)? as usize),
                _ => return Err(unknown()),
            }
        }
        let path = bundled::resolve(name)
            .map_err(|source| PluginSpecError::Bundled {
                name: name.to_owned(),
                source,
            })?
            .ok_or_else(|| PluginSpecError::NotFound(name.to_owned()))?;
        Ok(PluginSpec {
            name: name.to_owned(),
            path,
            weight,
            budgets,
        })
    }
}

/// `2000000`, `2e9`, `2_000_000`.
fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    s.parse::<u64>().ok().or_else(|| {
        let f = s.parse::<f64>().ok()?;
        (f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64).then_some(f as u64)
    })
}

/// `1024`, `64KiB`, `256MiB`, `1GiB` (also `K`, `M`, `G`, `KB`, `MB`, `GB` as binary units).
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `10s`, `500ms`, `2m`, `1h`, `1.5s`.
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        return None;
    };
    let secs = num.trim().parse::<f64>().ok()? * scale;
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_counts_and_durations() {
        assert_eq!(parse_size("256MiB"), Some(256 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_count("2e9"), Some(2_000_000_000));
        assert_eq!(parse_count("2_000"), Some(2000));
        assert_eq!(parse_count("1.5"), None);
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("10"), None);
    }

    #[test]
    fn plugin_arguments() {
        let spec: PluginSpec = "swe-rl=0.5,fuel=1e9,memory=64MiB,timeout=2s"
            .parse()
            .unwrap();
        assert_eq!(spec.name, "swe-rl");
        assert_eq!(spec.weight, 0.5);
        assert_eq!(spec.budgets.fuel, Some(1_000_000_000));
        assert_eq!(spec.budgets.memory_bytes, Some(64 << 20));
        assert_eq!(spec.budgets.wall_clock, Some(Duration::from_secs(2)));
        assert_eq!(spec.path, bundled::require("swe-rl").unwrap());
        let spec: PluginSpec = "format".parse().unwrap();
        assert_eq!(spec.weight, 1.0);
        assert!(matches!(
            "nope".parse::<PluginSpec>(),
            Err(PluginSpecError::NotFound(name)) if name == "nope"
        ));
        assert!(matches!(
            "swe-rl=abc".parse::<PluginSpec>(),
            Err(PluginSpecError::BadWeight { .. })
        ));
        assert!(matches!(
            "swe-rl=inf".parse::<PluginSpec>(),
            Err(PluginSpecError::BadWeight { .. })
        ));
        assert!(matches!(
            "swe-rl,colour=red".parse::<PluginSpec>(),
            Err(PluginSpecError::BadOption { .. })
        ));
    }

    #[test]
    fn a_budget_value_out_of_its_range_is_named_with_what_is_accepted() {
        let error = |arg: &str| arg.parse::<PluginSpec>().unwrap_err().to_string();
        assert_eq!(
            error("swe-rl,timeout=5"),
            "plugin `swe-rl`: `timeout=5`: no unit: write `5s`, `5ms` or `5m`"
        );
        for (arg, key) in [
            ("swe-rl,fuel=1e30", "fuel"),
            ("swe-rl,fuel=0", "fuel"),
            ("swe-rl,memory=lots", "memory"),
            ("swe-rl,memory=1KiB", "memory"),
            ("swe-rl,memory=8GiB", "memory"),
            ("swe-rl,timeout=0s", "timeout"),
            ("swe-rl,timeout=2d", "timeout"),
            ("swe-rl,stack=1", "stack"),
            ("swe-rl,output=0", "output"),
        ] {
            let option = arg.trim_start_matches("swe-rl,");
            assert_eq!(
                error(arg),
                format!("plugin `swe-rl`: `{option}`: {}", accepted(key)),
                "{arg}"
            );
        }
        assert_eq!(
            error("swe-rl,colour=red"),
            "plugin `swe-rl`: `colour=red` is not a budget setting (fuel=N, memory=SIZE, timeout=DURATION, stack=SIZE, output=SIZE)"
        );
        // The ends of each range are accepted.
        let spec: PluginSpec = "swe-rl,fuel=1,memory=1MiB,timeout=24h,stack=64KiB,output=1GiB"
            .parse()
            .unwrap();
        assert_eq!(spec.budgets.memory_bytes, Some(1 << 20));
    }
}
