//! A serial price-time-priority order book exchange: the baseline SPEEDEX is measured against
//! (SPEEDEX §7.1, "Traditional Exchange Semantics").
//!
//! Same accounts and transactions as the batch exchange, opposite semantics: transactions run one
//! after another in the order given, and each sees every earlier one's effect. That is what makes
//! it a baseline — every offer changes the price the next one meets, so nothing can run in
//! parallel. It keeps no tries and computes no state root: it measures the matching alone.
//! Signatures, when checked, are checked one at a time on the executing thread, in order.
//!
//! A transaction is rejected, changing nothing, with the [`DropReason`] of the first check it
//! fails: well-formed, source exists, signature, sequence in `(last, last + 64]`, assets exist,
//! then per operation — the balance covers the debit *now*, a cancel names a resting offer of
//! its source (pair, limit and id), a payment's receiver exists, a new account's id is free.
//!
//! # Matching
//!
//! Per ordered pair (S, B) a book holds resting offers selling S for B, keyed by
//! (limit price, arrival): lowest limit first — the cheapest for a taker — and among equal limits
//! the earliest arrival (a per-book counter) first.
//!
//! A new offer selling S for B at limit p (units of B per unit of S) meets the opposite book
//! (offers selling B for S). A resting offer there with limit q (units of S per unit of B) crosses
//! when p·q ≤ 1. The trade happens at the resting (maker) offer's price q, in integers
//! ([`size_trade`]):
//!
//! - the maker sells `y = min(maker left, floor(taker left / q))` units of B;
//! - the taker pays `x = ceil(q·y)` units of S. Rounding up favours the maker, so `x ≥ q·y` (the
//!   maker's limit) and, since `q·y ≤ taker left`, `x ≤ taker left`;
//! - the taker's limit `y ≥ p·x` is then checked exactly. It can fail only when `y` is below
//!   `1/(1/p − q)` — a fill so small that rounding `x` up moved the rate past p. Such a maker is
//!   passed over for this taker (keeping its place for everyone else), at most
//!   [`ROUNDING_SKIPS_MAX`] times per taker so one transaction's work stays bounded.
//!
//! Every fill moves `x` of S from the taker's lock to the maker and `y` of B from the maker's lock
//! to the taker, so no asset is created or destroyed. What is left of the taker's offer rests in
//! its own book at its own limit. There is no commission. An account may trade with its own
//! resting offers (nothing is created by it, and preventing it is policy, not matching).

use std::collections::{BTreeMap, HashMap};
use walras_crypto::{verify, PublicKey, Signature};
use walras_engine::{
    admit, check_genesis, new_slot, Account, DropReason, Rejection, SlotMap, StateError,
    ACCOUNTS_MAX,
};
use walras_types::genesis::Genesis;
use walras_types::{
    AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction, MAX_AMOUNT,
};

/// How many resting offers one taker may pass over because integer rounding would break its
/// limit; at the next such offer it stops matching and rests. Bounds one transaction's work.
pub const ROUNDING_SKIPS_MAX: usize = 8;

/// A resting offer's position in its book: (limit price, arrival in that book).
type BookKey = (Price, u64);

/// A resting offer: who owns it, its id, and how much of its sold asset is still locked in it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RestingOffer {
    owner_slot: u32,
    id: OfferId,
    remaining: u64,
}

/// The resting offers of one ordered pair, best (lowest) limit first, then by arrival.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Book {
    offers: BTreeMap<BookKey, RestingOffer>,
    next_arrival: u64,
}

/// Where a resting offer sits: its pair's index and its key in that pair's book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OfferLocation {
    pair_index: usize,
    key: BookKey,
}

/// One fill: a taker (the offer being placed) traded with a maker (a resting offer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    pub taker: AccountId,
    pub taker_offer: OfferId,
    /// The taker's limit: at least this many units of `taker_buys` per unit of `taker_sells`.
    pub taker_limit: Price,
    pub maker: AccountId,
    pub maker_offer: OfferId,
    /// The maker's limit, and the fill's price: at least this many units of `taker_sells` per
    /// unit of `taker_buys`.
    pub maker_limit: Price,
    pub taker_sells: AssetId,
    pub taker_buys: AssetId,
    /// Units of `taker_sells` that went from taker to maker.
    pub taker_sold: u64,
    /// Units of `taker_buys` that went from maker to taker.
    pub maker_sold: u64,
}

