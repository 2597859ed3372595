//! The offer tracer: one offer followed through the committed blocks (see the crate
//! documentation for how it decides).

use ethnum::U256;
use std::collections::BTreeMap;
use std::fmt;
use walras_clearing::{FillWalk, PayoutTerms};
use walras_crypto::Hash;
use walras_engine::{transaction_hash, Block, DropReason};
use walras_types::transaction::NewOffer;
use walras_types::{
    AccountId, AssetId, Fraction, OfferId, OfferKey, Price, SignedTransaction, Valuation,
};

/// An offer as users name it: its account and its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferRef {
    pub account: AccountId,
    pub id: OfferId,
}

/// Where an offer stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferStatus {
    /// It sold its whole amount, or all of it but a rest of dust returned to its account (the
    /// rest rule: [`walras_clearing::PayoutTerms::returned_rest`]).
    Traded,
    /// It sold part of its amount and the rest is still open.
    PartlyTraded,
    /// It is open and has sold nothing.
    NotTraded,
    /// Its creating transaction was dropped by the block filter.
    Dropped,
    /// Its account cancelled it (after it sold what [`OfferExplanation::sold_total`] says).
    Cancelled,
    /// Its creating transaction waits in the mempool.
    Pending,
    /// No block and no pending transaction creates it.
    Unknown,
}

impl OfferStatus {
    pub fn name(self) -> &'static str {
        match self {
            OfferStatus::Traded => "traded",
            OfferStatus::PartlyTraded => "partly_traded",
            OfferStatus::NotTraded => "not_traded",
            OfferStatus::Dropped => "dropped",
            OfferStatus::Cancelled => "cancelled",
            OfferStatus::Pending => "pending",
            OfferStatus::Unknown => "unknown",
        }
    }
}

/// What happened to an offer in one block's clearing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockReason {
    /// It sold all it held.
    Filled,
    /// It was the pair's last traded offer: the pair's amount ran out inside it.
    PartlyFilled,
    /// Its limit is at or below the rate, but its payout, rounded down to whole units, would
    /// pay it below its limit (after the commission) for its whole amount: it sold only the
    /// largest part that meets its limit, possibly nothing, and keeps the rest.
    RoundedBelowLimit,
    /// Its limit is above the pair's rate: it could not trade.
    OutOfTheMoney,
    /// Its limit equals the rate exactly: it may trade but need not (the partial-fill edge),
    /// and the pair's amount ran out before it.
    AtTheMoney,
    /// Its limit is below the rate, but the pair's amount ran out on offers ahead of it in the
    /// canonical order.
    VolumeRanOut,
}

impl BlockReason {
    pub fn name(self) -> &'static str {
        match self {
            BlockReason::Filled => "filled",
            BlockReason::PartlyFilled => "partly_filled",
            BlockReason::RoundedBelowLimit => "rounded_below_limit",
            BlockReason::OutOfTheMoney => "out_of_the_money",
            BlockReason::AtTheMoney => "at_the_money",
            BlockReason::VolumeRanOut => "volume_ran_out",
        }
    }
}

/// A distance in basis points, held exactly as a whole number of hundredths of a basis point
/// (rounded down).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BasisPoints(pub U256);

impl BasisPoints {
    /// `floor((limit − rate) / rate · 10^6)` hundredths of a basis point, for `limit > rate > 0`.
    pub fn above(limit: Price, rate: Price) -> BasisPoints {
        debug_assert!(limit > rate && rate.0 > 0);
        let gap = U256::from(limit.0 - rate.0) * U256::from(1_000_000u32);
        BasisPoints(gap / U256::from(rate.0))
    }
}

impl fmt::Display for BasisPoints {
    /// A plain decimal with two decimals, e.g. `12.05`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hundred = U256::from(100u32);
        write!(f, "{}.{:02}", self.0 / hundred, (self.0 % hundred).as_u32())
    }
}

