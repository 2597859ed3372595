//! Core types shared by every Walras crate.
//!
//! Everything here is integer arithmetic: no floating point decides anything that is committed.
//! Floats appear only as *views* (`to_f64`) for heuristics and display.
//!
//! - [`AssetId`], [`AccountId`], [`OfferId`]: identifiers.
//! - Amounts are `u64` integers of an asset's smallest unit, capped at [`MAX_AMOUNT`] (`i64::MAX`):
//!   an asset's total issuance never exceeds it, so every per-asset sum fits in `u64` and every
//!   product of an amount with a price fits the 192-bit helpers in [`fixed`].
//! - [`Price`]: a limit price or exchange rate, unsigned Q48.80 fixed point; limits are accepted
//!   from 1e-12 to 1e12 with at least 12 significant digits (see [`price`]).
//! - [`Valuation`]: a clearing valuation of one asset; only ratios of valuations mean anything.
//! - [`Fraction`]: a number in [0, 1) such as the commission ε or the smoothing width μ.
//! - [`Offer`] and its canonical order [`OfferKey`] = (limit price, account, offer id).
//! - [`offers_csv`]: the offers CSV of the command-line contract, reader and writer.
//! - [`transaction`]: transactions and their canonical binary encoding.
//! - [`genesis`]: the accounts, keys and balances before the first block, and their encoding.
//! - [`codec`]: the one big-endian reader and writer every binary format is read and written with.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod codec;
pub mod fixed;
pub mod genesis;
pub mod offer;
pub mod offers_csv;
pub mod parse;
pub mod price;
pub mod transaction;

pub use genesis::{
    Genesis, GenesisAccount, GenesisError, GenesisSummary, PaymentsGenesis, PaymentsValidator,
    GENESIS_MAGIC, GENESIS_MAGIC_PAYMENTS, PAYMENTS_VALIDATORS_MAX,
};
pub use offer::{AccountId, AssetId, Offer, OfferId, OfferKey, PairId};
pub use price::{Fraction, Price, PriceError, Valuation};
pub use transaction::{
    CancelledOffer, DecodeError, NewOffer, Operation, PaymentsCertificate, PaymentsOutput,
    SignedTransaction, Transaction,
};

/// The largest amount of any asset that can exist: issuance is capped at `i64::MAX` units.
pub const MAX_AMOUNT: u64 = i64::MAX as u64;

/// The most assets one exchange instance trades. Clearing work grows with the square of this.
pub const MAX_ASSETS: usize = 1024;
