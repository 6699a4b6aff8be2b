//! curate's integration tests, one binary (one link of everything they use): a module per
//! area.

#[allow(dead_code, missing_docs)]
mod support;

// The snapshots of `--help` hold `validate`'s.
#[cfg(feature = "validate")]
mod cli;
mod own_fixture;
mod shared_fixture;
mod unreadable_clone;
#[cfg(feature = "validate")]
mod validate;
