//! Planning one block: which account sends what, with which sequence number, and where the
//! injected faults go. Signing happens afterwards, in parallel.

use super::keys::KeyPool;
use super::ledger::{Ledger, VALUE_HI, VALUE_LO};
use super::{FaultKind, InjectedFault, WorkloadParams};
use crate::offers::{MAX_GENERATED_PRICE, MIN_GENERATED_PRICE};
use crate::rng::Rng;
use std::collections::HashMap;
use walras_types::transaction::SEQUENCE_WINDOW;
use walras_types::{AccountId, AssetId, Operation, Price, Transaction, MAX_AMOUNT};

/// Probability that a slot holds an injected fault.
const FAULT_RATE: f64 = 0.01;
/// Shares of the other (regular) slots; offers take the rest (about 73.5%).
const CREATE_ACCOUNT_SHARE: f64 = 0.005;
const PAYMENT_SHARE: f64 = 0.08;
const CANCEL_SHARE: f64 = 0.18;

/// A payment moves this fraction of the sender's known balance, log-uniform in between.
const PAYMENT_FRACTION_LO: f64 = 0.001;
const PAYMENT_FRACTION_HI: f64 = 0.05;

/// A fresh sequence number skips 1..=MAX_GAP numbers with this probability, at most
/// GAP_BUDGET per account and block: every account keeps room for 48 transactions.
const GAP_PROBABILITY: f64 = 0.05;
const MAX_GAP: u64 = 3;
const GAP_BUDGET: u64 = 16;

/// Power-law draws of a source before falling back to a scan for any qualifying account.
const SOURCE_DRAWS: usize = 32;
/// Random picks of a partner (an offer to cancel, an earlier transaction) before giving up.
const PARTNER_PICKS: usize = 8;

/// A planned block, before signing.
pub(super) struct BlockPlan {
    pub transactions: Vec<Transaction>,
    /// Per transaction: whether the exchange is expected to accept it through filtering.
    pub survives: Vec<bool>,
    /// Positions whose signature is to be corrupted.
    pub bad_signatures: Vec<usize>,
    pub faults: Vec<InjectedFault>,
    /// Account creations expected to succeed.
    pub accounts_created: usize,
}

/// An account's state within the block being planned.
#[derive(Clone, Copy, Debug)]
struct BlockAccount {
    /// The highest sequence number handed out so far (the last one before the block at first).
    top_sequence: u64,
    /// `top_sequence` may not pass this: last + 64.
    sequence_limit: u64,
    transactions: usize,
    gaps: u64,
    /// The sequence number of the account's first regular, validly signed, non-creation
    /// transaction: what a reused-sequence fault repeats.
    first_sequence: Option<u64>,
    /// Debits per held slot by validly signed transactions.
    debits: [u64; super::ledger::HELD_ASSETS_MAX],
    /// A fault drops all of the account's transactions.
    dropped: bool,
}

impl BlockAccount {
    fn has_room(&self) -> bool {
        self.transactions < SEQUENCE_WINDOW as usize && self.top_sequence < self.sequence_limit
    }
}

/// What a source must be able to do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Send one more transaction with a fresh sequence number.
    Room,
    /// That, and spend at least 2 units of some held asset.
    Funds,
}

/// The kinds of regular transaction.
enum Regular {
    Offer,
    Cancel,
    Payment,
    CreateAccount,
}

impl BlockPlan {
    /// The transactions the exchange is expected to accept, in block order: what the ledger
    /// applies (`Ledger::commit`).
    pub(super) fn surviving(&self) -> impl Iterator<Item = &Transaction> {
        self.transactions
            .iter()
            .zip(&self.survives)
            .filter_map(|(transaction, &survives)| survives.then_some(transaction))
    }
}

