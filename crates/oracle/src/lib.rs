//! Walras valuation oracle: a pure core. See `docs/oracle.md`.
pub mod aggregate;
pub mod book;
pub mod decimal;
pub mod event;
pub mod feed;
pub mod normalize;
pub mod pipeline;
pub mod value;