/// An offer in one block's clearing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockVerdict {
    pub height: u64,
    pub limit: Price,
    /// The pair's rate: `floor(p_sell · 2^80 / p_buy)` from the header's valuations.
    pub rate: Price,
    /// What the offer held when the block cleared.
    pub amount: u64,
    /// Sold in this block, and received for it (`floor(sold · floor(rate · (1 − ε)))`, at least
    /// `sold · limit · (1 − ε)`: the fill rule sells no more than meets the limit).
    pub sold: u64,
    pub received: u64,
    /// The rest returned to the account as the offer closed in this block (dust its fill left
    /// that could sell nothing at the rate); 0 otherwise.
    pub returned: u64,
    /// Amount of the offers ahead of it in the canonical order whose limits are at or below the
    /// rate (when the offer itself is in the money: all of those ahead).
    pub volume_ahead: u64,
    /// What the whole pair sold in this block.
    pub pair_sold: u64,
    pub reason: BlockReason,
    /// How far the limit is above the rate (only when out of the money).
    pub out_of_money: Option<BasisPoints>,
}

/// Why committed data cannot be explained: it contradicts itself (a store that does not hold
/// what the engine committed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    #[error("block {height}: expected height {expected} (blocks must be given in order from 1)")]
    OutOfOrder { height: u64, expected: u64 },
    #[error(
        "block {height}: the header has {found} valuations for {assets} assets, or a zero one"
    )]
    Valuations {
        height: u64,
        found: usize,
        assets: usize,
    },
    #[error("block {height}: the offer names an asset the header has no valuation for")]
    UnknownAsset { height: u64 },
    #[error("block {height}: an accepted cancel names offer {id} of account {account}, which is not open")]
    CancelOfUnknownOffer { height: u64, account: u64, id: u64 },
    #[error("block {height}: pair {sell}->{buy} trades {sold} but its last offer is not where that amount ends")]
    Trade {
        height: u64,
        sell: u16,
        buy: u16,
        sold: u64,
    },
    #[error("block {height}: an offer above the rate of pair {sell}->{buy} traded")]
    BeyondLimit { height: u64, sell: u16, buy: u16 },
}

/// The pair's outcome in a block, as its header states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairOutcome {
    /// The rate from the header's valuations and the commission: what every offer trades on.
    pub terms: PayoutTerms,
    /// Amount the pair sold and its last traded offer; `None` when it did not trade.
    pub traded: Option<(u64, OfferKey)>,
}

/// What happened to `target` in a block whose clearing ran on `book` (the pair's offers in
/// canonical order with the amounts they held), pure: the offer's place in the canonical order
/// decides how much of the pair's amount reaches it. Errs when the header's last offer does not
/// agree with that, or when an offer above the rate would have traded.
pub fn explain_in_block(
    height: u64,
    book: &BTreeMap<OfferKey, u64>,
    target: &OfferKey,
    pair: &PairOutcome,
    (sell, buy): (u16, u16),
) -> Result<Option<BlockVerdict>, ExplainError> {
    let Some(&amount) = book.get(target) else {
        return Ok(None);
    };
    let limit = target.min_price;
    let rate = pair.terms.rate();
    let pair_sold = pair.traded.map_or(0, |(sold, _)| sold);
    let inconsistent = ExplainError::Trade {
        height,
        sell,
        buy,
        sold: pair_sold,
    };
    if pair.traded.is_some_and(|(_, last)| last.min_price > rate) {
        return Err(ExplainError::BeyondLimit { height, sell, buy });
    }
    // The pair's amount shared by the fill rule over the offers ahead, then the target.
    let mut walk = FillWalk::new(pair.terms, pair_sold);
    let mut in_money_ahead = 0u64;
    for (key, held) in book.range(..*target) {
        walk.next(key.min_price, *held)
            .map_err(|_| inconsistent.clone())?;
        if key.min_price <= rate {
            in_money_ahead = in_money_ahead.saturating_add(*held);
        }
    }
    let sale = walk.next(limit, amount).map_err(|_| inconsistent.clone())?;
    let sold = sale.sold;
    // The header's last offer is the last one that sold: none after it did.
    if let Some((_, last)) = pair.traded {
        if (sold > 0 && *target > last) || (*target == last && sold == 0) {
            return Err(inconsistent);
        }
    } else if sold > 0 {
        return Err(inconsistent);
    }
    let capacity = pair.terms.sale(limit, amount).sold;
    let returned = pair.terms.returned_rest(limit, amount, sold);
    let reason = if sold > 0 && sold == amount {
        BlockReason::Filled
    } else if limit > rate {
        BlockReason::OutOfTheMoney
    } else if capacity < amount && sold == capacity {
        BlockReason::RoundedBelowLimit
    } else if sold > 0 {
        BlockReason::PartlyFilled
    } else if limit == rate {
        BlockReason::AtTheMoney
    } else {
        BlockReason::VolumeRanOut
    };
    let received = u64::try_from(sale.received).map_err(|_| inconsistent)?;
    Ok(Some(BlockVerdict {
        height,
        limit,
        rate,
        amount,
        sold,
        received,
        returned,
        volume_ahead: in_money_ahead,
        pair_sold,
        reason,
        out_of_money: (limit > rate).then(|| BasisPoints::above(limit, rate)),
    }))
}