pub(super) struct BlockPlanner<'a> {
    number: usize,
    params: &'a WorkloadParams,
    ledger: &'a mut Ledger,
    keys: &'a KeyPool,
    valuations: &'a [f64],
    rng: &'a mut Rng,
    accounts: HashMap<AccountId, BlockAccount>,
    /// Accounts with a `first_sequence`, in the order they got it.
    touched: Vec<AccountId>,
    transactions: Vec<Transaction>,
    /// Per transaction: dropped on its own (bad signature, duplicate creation).
    dropped: Vec<bool>,
    bad_signatures: Vec<usize>,
    faults: Vec<InjectedFault>,
    /// Positions of regular cancels and creations: partners for faults.
    cancels: Vec<usize>,
    creations: Vec<usize>,
}

impl<'a> BlockPlanner<'a> {
    pub(super) fn new(
        number: usize,
        params: &'a WorkloadParams,
        ledger: &'a mut Ledger,
        keys: &'a KeyPool,
        valuations: &'a [f64],
        rng: &'a mut Rng,
    ) -> BlockPlanner<'a> {
        BlockPlanner {
            number,
            params,
            ledger,
            keys,
            valuations,
            rng,
            accounts: HashMap::new(),
            touched: Vec::new(),
            transactions: Vec::with_capacity(params.txs_per_block),
            dropped: Vec::with_capacity(params.txs_per_block),
            bad_signatures: Vec::new(),
            faults: Vec::new(),
            cancels: Vec::new(),
            creations: Vec::new(),
        }
    }

    /// Fills the block with exactly `txs_per_block` transactions.
    pub(super) fn plan(mut self) -> BlockPlan {
        while self.transactions.len() < self.params.txs_per_block {
            let slots_left = self.params.txs_per_block - self.transactions.len();
            if self.rng.uniform_f64() < FAULT_RATE && self.params.faults {
                self.inject_fault(slots_left);
            } else {
                self.push_regular();
            }
        }
        self.finish()
    }

    fn finish(self) -> BlockPlan {
        let survives: Vec<bool> = self
            .transactions
            .iter()
            .zip(&self.dropped)
            .map(|(transaction, &dropped)| !dropped && !self.accounts[&transaction.source].dropped)
            .collect();
        let accounts_created = self
            .transactions
            .iter()
            .zip(&survives)
            .filter(|(transaction, &survives)| {
                survives && matches!(transaction.operation, Operation::CreateAccount { .. })
            })
            .count();
        BlockPlan {
            transactions: self.transactions,
            survives,
            bad_signatures: self.bad_signatures,
            faults: self.faults,
            accounts_created,
        }
    }

    // ----- accounts -----

    /// The account's block state, as it would be on first use.
    fn peek(&self, id: AccountId) -> BlockAccount {
        match self.accounts.get(&id) {
            Some(account) => *account,
            None => {
                let last = self.ledger.last_sequence[id.0 as usize];
                BlockAccount {
                    top_sequence: last,
                    sequence_limit: last + SEQUENCE_WINDOW,
                    transactions: 0,
                    gaps: 0,
                    first_sequence: None,
                    debits: [0; super::ledger::HELD_ASSETS_MAX],
                    dropped: false,
                }
            }
        }
    }

    fn account(&mut self, id: AccountId) -> &mut BlockAccount {
        let fresh = self.peek(id);
        self.accounts.entry(id).or_insert(fresh)
    }

    /// What the account can still spend of its held slot this block.
    fn remaining(&self, id: AccountId, slot: usize) -> u64 {
        let known = self.ledger.holdings[id.0 as usize].known[slot];
        known.saturating_sub(self.peek(id).debits[slot])
    }

    /// A random held slot with at least 2 units left, if any.
    fn funded_slot(&mut self, id: AccountId) -> Option<usize> {
        let held = self.ledger.held;
        let start = self.rng.index(held);
        (0..held)
            .map(|k| (start + k) % held)
            .find(|&slot| self.remaining(id, slot) >= 2)
    }

    fn qualifies(&self, id: AccountId, need: Need) -> bool {
        self.peek(id).has_room()
            && (need == Need::Room
                || (0..self.ledger.held).any(|slot| self.remaining(id, slot) >= 2))
    }

    /// A genesis account that can act, drawn by activity; if the draws keep hitting busy or
    /// broke accounts, the first qualifying one from a random start. `None` only if no account
    /// qualifies, which for [`Need::Room`] cannot happen: blocks hold at most 32 transactions
    /// per account and every account has room for 48.
    fn draw_source(&mut self, need: Need) -> Option<AccountId> {
        for _ in 0..SOURCE_DRAWS {
            let rank = self.ledger.activity.sample(self.rng);
            let id = self.ledger.ranks.id_of(rank);
            if self.qualifies(id, need) {
                return Some(id);
            }
        }
        let accounts = self.ledger.accounts;
        let start = self.rng.below(accounts);
        (0..accounts)
            .map(|k| AccountId((start + k) % accounts))
            .find(|&id| self.qualifies(id, need))
    }

    /// A source with room; see [`BlockPlanner::draw_source`] for why one always exists.
    fn source_with_room(&mut self) -> AccountId {
        match self.draw_source(Need::Room) {
            Some(id) => id,
            None => unreachable!("validated parameters leave room in some account"),
        }
    }

    /// The next fresh sequence number of the account, sometimes after a gap.
    fn next_sequence(&mut self, id: AccountId) -> u64 {
        let gap_draw = self.rng.uniform_f64();
        let gap_size = 1 + self.rng.below(MAX_GAP);
        let account = self.account(id);
        debug_assert!(account.has_room());
        let room_after = account.sequence_limit - account.top_sequence - 1;
        let gap = if gap_draw < GAP_PROBABILITY {
            gap_size.min(GAP_BUDGET - account.gaps).min(room_after)
        } else {
            0
        };
        account.gaps += gap;
        account.top_sequence += 1 + gap;
        account.top_sequence
    }

    /// Appends a transaction; returns its position.
    fn push(&mut self, source: AccountId, sequence: u64, operation: Operation) -> usize {
        self.account(source).transactions += 1;
        self.transactions.push(Transaction {
            source,
            sequence,
            operation,
        });
        self.dropped.push(false);
        self.transactions.len() - 1
    }

    /// Appends a regular transaction with a fresh sequence number, recording its debit.
    fn push_fresh(
        &mut self,
        source: AccountId,
        operation: Operation,
        debit: Option<(usize, u64)>,
    ) -> usize {
        let sequence = self.next_sequence(source);
        let is_creation = matches!(operation, Operation::CreateAccount { .. });
        let account = self.account(source);
        if let Some((slot, amount)) = debit {
            account.debits[slot] = account.debits[slot].saturating_add(amount);
        }
        if !is_creation && account.first_sequence.is_none() {
            account.first_sequence = Some(sequence);
            self.touched.push(source);
        }
        self.push(source, sequence, operation)
    }

    // ----- operations -----

    fn value_units(&mut self, asset: AssetId) -> u64 {
        let value = self.rng.log_uniform(VALUE_LO, VALUE_HI);
        let units = value * self.ledger.value_scale / self.valuations[usize::from(asset.0)];
        // Saturating cast; values are far below MAX_AMOUNT.
        (units.round() as u64).clamp(1, MAX_AMOUNT)
    }

    fn other_asset(&mut self, asset: AssetId) -> AssetId {
        let other = self.rng.index(self.params.assets - 1) as u16;
        AssetId(if other >= asset.0 { other + 1 } else { other })
    }

    /// A limit price a small random distance from the current valuation ratio (see
    /// [`workload_limit_distance`]), or symmetric around it in the `market` model.
    fn limit_price(&mut self, sell: AssetId, buy: AssetId) -> Price {
        let ratio = self.valuations[usize::from(sell.0)] / self.valuations[usize::from(buy.0)];
        let limit = match self.params.market_spread_ppm {
            None => ratio * (1.0 - workload_limit_distance(self.rng)),
            Some(ppm) => ratio * (f64::from(ppm) / 1e6 * self.rng.normal()).exp(),
        };
        Price::from_f64(limit.clamp(MIN_GENERATED_PRICE, MAX_GENERATED_PRICE))
    }

    /// An offer selling at most half of what is left of `slot` (so a busy account's offers
    /// shrink rather than overdraft).
    fn offer_from(&mut self, source: AccountId, slot: usize) -> (Operation, u64) {
        let sell = self.ledger.holdings[source.0 as usize].assets[slot];
        let buy = self.other_asset(sell);
        let cap = self.remaining(source, slot) / 2;
        let amount = self.value_units(sell).min(cap).max(1);
        let min_price = self.limit_price(sell, buy);
        let operation = Operation::CreateOffer {
            sell,
            buy,
            amount,
            min_price,
        };
        (operation, amount)
    }

    /// A payment of a small fraction of what is left of `slot`, to a random other account.
    fn payment_from(&mut self, source: AccountId, slot: usize) -> (Operation, u64) {
        let asset = self.ledger.holdings[source.0 as usize].assets[slot];
        let fraction = self
            .rng
            .log_uniform(PAYMENT_FRACTION_LO, PAYMENT_FRACTION_HI);
        let remaining = self.remaining(source, slot);
        let amount = ((remaining as f64 * fraction) as u64).clamp(1, remaining.max(1));
        let to = self.recipient(source);
        (Operation::Payment { to, asset, amount }, amount)
    }

    /// A uniformly random existing account other than `source`.
    fn recipient(&mut self, source: AccountId) -> AccountId {
        let total = self.ledger.accounts + self.ledger.created.len() as u64;
        loop {
            let draw = self.rng.below(total);
            let id = match draw.checked_sub(self.ledger.accounts) {
                None => AccountId(draw),
                Some(created) => self.ledger.created[created as usize],
            };
            if id != source {
                return id;
            }
        }
    }

    fn new_account(&mut self) -> Operation {
        let new_account = AccountId(self.ledger.next_new_account);
        self.ledger.next_new_account += 1;
        Operation::CreateAccount {
            new_account,
            public_key: *self.keys.for_account(new_account).public_key().as_bytes(),
        }
    }

    // ----- regular transactions -----

    fn regular_kind(&mut self) -> Regular {
        if self.params.payments_only {
            return Regular::Payment;
        }
        let draw = self.rng.uniform_f64();
        if draw < CREATE_ACCOUNT_SHARE {
            Regular::CreateAccount
        } else if draw < CREATE_ACCOUNT_SHARE + PAYMENT_SHARE {
            Regular::Payment
        } else if draw < CREATE_ACCOUNT_SHARE + PAYMENT_SHARE + CANCEL_SHARE {
            Regular::Cancel
        } else {
            Regular::Offer
        }
    }

    /// Appends exactly one regular transaction. A cancel with nothing to cancel becomes an
    /// offer; an offer or payment with no funded account becomes an account creation (never
    /// seen in practice: balances are sized for the workload).
    fn push_regular(&mut self) -> usize {
        let pushed = match self.regular_kind() {
            Regular::Offer => self.push_offer(),
            Regular::Cancel => self.push_cancel().or_else(|| self.push_offer()),
            Regular::Payment => self.push_payment(),
            Regular::CreateAccount => Some(self.push_creation()),
        };
        match pushed {
            Some(index) => index,
            None => self.push_creation(),
        }
    }

    fn push_offer(&mut self) -> Option<usize> {
        let source = self.draw_source(Need::Funds)?;
        let slot = self.funded_slot(source)?;
        let (operation, amount) = self.offer_from(source, slot);
        Some(self.push_fresh(source, operation, Some((slot, amount))))
    }

    fn push_payment(&mut self) -> Option<usize> {
        let source = self.draw_source(Need::Funds)?;
        let slot = self.funded_slot(source)?;
        let (operation, amount) = self.payment_from(source, slot);
        Some(self.push_fresh(source, operation, Some((slot, amount))))
    }

    /// Cancels a random offer from an earlier block whose owner has room.
    fn push_cancel(&mut self) -> Option<usize> {
        for _ in 0..PARTNER_PICKS {
            if self.ledger.open_offers.is_empty() {
                return None;
            }
            let pick = self.rng.index(self.ledger.open_offers.len());
            let offer = self.ledger.open_offers[pick];
            if !self.peek(offer.owner).has_room() {
                continue;
            }
            self.ledger.open_offers.swap_remove(pick);
            let operation = Operation::CancelOffer {
                sell: offer.sell,
                buy: offer.buy,
                min_price: offer.min_price,
                offer_id: offer.id,
            };
            let index = self.push_fresh(offer.owner, operation, None);
            self.cancels.push(index);
            return Some(index);
        }
        None
    }

    fn push_creation(&mut self) -> usize {
        let source = self.source_with_room();
        let operation = self.new_account();
        let index = self.push_fresh(source, operation, None);
        self.creations.push(index);
        index
    }

    // ----- faults -----

    /// Appends one fault (and, for kinds that need one, a regular partner first if the block
    /// has none yet). A kind that cannot be placed becomes a bad signature, which always can.
    fn inject_fault(&mut self, slots_left: usize) {
        let kinds: &[FaultKind] = if self.params.payments_only {
            &FaultKind::PAYMENTS
        } else {
            &FaultKind::ALL
        };
        let kind = kinds[self.rng.index(kinds.len())];
        let placed = match kind {
            FaultKind::Overdraft => Some(self.overdraft()),
            FaultKind::ReusedSequence => self.reused_sequence(),
            FaultKind::BadSignature => None,
            FaultKind::DoubleCancel => self.double_cancel(slots_left),
            FaultKind::DuplicateAccountCreation => self.duplicate_creation(slots_left),
        };
        let (index, kind) = match placed {
            Some(index) => (index, kind),
            None => (self.bad_signature(), FaultKind::BadSignature),
        };
        self.faults.push(InjectedFault {
            block: self.number,
            index,
            kind,
        });
    }

    /// A debit that brings the account's debits of one asset in this block above its balance:
    /// preferably one it could afford alone, on top of earlier debits, where the balance is known
    /// exactly; otherwise one that exceeds the asset's whole supply together with the earlier
    /// debits, which overdrafts whatever the account gained from trades.
    fn overdraft(&mut self) -> usize {
        let (source, slot, amount) = match self.exact_overdraft() {
            Some(found) => found,
            None => self.supply_overdraft(),
        };
        let asset = self.ledger.holdings[source.0 as usize].assets[slot];
        let operation = if self.params.payments_only || self.rng.uniform_f64() < 0.5 {
            let to = self.recipient(source);
            Operation::Payment { to, asset, amount }
        } else {
            let buy = self.other_asset(asset);
            let min_price = self.limit_price(asset, buy);
            Operation::CreateOffer {
                sell: asset,
                buy,
                amount,
                min_price,
            }
        };
        let sequence = self.next_sequence(source);
        let account = self.account(source);
        account.debits[slot] = account.debits[slot].saturating_add(amount);
        account.dropped = true;
        self.push(source, sequence, operation)
    }

    /// An account that debited an asset it knows its exact balance of, and one unit more than
    /// what is left of that balance.
    fn exact_overdraft(&mut self) -> Option<(AccountId, usize, u64)> {
        for _ in 0..PARTNER_PICKS {
            if self.touched.is_empty() {
                return None;
            }
            let source = self.touched[self.rng.index(self.touched.len())];
            let account = self.peek(source);
            if !account.has_room() {
                continue;
            }
            let holding = &self.ledger.holdings[source.0 as usize];
            let slot =
                (0..self.ledger.held).find(|&slot| holding.exact[slot] && account.debits[slot] > 0);
            if let Some(slot) = slot {
                return Some((source, slot, self.remaining(source, slot) + 1));
            }
        }
        None
    }

    /// Any account, one of its assets, and an amount that takes its debits past the supply.
    fn supply_overdraft(&mut self) -> (AccountId, usize, u64) {
        let source = self.source_with_room();
        let slot = self.rng.index(self.ledger.held);
        let asset = self.ledger.holdings[source.0 as usize].assets[slot];
        let supply = self.ledger.supply[usize::from(asset.0)];
        let already = self.peek(source).debits[slot];
        let amount = (supply + 1).saturating_sub(already).clamp(1, MAX_AMOUNT);
        (source, slot, amount)
    }

    /// A validly signed transaction reusing the sequence number of an account's first
    /// transaction in the block.
    fn reused_sequence(&mut self) -> Option<usize> {
        for _ in 0..PARTNER_PICKS {
            if self.touched.is_empty() {
                return None;
            }
            let source = self.touched[self.rng.index(self.touched.len())];
            let account = self.peek(source);
            let Some(sequence) = account.first_sequence else {
                continue;
            };
            if account.transactions >= SEQUENCE_WINDOW as usize {
                continue;
            }
            let (operation, debit) = self.affordable_payment(source);
            let account = self.account(source);
            if let Some((slot, amount)) = debit {
                account.debits[slot] = account.debits[slot].saturating_add(amount);
            }
            account.dropped = true;
            return Some(self.push(source, sequence, operation));
        }
        None
    }

    /// A payment the account can afford; if it is broke (not seen in practice), one unit of its
    /// first asset, which the fault's drop makes harmless.
    fn affordable_payment(&mut self, source: AccountId) -> (Operation, Option<(usize, u64)>) {
        match self.funded_slot(source) {
            Some(slot) => {
                let (operation, amount) = self.payment_from(source, slot);
                (operation, Some((slot, amount)))
            }
            None => {
                let asset = self.ledger.holdings[source.0 as usize].assets[0];
                let to = self.recipient(source);
                let operation = Operation::Payment {
                    to,
                    asset,
                    amount: 1,
                };
                (operation, None)
            }
        }
    }

    /// An ordinary offer or payment whose signature will be corrupted. Its debit is not
    /// recorded: the exchange discards it before checking balances.
    fn bad_signature(&mut self) -> usize {
        let source = self.source_with_room();
        let offer = !self.params.payments_only && self.rng.uniform_f64() < 0.75;
        let operation = match self.funded_slot(source) {
            Some(slot) if offer => self.offer_from(source, slot).0,
            _ => self.affordable_payment(source).0,
        };
        let sequence = self.next_sequence(source);
        let index = self.push(source, sequence, operation);
        self.dropped[index] = true;
        self.bad_signatures.push(index);
        index
    }

    /// A second cancel, by the same account, of an offer cancelled earlier in the block.
    fn double_cancel(&mut self, slots_left: usize) -> Option<usize> {
        if self.cancels.is_empty() && (slots_left < 2 || self.push_cancel().is_none()) {
            return None;
        }
        for _ in 0..PARTNER_PICKS {
            if self.cancels.is_empty() {
                return None;
            }
            let pick = self.rng.index(self.cancels.len());
            let Transaction {
                source, operation, ..
            } = self.transactions[self.cancels[pick]];
            if !self.peek(source).has_room() {
                continue;
            }
            // One fault per partner: each double cancel is a pair.
            self.cancels.swap_remove(pick);
            let sequence = self.next_sequence(source);
            self.account(source).dropped = true;
            return Some(self.push(source, sequence, operation));
        }
        None
    }

    /// A second creation, preferably by another account, of an id created earlier in the block.
    fn duplicate_creation(&mut self, slots_left: usize) -> Option<usize> {
        if self.creations.is_empty() {
            if slots_left < 2 {
                return None;
            }
            self.push_creation();
        }
        // One fault per partner: each duplicate creation is a pair.
        let partner = self
            .creations
            .swap_remove(self.rng.index(self.creations.len()));
        let Transaction {
            source: partner_source,
            operation,
            ..
        } = self.transactions[partner];
        let mut source = self.source_with_room();
        for _ in 0..PARTNER_PICKS {
            if source != partner_source {
                break;
            }
            source = self.source_with_room();
        }
        let sequence = self.next_sequence(source);
        let index = self.push(source, sequence, operation);
        self.dropped[partner] = true;
        self.dropped[index] = true;
        Some(index)
    }
}

/// The relative distance `d` of a workload offer's limit below the valuation ratio,
/// `limit = ratio × (1 − d)`: normal with mean 0.5% and standard deviation 1%, clamped to ±10%.
/// About a third of new offers are out of the money and rest in the books, as in SPEEDEX §7's
/// steady state with many open offers; the in-the-money rest trade in the block they arrive in.
fn workload_limit_distance(rng: &mut Rng) -> f64 {
    (0.005 + 0.01 * rng.normal()).clamp(-0.1, 0.1)
}