/// What one block did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderbookBlockStats {
    pub accepted: usize,
    pub rejected: usize,
    /// Fills, one per (taker, maker) match.
    pub trades: usize,
    /// Per asset: units sold in fills, by takers and makers alike.
    pub volume_by_asset: Vec<u128>,
}

/// A transaction that passed every check, with what its effect needs.
enum Admitted {
    CreateAccount {
        id: AccountId,
        public_key: [u8; 32],
    },
    CreateOffer(Taker),
    CancelOffer(OfferLocation),
    Payment {
        to_slot: u32,
        asset: AssetId,
        amount: u64,
    },
}

/// A new offer about to match.
#[derive(Clone, Copy, Debug)]
struct Taker {
    slot: u32,
    id: OfferId,
    sell: AssetId,
    buy: AssetId,
    amount: u64,
    limit: Price,
}

/// The serial exchange: accounts and, per ordered pair, a price-time book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderbookExchange {
    assets: usize,
    accounts: Vec<Account>,
    account_ids: Vec<AccountId>,
    slots: SlotMap,
    /// Per pair index (`sell * assets + buy`).
    books: Vec<Book>,
    /// Resting offers by (owner slot, offer id), so a cancel finds its offer without a scan.
    /// Only looked up, never iterated: its order cannot leak into results.
    locations: HashMap<(u32, OfferId), OfferLocation>,
    issued: Vec<u64>,
}

impl OrderbookExchange {
    /// The exchange before the first block: genesis balances, empty books.
    pub fn from_genesis(genesis: &Genesis) -> Result<OrderbookExchange, StateError> {
        check_genesis(genesis)?;
        let assets = genesis.assets as usize;
        let mut exchange = OrderbookExchange {
            assets,
            accounts: Vec::with_capacity(genesis.accounts.len()),
            account_ids: Vec::with_capacity(genesis.accounts.len()),
            slots: SlotMap::default(),
            books: vec![Book::default(); assets * assets],
            locations: HashMap::new(),
            issued: vec![0; assets],
        };
        for entry in &genesis.accounts {
            for (asset, amount) in &entry.balances {
                // validate() bounded every per-asset total by MAX_AMOUNT.
                exchange.issued[asset.0 as usize] += amount;
            }
            exchange.add_account(
                entry.id,
                Account::new(entry.public_key, entry.balances.clone()),
            );
        }
        Ok(exchange)
    }

    /// Executes `transactions` one after another, in the order given: each sees the effects of
    /// every earlier one. A rejected transaction changes nothing.
    pub fn execute_block(
        &mut self,
        transactions: &[SignedTransaction],
        verify_signatures: bool,
    ) -> OrderbookBlockStats {
        let mut stats = OrderbookBlockStats {
            accepted: 0,
            rejected: 0,
            trades: 0,
            volume_by_asset: vec![0; self.assets],
        };
        let mut fills = Vec::new();
        for signed in transactions {
            fills.clear();
            match self.execute_transaction(signed, verify_signatures, &mut fills) {
                Ok(()) => stats.accepted += 1,
                Err(_) => stats.rejected += 1,
            }
            stats.trades += fills.len();
            for fill in &fills {
                stats.volume_by_asset[fill.taker_sells.0 as usize] += fill.taker_sold as u128;
                stats.volume_by_asset[fill.taker_buys.0 as usize] += fill.maker_sold as u128;
            }
        }
        stats
    }

    /// Executes one transaction against the current state, appending its fills to `fills`.
    /// On `Err` nothing changed.
    pub fn execute_transaction(
        &mut self,
        signed: &SignedTransaction,
        verify_signatures: bool,
        fills: &mut Vec<Fill>,
    ) -> Result<(), DropReason> {
        let transaction = &signed.transaction;
        let slot = self.check_source(signed, verify_signatures)?;
        let admitted = self.check_operation(slot, transaction)?;
        self.accounts[slot as usize].last_sequence = transaction.sequence;
        self.apply(slot, admitted, fills);
        Ok(())
    }

    /// Per asset: balances plus amounts locked in resting offers. Equals [`Self::issued`] in
    /// every reachable state (conservation; nothing is ever burned here).
    pub fn accounted(&self) -> Vec<u128> {
        let mut totals = vec![0u128; self.assets];
        for account in &self.accounts {
            for (asset, amount) in account.balances() {
                totals[asset.0 as usize] += *amount as u128;
            }
        }
        for (pair_index, book) in self.books.iter().enumerate() {
            let locked: u128 = book.offers.values().map(|o| o.remaining as u128).sum();
            totals[pair_index / self.assets] += locked;
        }
        totals
    }