/// The block filter's verdict on the offer's creating transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedOffer {
    pub height: u64,
    pub transaction: Hash,
    pub reason: DropReason,
    /// The account's transactions the rule found in conflict with it: for the account-wide
    /// rules, the account's other transactions of the block dropped by the same rule; for a
    /// replayed sequence number, the committed transaction that used it first (when seen).
    pub conflicting: Vec<Hash>,
}

/// Everything known about one offer, from committed blocks and the mempool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfferExplanation {
    pub offer: OfferRef,
    pub status: OfferStatus,
    /// The offer as its (latest) creating transaction states it.
    pub details: Option<NewOffer>,
    /// Height and hash of the accepted creating transaction.
    pub created: Option<(u64, Hash)>,
    pub dropped: Option<DroppedOffer>,
    /// Height and hash of the accepted cancel.
    pub cancelled: Option<(u64, Hash)>,
    /// The latest block whose clearing the offer was in.
    pub latest: Option<BlockVerdict>,
    /// How many blocks' clearings the offer was in.
    pub blocks_live: u64,
    pub sold_total: u64,
    pub received_total: u64,
}

impl OfferExplanation {
    /// The height the explanation is about: the latest block the offer was live in, else the
    /// block that dropped it.
    pub fn height(&self) -> Option<u64> {
        match (self.status, &self.latest, &self.dropped, &self.cancelled) {
            (OfferStatus::Cancelled, _, _, Some((height, _))) => Some(*height),
            (_, Some(latest), _, _) => Some(latest.height),
            (_, None, Some(dropped), _) => Some(dropped.height),
            _ => None,
        }
    }

