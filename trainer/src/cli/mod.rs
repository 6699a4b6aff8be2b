//! The library side of the `trainer` subcommands: each module turns already-parsed arguments
//! into the text the subcommand prints, so that the binary stays argument parsing and exit codes.

pub mod loss;
pub mod tokenizer;
