//! host's integration tests, one binary (one link of everything they use): a module per
//! area.

#[allow(dead_code, missing_docs)]
mod support;

mod hostile;
mod hostile_results;
mod loading;
mod python;
mod scorer;
