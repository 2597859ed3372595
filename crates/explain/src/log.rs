//! Reading the committed log for an explanation: the store's per-offer index first, then the
//! blocks the tracer needs.

use crate::tracer::{ExplainError, OfferExplanation, OfferRef, OfferTracer};
use walras_engine::Block;
use walras_store::{BlockStore, OfferTouch, StoreError};
use walras_types::transaction::NewOffer;
use walras_types::{AccountId, Fraction, OfferId};

/// Why the committed log could not be read for an explanation.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading block {height}: {error}")]
    Block { height: u64, error: StoreError },
    #[error("block {height} is missing from the log")]
    MissingBlock { height: u64 },
    #[error("reading block {height}'s results: {error}")]
    Results { height: u64, error: StoreError },
    #[error("reading the offer index: {0}")]
    Index(StoreError),
    /// The stored blocks contradict themselves.
    #[error("the block log cannot explain this offer: {0}")]
    Inconsistent(#[from] ExplainError),
    /// `keep_going` said stop (the node is shutting down).
    #[error("stopped before the end of the log")]
    Stopped,
}

/// Explains `target` from the blocks up to `tip`, with `pending` as in [`OfferTracer::finish`]
/// (read the mempool before the tip, so a transaction that commits in between is found in the
/// log, never missed by both). `assets` and `epsilon` are the chain's asset count and the
/// engine's commission. `keep_going` is asked between blocks; `false` ends the read with
/// [`ReadError::Stopped`].
///
/// When the per-offer index holds no block creating the offer, no block is read: no block can
/// then change the tracer's verdict (without a creating transaction it is pending or unknown).
pub fn explain_committed(
    store: &BlockStore,
    target: OfferRef,
    (assets, epsilon): (usize, Fraction),
    tip: u64,
    pending: Option<Option<NewOffer>>,
    keep_going: impl Fn() -> bool,
) -> Result<OfferExplanation, ReadError> {
    let mut tracer = OfferTracer::new(target, assets, epsilon);
    let touches = store
        .offer_touches(target.account, target.id)
        .map_err(ReadError::Index)?;
    let created = touches
        .iter()
        .any(|(height, touch)| *height <= tip && touch.contains(OfferTouch::CREATES));
    if !created {
        return Ok(tracer.finish(pending));
    }
    for height in 1..=tip {
        let block = stored_block(store, height)?;
        let dropped = store
            .dropped(height)
            .map_err(|error| ReadError::Results { height, error })?
            .unwrap_or_default();
        tracer.block(&block, &dropped)?;
        if tracer.finished() {
            break;
        }
        if !keep_going() {
            return Err(ReadError::Stopped);
        }
    }
    Ok(tracer.finish(pending))
}

/// The accounts, ascending and at most `accounts_max`, with a block up to `tip` holding a
/// transaction of sequence number `id` that creates an offer (accepted or dropped): one
/// B-tree descent in the per-offer index, a scan of that id's entries.
pub fn offer_accounts(
    store: &BlockStore,
    id: OfferId,
    tip: u64,
    accounts_max: usize,
) -> Result<Vec<AccountId>, ReadError> {
    store
        .offer_creators(id, tip, accounts_max)
        .map_err(ReadError::Index)
}

/// Block `height` from the log, which must hold every block up to the tip.
fn stored_block(store: &BlockStore, height: u64) -> Result<Block, ReadError> {
    store
        .block(height)
        .map_err(|error| ReadError::Block { height, error })?
        .ok_or(ReadError::MissingBlock { height })
}
