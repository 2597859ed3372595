//! An immutable snapshot of what admission reads of every account (its key and last committed
//! sequence number for the rule, its balances for the advisory funds check), as of one
//! committed block.
//!
//! A node publishes one view per committed block and every admission path (the HTTP API,
//! CometBFT's `CheckTx`) reads the published view instead of locking the state, which is
//! write-locked for the length of a block's execution. The view is a value: a reader holding it
//! sees one block's accounts, whatever commits meanwhile.
//!
//! The view holds the state's own account table ([`Accounts`]), shared chunk by chunk: taking
//! one copies no account, and the next block's first write to a chunk the view holds copies
//! that chunk for the state (copy-on-write). The id → slot index is the state's, shared shard
//! by shard ([`SlotIndex`]). A key is decoded on its account's first signature check, by
//! whichever reader or block needs it first, and the decoded key travels with the account's
//! chunk when it is copied.

use crate::account::Account;
use crate::accounts::Accounts;
use crate::admission::SourceView;
use crate::slot_index::SlotIndex;
use crate::state::ExchangeState;
use walras_types::{AccountId, AssetId};

/// The accounts after the block at [`AccountView::height`].
#[derive(Clone, Debug)]
pub struct AccountView {
    height: u64,
    /// The state's index at this height, shared shard by shard (see [`SlotIndex`]).
    slots: SlotIndex,
    /// The state's accounts at this height, shared chunk by chunk.
    accounts: Accounts,
}

impl AccountView {
    /// The view of `state` as it stands: a reference to each of its chunks of accounts and
    /// shards of the id index, nothing copied (at 10M accounts, building a copy of every
    /// account's facts took 1.7-2.2 s of a restart on the 2-core VM).
    pub fn of(state: &ExchangeState) -> AccountView {
        let view = AccountView {
            height: state.height,
            slots: state.slots.clone(),
            accounts: state.accounts.clone(),
        };
        assert_eq!(
            view.slots.len(),
            view.accounts.len(),
            "the view indexes every account once"
        );
        view
    }

    /// The view of `state` after a block, `self` the view before it: [`Self::of`], with the
    /// keys readers of `self` decoded in chunks the block has copied since kept for the new
    /// view (and for the state, whose chunks those are).
    pub fn after_block(&self, state: &ExchangeState) -> AccountView {
        let view = AccountView::of(state);
        view.accounts.keep_decoded_keys(&self.accounts);
        view
    }