    /// Per asset: what genesis issued.
    pub fn issued(&self) -> &[u64] {
        &self.issued
    }

    pub fn assets(&self) -> usize {
        self.assets
    }

    pub fn account(&self, id: AccountId) -> Option<&Account> {
        self.slots
            .get(&id)
            .map(|slot| &self.accounts[*slot as usize])
    }

    /// What is still locked in `owner`'s resting offer `id`, if it rests.
    pub fn resting_amount(&self, owner: AccountId, id: OfferId) -> Option<u64> {
        let slot = *self.slots.get(&owner)?;
        let location = self.locations.get(&(slot, id))?;
        let offer = &self.books[location.pair_index].offers[&location.key];
        Some(offer.remaining)
    }

    pub fn open_offer_count(&self) -> usize {
        self.locations.len()
    }

    /// Adds an account; the caller checked there is room (genesis size, or `AccountsFull`).
    fn add_account(&mut self, id: AccountId, account: Account) {
        let Some(slot) = new_slot(self.accounts.len(), ACCOUNTS_MAX) else {
            panic!("an account beyond ACCOUNTS_MAX was admitted");
        };
        self.slots.insert(id, slot);
        self.account_ids.push(id);
        self.accounts.push(account);
    }

    fn pair_index(&self, sell: AssetId, buy: AssetId) -> usize {
        sell.0 as usize * self.assets + buy.0 as usize
    }

    fn known_asset(&self, asset: AssetId) -> bool {
        (asset.0 as usize) < self.assets
    }

    /// Checks that do not depend on the operation: form, source, signature, sequence window.
    fn check_source(
        &self,
        signed: &SignedTransaction,
        verify_signatures: bool,
    ) -> Result<u32, DropReason> {
        let slot = self.slots.get(&signed.transaction.source).copied();
        let source = slot.map(|slot| self.accounts[slot as usize].admission_view());
        admit(signed, source, None, |key| {
            !verify_signatures || signature_valid(key, signed)
        })
        .map_err(Rejection::drop_reason)?;
        slot.ok_or(DropReason::UnknownSource)
    }

    /// Checks the operation against the state *now* and says what applying it needs.
    fn check_operation(
        &self,
        slot: u32,
        transaction: &Transaction,
    ) -> Result<Admitted, DropReason> {
        let account = &self.accounts[slot as usize];
        if !transaction
            .operation
            .assets()
            .all(|asset| self.known_asset(asset))
        {
            return Err(DropReason::UnknownAsset);
        }
        if let Some(offer) = transaction.new_offer() {
            if account.balance(offer.sell) < offer.amount {
                return Err(DropReason::AccountOverdraft);
            }
            return Ok(Admitted::CreateOffer(Taker {
                slot,
                id: offer.key.id,
                sell: offer.sell,
                buy: offer.buy,
                amount: offer.amount,
                limit: offer.key.min_price,
            }));
        }
        if let Some(cancel) = transaction.cancelled_offer() {
            let pair_index = self.pair_index(cancel.sell, cancel.buy);
            return self
                .locate_own_offer(slot, cancel.key.id, pair_index, cancel.key.min_price)
                .map(Admitted::CancelOffer);
        }
        match transaction.operation {
            Operation::CreateAccount {
                new_account,
                public_key,
            } => {
                if self.slots.contains_key(&new_account) {
                    return Err(DropReason::AccountExists);
                }
                if new_slot(self.accounts.len(), ACCOUNTS_MAX).is_none() {
                    return Err(DropReason::AccountsFull);
                }
                Ok(Admitted::CreateAccount {
                    id: new_account,
                    public_key,
                })
            }
            Operation::Payment { to, asset, amount } => {
                let to_slot = *self.slots.get(&to).ok_or(DropReason::UnknownReceiver)?;
                if account.balance(asset) < amount {
                    return Err(DropReason::AccountOverdraft);
                }
                Ok(Admitted::Payment {
                    to_slot,
                    asset,
                    amount,
                })
            }
            Operation::CreateOffer { .. } | Operation::CancelOffer { .. } => {
                unreachable!("offer operations were handled above")
            }
            // The baseline has no payments bridge: the admission rule already refused these
            // (it is given no bridge), and this says so again rather than assume it.
            Operation::DepositToPayments { .. } | Operation::WithdrawFromPayments { .. } => {
                Err(DropReason::PaymentsDisabled)
            }
        }
    }

