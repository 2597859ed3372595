//! An immutable snapshot of what admission reads of every account (its key and last committed
//! sequence number for the rule, its balances for the advisory funds check), as of one
//! committed block.
//!
//! A node publishes one view per committed block and every admission path (the HTTP API,
//! CometBFT's `CheckTx`) reads the published view instead of locking the state, which is
//! write-locked for the length of a block's execution. The view is a value: a reader holding it
//! sees one block's facts, whatever commits meanwhile.
//!
//! Publishing a view per block must not cost a copy of every account, so the facts are kept in
//! chunks of [`CHUNK_ACCOUNTS`] shared between successive views: [`AccountView::after_block`]
//! copies only the chunks holding an account the block touched (copy-on-write through
//! [`Arc::make_mut`]; an account's balances are held inline as in the account, so copying a
//! chunk copies bytes and allocates nothing per account). The id → slot index is the state's,
//! shared shard by shard ([`SlotIndex`]).

use crate::account::{Account, Balances};
use crate::admission::SourceView;
use crate::slot_index::SlotIndex;
use crate::state::ExchangeState;
use std::sync::{Arc, OnceLock};
use walras_crypto::PublicKey;
use walras_types::{AccountId, AssetId};

/// Accounts per shared chunk: small enough that a block touching one account copies little,
/// large enough that the chunk list of a million accounts stays a few thousand pointers.
pub(crate) const CHUNK_ACCOUNTS: usize = 256;

/// What admission reads of one account.
#[derive(Clone, Debug)]
struct Facts {
    public_key: [u8; 32],
    /// The key decoded on the account's first admission check, not when the view is built:
    /// a node builds its first view of every account at start-up, and decoding 10M keys there
    /// cost ~100 s of CPU before it served (issue 32). Taken from the state's account when it
    /// has already decoded it. Shared by the views that share the chunk. Behind a pointer: the
    /// ~190-byte point only for accounts admission has read (inline, ~2 GB of view at 10M
    /// accounts). An `Arc`, not a `Box`: copying a chunk for a block copies all 256 facts, and
    /// a boxed key made that an allocation and a copy of each decoded key, then a free when
    /// the older view went: building the view and dropping the older one took 3.4 ms of the
    /// producer's ~26 ms per block of 1,000 payments over 4,000 accounts (the overload test,
    /// test profile), 2.1 ms with the key shared.
    key: OnceLock<Option<Arc<PublicKey>>>,
    last_sequence: u64,
    /// Sorted by asset, as in the account (only positive balances), inline as the account
    /// holds them: one shared allocation per account made a restart at 10M accounts allocate
    /// 10M of them while building its first view.
    balances: Balances,
}

/// Equal when what admission reads is: whether the key is decoded yet is not a fact.
impl PartialEq for Facts {
    fn eq(&self, other: &Facts) -> bool {
        self.public_key == other.public_key
            && self.last_sequence == other.last_sequence
            && self.balances == other.balances
    }
}

impl Eq for Facts {}

impl Facts {
    /// `account`'s facts, with the key decoded if `account` or `previous` (the same account's
    /// facts in the view before: keys never change) has decoded it.
    fn of(account: &Account, previous: Option<&Facts>) -> Facts {
        let key = OnceLock::new();
        let decoded = account
            .decoded_key()
            .map(|decoded| decoded.map(|key| Arc::new(*key)))
            .or_else(|| previous.and_then(|previous| previous.key.get().cloned()));
        if let Some(decoded) = decoded {
            let _ = key.set(decoded);
        }
        Facts {
            public_key: account.public_key,
            key,
            last_sequence: account.last_sequence,
            balances: account.held_balances().clone(),
        }
    }

    fn source(&self) -> SourceView {
        SourceView {
            key: self
                .key
                .get_or_init(|| PublicKey::from_bytes(&self.public_key).ok().map(Arc::new))
                .as_deref()
                .copied(),
            last_sequence: self.last_sequence,
        }
    }
}

/// The admission facts of every account after the block at [`AccountView::height`].
#[derive(Clone, Debug)]
pub struct AccountView {
    height: u64,
    /// The state's index at this height, shared shard by shard (see [`SlotIndex`]).
    slots: SlotIndex,
    /// Facts by slot, `CHUNK_ACCOUNTS` per chunk; every chunk but the last is full.
    chunks: Vec<Arc<Vec<Facts>>>,
    len: usize,
}

impl AccountView {
    /// The view of `state` as it stands (reads every account once: at start-up).
    pub fn of(state: &ExchangeState) -> AccountView {
        AccountView::of_on(state, 1)
    }

