//! The mempool: admitted transactions waiting for a block.
//!
//! A pure data structure (no I/O, no clock, no locks): the server wraps it in a mutex. The
//! admission rule (`walras_engine::admission`) is applied by the caller, against the account
//! view published for the last committed block (`Shared::accounts`); what is checked here
//! needs the mempool alone: duplicates of a (source, sequence) already waiting or in the block
//! being built, and capacity (back-pressure). The mempool keeps no account facts of its own,
//! only what its pending transactions debit ([`Mempool::pending_debit`]), which admission's
//! funds check subtracts from the account view's balance.
//!
//! Each waiting transaction keeps the instant it was admitted (passed in by the caller), so the
//! producer can drop, oldest first, what waited too long to commit within the node's bound
//! ([`Mempool::shed_admitted_before`]; see [`crate::overload`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;
use walras_crypto::Hash;
use walras_engine::debit;
use walras_types::transaction::SEQUENCE_WINDOW;
use walras_types::{AccountId, AssetId, SignedTransaction};

/// Why a transaction is not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitError {
    /// The same source and sequence number is already waiting or being executed.
    Duplicate,
    /// The mempool holds `capacity` transactions.
    Full { capacity: usize },
}

/// Admitted transactions: a FIFO queue of those waiting, plus those taken into the block being
/// built, which still count for duplicates and capacity until [`Mempool::committed`].
pub struct Mempool {
    capacity: usize,
    /// In admission order, each with its admission instant.
    waiting: VecDeque<(Hash, SignedTransaction, Instant)>,
    /// Hashes of waiting and in-flight transactions.
    pending: HashSet<Hash>,
    /// (source, sequence) of waiting and in-flight transactions.
    slots: HashSet<(AccountId, u64)>,
    /// Per (source, asset): what its waiting and in-flight transactions debit (never zero: an
    /// entry is removed when it falls to zero). Only looked up, never iterated.
    debits: HashMap<(AccountId, AssetId), u64>,
}

impl Mempool {
    pub fn new(capacity: usize) -> Mempool {
        Mempool {
            capacity,
            waiting: VecDeque::new(),
            pending: HashSet::new(),
            slots: HashSet::new(),
            debits: HashMap::new(),
        }
    }

    /// What `account`'s pending (waiting and in-flight) transactions debit of `asset`.
    pub fn pending_debit(&self, account: AccountId, asset: AssetId) -> u64 {
        self.debits.get(&(account, asset)).copied().unwrap_or(0)
    }

    fn add_debit(&mut self, signed: &SignedTransaction) {
        if let Some((asset, amount)) = debit(&signed.transaction.operation) {
            let total = self
                .debits
                .entry((signed.transaction.source, asset))
                .or_insert(0);
            *total = total.saturating_add(amount);
        }
    }

