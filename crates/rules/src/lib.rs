//! The workspace's rules, checked as tests (`cargo test -p walras-rules`). A newcomer looking
//! for "what must always hold across crates" starts here:
//!
//! - `tests/dependency_rules.rs`: the production binary links neither the workload generator nor
//!   the development keys; the fuzz targets build without tokio, axum or hyper (read from
//!   `cargo tree --locked`).
//! - `tests/module_rules.rs`: no module circle inside any crate, at any depth (the graph of each
//!   module's children, from `crate::`, `super::` and `self::` paths in non-test code).
//! - `tests/admission_rule.rs`: one admission rule (`walras_engine::admission`) on every path:
//!   the node's HTTP API, CometBFT's `CheckTx`, the block filter give the same verdict and code.
//! - `tests/signature_rule.rs`: one signature rule (ZIP-215, `walras_crypto::signature_accepted`)
//!   on every submission path, and a restart on the same store reaches the same state root.
//!
//! Crate-local invariants stay with their crates (each crate's `tests/`); only rules that span
//! crates live here. The library itself is empty.