    /// [`AccountView::of`], its chunks built on up to `threads` threads (at 10M accounts the
    /// view took about 5 s of a restart on one thread); the id → slot index is the state's,
    /// shared. The same view for any thread count.
    pub fn of_on(state: &ExchangeState, threads: usize) -> AccountView {
        let pieces: Vec<&[Account]> = state.accounts.chunks(CHUNK_ACCOUNTS).collect();
        let chunks = walras_par::map_in_order(&pieces, threads, 2, |piece| {
            Arc::new(
                piece
                    .iter()
                    .map(|account| Facts::of(account, None))
                    .collect(),
            )
        });
        let view = AccountView {
            height: state.height,
            slots: state.slots.clone(),
            chunks,
            len: state.accounts.len(),
        };
        assert_eq!(
            view.chunks.iter().map(|chunk| chunk.len()).sum::<usize>(),
            view.len,
            "the view holds every account once"
        );
        view
    }

    /// The view after a block that changed the accounts `touched` (its
    /// `BlockOutcome::touched_accounts`): `self` updated from `state` (the state after that
    /// block) for those accounts and for the accounts the block created. Keys never change,
    /// and a block changes no other account's sequence number or balances.
    pub fn after_block(
        &self,
        state: &ExchangeState,
        touched: impl IntoIterator<Item = AccountId>,
    ) -> AccountView {
        let mut view = self.clone();
        view.height = state.height;
        for id in touched {
            let Some(&slot) = state.slots.get(&id) else {
                continue; // not an account of the state: nothing to update
            };
            let slot = slot as usize;
            if slot >= view.len {
                continue; // created by this block: appended below
            }
            let account = &state.accounts[slot];
            let chunk = &mut view.chunks[slot / CHUNK_ACCOUNTS];
            let facts = &chunk[slot % CHUNK_ACCOUNTS];
            if facts.last_sequence != account.last_sequence
                || *facts.balances != *account.balances()
            {
                let changed = Facts::of(account, Some(facts));
                Arc::make_mut(chunk)[slot % CHUNK_ACCOUNTS] = changed;
            }
        }
        if state.accounts.len() > view.len {
            // The state's index holds the created accounts; the shards they did not land in
            // are still shared with the view before.
            view.slots = state.slots.clone();
            view.append_from(state);
        }
        debug_assert_eq!(view.slots.len(), state.accounts.len());
        debug_assert_eq!(view.len, state.accounts.len());
        view
    }

    /// Appends the accounts of `state` at slots `self.len..`.
    fn append_from(&mut self, state: &ExchangeState) {
        for account in &state.accounts[self.len..] {
            if self
                .chunks
                .last()
                .is_none_or(|chunk| chunk.len() == CHUNK_ACCOUNTS)
            {
                self.chunks
                    .push(Arc::new(Vec::with_capacity(CHUNK_ACCOUNTS)));
            }
            let last = self.chunks.len() - 1;
            Arc::make_mut(&mut self.chunks[last]).push(Facts::of(account, None));
            self.len += 1;
        }
    }

    /// The height of the block this view is the result of (0: the genesis).
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Accounts in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What the admission rule reads of `id`; `None` when the account does not exist.
    pub fn source(&self, id: AccountId) -> Option<SourceView> {
        self.facts(id).map(Facts::source)
    }

    /// `id`'s balance of `asset` (0 when it holds none or does not exist).
    pub fn balance(&self, id: AccountId, asset: AssetId) -> u64 {
        let Some(facts) = self.facts(id) else {
            return 0;
        };
        match facts
            .balances
            .binary_search_by_key(&asset, |(held, _)| *held)
        {
            Ok(at) => facts.balances[at].1,
            Err(_) => 0,
        }
    }

    fn facts(&self, id: AccountId) -> Option<&Facts> {
        let slot = *self.slots.get(&id)? as usize;
        Some(&self.chunks[slot / CHUNK_ACCOUNTS][slot % CHUNK_ACCOUNTS])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EngineConfig, ExchangeState};
    use walras_crypto::Keypair;
    use walras_types::genesis::{Genesis, GenesisAccount};
    use walras_types::{AssetId, Operation, SignedTransaction, Transaction};