    fn remove_debit(&mut self, signed: &SignedTransaction) {
        let Some((asset, amount)) = debit(&signed.transaction.operation) else {
            return;
        };
        let key = (signed.transaction.source, asset);
        if let Some(total) = self.debits.get_mut(&key) {
            *total = total.saturating_sub(amount);
            if *total == 0 {
                self.debits.remove(&key);
            }
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waiting and in-flight transactions.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Transactions waiting for the next block.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn contains(&self, hash: &Hash) -> bool {
        self.pending.contains(hash)
    }

    /// The lowest sequence number above `last_sequence` (the committed one, from the account
    /// view read under the same lock) that no pending transaction of `account` uses: what a
    /// client should sign next.
    pub fn next_sequence(&self, account: AccountId, last_sequence: u64) -> u64 {
        let last = last_sequence;
        let free =
            (last + 1..=last + SEQUENCE_WINDOW).find(|s| !self.slots.contains(&(account, *s)));
        free.unwrap_or(last + SEQUENCE_WINDOW + 1)
    }

    /// Whether a transaction of `account` with sequence number `sequence` is pending and may
    /// create that offer: `Some(Some(offer))` when it waits and creates one, `Some(None)` when
    /// it is in the block being built (not kept here), `None` otherwise.
    pub fn pending_offer(
        &self,
        account: AccountId,
        sequence: u64,
    ) -> Option<Option<walras_types::NewOffer>> {
        if !self.slots.contains(&(account, sequence)) {
            return None;
        }
        match self.waiting.iter().find(|(_, signed, _)| {
            signed.transaction.source == account && signed.transaction.sequence == sequence
        }) {
            Some((_, signed, _)) => signed.transaction.new_offer().map(Some),
            None => Some(None),
        }
    }

    /// The accounts whose waiting transactions create an offer with id `sequence`.
    pub fn offer_sources(&self, sequence: u64) -> Vec<AccountId> {
        self.waiting
            .iter()
            .filter(|(_, signed, _)| {
                signed.transaction.sequence == sequence && signed.transaction.new_offer().is_some()
            })
            .map(|(_, signed, _)| signed.transaction.source)
            .collect()
    }

    /// Admits a transaction the admission rule accepted, at `now`.
    pub fn admit(
        &mut self,
        hash: Hash,
        signed: SignedTransaction,
        now: Instant,
    ) -> Result<(), AdmitError> {
        let transaction = &signed.transaction;
        let slot = (transaction.source, transaction.sequence);
        if self.slots.contains(&slot) || self.pending.contains(&hash) {
            return Err(AdmitError::Duplicate);
        }
        if self.pending.len() >= self.capacity {
            return Err(AdmitError::Full {
                capacity: self.capacity,
            });
        }
        self.slots.insert(slot);
        self.pending.insert(hash);
        self.add_debit(&signed);
        self.waiting.push_back((hash, signed, now));
        Ok(())
    }

    /// Takes up to `max` waiting transactions, oldest first, for the next block. They stay
    /// pending until [`Mempool::committed`].
    pub fn take(&mut self, max: usize) -> Vec<(Hash, SignedTransaction)> {
        let count = max.min(self.waiting.len());
        self.waiting
            .drain(..count)
            .map(|(hash, signed, _)| (hash, signed))
            .collect()
    }

    /// When the oldest waiting transaction was admitted.
    pub fn oldest_admitted_at(&self) -> Option<Instant> {
        self.waiting.front().map(|(_, _, admitted_at)| *admitted_at)
    }

    /// Drops the waiting transactions admitted before `cutoff` (the oldest, at the front) and
    /// forgets them, so their sources may use the sequence numbers again; returns them.
    /// Transactions taken into a block are never dropped here.
    pub fn shed_admitted_before(&mut self, cutoff: Instant) -> Vec<(Hash, SignedTransaction)> {
        let count = self
            .waiting
            .iter()
            .take_while(|(_, _, admitted_at)| *admitted_at < cutoff)
            .count();
        let shed: Vec<(Hash, SignedTransaction)> = self
            .waiting
            .drain(..count)
            .map(|(hash, signed, _)| (hash, signed))
            .collect();
        for (hash, signed) in &shed {
            self.forget(hash, signed);
        }
        shed
    }

    /// Forgets a transaction that was taken but will never commit here (in replicated mode:
    /// CometBFT refused it, or it stayed uncommitted too long), so its source may sign that
    /// sequence number again. Nothing happens if it is not pending.
    pub fn forget(&mut self, hash: &Hash, signed: &SignedTransaction) {
        if self.pending.remove(hash) {
            let transaction = &signed.transaction;
            self.slots
                .remove(&(transaction.source, transaction.sequence));
            self.remove_debit(signed);
        }
    }

    /// Forgets the transactions of a committed block. The caller publishes the account view
    /// after the block under the same lock (`Shared::committed`).
    pub fn committed(&mut self, block: &[(Hash, SignedTransaction)]) {
        for (hash, signed) in block {
            let transaction = &signed.transaction;
            // A replica's block also holds transactions other nodes admitted: only this
            // mempool's own count against its debits.
            if self.pending.remove(hash) {
                self.remove_debit(signed);
            }
            self.slots
                .remove(&(transaction.source, transaction.sequence));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::{AssetId, Operation, Transaction};

    fn payment(source: u64, sequence: u64) -> (Hash, SignedTransaction) {
        let signed = SignedTransaction {
            transaction: Transaction {
                source: AccountId(source),
                sequence,
                operation: Operation::Payment {
                    to: AccountId(99),
                    asset: AssetId(0),
                    amount: 1,
                },
            },
            signature: [0; 64],
        };
        (walras_engine::transaction_hash(&signed), signed)
    }

    fn admit(mempool: &mut Mempool, source: u64, sequence: u64) -> Result<(), AdmitError> {
        let (hash, signed) = payment(source, sequence);
        mempool.admit(hash, signed, Instant::now())
    }

    #[test]
    fn a_pending_sequence_is_a_duplicate_until_its_block_commits() {
        let mut mempool = Mempool::new(100);
        admit(&mut mempool, 1, 1).unwrap();
        assert_eq!(admit(&mut mempool, 1, 1), Err(AdmitError::Duplicate));
        let block = mempool.take(10);
        assert_eq!(block.len(), 1);
        assert_eq!(mempool.waiting(), 0);
        assert_eq!(mempool.len(), 1, "in flight still counts");
        assert_eq!(admit(&mut mempool, 1, 1), Err(AdmitError::Duplicate));
        assert_eq!(mempool.next_sequence(AccountId(1), 0), 2);
        mempool.committed(&block);
        assert_eq!(mempool.len(), 0);
        assert_eq!(mempool.next_sequence(AccountId(1), 1), 2);
    }

    #[test]
    fn a_full_mempool_refuses_and_take_is_fifo() {
        let mut mempool = Mempool::new(3);
        for sequence in 1..=3 {
            admit(&mut mempool, 1, sequence).unwrap();
        }
        assert_eq!(
            admit(&mut mempool, 1, 4),
            Err(AdmitError::Full { capacity: 3 })
        );
        let first = mempool.take(2);
        let sequences: Vec<u64> = first.iter().map(|(_, s)| s.transaction.sequence).collect();
        assert_eq!(sequences, vec![1, 2]);
        assert_eq!(
            admit(&mut mempool, 1, 4),
            Err(AdmitError::Full { capacity: 3 }),
            "in-flight transactions hold capacity"
        );
        mempool.committed(&first);
        assert_eq!(admit(&mut mempool, 1, 4), Ok(()));
        assert_eq!(mempool.next_sequence(AccountId(1), 2), 5);
    }

    #[test]
    fn shedding_drops_the_oldest_waiting_and_frees_their_slots_but_never_the_block_in_flight() {
        let mut mempool = Mempool::new(100);
        let start = Instant::now();
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        for sequence in 1..=5u64 {
            let (hash, signed) = payment(1, sequence);
            mempool.admit(hash, signed, at(sequence * 10)).unwrap();
        }
        let in_flight = mempool.take(1);
        assert_eq!(mempool.oldest_admitted_at(), Some(at(20)));
        // Everything admitted before 40 ms goes, the one in flight (10 ms) excepted.
        let shed = mempool.shed_admitted_before(at(40));
        let sequences: Vec<u64> = shed.iter().map(|(_, s)| s.transaction.sequence).collect();
        assert_eq!(sequences, vec![2, 3]);
        assert_eq!((mempool.waiting(), mempool.len()), (2, 3));
        assert_eq!(mempool.oldest_admitted_at(), Some(at(40)));
        assert_eq!(admit(&mut mempool, 1, 2), Ok(()), "its slot is free again");
        assert_eq!(admit(&mut mempool, 1, 1), Err(AdmitError::Duplicate));
        mempool.committed(&in_flight);
        assert_eq!(mempool.len(), 3);
    }

    #[test]
    fn a_waiting_offer_is_pending_and_a_payment_of_that_sequence_is_not() {
        let mut mempool = Mempool::new(100);
        admit(&mut mempool, 1, 1).unwrap();
        let offer = SignedTransaction {
            transaction: Transaction {
                source: AccountId(1),
                sequence: 2,
                operation: Operation::CreateOffer {
                    sell: AssetId(0),
                    buy: AssetId(1),
                    amount: 5,
                    min_price: walras_types::Price::ONE,
                },
            },
            signature: [0; 64],
        };
        let hash = walras_engine::transaction_hash(&offer);
        mempool.admit(hash, offer, Instant::now()).unwrap();
        let pending = mempool.pending_offer(AccountId(1), 2);
        assert_eq!(pending, Some(offer.transaction.new_offer()));
        assert_eq!(mempool.pending_offer(AccountId(1), 1), None, "a payment");
        assert_eq!(mempool.pending_offer(AccountId(1), 3), None);
        assert_eq!(mempool.offer_sources(2), vec![AccountId(1)]);
        assert!(mempool.offer_sources(1).is_empty());
        // Taken into the block being built: still pending, its offer no longer kept here.
        let block = mempool.take(10);
        assert_eq!(mempool.pending_offer(AccountId(1), 2), Some(None));
        mempool.committed(&block);
        assert_eq!(mempool.pending_offer(AccountId(1), 2), None);
    }

    /// The funds check subtracts what pending transactions debit: the sum follows admissions
    /// and is released when their block commits (or they are forgotten), and a committed
    /// transaction this mempool never held releases nothing.
    #[test]
    fn pending_debits_follow_admission_and_commit() {
        let mut mempool = Mempool::new(100);
        let (asset, source) = (AssetId(0), AccountId(1));
        admit(&mut mempool, 1, 1).unwrap();
        admit(&mut mempool, 1, 2).unwrap();
        assert_eq!(mempool.pending_debit(source, asset), 2);
        assert_eq!(mempool.pending_debit(source, AssetId(1)), 0);
        let block = mempool.take(1);
        assert_eq!(
            mempool.pending_debit(source, asset),
            2,
            "in flight still counts"
        );
        let (other_hash, other) = payment(1, 9);
        mempool.committed(&[(other_hash, other)]);
        assert_eq!(mempool.pending_debit(source, asset), 2, "not ours");
        mempool.committed(&block);
        assert_eq!(mempool.pending_debit(source, asset), 1);
        let (hash, signed) = payment(1, 2);
        mempool.forget(&hash, &signed);
        assert_eq!(mempool.pending_debit(source, asset), 0);
        assert!(mempool.debits.is_empty());
    }
}