    /// A machine-readable reason: the drop rule's name, `cancelled`, `pending`,
    /// `unknown_offer`, or the latest block's [`BlockReason`].
    pub fn reason_code(&self) -> &'static str {
        match self.status {
            OfferStatus::Dropped => self.dropped.as_ref().map_or("dropped", |d| d.reason.name()),
            OfferStatus::Cancelled => "cancelled",
            OfferStatus::Pending => "pending",
            OfferStatus::Unknown => "unknown_offer",
            OfferStatus::Traded | OfferStatus::PartlyTraded | OfferStatus::NotTraded => self
                .latest
                .as_ref()
                .map_or("not_traded", |latest| latest.reason.name()),
        }
    }

    /// The explanation in words, with its numbers.
    pub fn summary(&self) -> String {
        let name = format!(
            "Offer {} of account {}",
            self.offer.id.0, self.offer.account.0
        );
        let pair = self
            .details
            .map(|d| format!("selling asset {} for asset {}", d.sell.0, d.buy.0))
            .unwrap_or_default();
        match self.status {
            OfferStatus::Unknown => {
                format!("{name} is unknown: no block and no pending transaction creates it.")
            }
            OfferStatus::Pending => format!(
                "{name} ({pair}) is pending: its transaction waits in the mempool for a block."
            ),
            OfferStatus::Dropped => {
                let Some(dropped) = &self.dropped else {
                    return format!("{name} was dropped.");
                };
                let conflict = if dropped.conflicting.is_empty() {
                    String::new()
                } else {
                    let hashes: Vec<String> =
                        dropped.conflicting.iter().map(Hash::to_string).collect();
                    format!(
                        " Conflicting transaction(s) of the account: {}.",
                        hashes.join(", ")
                    )
                };
                format!(
                    "{name} ({pair}) never entered a book: block {} dropped its transaction {} \
                     by the rule {} ({}).{conflict}",
                    dropped.height,
                    dropped.transaction,
                    dropped.reason.name(),
                    drop_words(dropped.reason)
                )
            }
            _ => self.live_summary(&name, &pair),
        }
    }

    fn live_summary(&self, name: &str, pair: &str) -> String {
        let mut text = format!("{name} ({pair})");
        if let Some((height, hash)) = self.cancelled {
            text.push_str(&format!(
                " was cancelled in block {height} by transaction {hash}. Before that it"
            ));
        }
        let Some(latest) = &self.latest else {
            text.push_str(" was in no block's clearing.");
            return text;
        };
        let rested = if self.blocks_live == 1 {
            "1 block".to_string()
        } else {
            format!("{} blocks", self.blocks_live)
        };
        text.push_str(&format!(
            " was in the clearing of {rested}; in the latest, block {}, with limit {} against \
             the pair's clearing rate {}: ",
            latest.height,
            // 12 significant digits for a reader; the exact values are the explanation's
            // `limit_price` and `clearing_rate` fields.
            latest.limit,
            latest.rate
        ));
        let edge = if latest.limit == latest.rate {
            " Its limit equals the rate exactly: the partial-fill edge, where an offer may \
             trade but need not."
        } else {
            ""
        };
        text.push_str(&match latest.reason {
            BlockReason::Filled => format!(
                "it sold all {} it held for {} (the pair sold {}).{edge}",
                latest.amount, latest.received, latest.pair_sold
            ),
            BlockReason::PartlyFilled => format!(
                "it sold {} of {} for {}: the pair sold {} and {} of it went to offers ahead of \
                 it in the canonical order, so the amount ran out inside this offer.{edge}",
                latest.sold, latest.amount, latest.received, latest.pair_sold, latest.volume_ahead
            ),
            BlockReason::RoundedBelowLimit => format!(
                "it sold {} of {} for {}: payouts are rounded down to whole units, and selling \
                 more would have paid it below its limit after the commission, so it sold only \
                 the largest part that meets its limit and keeps the rest.",
                latest.sold, latest.amount, latest.received
            ),
            BlockReason::OutOfTheMoney => format!(
                "it did not trade: its limit is {} bp above the rate (out of the money).",
                latest
                    .out_of_money
                    .map(|bp| bp.to_string())
                    .unwrap_or_default()
            ),
            BlockReason::AtTheMoney | BlockReason::VolumeRanOut => format!(
                "it did not trade: it is in the money, but the pair sold only {} and {} was \
                 ahead of it in the canonical order, so the volume ran out before it.{edge}",
                latest.pair_sold, latest.volume_ahead
            ),
        });
        if latest.returned > 0 {
            text.push_str(&format!(
                " The {} it still held could sell nothing at that rate in whole units (dust): \
                 the rest rule returned it to the account and closed the offer.",
                latest.returned
            ));
        }
        if self.sold_total > latest.sold {
            text.push_str(&format!(
                " Over all its blocks it sold {} of {} for {}.",
                self.sold_total,
                self.details.map_or(0, |d| d.amount),
                self.received_total
            ));
        }
        text
    }
}

fn drop_words(reason: DropReason) -> &'static str {
    match reason {
        DropReason::AccountOverdraft => {
            "the account's transactions in the block together debit more than its balance, so \
             all of them were dropped"
        }
        DropReason::AccountReusedSequence => {
            "another transaction of the account in the block has the same sequence number, so \
             all of the account's transactions were dropped"
        }
        DropReason::AccountDoubleCancel => {
            "the account cancels one offer twice in the block, so all of its transactions \
             were dropped"
        }
        DropReason::Replayed => "its sequence number was already used by a committed transaction",
        DropReason::SequenceOutOfWindow => "its sequence number is too far ahead of the account's",
        DropReason::BadSignature => "its signature does not verify",
        DropReason::UnknownSource => "its account does not exist",
        DropReason::UnknownAsset => "it names an asset that does not exist",
        DropReason::Malformed => "its fields are invalid",
        _ => "see the rule's name",
    }
}

/// Explains `target` from the committed blocks from height 1 on, each with the transactions
/// it dropped (index, reason); `pending` as in [`OfferTracer::finish`]. Stops reading once the
/// offer is closed.
pub fn explain_offer<'a>(
    target: OfferRef,
    assets: usize,
    epsilon: Fraction,
    blocks: impl IntoIterator<Item = (&'a Block, &'a [(u32, DropReason)])>,
    pending: Option<Option<NewOffer>>,
) -> Result<OfferExplanation, ExplainError> {
    let mut tracer = OfferTracer::new(target, assets, epsilon);
    for (block, dropped) in blocks {
        tracer.block(block, dropped)?;
        if tracer.finished() {
            break;
        }
    }
    Ok(tracer.finish(pending))
}

