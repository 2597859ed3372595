//! Reading the committed log for an explanation: the store's per-offer index first, then the
//! blocks the tracer needs.

use crate::tracer::{ExplainError, OfferExplanation, OfferRef, OfferTracer};
use walras_engine::{Block, DropReason};
use walras_store::{BlockStore, OfferTouch, StoreError};
use walras_types::transaction::NewOffer;
use walras_types::{AccountId, Fraction, OfferId, PairId};

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
/// log, never missed by both). `chain` is the asset count and the engine's commission.
/// `keep_going` is asked between blocks; `false` ends the read with [`ReadError::Stopped`].
///
/// What is read, through the store's per-offer index:
/// - no block creates the offer: the blocks that used its account's sequence number (a
///   dropped creation, a replay's first use), and nothing else;
/// - a block `c` creates it: those blocks before the newest book snapshot below `c`, the
///   snapshot's book of its pair, and every block from the snapshot on until the offer closes
///   (the tip while it is open), followed for that pair only. So the cost is the offer's
///   life plus at most one snapshot interval, whatever the length of the log before it.
pub fn explain_committed(
    store: &BlockStore,
    target: OfferRef,
    chain: (usize, Fraction),
    tip: u64,
    pending: Option<Option<NewOffer>>,
    keep_going: impl Fn() -> bool,
) -> Result<OfferExplanation, ReadError> {
    let touches = store
        .offer_touches(target.account, target.id)
        .map_err(ReadError::Index)?;
    let noted: Vec<(u64, OfferTouch)> = touches
        .into_iter()
        .filter(|(height, touch)| {
            *height <= tip
                && (touch.contains(OfferTouch::CREATES) || touch.contains(OfferTouch::SEQUENCE))
        })
        .collect();
    let Some((created, offer)) = accepted_creation(store, target, &noted)? else {
        let mut tracer = OfferTracer::new(target, chain.0, chain.1);
        for (height, _) in &noted {
            let (block, dropped) = stored(store, *height)?;
            tracer.note_earlier(&block, &dropped);
        }
        return Ok(tracer.finish(pending));
    };
    let pair = PairId {
        sell: offer.sell,
        buy: offer.buy,
    };
    let (snapshot, book) = store
        .pair_book_before(created, pair)
        .map_err(ReadError::Index)?;
    let mut tracer =
        OfferTracer::resume(target, chain, snapshot + 1, (offer.sell, offer.buy), book);
    for (height, _) in noted.iter().filter(|(height, _)| *height <= snapshot) {
        let (block, dropped) = stored(store, *height)?;
        tracer.note_earlier(&block, &dropped);
    }
    for height in snapshot + 1..=tip {
        let (block, dropped) = stored(store, height)?;
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

/// The height of the block that accepted the target's creation, and the offer it created;
/// `None` when no block did (`noted`: the index's blocks with a transaction of the target's
/// account and sequence number, in height order).
fn accepted_creation(
    store: &BlockStore,
    target: OfferRef,
    noted: &[(u64, OfferTouch)],
) -> Result<Option<(u64, NewOffer)>, ReadError> {
    for (height, touch) in noted {
        if !touch.contains(OfferTouch::CREATES) {
            continue;
        }
        let (block, dropped) = stored(store, *height)?;
        for (index, signed) in block.transactions.iter().enumerate() {
            let transaction = &signed.transaction;
            let accepted = dropped
                .binary_search_by_key(&(index as u32), |(at, _)| *at)
                .is_err();
            if transaction.source == target.account
                && transaction.sequence == target.id.0
                && accepted
            {
                if let Some(offer) = transaction.new_offer() {
                    return Ok(Some((*height, offer)));
                }
            }
        }
    }
    Ok(None)
}

/// Block `height` and what it dropped, from a log that must hold every block up to the tip.
fn stored(store: &BlockStore, height: u64) -> Result<(Block, Vec<(u32, DropReason)>), ReadError> {
    let block = store
        .block(height)
        .map_err(|error| ReadError::Block { height, error })?
        .ok_or(ReadError::MissingBlock { height })?;
    let dropped = store
        .dropped(height)
        .map_err(|error| ReadError::Results { height, error })?
        .unwrap_or_default();
    Ok((block, dropped))
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
