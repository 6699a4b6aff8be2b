//! [`TrainingArguments`]: the settings every training loop reads (optimiser, schedule, batch
//! shape, length of the run, seed), under the names of `transformers`' `TrainingArguments`.
//!
//! TRL's `SFTConfig` and `GRPOConfig` inherit these fields, so a TRL user writes them at the top
//! level of a config beside the trainer's own keys. swerve's configs ([`SftConfig`],
//! [`GrpoConfig`]) embed the struct and read it from the same flat table (`deserialize_flat`):
//! each trainer keeps its own defaults for them (TRL's SFT and GRPO learning rates differ), every
//! value is read where it stands in the text, so that a TOML error points at the right line, and
//! a key that neither the arguments nor the config know is refused where it stands.
//!
//! [`SftConfig`]: crate::train::sft_loop::SftConfig
//! [`GrpoConfig`]: crate::grpo::GrpoConfig

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::model::AdamWConfig;
use crate::train::schedule::Schedule;

/// The learning-rate schedule (`lr_scheduler_type`). Only the schedules swerve implements are
/// accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedulerType {
    /// Linear warm-up, then linear decay to 0 (default).
    #[default]
    Linear,
    /// Linear warm-up, then cosine decay to 0.
    Cosine,
    /// Constant, no warm-up.
    Constant,
    /// Linear warm-up, then constant.
    ConstantWithWarmup,
}

/// The training arguments SFT and GRPO share, with `transformers`' names. `default()` is
/// `transformers`' `TrainingArguments`; each trainer's config lays its own defaults over it (see
/// theirs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainingArguments {
    /// Peak AdamW learning rate. `transformers`' default 5e-5; SFT's 2e-5, GRPO's 1e-6.
    pub learning_rate: f64,
    /// AdamW decoupled weight decay. Default 0.0.
    pub weight_decay: f64,
    /// AdamW β₁. Default 0.9.
    pub adam_beta1: f64,
    /// AdamW β₂. Default 0.999.
    pub adam_beta2: f64,
    /// AdamW ε. Default 1e-8.
    pub adam_epsilon: f64,
    /// Global gradient-norm clipping threshold; 0 turns clipping off. Default 1.0.
    pub max_grad_norm: f64,
    /// Learning-rate schedule. Default `linear`.
    pub lr_scheduler_type: LrSchedulerType,
    /// Share of the training steps used for linear warm-up. Default 0.0.
    pub warmup_ratio: f64,
    /// Warm-up steps; when > 0 it overrides `warmup_ratio`. Default 0.
    pub warmup_steps: usize,
    /// Passes over the data, when `max_steps` is not set. Default 3.0.
    pub num_train_epochs: f64,
    /// Total optimiser steps; -1 means "from `num_train_epochs`". Default -1.
    pub max_steps: i64,
    /// Examples (SFT) or completions (GRPO) per micro-batch on each process. Default 8.
    pub per_device_train_batch_size: usize,
    /// Micro-batches per optimiser step (GAS). Default 1.
    pub gradient_accumulation_steps: usize,
    /// Seed of every random choice of the run (data order, sampling, shuffling). Default 42.
    pub seed: u64,
    /// Recompute each decoder layer's activations in the backward pass instead of keeping them;
    /// gradients are the same either way. `transformers`' default false; SFT's and GRPO's true.
    pub gradient_checkpointing: bool,
}

impl Default for TrainingArguments {
    fn default() -> Self {
        Self {
            learning_rate: 5e-5,
            weight_decay: 0.0,
            adam_beta1: 0.9,
            adam_beta2: 0.999,
            adam_epsilon: 1e-8,
            max_grad_norm: 1.0,
            lr_scheduler_type: LrSchedulerType::Linear,
            warmup_ratio: 0.0,
            warmup_steps: 0,
            num_train_epochs: 3.0,
            max_steps: -1,
            per_device_train_batch_size: 8,
            gradient_accumulation_steps: 1,
            seed: 42,
            gradient_checkpointing: false,
        }
    }
}

/// A setting whose value is out of range: its name and what is wrong, with the value found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{field}` {reason}")]
pub struct InvalidSetting {
    /// The setting's name (the TOML key).
    pub field: &'static str,
    /// What is wrong with it, including the value found.
    pub reason: String,
}

