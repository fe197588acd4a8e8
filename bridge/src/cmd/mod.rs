//! The offline and client subcommands (each module: its clap `Args` and a `run` returning
//! the exit code). `serve`, `validate`, `conformance` and `config` live in [`crate::cli`].

pub mod adapters;
pub mod bench;
pub mod client;
pub mod install;
pub mod project;
pub mod respond;
pub mod tail;
pub mod timeline;
