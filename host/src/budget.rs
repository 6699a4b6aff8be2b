//! Budgets: how much a plugin may compute, allocate and recurse, and how long it may run.

use std::time::Duration;

/// The limits one plugin call runs under. Every field has a documented default
/// ([`Budgets::default`]); a plugin may override any of them ([`BudgetOverrides`]).
///
/// In batch mode ([`crate::Isolation::Batch`]) fuel and wall-clock budgets are per sample and
/// pooled over the batch (a batch of n samples gets n times the budget); memory is per store.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Budgets {
    /// Fuel per sample: roughly one unit per executed wasm instruction. Deterministic: the same
    /// plugin on the same input runs out at the same instruction on every machine. Default
    /// 2,000,000,000 (the SWE-RL reward's costliest development vector uses about 4 % of it;
    /// an interpreted Python plugin needs ~200 M for a simple reward).
    pub fuel: u64,
    /// Wall-clock backstop per sample, enforced with epoch interruption. Not deterministic; it
    /// only catches what fuel cannot (for example time spent in host calls). Default 10 s.
    pub wall_clock: Duration,
    /// Linear-memory cap per store, in bytes, over all of the plugin's memories. Growing past it
    /// traps and is classified as `out_of_memory`. Default 256 MiB.
    pub memory_bytes: u64,
    /// Maximum native stack the plugin's wasm code may use, in bytes. Exceeding it traps with
    /// "call stack exhausted" (classified `trap`). Guests' own shadow stacks live in linear
    /// memory and are covered by `memory_bytes`. Default 512 KiB.
    pub wasm_stack_bytes: usize,
    /// How many bytes of the plugin's stdout and stderr (together) are kept; older output is
    /// dropped so that the tail, where panics and tracebacks are, survives. Default 16 KiB.
    pub output_bytes: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            fuel: 2_000_000_000,
            wall_clock: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            wasm_stack_bytes: 512 << 10,
            output_bytes: 16 << 10,
        }
    }
}

/// Per-plugin changes to the default [`Budgets`]; `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BudgetOverrides {
    /// See [`Budgets::fuel`].
    pub fuel: Option<u64>,
    /// See [`Budgets::wall_clock`].
    pub wall_clock: Option<Duration>,
    /// See [`Budgets::memory_bytes`].
    pub memory_bytes: Option<u64>,
    /// See [`Budgets::wasm_stack_bytes`].
    pub wasm_stack_bytes: Option<usize>,
    /// See [`Budgets::output_bytes`].
    pub output_bytes: Option<usize>,
}

impl Budgets {
    /// These budgets with the overrides applied.
    pub fn with(self, o: &BudgetOverrides) -> Budgets {
        Budgets {
            fuel: o.fuel.unwrap_or(self.fuel),
            wall_clock: o.wall_clock.unwrap_or(self.wall_clock),
            memory_bytes: o.memory_bytes.unwrap_or(self.memory_bytes),
            wasm_stack_bytes: o.wasm_stack_bytes.unwrap_or(self.wasm_stack_bytes),
            output_bytes: o.output_bytes.unwrap_or(self.output_bytes),
        }
    }
}
