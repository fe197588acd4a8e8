//! The attention book and its open requests: the pure lifecycle of AEP-0002 §7 lives
//! with the mappings ([`aep_adapters::attention`]); the hook receiver, the control loop
//! and the observers share one book through this path.

pub use aep_adapters::attention::{AttentionBook, Pending};
