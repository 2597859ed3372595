//! Deterministic workload generators for Walras.
//!
//! [`generate_offers`] turns an [`OfferWorkload`] (assets, offers, seed, model) into limit sell
//! offers plus the model's hidden "true" valuations. In every model, offers are created in
//! [`BATCHES`](offers::BATCHES) batches; between batches the valuations take one step of a
//! geometric Brownian motion, so older offers are priced against older valuations. Limit prices
//! sit near the valuation ratio, `v_sell / v_buy × (1 − d)` with `d ~ N(3%, 2%)`, so most offers
//! are in the money when made, some are not, and the drift makes older ones stale. Accounts
//! follow a power law (a few accounts make most offers).
//!
//! [`generate_workload`] (module [`workload`]) makes a genesis state and blocks of signed
//! transactions (offers, cancels, payments, account creations) in the SPEEDEX §7 model, with
//! injected invalid transactions recorded as [`InjectedFault`]s; [`WorkloadGenerator`] makes the
//! same workload one block at a time.
//!
//! The offer models ([`OfferModel`]):
//!
//! - **`cycles`** (default; the synthetic model of SPEEDEX §7): valuations start log-uniform over
//!   [0.1, 10] and drift slowly (σ = 0.02 per batch). Trades go along cycles of 2..=7 distinct
//!   assets, a1→a2→…→ak→a1, every offer of a cycle worth about the same value (one log-uniform
//!   value per cycle over two decades), so at the true valuations the cycles balance.
//! - **`skewed`** (like the volume-weighted crypto data set of SPEEDEX §6.2): each asset has a
//!   volume weight `1/(rank+1)^1.2` (ranks shuffled), so a few assets dominate trading and many
//!   are thin; the sold asset is drawn in proportion to weight, the bought one likewise among the
//!   others. Valuations start log-uniform over [0.01, 100] and are volatile (σ = 0.1 per batch).
//! - **`wide`**: valuations spread log-uniformly (stratified) over [1e-6, 1e6] with little drift
//!   (σ = 0.01 per batch); pairs are uniform among pairs whose valuation ratio lies in
//!   [1e-9, 1e9]. Assets further apart have no direct market in this model, which keeps every
//!   limit price representable and stresses the clearing's numerical range. (Only if no pair
//!   qualifies, as can happen with 2 assets, are pairs drawn from all pairs and their limit prices
//!   clamped.)
//!
//! Amounts are `max(1, round(value / v_sell))` with one value scale for all assets, chosen so
//! typical amounts are large integers while each asset's total on sale stays at most 2^60 (below
//! [`MAX_AMOUNT`](walras_types::MAX_AMOUNT)); limit prices are clamped into [1e-9, 1e9].
//!
//! # Determinism
//!
//! The random numbers come from this crate's own xoshiro256** generator ([`rng::Rng`]), never
//! from an external crate, so a seed's integer stream never changes. The generators also use
//! floating point (`ln`, `exp`, `powf`, `sin_cos` from the platform's libm), so the same workload
//! gives bit-identical offers for a given build on a given platform; a different libm could, in
//! rare cases, round a value differently.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod generate;
pub mod market;
pub mod offers;
pub mod rng;
pub mod shape;
pub mod workload;

pub use generate::generate_offers;
pub use offers::{GeneratedOffers, OfferModel, OfferWorkload, UnknownModel};
pub use rng::{PowerLaw, Rng, WeightedIndex};
pub use shape::{MarketShape, OfferParamsError, PairChoice};
pub use workload::{
    generate_workload, FaultCounts, FaultKind, GeneratedBlock, InjectedFault, OperationCounts,
    Workload, WorkloadError, WorkloadGenerator, WorkloadParams, WorkloadStats,
};
