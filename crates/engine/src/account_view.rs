//! An immutable snapshot of what admission reads of every account (its key and last committed
//! sequence number for the rule, its balances for the advisory funds check), as of one
//! committed block.
//!
//! A node publishes one view per committed block and every admission path (the HTTP API,
//! CometBFT's `CheckTx`) reads the published view instead of locking the state, which is
//! write-locked for the length of a block's execution. The view is a value: a reader holding it
//! sees one block's accounts, whatever commits meanwhile.
//!
//! A view is a *base*, the state's own account table ([`Accounts`]) as of some earlier block,
//! shared chunk by chunk, plus *layers*: per block since the base, a copy of each account that
//! block wrote (changed or created). The next block's first write to a chunk the base holds
//! copies that chunk for the state (copy-on-write), once per base, not once per block.
//!
//! Before, every view took the state's table anew: one reference per chunk of 32 accounts to
//! take and, a block later, one to drop, on the producer between blocks (~4 ms each at 10M
//! accounts on the 2-core VM, issue 32): work per block that grew with the accounts, not with
//! the block. Now a block's view costs a copy of what the block wrote, and the base is retaken
//! (the same references, once) only when the layers would hold more accounts than a fresh
//! base costs ([`rebase_written_max`]). Past [`LAYERS_MAX`] layers the newest are merged into
//! one ([`merge_newest`]), so lookups read at most [`LAYERS_MAX`] small maps before the base.
//!
//! The id → slot index is the state's, shared shard by shard ([`SlotIndex`]). A key is decoded
//! on its account's first signature check, by whichever reader or block needs it first, and
//! the decoded key travels with the account when the state copies its chunk or a layer copies
//! the account; the view after a block hands the keys its readers decoded to the state.

use crate::account::Account;
use crate::accounts::{Accounts, CHUNK_ACCOUNTS};
use crate::admission::SourceView;
use crate::slot_index::{IdHasher, SlotIndex};
use crate::state::ExchangeState;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use walras_types::{AccountId, AssetId};

/// Most layers a view holds: each is one more map a lookup of an account the layers do not
/// hold reads before the base. Past it the newest layers are merged ([`merge_newest`]).
/// (Before, the view retook its base after this many blocks, however little they wrote: at
/// 10M accounts and 50 transactions a block, 0.5-0.9 ms a block on the 2-core VM.)
pub(crate) const LAYERS_MAX: usize = 8;

/// Fewest written accounts the layers may hold before a view retakes its base, whatever the
/// accounts: below it a base is cheap to retake anyway.
const REBASE_WRITTEN_MIN: usize = 1 << 14;

/// Most accounts the layers may hold before the view retakes its base, for a base of
/// `accounts`: one per eight chunks (retaking a base takes a reference per chunk, and dropping
/// the old one drops as many), so the references cost at most 16 per written account; and the
/// chunks the state copied while the base held them (at most one per written account) are at
/// most an eighth of the table.
pub(crate) fn rebase_written_max(accounts: usize) -> usize {
    (accounts.div_ceil(CHUNK_ACCOUNTS) / 8).max(REBASE_WRITTEN_MIN)
}

/// The accounts one block wrote, by slot, as they were after it.
type Layer = HashMap<u32, Account, BuildHasherDefault<IdHasher>>;

/// The accounts after the block at [`AccountView::height`].
#[derive(Clone, Debug)]
pub struct AccountView {
    height: u64,
    /// The state's index at this height, shared shard by shard (see [`SlotIndex`]).
    slots: SlotIndex,
    /// The state's accounts at an earlier height (or this one), shared chunk by chunk.
    base: Arc<Accounts>,
    /// Per block since the base's height, oldest first: the accounts it wrote.
    layers: Vec<Arc<Layer>>,
}

impl AccountView {
    /// The view of `state` as it stands: a reference to each of its chunks of accounts and
    /// shards of the id index, nothing copied (at 10M accounts, building a copy of every
    /// account's facts took 1.7-2.2 s of a restart on the 2-core VM).
    pub fn of(state: &ExchangeState) -> AccountView {
        let view = AccountView {
            height: state.height,
            slots: state.slots.clone(),
            base: Arc::new(state.accounts.clone()),
            layers: Vec::new(),
        };
        assert_eq!(
            view.slots.len(),
            state.accounts.len(),
            "the view indexes every account once"
        );
        view
    }

