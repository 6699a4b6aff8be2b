//! One store per batch (or per sample): the plugin's WASI context, its memory limiter, its
//! output pipe and its fuel and wall-clock deadline. Dropping the store frees the instance.

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::budget::Budgets;
use crate::engine::EPOCH_TICK;
use crate::outcome::{Failure, classify_trap};
use crate::wasi::{TailPipe, deterministic_ctx};

/// Host state of one store.
pub(crate) struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    output: TailPipe,
}

impl PluginState {
    /// The store's resource table (WASI handles).
    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps the total linear memory of a store and records whether it refused a request, so that
/// the resulting trap is classified `out_of_memory` whatever the guest does next.
struct MemoryLimiter {
    cap: usize,
    used: usize,
    denied: bool,
}

/// Tables hold function references; a cap keeps a hostile table from eating host memory.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.used - current.min(self.used) + desired;
        if total > self.cap {
            self.denied = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} bytes reached (asked for {desired} bytes)",
                self.cap
            ));
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A store ready to instantiate a plugin, with its budgets set.
pub(crate) struct PluginStore {
    pub(crate) store: Store<PluginState>,
    fuel: u64,
}

impl PluginStore {
    /// A fresh store for `samples` samples' worth of budget.
    pub(crate) fn new(engine: &wasmtime::Engine, budgets: &Budgets, samples: usize) -> PluginStore {
        let output = TailPipe::new(budgets.output_bytes);
        let state = PluginState {
            wasi: deterministic_ctx(&output),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                cap: usize::try_from(budgets.memory_bytes).unwrap_or(usize::MAX),
                used: 0,
                denied: false,
            },
            output,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        let n = samples.max(1) as u64;
        let fuel = budgets.fuel.saturating_mul(n);
        store
            .set_fuel(fuel)
            .expect("fuel is enabled on every swerve engine");
        let ticks = budgets
            .wall_clock
            .as_nanos()
            .div_ceil(EPOCH_TICK.as_nanos()) as u64;
        store.set_epoch_deadline(ticks.saturating_mul(n).max(1));
        store.epoch_deadline_trap();
        PluginStore { store, fuel }
    }

    /// Fuel consumed so far.
    pub(crate) fn fuel_consumed(&self) -> u64 {
        self.fuel - self.store.get_fuel().unwrap_or(0)
    }

    /// What the plugin printed, tail only.
    pub(crate) fn output_tail(&self) -> String {
        self.store.data().output.tail()
    }

    /// Classifies an error returned by a call into this store.
    pub(crate) fn failure(&self, err: &wasmtime::Error) -> Failure {
        classify_trap(
            err,
            self.store.data().limiter.denied,
            self.output_tail(),
            self.fuel_consumed(),
        )
    }
}