    /// The source's resting offer named by a cancel; the pair and limit must match too, as a
    /// cancel names the offer's full key.
    fn locate_own_offer(
        &self,
        slot: u32,
        id: OfferId,
        pair_index: usize,
        limit: Price,
    ) -> Result<OfferLocation, DropReason> {
        match self.locations.get(&(slot, id)) {
            Some(location) if location.pair_index == pair_index && location.key.0 == limit => {
                Ok(*location)
            }
            _ => Err(DropReason::UnknownOffer),
        }
    }

    /// The effect of an admitted transaction. Cannot fail: every check passed.
    fn apply(&mut self, slot: u32, admitted: Admitted, fills: &mut Vec<Fill>) {
        match admitted {
            Admitted::CreateAccount { id, public_key } => {
                self.add_account(id, Account::new(public_key, Vec::new()))
            }
            Admitted::CreateOffer(taker) => self.place_offer(taker, fills),
            Admitted::CancelOffer(location) => self.cancel_offer(slot, location),
            Admitted::Payment {
                to_slot,
                asset,
                amount,
            } => {
                self.accounts[slot as usize].debit(asset, amount);
                self.accounts[to_slot as usize].credit(asset, amount);
            }
        }
    }

    /// Locks the taker's amount, matches it, and rests what is left.
    fn place_offer(&mut self, taker: Taker, fills: &mut Vec<Fill>) {
        self.accounts[taker.slot as usize].debit(taker.sell, taker.amount);
        let left = self.match_offer(&taker, fills);
        if left > 0 {
            self.rest(&taker, left);
        }
    }

    /// Fills `taker` against the opposite book, best price then earliest arrival first, until
    /// it is used up or no resting offer crosses. Returns what is left of the taker's amount.
    fn match_offer(&mut self, taker: &Taker, fills: &mut Vec<Fill>) -> u64 {
        let opposite = self.pair_index(taker.buy, taker.sell);
        let OrderbookExchange {
            accounts,
            account_ids,
            books,
            locations,
            ..
        } = self;
        let book = &mut books[opposite];
        let mut left = taker.amount;
        let mut filled_keys: Vec<BookKey> = Vec::new();
        let mut skips = 0usize;
        for (key, maker) in book.offers.iter_mut() {
            if !crosses(taker.limit, key.0) {
                break;
            }
            let (taker_sold, maker_sold) =
                match size_trade(left, taker.limit, maker.remaining, key.0) {
                    TradeSize::Fill {
                        taker_sold,
                        maker_sold,
                    } => (taker_sold, maker_sold),
                    TradeSize::TakerTooSmall => break,
                    TradeSize::RoundsPastTakerLimit if skips < ROUNDING_SKIPS_MAX => {
                        skips += 1;
                        continue;
                    }
                    TradeSize::RoundsPastTakerLimit => break,
                };
            left -= taker_sold;
            maker.remaining -= maker_sold;
            accounts[maker.owner_slot as usize].credit(taker.sell, taker_sold);
            accounts[taker.slot as usize].credit(taker.buy, maker_sold);
            fills.push(Fill {
                taker: account_ids[taker.slot as usize],
                taker_offer: taker.id,
                taker_limit: taker.limit,
                maker: account_ids[maker.owner_slot as usize],
                maker_offer: maker.id,
                maker_limit: key.0,
                taker_sells: taker.sell,
                taker_buys: taker.buy,
                taker_sold,
                maker_sold,
            });
            if maker.remaining == 0 {
                filled_keys.push(*key);
            }
            if left == 0 {
                break;
            }
        }
        for key in filled_keys {
            if let Some(maker) = book.offers.remove(&key) {
                locations.remove(&(maker.owner_slot, maker.id));
            }
        }
        left
    }

    /// Puts what is left of a taker into its own book, behind every earlier offer at its limit.
    fn rest(&mut self, taker: &Taker, left: u64) {
        let pair_index = self.pair_index(taker.sell, taker.buy);
        let book = &mut self.books[pair_index];
        let key = (taker.limit, book.next_arrival);
        book.next_arrival += 1;
        book.offers.insert(
            key,
            RestingOffer {
                owner_slot: taker.slot,
                id: taker.id,
                remaining: left,
            },
        );
        self.locations
            .insert((taker.slot, taker.id), OfferLocation { pair_index, key });
    }