/// Walks committed blocks in height order and follows one offer (see the crate documentation).
pub struct OfferTracer {
    target: OfferRef,
    assets: usize,
    epsilon: Fraction,
    next_height: u64,
    /// Open offers per pair index (`sell * assets + buy`), as clearing saw them; only the
    /// target's pair once it is known.
    books: BTreeMap<usize, BTreeMap<OfferKey, u64>>,
    pair: Option<usize>,
    details: Option<NewOffer>,
    created: Option<(u64, Hash)>,
    dropped: Option<DroppedOffer>,
    cancelled: Option<(u64, Hash)>,
    /// A committed transaction of the account with the offer's sequence number.
    sequence_used: Option<Hash>,
    latest: Option<BlockVerdict>,
    blocks_live: u64,
    sold_total: u64,
    received_total: u64,
}

impl OfferTracer {
    /// A tracer before block 1 (a genesis holds no offers). `epsilon` is the commission the
    /// node's engine charges.
    pub fn new(target: OfferRef, assets: usize, epsilon: Fraction) -> OfferTracer {
        OfferTracer {
            target,
            assets,
            epsilon,
            next_height: 1,
            books: BTreeMap::new(),
            pair: None,
            details: None,
            created: None,
            dropped: None,
            cancelled: None,
            sequence_used: None,
            latest: None,
            blocks_live: 0,
            sold_total: 0,
            received_total: 0,
        }
    }

    /// A tracer that starts at block `next_height` with the target's pair known and its book
    /// as it stood after block `next_height - 1` (a stored snapshot; empty for height 1),
    /// following only that pair. Give it the blocks before `next_height` that hold a
    /// transaction of the target's account and sequence number through
    /// [`OfferTracer::note_earlier`] first: it then reaches the explanation the tracer from
    /// block 1 reaches, provided the offer is created at `next_height` or later.
    pub fn resume(
        target: OfferRef,
        (assets, epsilon): (usize, Fraction),
        next_height: u64,
        (sell, buy): (AssetId, AssetId),
        book: BTreeMap<OfferKey, u64>,
    ) -> OfferTracer {
        let mut tracer = OfferTracer::new(target, assets, epsilon);
        let pair = tracer.pair_index(sell, buy);
        tracer.next_height = next_height;
        tracer.pair = Some(pair);
        tracer.books.insert(pair, book);
        tracer
    }

    /// Notes the target's transactions in `block`, a block before the one [`OfferTracer::resume`]
    /// started at (blocks in height order): a dropped creation, or what used its sequence
    /// number. Nothing else of the block matters before the offer exists.
    pub fn note_earlier(&mut self, block: &Block, dropped: &[(u32, DropReason)]) {
        let height = block.header.height;
        for (index, signed) in block.transactions.iter().enumerate() {
            let transaction = &signed.transaction;
            if transaction.source == self.target.account && transaction.sequence == self.target.id.0
            {
                self.note_target_transaction(height, block, index, dropped);
            }
        }
    }

    /// Whether later blocks can change the explanation: once the offer is closed (filled or
    /// cancelled) they cannot.
    pub fn finished(&self) -> bool {
        match (self.pair, self.created) {
            (Some(pair), Some(_)) => self
                .books
                .get(&pair)
                .is_none_or(|book| !book.contains_key(&self.target_key_or_default())),
            _ => false,
        }
    }

    fn target_key_or_default(&self) -> OfferKey {
        self.details.map_or(
            OfferKey {
                min_price: Price(0),
                account: self.target.account,
                id: self.target.id,
            },
            |details| details.key,
        )
    }

    fn tracked(&self, pair: usize) -> bool {
        self.pair.is_none_or(|target| target == pair)
    }

    fn pair_index(&self, sell: AssetId, buy: AssetId) -> usize {
        sell.0 as usize * self.assets + buy.0 as usize
    }

