//! tests's integration tests, one binary (one link of everything they use): a module per
//! area.

mod agents;
mod curated_tasks;
mod executable_tasks;
mod interrupts;
mod swe_rl_plugin;
mod tidy;
