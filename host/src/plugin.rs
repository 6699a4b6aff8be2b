//! Loading plugins: read, refuse what is not a component, compile once (precompile cache), check
//! the imports against what the host grants and the exports against the world, and build the
//! `InstancePre` that every store instantiates from.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker};

use crate::budget::{BudgetOverrides, Budgets};
use crate::cache::PrecompileCache;
use crate::engine::engine_for;
use crate::error::HostError;
use crate::evaluator::EvaluatorPlugin;
use crate::reward::RewardPlugin;
use crate::store::PluginState;
use crate::types::PluginInfo;

/// The world a plugin targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum World {
    /// `swerve:plugin/reward`: scores samples.
    Reward,
    /// `swerve:plugin/evaluator`: parses test logs.
    Evaluator,
}

impl World {
    /// The world's name in the WIT package.
    pub fn as_str(self) -> &'static str {
        match self {
            World::Reward => "reward",
            World::Evaluator => "evaluator",
        }
    }

    fn exports(self) -> &'static [&'static str] {
        match self {
            World::Reward => &["info", "score"],
            World::Evaluator => &["info", "parse"],
        }
    }
}

/// Interface packages a plugin may import. WASI interfaces are linked but the context grants
/// nothing (`docs/plugins.md`): files, sockets and name lookups are denied, clocks and randomness
/// are fixed. Anything else (for example `wasi:http`) makes the plugin invalid.
pub const ALLOWED_IMPORTS: [&str; 7] = [
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:io/",
    "wasi:filesystem/",
    "wasi:sockets/",
    "swerve:plugin/",
];

/// What a plugin is, as [`Host::inspect`] reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginReport {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// SHA-256 of the component bytes.
    pub sha256: String,
    /// Size of the component in bytes.
    pub size: usize,
    /// The world it targets.
    pub world: World,
    /// Its own description.
    pub info: PluginInfo,
    /// Every import, by name.
    pub imports: Vec<String>,
    /// Every export, by name.
    pub exports: Vec<String>,
    /// The budgets it would run with.
    pub budgets: Budgets,
}

/// Host-wide settings.
#[derive(Debug, Clone, Default)]
pub struct HostConfig {
    /// Folder of the precompile cache; `None` compiles every plugin at load time.
    pub cache_dir: Option<PathBuf>,
    /// Default budgets for every plugin.
    pub budgets: Budgets,
}

/// The plugin host: engines, the precompile cache and the compiled plugins. Share it by
/// reference; plugins loaded from it are cheap to clone and `Send + Sync`.
pub struct Host {
    cache: Option<PrecompileCache>,
    budgets: Budgets,
    compiled: Mutex<Vec<(String, usize, Component)>>,
}

/// A compiled plugin with its linker-resolved `InstancePre`.
pub(crate) struct Loaded {
    pub(crate) name: String,
    pub(crate) engine: Engine,
    pub(crate) pre: wasmtime::component::InstancePre<PluginState>,
    pub(crate) budgets: Budgets,
    pub(crate) report: PluginReport,
}

impl Host {
    /// A host with the given settings.
    pub fn new(config: HostConfig) -> Result<Host, HostError> {
        let cache = config
            .cache_dir
            .as_deref()
            .map(PrecompileCache::open)
            .transpose()?;
        Ok(Host {
            cache,
            budgets: config.budgets,
            compiled: Mutex::default(),
        })
    }

    /// The default budgets.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Loads a reward plugin.
    pub fn load_reward(
        &self,
        path: &Path,
        overrides: &BudgetOverrides,
    ) -> Result<RewardPlugin, HostError> {
        let loaded = self.load(path, Some(World::Reward), overrides)?;
        RewardPlugin::new(Arc::new(loaded))
    }

    /// Loads an evaluator (log-parser) plugin.
    pub fn load_evaluator(
        &self,
        path: &Path,
        overrides: &BudgetOverrides,
    ) -> Result<EvaluatorPlugin, HostError> {
        let loaded = self.load(path, Some(World::Evaluator), overrides)?;
        EvaluatorPlugin::new(Arc::new(loaded))
    }

    /// Describes a plugin of either world: its world, info, imports, exports and budgets.
    pub fn inspect(
        &self,
        path: &Path,
        overrides: &BudgetOverrides,
    ) -> Result<PluginReport, HostError> {
        let loaded = Arc::new(self.load(path, None, overrides)?);
        Ok(match loaded.report.world {
            World::Reward => RewardPlugin::new(loaded)?.report().clone(),
            World::Evaluator => EvaluatorPlugin::new(loaded)?.report().clone(),
        })
    }