impl TrainingArguments {
    /// The TOML keys of these arguments: the fields' names.
    pub const KEYS: [&'static str; 15] = [
        "learning_rate",
        "weight_decay",
        "adam_beta1",
        "adam_beta2",
        "adam_epsilon",
        "max_grad_norm",
        "lr_scheduler_type",
        "warmup_ratio",
        "warmup_steps",
        "num_train_epochs",
        "max_steps",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "seed",
        "gradient_checkpointing",
    ];

    /// Reads the value of `key`, one of [`Self::KEYS`], from `map` into its field.
    fn read_value<'de, A: MapAccess<'de>>(
        &mut self,
        key: &'static str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match key {
            "learning_rate" => self.learning_rate = map.next_value()?,
            "weight_decay" => self.weight_decay = map.next_value()?,
            "adam_beta1" => self.adam_beta1 = map.next_value()?,
            "adam_beta2" => self.adam_beta2 = map.next_value()?,
            "adam_epsilon" => self.adam_epsilon = map.next_value()?,
            "max_grad_norm" => self.max_grad_norm = map.next_value()?,
            "lr_scheduler_type" => self.lr_scheduler_type = map.next_value()?,
            "warmup_ratio" => self.warmup_ratio = map.next_value()?,
            "warmup_steps" => self.warmup_steps = map.next_value()?,
            "num_train_epochs" => self.num_train_epochs = map.next_value()?,
            "max_steps" => self.max_steps = map.next_value()?,
            "per_device_train_batch_size" => self.per_device_train_batch_size = map.next_value()?,
            "gradient_accumulation_steps" => self.gradient_accumulation_steps = map.next_value()?,
            "seed" => self.seed = map.next_value()?,
            "gradient_checkpointing" => self.gradient_checkpointing = map.next_value()?,
            _ => unreachable!("`{key}` is not one of TrainingArguments::KEYS"),
        }
        Ok(())
    }

    /// Checks every value's range; the error names the field.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        finite_at_least("learning_rate", self.learning_rate, 0.0)?;
        finite_at_least("weight_decay", self.weight_decay, 0.0)?;
        unit_open("adam_beta1", self.adam_beta1)?;
        unit_open("adam_beta2", self.adam_beta2)?;
        check(
            "adam_epsilon",
            self.adam_epsilon.is_finite() && self.adam_epsilon > 0.0,
            || format!("must be a finite number > 0, got {}", self.adam_epsilon),
        )?;
        finite_at_least("max_grad_norm", self.max_grad_norm, 0.0)?;
        unit_closed("warmup_ratio", self.warmup_ratio)?;
        finite_at_least("num_train_epochs", self.num_train_epochs, 0.0)?;
        check(
            "max_steps",
            self.max_steps == -1 || self.max_steps > 0,
            || format!("must be -1 (unset) or positive, got {}", self.max_steps),
        )?;
        positive(
            "per_device_train_batch_size",
            self.per_device_train_batch_size,
        )?;
        positive(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        )
    }

    /// AdamW with these settings (clipping off when `max_grad_norm` is 0).
    pub(crate) fn adamw(&self) -> AdamWConfig {
        AdamWConfig {
            lr: self.learning_rate,
            beta1: self.adam_beta1,
            beta2: self.adam_beta2,
            eps: self.adam_epsilon,
            weight_decay: self.weight_decay,
            max_grad_norm: (self.max_grad_norm > 0.0).then_some(self.max_grad_norm),
        }
    }

    /// The learning-rate schedule of a run of `total_steps` steps.
    pub fn schedule(&self, total_steps: u64) -> Schedule {
        Schedule::new(
            self.learning_rate,
            self.lr_scheduler_type,
            self.warmup_steps,
            self.warmup_ratio,
            total_steps as usize,
        )
    }

    /// The run's optimiser steps: `max_steps` when set, else enough for `num_train_epochs`
    /// passes, `steps_for(epochs)` being the (fractional) steps that many passes take; at
    /// least 1.
    pub fn total_steps(&self, steps_for: impl FnOnce(f64) -> f64) -> u64 {
        if self.max_steps > 0 {
            return self.max_steps as u64;
        }
        (steps_for(self.num_train_epochs).ceil() as u64).max(1)
    }
}