    /// The view of `state` after a block, `self` the view before it: `self` plus a layer of
    /// the accounts the block wrote, or a fresh base ([`Self::of`]) when the layers are full
    /// or `state` is not exactly one block past `self`. Either way the keys readers of `self`
    /// decoded are kept for the new view and for the state.
    pub fn after_block(&self, state: &ExchangeState) -> AccountView {
        self.after_block_within(state, rebase_written_max(self.base.len()))
    }

    /// [`Self::after_block`] with the layers holding at most `written_max` accounts.
    fn after_block_within(&self, state: &ExchangeState, written_max: usize) -> AccountView {
        let writes = &state.last_writes;
        let one_block_on = state.height == self.height + 1 && writes.height == state.height;
        let written = self.written() + writes.slots.len();
        // Past the most layers a merge would copy the layers: worth it only while they hold
        // less than half of what a base costs (else the base would be retaken soon after).
        let full =
            written > written_max || (self.layers.len() >= LAYERS_MAX && written > written_max / 2);
        let view = if one_block_on && !full {
            self.with_layer(state, &writes.slots)
        } else {
            self.rebased(state)
        };
        assert_eq!(view.height, state.height);
        assert_eq!(view.len(), state.accounts.len());
        view
    }

    /// `self` and a layer of `slots`' accounts as `state` holds them.
    fn with_layer(&self, state: &ExchangeState, slots: &[u32]) -> AccountView {
        let mut layer = Layer::with_capacity_and_hasher(slots.len(), Default::default());
        for &slot in slots {
            let account = &state.accounts[slot as usize];
            // Most written accounts signed in the block, so the state decoded their keys.
            if !account.key_is_decoded() {
                if let Some(older) = self.account_at(slot as usize) {
                    account.keep_decoded_key(older);
                }
            }
            layer.insert(slot, account.clone());
        }
        let mut layers = self.layers.clone();
        layers.push(Arc::new(layer));
        if layers.len() > LAYERS_MAX {
            merge_newest(&mut layers);
        }
        AccountView {
            height: state.height,
            slots: state.slots.clone(),
            base: Arc::clone(&self.base),
            layers,
        }
    }

    /// [`Self::of`] `state`, with the keys readers of `self` decoded since the state copied
    /// their accounts (in the base's chunks and in the layers) given to the state first.
    fn rebased(&self, state: &ExchangeState) -> AccountView {
        state.accounts.keep_decoded_keys(&self.base);
        for layer in self.layers.iter().rev() {
            for (slot, older) in layer.iter() {
                state.accounts[*slot as usize].keep_decoded_key(older);
            }
        }
        AccountView::of(state)
    }

    /// The height of the block this view is the result of (0: the genesis).
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Accounts in the view (the index holds each once).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Accounts in the layers, counted once per layer they are in.
    fn written(&self) -> usize {
        self.layers.iter().map(|layer| layer.len()).sum()
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
        let account = self.account_at(slot);
        assert!(
            account.is_some(),
            "slot {slot} of {id:?} is in no layer and past the base"
        );
        account
    }

    /// The account at `slot` as of this view: the newest layer's copy, else the base's.
    fn account_at(&self, slot: usize) -> Option<&Account> {
        let key = slot as u32;
        self.layers
            .iter()
            .rev()
            .find_map(|layer| layer.get(&key))
            .or_else(|| (slot < self.base.len()).then(|| &self.base[slot]))
    }
}