    /// Follows the offer through the next block; `dropped` is what the store recorded for it
    /// (index in the block and reason, sorted by index).
    pub fn block(
        &mut self,
        block: &Block,
        dropped: &[(u32, DropReason)],
    ) -> Result<(), ExplainError> {
        let header = &block.header;
        let height = header.height;
        if height != self.next_height {
            return Err(ExplainError::OutOfOrder {
                height,
                expected: self.next_height,
            });
        }
        self.next_height += 1;
        if header.valuations.len() != self.assets || header.valuations.contains(&0) {
            return Err(ExplainError::Valuations {
                height,
                found: header.valuations.len(),
                assets: self.assets,
            });
        }
        let reason_of = |index: usize| {
            dropped
                .binary_search_by_key(&(index as u32), |(i, _)| *i)
                .ok()
                .map(|at| dropped[at].1)
        };
        // 1. The target's creating transaction (accepted or dropped), then the books as
        // clearing saw them: cancels out, creations in.
        for (index, signed) in block.transactions.iter().enumerate() {
            let transaction = &signed.transaction;
            let drop_reason = reason_of(index);
            if transaction.source == self.target.account && transaction.sequence == self.target.id.0
            {
                self.note_target_transaction(height, block, index, dropped);
            }
            if drop_reason.is_some() {
                continue;
            }
            if let Some(cancel) = transaction.cancelled_offer() {
                let pair = self.pair_index(cancel.sell, cancel.buy);
                if !self.tracked(pair) {
                    continue;
                }
                let book = self.books.entry(pair).or_default();
                if book.remove(&cancel.key).is_none() {
                    return Err(ExplainError::CancelOfUnknownOffer {
                        height,
                        account: cancel.key.account.0,
                        id: cancel.key.id.0,
                    });
                }
                if cancel.key.account == self.target.account && cancel.key.id == self.target.id {
                    self.cancelled = Some((height, transaction_hash(signed)));
                }
            } else if let Some(offer) = transaction.new_offer() {
                let pair = self.pair_index(offer.sell, offer.buy);
                if self.tracked(pair) {
                    self.books
                        .entry(pair)
                        .or_default()
                        .insert(offer.key, offer.amount);
                }
            }
        }
        if let (None, Some(details)) = (self.pair, self.details.filter(|_| self.created.is_some()))
        {
            // Found: from now on only its pair matters.
            let pair = self.pair_index(details.sell, details.buy);
            self.pair = Some(pair);
            self.books.retain(|index, _| *index == pair);
        }
        // 2. The target in this block's clearing (a resumed tracer knows the pair before the
        // offer exists: until then, a dropped creation's details name no book).
        if let (Some(details), Some(pair), Some(_)) = (self.details, self.pair, self.created) {
            let assets = self.assets;
            if usize::from(details.sell.0) >= assets || usize::from(details.buy.0) >= assets {
                return Err(ExplainError::UnknownAsset { height });
            }
            if let Some(book) = self.books.get(&pair) {
                let outcome = self.pair_outcome(block, details.sell, details.buy);
                if let Some(verdict) = explain_in_block(
                    height,
                    book,
                    &details.key,
                    &outcome,
                    (details.sell.0, details.buy.0),
                )? {
                    self.blocks_live += 1;
                    self.sold_total = self.sold_total.saturating_add(verdict.sold);
                    self.received_total = self.received_total.saturating_add(verdict.received);
                    self.latest = Some(verdict);
                }
            }
        }
        // 3. The trades, as execution applies them.
        for trade in &header.trades {
            let pair = self.pair_index(trade.sell, trade.buy);
            if !self.tracked(pair) {
                continue;
            }
            if usize::from(trade.sell.0) >= self.assets || usize::from(trade.buy.0) >= self.assets {
                return Err(ExplainError::UnknownAsset { height });
            }
            let terms = self.pair_outcome(block, trade.sell, trade.buy).terms;
            let book = self.books.entry(pair).or_default();
            let error = ExplainError::Trade {
                height,
                sell: trade.sell.0,
                buy: trade.buy.0,
                sold: trade.sold,
            };
            let mut walk = FillWalk::new(terms, trade.sold);
            let mut last = None;
            let mut sales = Vec::new();
            for (key, held) in book.iter() {
                if walk.left() == 0 {
                    break;
                }
                let sale = walk.next(key.min_price, *held).map_err(|_| error.clone())?;
                if sale.sold > 0 {
                    last = Some(*key);
                    let returned = terms.returned_rest(key.min_price, *held, sale.sold);
                    sales.push((*key, *held - sale.sold - returned));
                }
            }
            if walk.left() > 0 {
                return Err(error);
            }
            for (key, remaining) in sales {
                if remaining == 0 {
                    book.remove(&key);
                } else {
                    book.insert(key, remaining);
                }
            }
            if last != Some(trade.last_offer) {
                return Err(error);
            }
        }
        Ok(())
    }

