//! Engines: one wasmtime engine per distinct wasm-stack budget (the stack cap is an engine
//! setting), shared by every [`crate::Host`] of the process, all with fuel, epoch interruption,
//! deterministic floating point and a pooling instance allocator, and one background thread
//! that advances their epochs.
//!
//! Engines are process-wide because each one reserves its instance pool's address space up front
//! ([`pool_config`]); a host per test or per command must not multiply that reservation.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::error::HostError;

/// How often the epoch advances; wall-clock budgets are rounded up to whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The largest wasm stack a plugin may ask for. Plugin calls run on threads with
/// [`crate::WORKER_STACK_BYTES`] of native stack, which must stay well above it: running out of
/// the real native stack would abort the process.
pub const MAX_WASM_STACK_BYTES: usize = 4 << 20;

/// Linear-memory slots per engine's pool: the most memories that may be live at once across all
/// stores of one engine. A Rust plugin instance holds one; a componentize-py plugin a few. Each
/// slot reserves (but does not commit) 4 GiB of address space plus a guard region.
pub(crate) const POOL_MEMORIES: u32 = 1000;

/// Bytes of each linear memory kept resident (reset to the plugin's initial image) when a slot
/// is freed, so that the next store of the same plugin does not page-fault its heap in again.
/// Memory beyond it is returned to the kernel.
pub(crate) const KEEP_RESIDENT_BYTES: usize = 8 << 20;

static ENGINES: LazyLock<Mutex<HashMap<usize, Engine>>> = LazyLock::new(Mutex::default);
static TICKER: Mutex<bool> = Mutex::new(false);

/// The engine for a wasm-stack budget, created on first use and shared by the whole process.
pub(crate) fn engine_for(wasm_stack_bytes: usize) -> Result<Engine, HostError> {
    if wasm_stack_bytes > MAX_WASM_STACK_BYTES {
        return Err(HostError::Engine(format!(
            "wasm stack budget {wasm_stack_bytes} exceeds the maximum of {MAX_WASM_STACK_BYTES} bytes"
        )));
    }
    start_ticker()?;
    let mut engines = ENGINES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = engines.get(&wasm_stack_bytes) {
        return Ok(e.clone());
    }
    let engine = Engine::new(&engine_config(wasm_stack_bytes))
        .map_err(|e| HostError::Engine(format!("{e:#}")))?;
    engines.insert(wasm_stack_bytes, engine.clone());
    Ok(engine)
}

/// Starts the thread that advances every engine's epoch, once per process.
fn start_ticker() -> Result<(), HostError> {
    let mut started = TICKER.lock().unwrap_or_else(|p| p.into_inner());
    if !*started {
        std::thread::Builder::new()
            .name("swerve-epoch".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    let engines = ENGINES.lock().unwrap_or_else(|p| p.into_inner());
                    for engine in engines.values() {
                        engine.increment_epoch();
                    }
                }
            })
            .map_err(HostError::Thread)?;
        *started = true;
    }
    Ok(())
}

fn engine_config(wasm_stack_bytes: usize) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
        // Fuel is the deterministic budget; epochs are the wall-clock backstop.
        .consume_fuel(true)
        .epoch_interruption(true)
        // Same bits on every machine: canonical NaNs and deterministic relaxed SIMD.
        .cranelift_nan_canonicalization(true)
        .relaxed_simd_deterministic(true)
        .max_wasm_stack(wasm_stack_bytes)
        .parallel_compilation(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool_config()));
    // `perf record` can name the guest's functions: wasmtime writes /tmp/perf-<pid>.map.
    if std::env::var_os("SWERVE_WASM_PERFMAP").is_some() {
        c.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    c
}

/// The instance pool: slots are reused by the next store of the same plugin with their
/// copy-on-write image still mapped and [`KEEP_RESIDENT_BYTES`] of heap still resident, which is
/// what makes a fresh store per batch (or per sample) cheap. Limits are generous so that no
/// plugin the on-demand allocator accepts is refused: the store's own [`crate::Budgets`] are the
/// limits that matter, and they are enforced by the store's limiter.
pub(crate) fn pool_config() -> PoolingAllocationConfig {
    let mut p = PoolingAllocationConfig::new();
    p.total_memories(POOL_MEMORIES)
        .total_tables(2 * POOL_MEMORIES)
        .total_core_instances(4 * POOL_MEMORIES)
        .total_component_instances(POOL_MEMORIES)
        // Interpreters compiled to wasm (componentize-py's CPython) have large function tables.
        .table_elements(crate::store::MAX_TABLE_ELEMENTS)
        .max_core_instance_size(8 << 20)
        .max_component_instance_size(4 << 20)
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(64 << 10)
        // Plugins run synchronously on the caller's thread (no async support), so the pool
        // keeps no fiber stacks; the default thousand cost a thousand guard-page `mprotect`s,
        // about 3 ms, at every process start.
        .total_stacks(0)
        // Linux ≥ 6.7: reset only the pages the instance dirtied, found with PAGEMAP_SCAN,
        // instead of `memset`ting the whole kept-resident prefix.
        .pagemap_scan(Enabled::Auto);
    p
}