    /// Removes the source's resting offer and refunds exactly what was left of it.
    fn cancel_offer(&mut self, slot: u32, location: OfferLocation) {
        let sell = AssetId((location.pair_index / self.assets) as u16);
        let removed = self.books[location.pair_index].offers.remove(&location.key);
        // locate_own_offer found it in `locations`, which mirrors the books exactly.
        let offer = removed.expect("offer locations mirror the books");
        self.locations.remove(&(slot, offer.id));
        self.accounts[slot as usize].credit(sell, offer.remaining);
    }
}

/// Whether the source's key signed the transaction. A key that is not a valid curve point (an
/// account can be created with any 32 bytes) signs nothing.
fn signature_valid(key: &PublicKey, signed: &SignedTransaction) -> bool {
    let Ok(signature) = Signature::from_bytes(&signed.signature) else {
        return false;
    };
    verify(key, &signed.transaction.encode(), &signature).is_ok()
}

/// Whether a taker at limit `taker_limit` (B per S) and a maker at `maker_limit` (S per B) can
/// trade: `taker_limit · maker_limit ≤ 1`, exactly (a 256-bit product of the raw values).
pub fn crosses(taker_limit: Price, maker_limit: Price) -> bool {
    taker_limit.product_at_most_one(maker_limit)
}

/// The integer size of one fill at the maker's price (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TradeSize {
    /// The taker pays `taker_sold` units of its sold asset for `maker_sold` of the maker's.
    Fill { taker_sold: u64, maker_sold: u64 },
    /// The taker's remainder buys less than one unit at this maker's price (or any worse one).
    TakerTooSmall,
    /// Rounding the taker's payment up to a whole unit would push it past the taker's limit.
    RoundsPastTakerLimit,
}

/// Sizes a fill of a taker with `taker_left` units at limit `taker_limit` against a maker with
/// `maker_left` units at limit `maker_limit`, at the maker's price, rounding in the maker's
/// favour. Amounts are at most [`MAX_AMOUNT`] (< 2^63) and limits at most
/// [`Price::MAX_LIMIT`] (10^12), so `ceil(q·y)` is at most the taker's amount and every product
/// below is exact ([`Price::mul_amount_ceil`], [`Price::divide_amount_floor`]).
pub fn size_trade(
    taker_left: u64,
    taker_limit: Price,
    maker_left: u64,
    maker_limit: Price,
) -> TradeSize {
    debug_assert!(taker_left <= MAX_AMOUNT && maker_left <= MAX_AMOUNT);
    // floor(taker_left / q); a zero limit is unreachable for validated offers.
    let Some(affordable) = maker_limit.divide_amount_floor(taker_left) else {
        return TradeSize::TakerTooSmall;
    };
    let maker_sold = affordable.min(maker_left as u128) as u64;
    if maker_sold == 0 {
        return TradeSize::TakerTooSmall;
    }
    // ceil(q·y) ≤ taker_left because q·y ≤ taker_left and taker_left is an integer.
    let taker_sold = maker_limit.mul_amount_ceil(maker_sold);
    debug_assert!(taker_sold <= taker_left as u128);
    let taker_sold = taker_sold as u64;
    // The taker's limit, exactly: y ≥ p·x ⟺ y ≥ ceil(p·x) for an integer y.
    if (maker_sold as u128) < taker_limit.mul_amount_ceil(taker_sold) {
        return TradeSize::RoundsPastTakerLimit;
    }
    TradeSize::Fill {
        taker_sold,
        maker_sold,
    }
}

#[cfg(test)]
mod tests {
    //! The two pure pieces of matching, against 256-bit schoolbook arithmetic: `crosses` is
    //! exactly `p·q ≤ 2^160` on the raw Q48.80 values, and every `Fill` that `size_trade` returns respects both limits,
    //! fits both remainders, and trades at least one unit each way.
    use super::*;
    use proptest::prelude::*;

    /// `a · b` as 256 bits (high, low), by 64-bit limbs.
    fn wide_mul(a: u128, b: u128) -> (u128, u128) {
        let mask = u64::MAX as u128;
        let (a0, a1, b0, b1) = (a & mask, a >> 64, b & mask, b >> 64);
        let low = a0 * b0;
        let middle_a = a1 * b0;
        let middle_b = a0 * b1;
        let high = a1 * b1;
        let carry = ((low >> 64) + (middle_a & mask) + (middle_b & mask)) >> 64;
        let low_total = low
            .wrapping_add((middle_a & mask) << 64)
            .wrapping_add((middle_b & mask) << 64);
        (
            high + (middle_a >> 64) + (middle_b >> 64) + carry,
            low_total,
        )
    }