/// `Ok` when `ok`, else the error of `field` with `reason()`.
pub(crate) fn check(
    field: &'static str,
    ok: bool,
    reason: impl FnOnce() -> String,
) -> Result<(), InvalidSetting> {
    if ok {
        Ok(())
    } else {
        Err(InvalidSetting {
            field,
            reason: reason(),
        })
    }
}

/// `value` is finite and at least `min`.
pub(crate) fn finite_at_least(
    field: &'static str,
    value: f64,
    min: f64,
) -> Result<(), InvalidSetting> {
    check(field, value.is_finite() && value >= min, || {
        format!("must be a finite number >= {min}, got {value}")
    })
}

/// `value` is in [0, 1).
pub(crate) fn unit_open(field: &'static str, value: f64) -> Result<(), InvalidSetting> {
    check(field, (0.0..1.0).contains(&value), || {
        format!("must be in [0, 1), got {value}")
    })
}

/// `value` is in [0, 1].
pub(crate) fn unit_closed(field: &'static str, value: f64) -> Result<(), InvalidSetting> {
    check(field, (0.0..=1.0).contains(&value), || {
        format!("must be in [0, 1], got {value}")
    })
}

/// `value` is at least 1.
pub(crate) fn positive(field: &'static str, value: usize) -> Result<(), InvalidSetting> {
    check(field, value >= 1, || "must be at least 1, got 0".to_owned())
}

/// Reads a config that holds [`TrainingArguments`] beside its own fields from one flat table, as
/// TRL's configs inherit them. `own` is the config's derived deserializer
/// (`#[serde(remote = "Self")]`, with the arguments' field `#[serde(skip)]`), run on a
/// deserializer that hands it its own keys; the arguments' keys are read into a copy of
/// `defaults` as they come. Returns the config and its arguments.
pub(crate) fn deserialize_flat<'de, D, C>(
    deserializer: D,
    defaults: TrainingArguments,
    own: impl FnOnce(Flat<'_, D>) -> Result<C, D::Error>,
) -> Result<(C, TrainingArguments), D::Error>
where
    D: Deserializer<'de>,
{
    let mut arguments = defaults;
    let config = own(Flat {
        inner: deserializer,
        arguments: &mut arguments,
    })?;
    Ok((config, arguments))
}

/// The deserializer [`deserialize_flat`] runs a config's own derived deserializer on.
pub(crate) struct Flat<'a, D> {
    inner: D,
    arguments: &'a mut TrainingArguments,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Flat<'_, D> {
    type Error = D::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = FlatVisitor {
            visitor,
            routing: Routing {
                arguments: self.arguments,
                own: fields,
            },
        };
        self.inner.deserialize_struct(name, fields, visitor)
    }

    // A derived struct asks for `deserialize_struct`; anything else is not a config.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Where a flat table's keys go: the arguments' into `arguments`, the config's `own` on to its
/// visitor.
struct Routing<'a> {
    arguments: &'a mut TrainingArguments,
    own: &'static [&'static str],
}

/// Hands the config's visitor a map of its own keys.
struct FlatVisitor<'a, V> {
    visitor: V,
    routing: Routing<'a>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FlatVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(FlatMap {
            map,
            routing: self.routing,
        })
    }
}

