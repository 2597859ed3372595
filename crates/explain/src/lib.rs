//! Why an offer traded, or did not: "why did my order not fill?" answered from committed data.
//! A read model above the store: the engine decides state, this crate only reads what the
//! store committed.
//!
//! - [`OfferTracer`] follows one offer through the committed blocks in height order, keeping
//!   the books clearing saw, and decides exactly what happened to it in each block (see
//!   [`tracer`'s documentation](OfferTracer)).
//! - [`explain_committed`] and [`offer_accounts`] read the store for it, through its per-offer
//!   index ([`walras_store::BlockStore::offer_touches`],
//!   [`walras_store::BlockStore::offer_creators`], written in each block's own transaction).
//! - `From<&OfferExplanation> for OfferExplanationJson`: the wire form of an explanation.
//!
//! What the index bounds and what it does not: which accounts used an offer id, and whether
//! any block created offer (account, id), take one B-tree descent (`O(log n)` of the chain)
//! instead of a pass over the whole log; an unknown offer is answered without reading a block.
//! An offer that a block did create is still explained by replaying the log from block 1 up to
//! the offer's end (the tip while it is open): what it met in each block's clearing (the
//! volume ahead of it in the canonical order, what the fill rule left it) depends on every
//! offer of its pair, so the tracer needs the pair's whole book, and no stored data gives the
//! book at a past height short of replaying (the state checkpoints keep only the newest two).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(unreachable_pub)]

mod json;
mod log;
mod tracer;

pub use log::{explain_committed, offer_accounts, ReadError};
pub use tracer::{
    explain_in_block, explain_offer, BasisPoints, BlockReason, BlockVerdict, DroppedOffer,
    ExplainError, OfferExplanation, OfferRef, OfferStatus, OfferTracer, PairOutcome,
};