    /// `price · amount ≤ other · 2^80`, i.e. `price/2^80 · amount ≤ other`, exactly.
    fn at_most(price: Price, amount: u64, other: u64) -> bool {
        let shift = Price::FRAC_BITS;
        wide_mul(price.0, amount as u128)
            <= ((other as u128) >> (128 - shift), (other as u128) << shift)
    }

    /// 2^160 = 2^(2·FRAC_BITS) as (high, low): the raw product of two prices whose product is 1.
    const ONE_SQUARED: (u128, u128) = (1 << (2 * Price::FRAC_BITS - 128), 0);

    /// `floor(2^160 / q)`: the largest taker limit that crosses a maker at `q`.
    fn reciprocal_floor(q: Price) -> u128 {
        let quotient = (ethnum::U256::ONE << (2 * Price::FRAC_BITS)) / ethnum::U256::from(q.0);
        u128::try_from(quotient).unwrap_or(u128::MAX)
    }

    fn limit() -> impl Strategy<Value = Price> {
        prop_oneof![
            (Price::MIN_LIMIT.0..=Price::MAX_LIMIT.0).prop_map(Price),
            // Near 1, where p·q ≈ 1 and rounding decides.
            (Price::ONE.0 - (1 << 56)..Price::ONE.0 + (1 << 56)).prop_map(Price),
            (1u128..64).prop_map(|k| Price(k << (Price::FRAC_BITS - 3))),
            // Near both ends of the accepted range.
            (Price::MIN_LIMIT.0..Price::MIN_LIMIT.0 << 10).prop_map(Price),
            (Price::MAX_LIMIT.0 >> 10..=Price::MAX_LIMIT.0).prop_map(Price),
        ]
    }

    fn amount() -> impl Strategy<Value = u64> {
        prop_oneof![1u64..20, 1..=MAX_AMOUNT]
    }

    #[test]
    fn crossing_at_exact_reciprocals() {
        assert!(crosses(Price::ONE, Price::ONE));
        assert!(!crosses(Price(Price::ONE.0 + 1), Price::ONE));
        assert!(crosses(Price(Price::ONE.0 * 4), Price(Price::ONE.0 / 4)));
        assert!(!crosses(
            Price(Price::ONE.0 * 4 + 1),
            Price(Price::ONE.0 / 4)
        ));
    }

    #[test]
    fn rounding_past_the_taker_limit_is_refused() {
        // q = 1.5, one unit: the taker would pay 2 for 1, a rate of 0.5 < its limit 0.6.
        let q = Price(3u128 << (Price::FRAC_BITS - 1));
        let p = Price::from_f64(0.6);
        assert!(crosses(p, q));
        assert_eq!(size_trade(10, p, 1, q), TradeSize::RoundsPastTakerLimit);
        assert_eq!(
            size_trade(10, p, 100, q),
            TradeSize::Fill {
                taker_sold: 9,
                maker_sold: 6
            }
        );
    }

    proptest! {
        #[test]
        fn crosses_is_exact(p in limit(), q in limit()) {
            let product = wide_mul(p.0, q.0);
            prop_assert_eq!(crosses(p, q), product <= ONE_SQUARED);
        }

        #[test]
        fn fills_respect_both_limits(
            taker_left in amount(), p in limit(), maker_left in amount(), q in limit(),
        ) {
            if let TradeSize::Fill { taker_sold, maker_sold } = size_trade(taker_left, p, maker_left, q) {
                prop_assert!(taker_sold >= 1 && maker_sold >= 1);
                prop_assert!(taker_sold <= taker_left && maker_sold <= maker_left);
                prop_assert!(at_most(q, maker_sold, taker_sold), "maker limit");
                prop_assert!(at_most(p, taker_sold, maker_sold), "taker limit");
                prop_assert!(crosses(p, q));
            }
        }

        /// Takers priced at or just inside the maker's reciprocal, where rounding decides.
        #[test]
        fn fills_at_the_crossing_point_respect_both_limits(
            taker_left in amount(), maker_left in amount(), q in limit(), inside in 0u128..1 << 20,
        ) {
            let p = Price(reciprocal_floor(q).saturating_sub(inside).max(1));
            prop_assert!(crosses(p, q));
            if let TradeSize::Fill { taker_sold, maker_sold } = size_trade(taker_left, p, maker_left, q) {
                prop_assert!(at_most(q, maker_sold, taker_sold), "maker limit");
                prop_assert!(at_most(p, taker_sold, maker_sold), "taker limit");
            }
        }
    }
}