    fn keypair(id: u64) -> Keypair {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&id.to_le_bytes());
        Keypair::from_seed(seed)
    }

    /// `accounts` accounts (ids 0..) holding 1,000,000 of each of two assets.
    fn state(accounts: u64) -> ExchangeState {
        let genesis = Genesis {
            asset_info: Vec::new(),
            payments: None,
            assets: 2,
            accounts: (0..accounts)
                .map(|id| GenesisAccount {
                    id: AccountId(id),
                    public_key: *keypair(id).public_key().as_bytes(),
                    balances: vec![(AssetId(0), 1_000_000), (AssetId(1), 1_000_000)],
                })
                .collect(),
        };
        ExchangeState::from_genesis(&genesis, 1).unwrap()
    }

    fn signed(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
        let transaction = Transaction {
            source: AccountId(source),
            sequence,
            operation,
        };
        let signature = *keypair(source).sign(&transaction.encode()).as_bytes();
        SignedTransaction {
            transaction,
            signature,
        }
    }

    /// Executes the block; returns the accounts it touched.
    fn execute(state: &mut ExchangeState, transactions: Vec<SignedTransaction>) -> Vec<AccountId> {
        let config = EngineConfig::default();
        state
            .propose(transactions, &config)
            .unwrap()
            .1
            .touched_accounts
    }

    /// A view built on several threads (chunks in parallel, as a restarted node builds it)
    /// reads as the one built on one thread, for every account, across chunk boundaries.
    #[test]
    fn a_view_built_on_threads_reads_as_the_one_built_on_one() {
        let accounts = (2 * CHUNK_ACCOUNTS + 3) as u64;
        let mut state = state(accounts);
        execute(
            &mut state,
            vec![signed(
                7,
                1,
                Operation::Payment {
                    to: AccountId(accounts - 1),
                    asset: AssetId(1),
                    amount: 5,
                },
            )],
        );
        let one = AccountView::of(&state);
        let three = AccountView::of_on(&state, 3);
        assert_eq!((three.len(), three.height()), (one.len(), one.height()));
        for id in (0..accounts + 2).map(AccountId) {
            assert_eq!(
                three.source(id).is_some(),
                one.source(id).is_some(),
                "{id:?}"
            );
            for asset in [AssetId(0), AssetId(1)] {
                assert_eq!(three.balance(id, asset), one.balance(id, asset), "{id:?}");
            }
        }
        assert_eq!(
            three.balance(AccountId(accounts - 1), AssetId(1)),
            1_000_005
        );
    }

    /// Trigger: building a node's first view decoded every account's key (through
    /// `admission_view`): at 10M accounts ~100 s of CPU before a restarted node served
    /// (issue 32). A view now decodes a key when admission first reads it, with the verdict
    /// the state's account gives; and a view after a block keeps the keys already decoded.
    #[test]
    fn a_view_decodes_a_key_only_when_admission_reads_it() {
        let accounts = 10u64;
        let mut state = state(accounts);
        let view = AccountView::of(&state);
        let decoded = |view: &AccountView, id: u64| {
            view.facts(AccountId(id))
                .is_some_and(|facts| facts.key.get().is_some())
        };
        assert!((0..accounts).all(|id| !decoded(&view, id)));
        let source = view.source(AccountId(4)).expect("account 4");
        let account_key = state
            .account(AccountId(4))
            .and_then(|a| a.verifying_key().copied());
        assert_eq!(source.key, account_key);
        assert!(source.key.is_some());
        assert!(decoded(&view, 4) && !decoded(&view, 5));

        // Account 4 receives a payment (so its facts are rebuilt) but signs nothing.
        let payment = Operation::Payment {
            to: AccountId(4),
            asset: AssetId(0),
            amount: 5,
        };
        let touched = execute(&mut state, vec![signed(3, 1, payment)]);
        let next = view.after_block(&state, touched);
        assert!(decoded(&next, 4), "kept from the view before");
        assert!(
            decoded(&next, 3),
            "taken from the state, which checked its signature"
        );
        assert!(!decoded(&next, 5));
    }

    /// Trigger: the view kept an id → slot map of its own and copied it whole for every block
    /// that created an account (`Arc::make_mut` while the view before still held it): at 10M
    /// accounts ~285 MB copied on the block path for one creation. Now the view shares the
    /// state's index shard by shard and such a block copies only the shard the account lands
    /// in.
    #[test]
    fn a_block_creating_an_account_copies_one_shard_of_the_id_index_not_all_of_it() {
        let mut state = state(3 * CHUNK_ACCOUNTS as u64);
        let before = AccountView::of(&state);
        let creation = Operation::CreateAccount {
            new_account: AccountId(1_000_000),
            public_key: *keypair(1_000_000).public_key().as_bytes(),
        };
        let touched = execute(&mut state, vec![signed(5, 1, creation)]);
        let after = before.after_block(&state, touched);
        assert!(after.source(AccountId(1_000_000)).is_some());
        assert_eq!(before.source(AccountId(1_000_000)), None);
        assert_eq!(
            after.slots.shards_shared_with(&before.slots),
            crate::slot_index::SHARDS - 1
        );
        assert!(after.slots.shares_all_with(&state.slots));
    }

    /// The view after any sequence of blocks equals the view read afresh from the state, and
    /// the view taken before a block still says what it said (readers in flight keep theirs).
    #[test]
    fn after_block_equals_a_fresh_view_and_leaves_the_old_one_unchanged() {
        let accounts = (CHUNK_ACCOUNTS + 10) as u64;
        let mut state = state(accounts);
        let genesis_view = AccountView::of(&state);
        assert_eq!(genesis_view.len(), accounts as usize);
        let payment = |to: u64| Operation::Payment {
            to: AccountId(to),
            asset: AssetId(0),
            amount: 5,
        };
        let block = vec![
            signed(3, 1, payment(4)),
            signed(CHUNK_ACCOUNTS as u64 + 1, 4, payment(3)),
            signed(
                5,
                1,
                Operation::CreateAccount {
                    new_account: AccountId(1_000),
                    public_key: *keypair(1_000).public_key().as_bytes(),
                },
            ),
        ];
        let touched = execute(&mut state, block);
        let next = genesis_view.after_block(&state, touched);
        let fresh = AccountView::of(&state);
        assert_eq!(next.height(), 1);
        assert_eq!(next.len(), accounts as usize + 1);
        for id in (0..accounts).chain([1_000, 1_001]) {
            assert_eq!(
                next.source(AccountId(id)),
                fresh.source(AccountId(id)),
                "{id}"
            );
            for asset in [AssetId(0), AssetId(1)] {
                assert_eq!(
                    next.balance(AccountId(id), asset),
                    fresh.balance(AccountId(id), asset),
                    "{id} {asset:?}"
                );
            }
        }
        // The payments moved balances, the receivers' included (they sent nothing).
        assert_eq!(next.balance(AccountId(3), AssetId(0)), 1_000_000 - 5 + 5);
        assert_eq!(next.balance(AccountId(4), AssetId(0)), 1_000_000 + 5);
        assert_eq!(genesis_view.balance(AccountId(4), AssetId(0)), 1_000_000);
        assert_eq!(next.source(AccountId(3)).unwrap().last_sequence, 1);
        assert_eq!(
            next.source(AccountId(CHUNK_ACCOUNTS as u64 + 1))
                .unwrap()
                .last_sequence,
            4
        );
        assert!(next.source(AccountId(1_000)).unwrap().key.is_some());
        assert_eq!(next.source(AccountId(1_001)), None);
        // The old view is a value: the block changed nothing in it.
        assert_eq!(genesis_view.height(), 0);
        assert_eq!(genesis_view.source(AccountId(3)).unwrap().last_sequence, 0);
        assert_eq!(genesis_view.source(AccountId(1_000)), None);
        // Only the touched chunk 0 was copied; an untouched one is still shared.
        assert!(!Arc::ptr_eq(&genesis_view.chunks[0], &next.chunks[0]));
        assert!(genesis_view
            .slots
            .shares_all_with(&genesis_view.clone().slots));
        let untouched = AccountView::of(&state);
        let after_empty_block = untouched.after_block(&state, []);
        assert!(Arc::ptr_eq(
            &untouched.chunks[0],
            &after_empty_block.chunks[0]
        ));
        assert!(untouched.slots.shares_all_with(&after_empty_block.slots));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 32,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// The view moved along a sequence of blocks by their `touched_accounts` equals the view
        /// read afresh after each: payments credit receivers, crossing offers credit their
        /// owners in blocks they sent nothing in, overdrafts are dropped. A touched account left
        /// out would show its old balance to admission's funds check.
        #[test]
        fn the_view_moved_by_touched_accounts_equals_a_fresh_one(
            blocks in proptest::collection::vec(
                proptest::collection::vec((0u64..6, 0u64..6, 0u8..4, 1u64..600_000), 1..8),
                1..5,
            )
        ) {
            let mut state = state(6);
            let mut view = AccountView::of(&state);
            let mut next_sequence = [1u64; 6];
            let limits = ["0.5", "0.9", "1", "1.5"];
            for block in blocks {
                let transactions: Vec<SignedTransaction> = block
                    .into_iter()
                    .map(|(from, to, kind, amount)| {
                        let sequence = next_sequence[from as usize];
                        next_sequence[from as usize] += 1;
                        let (sell, buy) = if kind % 2 == 0 { (0, 1) } else { (1, 0) };
                        let operation = if from == to {
                            Operation::Payment { to: AccountId((to + 1) % 6), asset: AssetId(sell), amount }
                        } else {
                            Operation::CreateOffer {
                                sell: AssetId(sell),
                                buy: AssetId(buy),
                                amount,
                                min_price: walras_types::Price::parse_limit(limits[kind as usize]).unwrap(),
                            }
                        };
                        signed(from, sequence, operation)
                    })
                    .collect();
                let touched = execute(&mut state, transactions);
                view = view.after_block(&state, touched);
                let fresh = AccountView::of(&state);
                for id in 0..6 {
                    let id = AccountId(id);
                    proptest::prop_assert_eq!(view.source(id), fresh.source(id));
                    for asset in [AssetId(0), AssetId(1)] {
                        proptest::prop_assert_eq!(view.balance(id, asset), fresh.balance(id, asset));
                    }
                }
            }
        }
    }
}