    fn pair_outcome(&self, block: &Block, sell: AssetId, buy: AssetId) -> PairOutcome {
        let valuation = |asset: AssetId| Valuation(block.header.valuations[asset.0 as usize]);
        let rate = valuation(sell).rate_to(valuation(buy));
        PairOutcome {
            terms: PayoutTerms::new(rate, self.epsilon),
            traded: block
                .header
                .trades
                .iter()
                .find(|trade| trade.sell == sell && trade.buy == buy)
                .map(|trade| (trade.sold, trade.last_offer)),
        }
    }

    fn note_target_transaction(
        &mut self,
        height: u64,
        block: &Block,
        index: usize,
        dropped: &[(u32, DropReason)],
    ) {
        let reason_of = |index: usize| {
            dropped
                .binary_search_by_key(&(index as u32), |(i, _)| *i)
                .ok()
                .map(|at| dropped[at].1)
        };
        let drop_reason = reason_of(index);
        let signed = &block.transactions[index];
        let hash = transaction_hash(signed);
        match (signed.transaction.new_offer(), drop_reason) {
            (Some(offer), None) => {
                self.details = Some(offer);
                self.created = Some((height, hash));
                self.sequence_used = Some(hash);
            }
            (Some(offer), Some(reason)) if self.created.is_none() => {
                self.details = Some(offer);
                let conflicting = match reason {
                    DropReason::AccountOverdraft
                    | DropReason::AccountReusedSequence
                    | DropReason::AccountDoubleCancel => {
                        // The account's group: its other transactions of the block dropped by
                        // the same rule.
                        let source = signed.transaction.source;
                        let group: Vec<&SignedTransaction> = block
                            .transactions
                            .iter()
                            .enumerate()
                            .filter(|(other, other_signed)| {
                                *other != index
                                    && other_signed.transaction.source == source
                                    && reason_of(*other) == Some(reason)
                            })
                            .map(|(_, other_signed)| other_signed)
                            .collect();
                        let sequence_shared = |sequence: u64| {
                            let same = group
                                .iter()
                                .filter(|other| other.transaction.sequence == sequence)
                                .count();
                            same + usize::from(signed.transaction.sequence == sequence) >= 2
                        };
                        group
                            .iter()
                            .filter(|other| {
                                // For a reused sequence number: the transactions that reuse one.
                                reason != DropReason::AccountReusedSequence
                                    || sequence_shared(other.transaction.sequence)
                            })
                            .map(|other| transaction_hash(other))
                            .collect()
                    }
                    DropReason::Replayed => self.sequence_used.into_iter().collect(),
                    _ => Vec::new(),
                };
                self.dropped = Some(DroppedOffer {
                    height,
                    transaction: hash,
                    reason,
                    conflicting,
                });
            }
            (None, None) => self.sequence_used = Some(hash),
            _ => {}
        }
    }

