//! Why an offer traded, or did not: "why did my order not fill?" answered from committed data.
//! A read model above the store: the engine decides state, this crate only reads what the
//! store committed.
//!
//! An offer is named by its account and id (the sequence number of the transaction that created
//! it: ids are per account). Everything here is recomputed from the stored blocks and the
//! transactions each block dropped — nothing that a restart loses — by [`OfferTracer`], which
//! walks the blocks in height order and keeps the books clearing saw:
//!
//! 1. In each block, the accepted cancels leave their books and the accepted creations join
//!    them: the books are then exactly those the block's clearing ran on (the engine builds
//!    them the same way: open offers, less the cancelled, plus the new).
//! 2. If the offer is in its book, [`explain_in_block`] decides what happened to it from the
//!    header alone — the pair's rate from the header's valuations, the amount the pair sold and
//!    its last traded offer — and the offer's place in the canonical order.
//! 3. The header's trades are applied the way execution applies them: offers in canonical order
//!    fill until the pair's amount is sold, each selling what clearing's one fill rule
//!    ([`walras_clearing::FillWalk`], [`walras_clearing::PayoutTerms::sale`]) allows it at its
//!    limit; an offer selling less than its amount keeps the rest.
//!
//! The decision is exact (integers and Q48.80 prices); the distance of a limit from the rate is
//! in hundredths of a basis point, rounded down. The tracer checks the committed data against
//! itself (a cancel names an open offer, a header's last offer is where its amount ends) and
//! reports an inconsistency as an error instead of guessing.
//!
//! Cost of [`explain_offer`] and of a tracer from block 1: one pass over the blocks up to the
//! offer's end (they are decoded, not executed: no signature, no clearing); the books of every
//! pair are kept until the offer is found, then only its pair.
//!
//! # Reading the store
//!
//! [`explain_committed`] and [`offer_accounts`] read the store for the tracer through its
//! per-offer index ([`walras_store::BlockStore::offer_touches`],
//! [`walras_store::BlockStore::offer_creators`], which names exactly the stored blocks), and
//! `From<&OfferExplanation> for OfferExplanationJson` gives an explanation's wire form.
//!
//! What is read: which accounts used an offer id, and whether any block created offer
//! (account, id), take one B-tree descent in the index (`O(log n)` of the chain); an offer no
//! block created is answered from the few blocks that used its sequence number. An offer that
//! block `c` created is replayed for its pair only, from the newest book snapshot below `c`
//! ([`walras_store::BlockStore::pair_book_before`], every
//! [`walras_store::DEFAULT_BOOK_SNAPSHOT_INTERVAL_BLOCKS`] blocks) to its end: what it met in
//! each block's clearing (the volume ahead of it in the canonical order, what the fill rule
//! left it) depends on every offer of its pair, so the tracer needs the pair's book, and the
//! snapshot gives it without replaying the log before. The cost is the offer's life plus at
//! most one snapshot interval, whatever the length of the log before it; an offer open for
//! most of the chain still costs most of the chain.

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