    /// The height of the block this view is the result of (0: the genesis).
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Accounts in the view.
    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.len() == 0
    }

    /// What the admission rule reads of `id`; `None` when the account does not exist.
    pub fn source(&self, id: AccountId) -> Option<SourceView> {
        self.account(id).map(Account::admission_view)
    }

    /// `id`'s balance of `asset` (0 when it holds none or does not exist).
    pub fn balance(&self, id: AccountId, asset: AssetId) -> u64 {
        self.account(id).map_or(0, |account| account.balance(asset))
    }

    fn account(&self, id: AccountId) -> Option<&Account> {
        let slot = *self.slots.get(&id)? as usize;
        Some(&self.accounts[slot])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::CHUNK_ACCOUNTS;
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

    /// A payment of 5 units of asset 0 to `to`.
    fn payment(to: u64) -> Operation {
        Operation::Payment {
            to: AccountId(to),
            asset: AssetId(0),
            amount: 5,
        }
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

    /// Trigger: building a node's first view decoded every account's key (through
    /// `admission_view`): at 10M accounts ~100 s of CPU before a restarted node served
    /// (issue 32). A view decodes a key when admission first reads it, with the verdict the
    /// state's account gives; and the view after a block keeps the keys already decoded.
    #[test]
    fn a_view_decodes_a_key_only_when_admission_reads_it() {
        let accounts = 10u64;
        let mut state = state(accounts);
        let view = AccountView::of(&state);
        let decoded = |view: &AccountView, id: u64| {
            view.account(AccountId(id))
                .is_some_and(Account::key_is_decoded)
        };
        assert!((0..accounts).all(|id| !decoded(&view, id)));
        let source = view.source(AccountId(4)).expect("account 4");
        let account_key = state
            .account(AccountId(4))
            .and_then(|a| a.verifying_key().copied());
        assert_eq!(source.key, account_key);
        assert!(source.key.is_some());
        assert!(decoded(&view, 4) && !decoded(&view, 5));

        // Account 4 receives a payment (so its chunk is copied) but signs nothing.
        execute(&mut state, vec![signed(3, 1, payment(4))]);
        let next = AccountView::of(&state);
        assert!(decoded(&next, 4), "kept from the view before");
        assert!(
            decoded(&next, 3),
            "taken from the state, which checked its signature"
        );
        assert!(!decoded(&next, 5));
    }

    /// Trigger: with the view sharing the state's chunks, a key admission decoded through the
    /// published view after the next block had copied that account's chunk was decoded in the
    /// old chunk only: at 10,000 accounts (every chunk written each block) admission would
    /// decode most keys again after every block (about 10 µs each). The view after the block
    /// keeps such keys.
    #[test]
    fn a_key_decoded_in_the_old_view_after_the_block_copied_its_chunk_is_kept() {
        let mut state = state(10);
        let view = AccountView::of(&state);
        execute(&mut state, vec![signed(3, 1, payment(4))]);
        // A reader still holding the view before the block decodes account 6's key.
        assert!(view.source(AccountId(6)).unwrap().key.is_some());
        let next = view.after_block(&state);
        assert!(next.account(AccountId(6)).unwrap().key_is_decoded());
        assert!(state.account(AccountId(6)).unwrap().key_is_decoded());
        assert!(!next.account(AccountId(7)).unwrap().key_is_decoded());
        assert_eq!(
            next.source(AccountId(6)),
            AccountView::of(&state).source(AccountId(6))
        );
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
        execute(&mut state, vec![signed(5, 1, creation)]);
        let after = AccountView::of(&state);
        assert!(after.source(AccountId(1_000_000)).is_some());
        assert_eq!(before.source(AccountId(1_000_000)), None);
        assert_eq!(
            after.slots.shards_shared_with(&before.slots),
            crate::slot_index::SHARDS - 1
        );
        assert!(after.slots.shares_all_with(&state.slots));
    }

    /// Trigger: a restart at 10M accounts spent 1.7-2.2 s building the view, a second copy of
    /// every account's admission facts (issue 32). The view now holds the state's chunks: a
    /// block copies, for the state, only the chunks it writes, and the view taken before the
    /// block still says what it said (readers in flight keep theirs).
    #[test]
    fn a_block_copies_only_the_chunks_it_writes_and_the_view_before_keeps_its_accounts() {
        let accounts = (3 * CHUNK_ACCOUNTS + 10) as u64;
        let mut state = state(accounts);
        let genesis_view = AccountView::of(&state);
        assert_eq!(genesis_view.len(), accounts as usize);
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
        execute(&mut state, block);
        let next = AccountView::of(&state);
        assert_eq!(next.height(), 1);
        assert_eq!(next.len(), accounts as usize + 1);
        // The payments moved balances, the receivers' included (they sent nothing).
        assert_eq!(next.balance(AccountId(3), AssetId(0)), 1_000_000 - 5 + 5);
        assert_eq!(next.balance(AccountId(4), AssetId(0)), 1_000_000 + 5);
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
        assert_eq!(genesis_view.balance(AccountId(4), AssetId(0)), 1_000_000);
        assert_eq!(genesis_view.source(AccountId(3)).unwrap().last_sequence, 0);
        assert_eq!(genesis_view.source(AccountId(1_000)), None);
        // Chunks 0 and 1 were written (and the last, which took the new account); chunk 2
        // is still the genesis view's.
        let shared = next.accounts.chunks_shared_with(&genesis_view.accounts);
        assert_eq!(shared, vec![false, false, true, false]);
    }

    /// Trigger: every block copies, for the state, each chunk it writes that the published
    /// view still holds; with chunks of 256 accounts, a node whose blocks' transactions came
    /// from a million different accounts spent a quarter of its engine samples copying
    /// chunks (and as much again in the kernel zeroing their fresh pages), and its apply
    /// phase took twice as long as with the same load from 10,000 accounts (issue 32,
    /// 2026-12-07). A block copies at most 64 accounts for each account it writes.
    #[test]
    fn a_block_copies_at_most_64_accounts_for_each_account_it_writes() {
        let accounts = 4 * 256 + 10;
        let mut state = state(accounts as u64);
        let view = AccountView::of(&state);
        // Two payments between accounts of the first 256 and one from the middle of the table.
        let block = vec![
            signed(3, 1, payment(130)),
            signed(200, 1, payment(3)),
            signed(600, 1, payment(601)),
        ];
        let touched = execute(&mut state, block).len();
        assert_eq!(touched, 5, "3, 130, 200, 600 and 601 were written");
        let shared = state.accounts.chunks_shared_with(&view.accounts);
        let copied: usize = shared
            .iter()
            .enumerate()
            .filter(|(_, shared)| !**shared)
            .map(|(chunk, _)| CHUNK_ACCOUNTS.min(accounts - chunk * CHUNK_ACCOUNTS))
            .sum();
        assert!(
            copied <= 64 * touched,
            "{copied} accounts copied for {touched} written"
        );
        assert_eq!(
            view.balance(AccountId(130), AssetId(0)),
            1_000_000,
            "the view before the block keeps its balances"
        );
        assert_eq!(
            AccountView::of(&state).balance(AccountId(130), AssetId(0)),
            1_000_005
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 32,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Every view keeps the accounts of its height while later blocks write the state's
        /// shared chunks: payments credit receivers, crossing offers credit their owners in
        /// blocks they sent nothing in, overdrafts are dropped. A write that reached a chunk
        /// a view still held would show a reader a balance of another height.
        #[test]
        fn every_view_keeps_the_accounts_of_its_height_while_blocks_go_on(
            blocks in proptest::collection::vec(
                proptest::collection::vec((0u64..6, 0u64..6, 0u8..4, 1u64..600_000), 1..8),
                1..5,
            )
        ) {
            let mut state = state(6);
            let mut views = vec![AccountView::of(&state)];
            let copy = |state: &ExchangeState| -> Vec<Option<Account>> {
                (0..6).map(|id| state.account(AccountId(id)).cloned()).collect()
            };
            let mut copies = vec![copy(&state)];
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
                execute(&mut state, transactions);
                views.push(AccountView::of(&state));
                copies.push(copy(&state));
            }
            for (view, copy) in views.iter().zip(&copies) {
                for id in 0..6u64 {
                    let account = copy[id as usize].as_ref();
                    proptest::prop_assert_eq!(view.account(AccountId(id)), account);
                    proptest::prop_assert_eq!(
                        view.source(AccountId(id)),
                        account.map(Account::admission_view)
                    );
                    for asset in [AssetId(0), AssetId(1)] {
                        proptest::prop_assert_eq!(
                            view.balance(AccountId(id), asset),
                            account.map_or(0, |a| a.balance(asset))
                        );
                    }
                }
            }
        }
    }
}