    fn load(
        &self,
        path: &Path,
        expected: Option<World>,
        overrides: &BudgetOverrides,
    ) -> Result<Loaded, HostError> {
        let name = plugin_name(path);
        let bytes = fs_err::read(path).map_err(|source| HostError::ReadPlugin {
            path: path.to_owned(),
            source,
        })?;
        let budgets = self.budgets.with(overrides);
        let engine = engine_for(budgets.wasm_stack_bytes)?;
        check_component_bytes(&name, &bytes)?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let component = self.compile(&name, &engine, &bytes, &sha256, budgets.wasm_stack_bytes)?;
        let invalid = |reason: String| HostError::InvalidPlugin {
            plugin: name.clone(),
            reason,
        };

        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(&engine).map(|(n, _)| n.to_owned()).collect();
        let exports: Vec<String> = ty.exports(&engine).map(|(n, _)| n.to_owned()).collect();
        let refused: Vec<&String> = imports
            .iter()
            .filter(|i| !ALLOWED_IMPORTS.iter().any(|p| i.starts_with(p)))
            .collect();
        if !refused.is_empty() {
            return Err(invalid(format!(
                "it imports {}, which the host does not grant (allowed: {})",
                join(&refused),
                ALLOWED_IMPORTS.join(", ")
            )));
        }
        let world = detect_world(&name, &component, &engine)?;
        if let Some(expected) = expected
            && expected != world
        {
            return Err(invalid(format!(
                "it targets the `{}` world, but a `{}` plugin is needed here",
                world.as_str(),
                expected.as_str()
            )));
        }

        let mut linker = Linker::<PluginState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| HostError::Engine(format!("cannot link WASI: {e:#}")))?;
        crate::wasi::link_timeless_sleeps(&mut linker)
            .map_err(|e| HostError::Engine(format!("cannot link WASI clocks: {e:#}")))?;
        let pre = linker.instantiate_pre(&component).map_err(|e| {
            invalid(format!(
                "its imports do not match what the host provides: {e:#}"
            ))
        })?;
        let report = PluginReport {
            path: path.to_owned(),
            sha256,
            size: bytes.len(),
            world,
            info: PluginInfo {
                name: name.clone(),
                version: String::new(),
                description: String::new(),
            },
            imports,
            exports,
            budgets,
        };
        Ok(Loaded {
            name,
            engine,
            pre,
            budgets,
            report,
        })
    }

    /// Compiles a component (`bytes`, whose SHA-256 is `sha`), or takes it from the in-memory
    /// or on-disk cache.
    fn compile(
        &self,
        name: &str,
        engine: &Engine,
        bytes: &[u8],
        sha: &str,
        stack: usize,
    ) -> Result<Component, HostError> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, c)) = compiled.iter().find(|(s, k, _)| *s == sha && *k == stack) {
            return Ok(c.clone());
        }
        let cached = self.cache.as_ref().and_then(|c| c.load(engine, sha));
        let component = match cached {
            Some(c) => c,
            None => {
                let started = std::time::Instant::now();
                let c = Component::new(engine, bytes).map_err(|e| HostError::InvalidPlugin {
                    plugin: name.to_owned(),
                    reason: format!("it does not compile: {e:#}"),
                })?;
                tracing::debug!(plugin = name, elapsed = ?started.elapsed(), "compiled plugin");
                if let Some(cache) = &self.cache {
                    cache.store(engine, sha, &c)?;
                }
                c
            }
        };
        compiled.push((sha.to_owned(), stack, component.clone()));
        Ok(component)
    }
}

fn plugin_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn join(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses anything that is not a WebAssembly component: core modules (need a component
/// wrapper) and precompiled native code (never accepted from outside; see `cache.rs`).
fn check_component_bytes(name: &str, bytes: &[u8]) -> Result<(), HostError> {
    let invalid = |reason: &str| HostError::InvalidPlugin {
        plugin: name.to_owned(),
        reason: reason.to_owned(),
    };
    if bytes.starts_with(b"\x7fELF") {
        return Err(invalid(
            "it is precompiled native code; only WebAssembly components are accepted",
        ));
    }
    if !bytes.starts_with(b"\0asm") || bytes.len() < 8 {
        return Err(invalid("it is not a WebAssembly binary"));
    }
    // Bytes 4..8: version and layer. Components are layer 1; core modules are version 1, layer 0.
    if bytes[6..8] != [1, 0] {
        return Err(invalid(
            "it is a core WebAssembly module, not a component; build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)",
        ));
    }
    Ok(())
}

fn detect_world(name: &str, component: &Component, engine: &Engine) -> Result<World, HostError> {
    let exported: Vec<(String, bool)> = component
        .component_type()
        .exports(engine)
        .map(|(n, item)| {
            (
                n.to_owned(),
                matches!(item.ty, ComponentItem::ComponentFunc(_)),
            )
        })
        .collect();
    let has = |f: &str| exported.iter().any(|(n, is_func)| n == f && *is_func);
    for world in [World::Reward, World::Evaluator] {
        if world.exports().iter().all(|f| has(f)) {
            return Ok(world);
        }
    }
    Err(HostError::InvalidPlugin {
        plugin: name.to_owned(),
        reason: format!(
            "it exports {} but neither world: `reward` needs `info` and `score`, `evaluator` needs `info` and `parse` (swerve:plugin@0.1.0)",
            if exported.is_empty() {
                "nothing".to_owned()
            } else {
                exported
                    .iter()
                    .map(|(n, _)| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_component() {
        let check = |bytes: &[u8]| check_component_bytes("p", bytes).map_err(|e| e.to_string());
        assert!(
            check(b"\x7fELF\x02\x01\x01")
                .unwrap_err()
                .contains("precompiled native code")
        );
        assert!(
            check(b"hello world")
                .unwrap_err()
                .contains("not a WebAssembly binary")
        );
        assert!(
            check(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .contains("core WebAssembly module")
        );
        assert!(check(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
