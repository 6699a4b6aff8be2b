//! Curation inputs the project writes itself: git histories shaped like GitHub's and GH Archive
//! hour files ([`history`]), and the corpus curate's tests, the README's example and the
//! cross-crate tests run on ([`corpus`]; `cargo run -p swerve-tests --example curation-corpus --
//! DIR` writes it for a user to try `curate run` on).

pub mod corpus;
pub mod history;