/// Merges the newest layers into one: the newest two, and each older one no larger than those
/// being merged together. A merge so copies about as much as it merges and never a layer much
/// larger than the writes since it, so with blocks of like size an account is copied a few
/// times before the base is retaken (the layers' sizes fall off geometrically, oldest
/// largest), instead of the base being retaken every [`LAYERS_MAX`] blocks whatever they
/// wrote. The newest copy of an account wins, keeping a key an older copy had decoded.
fn merge_newest(layers: &mut Vec<Arc<Layer>>) {
    assert!(layers.len() >= 2, "a merge takes two layers at least");
    let mut start = layers.len() - 2;
    let mut merged_len = layers[start].len() + layers[start + 1].len();
    while start > 0 && layers[start - 1].len() <= merged_len {
        start -= 1;
        merged_len += layers[start].len();
    }
    let mut merged = Layer::with_capacity_and_hasher(merged_len, Default::default());
    for layer in layers[start..].iter().rev() {
        for (slot, account) in layer.iter() {
            match merged.entry(*slot) {
                Entry::Occupied(newer) => newer.get().keep_decoded_key(account),
                Entry::Vacant(vacant) => {
                    vacant.insert(account.clone());
                }
            }
        }
    }
    layers.truncate(start);
    layers.push(Arc::new(merged));
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
    /// keeps such keys, and gives them to the state when it retakes its base.
    #[test]
    fn a_key_decoded_in_the_old_view_after_the_block_copied_its_chunk_is_kept() {
        let mut state = state(10);
        let view = AccountView::of(&state);
        execute(&mut state, vec![signed(3, 1, payment(4))]);
        // A reader still holding the view before the block decodes account 6's key.
        assert!(view.source(AccountId(6)).unwrap().key.is_some());
        let next = view.after_block(&state);
        assert!(next.account(AccountId(6)).unwrap().key_is_decoded());
        assert!(!next.account(AccountId(7)).unwrap().key_is_decoded());
        // (Not compared with a view of the state: reading it would decode the key there.)
        assert_eq!(next.source(AccountId(6)), view.source(AccountId(6)));
        // Account 4 was written by the block; its key, decoded by a reader of `next`'s
        // layer, reaches the state with the next block that writes it.
        assert!(next.source(AccountId(4)).unwrap().key.is_some());
        assert!(!state.account(AccountId(4)).unwrap().key_is_decoded());
        execute(&mut state, vec![signed(3, 2, payment(4))]);
        let third = next.after_block(&state);
        assert!(Arc::ptr_eq(&third.base, &view.base), "no base retaken yet");
        assert!(state.account(AccountId(4)).unwrap().key_is_decoded());
        assert!(third.account(AccountId(4)).unwrap().key_is_decoded());
        // Account 6's key reaches the state when a view retakes the base.
        assert!(!state.account(AccountId(6)).unwrap().key_is_decoded());
        let rebased = third.rebased(&state);
        assert!(state.account(AccountId(6)).unwrap().key_is_decoded());
        assert!(rebased.account(AccountId(6)).unwrap().key_is_decoded());
        assert!(!rebased.account(AccountId(7)).unwrap().key_is_decoded());
    }

    /// A block in which account 3 pays 4 and the second chunk's account 9 pays 3 (sequence
    /// `sequence` for both): it writes those three accounts, in two chunks.
    fn pay_across_two_chunks(state: &mut ExchangeState, sequence: u64) {
        execute(
            state,
            vec![
                signed(3, sequence, payment(4)),
                signed(CHUNK_ACCOUNTS as u64 + 9, sequence, payment(3)),
            ],
        );
    }

    /// Trigger: every view took the state's whole account table, one reference per chunk of
    /// 32 accounts, and dropped the one before it: ~4 ms each on the producer between blocks
    /// at 10M accounts (2-core VM, issue 32), whatever the block's size. The view after a
    /// block shares the view before's table and copies only the accounts the block wrote,
    /// until its layers fill and it retakes the state's table.
    #[test]
    fn a_view_after_a_block_copies_the_accounts_the_block_wrote_not_a_reference_per_chunk() {
        let accounts = (4 * CHUNK_ACCOUNTS) as u64;
        let mut state = state(accounts);
        let mut view = AccountView::of(&state);
        let genesis_base = Arc::clone(&view.base);
        for block in 0..LAYERS_MAX as u64 {
            let sequence = block + 1;
            pay_across_two_chunks(&mut state, sequence);
            view = view.after_block(&state);
            assert!(Arc::ptr_eq(&view.base, &genesis_base), "block {block}");
            assert_eq!(view.layers.len(), block as usize + 1);
            assert_eq!(
                view.layers.last().unwrap().len(),
                3,
                "3, 4 and the second chunk's sender written"
            );
            assert_eq!(view.written(), 3 * (block as usize + 1));
        }
        assert_eq!(
            view.balance(AccountId(4), AssetId(0)),
            1_000_000 + 5 * LAYERS_MAX as u64
        );
        // The chunks the blocks wrote were copied for the state once, not once per block.
        assert_eq!(
            state.accounts.chunks_shared_with(&genesis_base),
            vec![false, false, true, true]
        );
        // A block past the most layers merges the newest instead of retaking the table.
        execute(&mut state, vec![signed(3, 9, payment(4))]);
        let merged = view.after_block(&state);
        assert!(Arc::ptr_eq(&merged.base, &genesis_base));
        assert!(merged.layers.len() <= LAYERS_MAX);
        // Once the layers would hold more accounts than allowed, the next view retakes it.
        execute(&mut state, vec![signed(3, 10, payment(4))]);
        let rebased = merged.after_block_within(&state, merged.written());
        assert!(!Arc::ptr_eq(&rebased.base, &genesis_base));
        assert!(rebased.layers.is_empty() && rebased.written() == 0);
        assert_eq!(
            state.accounts.chunks_shared_with(&rebased.base),
            vec![true; 4]
        );
        assert_eq!(
            merged.balance(AccountId(4), AssetId(0)),
            1_000_000 + 5 * (LAYERS_MAX as u64 + 1)
        );
        assert_eq!(
            rebased.balance(AccountId(4), AssetId(0)),
            1_000_000 + 5 * (LAYERS_MAX as u64 + 2)
        );
        assert_eq!(
            view.balance(AccountId(4), AssetId(0)),
            1_000_000 + 5 * LAYERS_MAX as u64,
            "the view before is a value"
        );
    }

    /// Trigger: the view retook its base every [`LAYERS_MAX`] blocks however little they
    /// wrote: at 10M accounts and 50 transactions a block, publishing cost 0.5-0.9 ms a block on
    /// the 2-core VM (issue 32, 2026-12-07), against ~4 ms for the whole block's execution.
    /// Small blocks now merge their layers, and the base is retaken only once the layers
    /// hold more accounts than it costs.
    #[test]
    fn a_view_after_many_small_blocks_merges_its_layers_instead_of_retaking_the_base() {
        let mut state = state((4 * CHUNK_ACCOUNTS) as u64);
        let mut view = AccountView::of(&state);
        let genesis_base = Arc::clone(&view.base);
        let blocks = 4 * LAYERS_MAX as u64;
        for sequence in 1..=blocks {
            pay_across_two_chunks(&mut state, sequence);
            view = view.after_block(&state);
            assert!(Arc::ptr_eq(&view.base, &genesis_base), "block {sequence}");
            assert!(view.layers.len() <= LAYERS_MAX);
            // The same three accounts each block: merged layers hold each once.
            assert!(view.written() <= 3 * LAYERS_MAX);
        }
        assert_eq!(
            view.balance(AccountId(4), AssetId(0)),
            1_000_000 + 5 * blocks
        );
        assert_eq!(
            view.source(AccountId(CHUNK_ACCOUNTS as u64 + 9))
                .unwrap()
                .last_sequence,
            blocks
        );
    }

    /// Past the most layers, layers holding more than half of what a base costs are not merged
    /// (a copy of them, and the base retaken a few blocks later anyway): the base is retaken.
    #[test]
    fn full_layers_holding_over_half_their_allowance_retake_the_base_instead_of_merging() {
        let mut state = state(10);
        let mut view = AccountView::of(&state);
        for sequence in 1..=LAYERS_MAX as u64 {
            execute(&mut state, vec![signed(3, sequence, payment(4))]);
            view = view.after_block(&state);
        }
        assert_eq!(view.layers.len(), LAYERS_MAX);
        // Two accounts a block: with the next block's, the layers would hold 18.
        execute(&mut state, vec![signed(3, 9, payment(4))]);
        let merged = view.after_block_within(&state, 36);
        assert!(Arc::ptr_eq(&merged.base, &view.base));
        assert!(merged.layers.len() < LAYERS_MAX);
        let rebased = view.after_block_within(&state, 35);
        assert!(!Arc::ptr_eq(&rebased.base, &view.base));
        assert!(rebased.layers.is_empty());
        assert_eq!(
            merged.balance(AccountId(4), AssetId(0)),
            rebased.balance(AccountId(4), AssetId(0))
        );
    }

    /// Layers of `sizes` accounts each, at consecutive slots from 1 (each layer's after the
    /// one before's), each account holding `balance` of asset 0.
    fn layers_of(sizes: &[usize], balance: u64) -> Vec<Arc<Layer>> {
        let mut slot = 0u32;
        sizes
            .iter()
            .map(|size| {
                let layer: Layer = (0..*size)
                    .map(|_| {
                        slot += 1;
                        let key = *keypair(u64::from(slot)).public_key().as_bytes();
                        (slot, Account::new(key, vec![(AssetId(0), balance)]))
                    })
                    .collect();
                Arc::new(layer)
            })
            .collect()
    }

    /// A merge takes the newest layers and the older ones no larger than what it merges: a
    /// large old layer stays shared, not copied again for a small block.
    #[test]
    fn merging_the_newest_layers_leaves_a_larger_older_layer_shared() {
        let mut layers = layers_of(&[64, 8, 4, 2, 1, 1, 1, 1, 1], 7);
        let oldest = Arc::clone(&layers[0]);
        merge_newest(&mut layers);
        assert_eq!(layers.len(), 2);
        assert!(Arc::ptr_eq(&layers[0], &oldest));
        assert_eq!(layers[1].len(), 8 + 4 + 2 + 5);
        // Two layers of one size merge whole.
        let mut even = layers_of(&[3, 3], 7);
        merge_newest(&mut even);
        assert_eq!(even.len(), 1);
        assert_eq!(even[0].len(), 6);
    }

    /// Merged, an account written in several layers keeps its newest copy, with a key an
    /// older copy had decoded.
    #[test]
    fn a_merged_layer_holds_each_account_s_newest_copy_with_its_decoded_key() {
        let older = layers_of(&[2], 100);
        let newer = layers_of(&[2], 200);
        assert!(
            older[0][&1].verifying_key().is_some(),
            "decodes slot 1's key"
        );
        let mut layers = vec![Arc::clone(&older[0]), Arc::clone(&newer[0])];
        merge_newest(&mut layers);
        assert_eq!(layers.len(), 1);
        let merged = &layers[0];
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[&1].balance(AssetId(0)), 200);
        assert_eq!(merged[&2].balance(AssetId(0)), 200);
        assert!(merged[&1].key_is_decoded(), "kept from the older copy");
        assert!(!merged[&2].key_is_decoded());
    }

    /// The layers may hold no more accounts than a fresh base costs: at 10M accounts one per
    /// eight chunks of 32, and never fewer than [`REBASE_WRITTEN_MIN`].
    #[test]
    fn layers_hold_at_most_one_account_per_eight_chunks_before_the_base_is_retaken() {
        assert_eq!(
            rebase_written_max(10_000_000),
            10_000_000 / CHUNK_ACCOUNTS / 8
        );
        assert_eq!(rebase_written_max(10_000), REBASE_WRITTEN_MIN);
        assert_eq!(rebase_written_max(0), REBASE_WRITTEN_MIN);
    }

    /// A view that is not exactly one block behind the state (a node that applied blocks
    /// without publishing views between them) retakes the base instead of missing a block's
    /// writes.
    #[test]
    fn a_view_two_blocks_behind_the_state_retakes_the_base() {
        let mut state = state(10);
        let view = AccountView::of(&state);
        execute(&mut state, vec![signed(3, 1, payment(4))]);
        execute(&mut state, vec![signed(5, 1, payment(6))]);
        let next = view.after_block(&state);
        assert!(next.layers.is_empty());
        assert_eq!(next.height(), 2);
        assert_eq!(next.balance(AccountId(4), AssetId(0)), 1_000_005);
        assert_eq!(next.balance(AccountId(6), AssetId(0)), 1_000_005);
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
        let shared = next.base.chunks_shared_with(&genesis_view.base);
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
        let shared = state.accounts.chunks_shared_with(&view.base);
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
        /// a view still held would show a reader a balance of another height; a layer that
        /// missed an account a block wrote, the balance of the height before. Views are taken
        /// fresh and chained block after block (through layers and retaken bases).
        #[test]
        fn every_view_keeps_the_accounts_of_its_height_while_blocks_go_on(
            blocks in proptest::collection::vec(
                proptest::collection::vec((0u64..6, 0u64..6, 0u8..4, 1u64..600_000), 1..8),
                1..(4 * LAYERS_MAX),
            )
        ) {
            let mut state = state(6);
            let mut views = vec![AccountView::of(&state)];
            let mut chained = vec![AccountView::of(&state)];
            // Chained with room for 4 accounts in the layers: bases retaken often.
            let mut chained_small = vec![AccountView::of(&state)];
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
                chained.push(chained.last().unwrap().after_block(&state));
                chained_small.push(chained_small.last().unwrap().after_block_within(&state, 4));
                copies.push(copy(&state));
            }
            let all_views = views
                .iter()
                .zip(&copies)
                .chain(chained.iter().zip(&copies))
                .chain(chained_small.iter().zip(&copies));
            for (view, copy) in all_views {
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