/// A table's entries less the arguments' ones, which are read into the arguments on the way.
struct FlatMap<'a, A> {
    map: A,
    routing: Routing<'a>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FlatMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let own = self.routing.own;
        while let Some(key) = self.map.next_key_seed(KeySeed { own })? {
            match key {
                Key::Argument(name) => self.routing.arguments.read_value(name, &mut self.map)?,
                Key::Own(name) => {
                    let name: de::value::StrDeserializer<'_, A::Error> = name.into_deserializer();
                    return seed.deserialize(name).map(Some);
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// A key of a flat table: a training argument's or the config's own.
enum Key {
    Argument(&'static str),
    Own(&'static str),
}

/// Reads a key, refusing one that is neither an argument's nor the config's (so that the error
/// points at the key).
struct KeySeed {
    own: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a setting's name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        if let Some(name) = TrainingArguments::KEYS.iter().find(|k| **k == key) {
            return Ok(Key::Argument(name));
        }
        if let Some(name) = self.own.iter().find(|k| **k == key) {
            return Ok(Key::Own(name));
        }
        // serde's own wording, over both lists.
        let expected: Vec<String> = TrainingArguments::KEYS
            .iter()
            .chain(self.own)
            .map(|k| format!("`{k}`"))
            .collect();
        Err(E::custom(format_args!(
            "unknown field `{key}`, expected one of {}",
            expected.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpo::GrpoConfig;
    use crate::train::sft_loop::SftConfig;

    /// Every field a value of its own, none the default.
    fn unusual() -> TrainingArguments {
        TrainingArguments {
            learning_rate: 0.125,
            weight_decay: 0.25,
            adam_beta1: 0.5,
            adam_beta2: 0.75,
            adam_epsilon: 1e-3,
            max_grad_norm: 2.0,
            lr_scheduler_type: LrSchedulerType::Cosine,
            warmup_ratio: 0.5,
            warmup_steps: 3,
            num_train_epochs: 1.5,
            max_steps: 7,
            per_device_train_batch_size: 2,
            gradient_accumulation_steps: 4,
            seed: 9,
            gradient_checkpointing: true,
        }
    }

    #[test]
    fn keys_are_the_fields() {
        let table = toml::Table::try_from(TrainingArguments::default()).unwrap();
        let mut fields: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut keys = TrainingArguments::KEYS.to_vec();
        fields.sort_unstable();
        keys.sort_unstable();
        assert_eq!(fields, keys);
    }

    #[test]
    fn every_key_reaches_its_field_in_both_configs() {
        let arguments = unusual();
        let text = toml::to_string(&arguments).unwrap();
        assert_eq!(SftConfig::parse_toml(&text).unwrap().training, arguments);
        assert_eq!(GrpoConfig::parse_toml(&text).unwrap().training, arguments);
    }

    #[test]
    fn each_config_keeps_its_defaults() {
        let sft = SftConfig::parse_toml("max_length = 64\nseed = 1\n").unwrap();
        assert_eq!(sft.training.learning_rate, 2e-5);
        assert_eq!(sft.training.seed, 1);
        assert_eq!(sft.max_length, 64);
        let grpo = GrpoConfig::parse_toml("beta = 0.5\n").unwrap();
        assert_eq!(grpo.training.learning_rate, 1e-6);
        assert!(grpo.training.gradient_checkpointing);
        assert_eq!(
            grpo,
            GrpoConfig {
                beta: 0.5,
                ..GrpoConfig::default()
            }
        );
        assert_eq!(SftConfig::parse_toml("").unwrap(), SftConfig::default());
    }

    /// A value of the wrong type and an unknown key point at their own line, whichever struct
    /// the key belongs to.
    #[test]
    fn errors_point_at_the_key() {
        for (text, line) in [
            ("max_length = 8\nlearning_rate = \"fast\"\n", 2),
            ("learning_rate = 1.0\nmax_length = \"long\"\n", 2),
            ("seed = 1\nmax_lenght = 8\n", 2),
        ] {
            let message = SftConfig::parse_toml(text).unwrap_err().to_string();
            assert!(
                message.contains(&format!("line {line}")),
                "{text}: {message}"
            );
        }
        let message = SftConfig::parse_toml("seed = 1\nmax_lenght = 8\n")
            .unwrap_err()
            .to_string();
        assert!(message.contains("unknown field `max_lenght`"), "{message}");
        assert!(
            message.contains("`max_length`") && message.contains("`seed`"),
            "{message}"
        );
    }

    #[test]
    fn ranges_are_checked() {
        for (arguments, field) in [
            (
                TrainingArguments {
                    adam_beta1: 1.0,
                    ..unusual()
                },
                "adam_beta1",
            ),
            (
                TrainingArguments {
                    max_steps: 0,
                    ..unusual()
                },
                "max_steps",
            ),
            (
                TrainingArguments {
                    gradient_accumulation_steps: 0,
                    ..unusual()
                },
                "gradient_accumulation_steps",
            ),
        ] {
            assert_eq!(arguments.validate().unwrap_err().field, field);
        }
        assert_eq!(unusual().validate(), Ok(()));
    }

    #[test]
    fn total_steps_follow_max_steps_or_epochs() {
        let arguments = unusual();
        assert_eq!(arguments.total_steps(|_| unreachable!()), 7);
        let by_epochs = TrainingArguments {
            max_steps: -1,
            ..arguments
        };
        assert_eq!(by_epochs.total_steps(|epochs| epochs * 3.0), 5);
        assert_eq!(by_epochs.total_steps(|_| 0.0), 1);
    }
}