    /// The explanation after the blocks given so far; `pending` says whether a transaction
    /// creating the offer waits in the mempool (with its offer, when it is known).
    pub fn finish(self, pending: Option<Option<NewOffer>>) -> OfferExplanation {
        let open = self.pair.and_then(|pair| {
            self.books
                .get(&pair)
                .and_then(|book| book.get(&self.target_key_or_default()))
        });
        let status = match (&self.created, &self.dropped, pending) {
            (Some(_), _, _) if self.cancelled.is_some() => OfferStatus::Cancelled,
            (Some(_), _, _) if open.is_none() => OfferStatus::Traded,
            (Some(_), _, _) if self.sold_total > 0 => OfferStatus::PartlyTraded,
            (Some(_), _, _) => OfferStatus::NotTraded,
            (None, _, Some(_)) => OfferStatus::Pending,
            (None, Some(_), None) => OfferStatus::Dropped,
            (None, None, None) => OfferStatus::Unknown,
        };
        let details = match (status, pending) {
            (OfferStatus::Pending, Some(offer)) => offer.or(self.details),
            _ => self.details,
        };
        OfferExplanation {
            offer: self.target,
            status,
            details,
            created: self.created,
            dropped: if status == OfferStatus::Dropped {
                self.dropped
            } else {
                None
            },
            cancelled: self.cancelled,
            latest: self.latest,
            blocks_live: self.blocks_live,
            sold_total: self.sold_total,
            received_total: self.received_total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count / 1024`, exactly.
    fn units(count: u128) -> Price {
        Price(count * (Price::ONE.0 >> 10))
    }

    /// An offer key whose limit is `price / 1024`.
    fn key(price: u128, account: u64, id: u64) -> OfferKey {
        OfferKey {
            min_price: units(price),
            account: AccountId(account),
            id: OfferId(id),
        }
    }

    fn book(offers: &[(OfferKey, u64)]) -> BTreeMap<OfferKey, u64> {
        offers.iter().copied().collect()
    }

    #[test]
    fn basis_points_are_floored_hundredths() {
        let rate = Price::ONE;
        // 1/16 above: 625 bp exactly; 1/1024 above: 9.765625 bp, rounded down.
        let limit = Price(Price::ONE.0 + Price::ONE.0 / 16);
        assert_eq!(BasisPoints::above(limit, rate).to_string(), "625.00");
        let limit = Price(Price::ONE.0 + Price::ONE.0 / 1024);
        assert_eq!(BasisPoints::above(limit, rate).to_string(), "9.76");
        assert_eq!(
            BasisPoints::above(Price(3 * Price::ONE.0), rate).to_string(),
            "20000.00"
        );
        assert_eq!(
            BasisPoints::above(Price(1_000_001), Price(1_000_000)).to_string(),
            "0.01"
        );
        assert_eq!(
            BasisPoints::above(Price(10_000_001), Price(10_000_000)).to_string(),
            "0.00"
        );
        // Extremes do not overflow.
        let top = BasisPoints::above(Price(u128::MAX), Price(1));
        assert!(top.0 > U256::from(u128::MAX));
    }

    #[test]
    fn at_the_money_and_the_volume_ahead_are_told_apart() {
        let rate = units(1_024); // 1: every payout exact, so the offers at the rate can trade
        let offers = book(&[
            (key(900, 1, 1), 50),
            (key(1_024, 2, 1), 30),
            (key(1_024, 3, 1), 20),
            (key(1_100, 1, 2), 10),
        ]);
        let pair = PairOutcome {
            terms: PayoutTerms::new(rate, Fraction::ZERO),
            traded: Some((60, key(1_024, 2, 1))),
        };
        let verdict = |target: OfferKey| {
            explain_in_block(7, &offers, &target, &pair, (0, 1))
                .unwrap()
                .unwrap()
        };
        let first = verdict(key(900, 1, 1));
        assert_eq!(
            (first.reason, first.sold, first.volume_ahead),
            (BlockReason::Filled, 50, 0)
        );
        let edge = verdict(key(1_024, 2, 1));
        assert_eq!(
            (edge.reason, edge.sold, edge.volume_ahead),
            (BlockReason::PartlyFilled, 10, 50)
        );
        let at = verdict(key(1_024, 3, 1));
        assert_eq!(
            (at.reason, at.sold, at.volume_ahead),
            (BlockReason::AtTheMoney, 0, 80)
        );
        let out = verdict(key(1_100, 1, 2));
        assert_eq!(out.reason, BlockReason::OutOfTheMoney);
        assert_eq!(out.volume_ahead, 100, "the in-the-money amount ahead");
        assert_eq!(out.out_of_money.unwrap().to_string(), "742.18");
        assert_eq!(
            explain_in_block(7, &offers, &key(5, 9, 9), &pair, (0, 1)).unwrap(),
            None,
            "an offer not in the book"
        );
    }

    #[test]
    fn a_header_that_disagrees_with_the_order_is_an_error_not_a_guess() {
        let offers = book(&[(key(900, 1, 1), 50), (key(950, 2, 1), 30)]);
        let wrong_last = PairOutcome {
            terms: PayoutTerms::new(units(1_024), Fraction::ZERO),
            traded: Some((60, key(900, 1, 1))),
        };
        assert!(matches!(
            explain_in_block(3, &offers, &key(950, 2, 1), &wrong_last, (0, 1)),
            Err(ExplainError::Trade { height: 3, .. })
        ));
        let beyond = PairOutcome {
            terms: PayoutTerms::new(units(920), Fraction::ZERO),
            traded: Some((60, key(950, 2, 1))),
        };
        assert!(matches!(
            explain_in_block(3, &offers, &key(950, 2, 1), &beyond, (0, 1)),
            Err(ExplainError::BeyondLimit { .. })
        ));
    }
}
