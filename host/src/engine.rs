//! Engines: one wasmtime engine per distinct wasm-stack budget (the stack cap is an engine
//! setting), all with fuel, epoch interruption and deterministic floating point, and one
//! background thread that advances their epochs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine};

use crate::error::HostError;

/// How often the epoch advances; wall-clock budgets are rounded up to whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The largest wasm stack a plugin may ask for. Plugin calls run on threads with
/// [`crate::WORKER_STACK_BYTES`] of native stack, which must stay well above it: running out of
/// the real native stack would abort the process.
pub const MAX_WASM_STACK_BYTES: usize = 4 << 20;

/// The engines of one host and the thread that ticks their epochs.
pub(crate) struct Engines {
    engines: Arc<Mutex<HashMap<usize, Engine>>>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Engines {
    pub(crate) fn new() -> Result<Engines, HostError> {
        let engines: Arc<Mutex<HashMap<usize, Engine>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let engines = Arc::clone(&engines);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("swerve-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        let engines = engines.lock().unwrap_or_else(|p| p.into_inner());
                        for engine in engines.values() {
                            engine.increment_epoch();
                        }
                    }
                })
                .map_err(HostError::Thread)?
        };
        Ok(Engines {
            engines,
            stop,
            ticker: Some(ticker),
        })
    }

    /// The engine for a wasm-stack budget, created on first use.
    pub(crate) fn get(&self, wasm_stack_bytes: usize) -> Result<Engine, HostError> {
        if wasm_stack_bytes > MAX_WASM_STACK_BYTES {
            return Err(HostError::Engine(format!(
                "wasm stack budget {wasm_stack_bytes} exceeds the maximum of {MAX_WASM_STACK_BYTES} bytes"
            )));
        }
        let mut engines = self.engines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = engines.get(&wasm_stack_bytes) {
            return Ok(e.clone());
        }
        let engine = Engine::new(&engine_config(wasm_stack_bytes))
            .map_err(|e| HostError::Engine(format!("{e:#}")))?;
        engines.insert(wasm_stack_bytes, engine.clone());
        Ok(engine)
    }
}

impl Drop for Engines {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
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
        .parallel_compilation(true);
    c
}
