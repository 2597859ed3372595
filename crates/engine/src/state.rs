//! Exchange state: accounts, open offers, burns; and its commitment (the state root).
//!
//! Accounts live in a `Vec` indexed by *slot* (their position), with a map from account id to
//! slot. Execution shards accounts by contiguous slot ranges, so each thread owns a disjoint
//! `&mut` range and nothing needs a lock. Open offers live per ordered pair in canonical order.
//!
//! The state root commits to everything: an account trie (key: account id, value: the encoded
//! account) and one offer trie per pair (key: big-endian limit price ‖ account ‖ offer id, so key
//! order is canonical order; value: remaining amount), combined with the burns per asset and the
//! height (see [`ExchangeState::state_root`]), and, on an exchange bridged to a payments lane,
//! the bridge's escrow and withdrawn set ([`crate::bridge`]). Hashing never depends on map
//! iteration order.

use crate::account::Account;
use crate::accounts::Accounts;
use crate::bridge::PaymentsBridge;
use crate::carried::CarriedBooks;
use crate::draft_memory::DraftMemory;
use crate::market::MarketPrices;
use crate::offer_book::{OfferBook, OfferTrie};
use crate::slot_index::SlotIndex;
use walras_crypto::{Domain, Hash, Hasher as HashWriter};
use walras_trie::{leaf_hashes, LeafHash, Trie};
use walras_types::genesis::Genesis;
use walras_types::{AccountId, AssetId, PairId, MAX_AMOUNT};

/// Hash domain of the state root.
pub(crate) const STATE_DOMAIN: Domain = Domain::new("walras/state");

/// The most accounts an exchange holds. An account's slot (its index in the state's vectors
/// and in every per-block work list, and its place in a checkpoint) is a `u32`, so slots run
/// `0..ACCOUNTS_MAX`: a genesis with more is refused, and a block's creations beyond the cap
/// are dropped ([`DropReason::AccountsFull`](crate::DropReason::AccountsFull)).
pub const ACCOUNTS_MAX: usize = u32::MAX as usize;

/// The genesis rules ([`Genesis::validate`]) and the account cap: what both exchanges (this one
/// and the order-book baseline) require of a genesis.
pub fn check_genesis(genesis: &Genesis) -> Result<(), StateError> {
    genesis
        .validate()
        .map_err(|error| StateError::Genesis(error.to_string()))?;
    if genesis.accounts.len() > ACCOUNTS_MAX {
        return Err(StateError::Genesis(format!(
            "{} accounts: at most {ACCOUNTS_MAX}",
            genesis.accounts.len()
        )));
    }
    Ok(())
}

/// Every slot of a state of `accounts` accounts (at most `ACCOUNTS_MAX`, so each fits).
pub(crate) fn all_slots(accounts: usize) -> Vec<u32> {
    assert!(
        accounts <= ACCOUNTS_MAX,
        "{accounts} accounts over ACCOUNTS_MAX"
    );
    (0..accounts)
        .map_while(|slot| u32::try_from(slot).ok())
        .collect()
}

/// The slot of a new account after `accounts` existing ones, or `None` when `accounts_max`
/// (`ACCOUNTS_MAX` outside tests) are already there: never a slot that wrapped.
pub fn new_slot(accounts: usize, accounts_max: usize) -> Option<u32> {
    debug_assert!(accounts_max <= ACCOUNTS_MAX);
    if accounts >= accounts_max {
        return None;
    }
    u32::try_from(accounts).ok()
}

/// Bytes a state holds in memory, by part: each from its structures' sizes and counts (not
/// the allocator's own figures), so their sum is below the process's RSS by the allocator's
/// rounding and free pages, the account views' copies, decoded keys
/// ([`crate::decoded_keys_live`]), the server's indexes and the mapped store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateMemory {
    /// The account table: every account at its type's size (balances past the inline ones
    /// not counted).
    pub accounts: u64,
    /// The account id → slot index and the ids by slot.
    pub account_index: u64,
    /// The account trie's nodes ([`walras_trie::Trie::memory`]).
    pub account_trie: u64,
    /// Every pair's offer trie's nodes.
    pub offer_tries: u64,
    /// The clearing books carried to the next block (shared chunks counted once per holder).
    pub books: u64,
}

/// Why a genesis cannot start an exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("invalid genesis: {0}")]
    Genesis(String),
}

/// The whole exchange.
pub struct ExchangeState {
    pub(crate) assets: usize,
    pub(crate) accounts: Accounts,
    pub(crate) account_ids: Vec<AccountId>,
    pub(crate) slots: SlotIndex,
    pub(crate) issued: Vec<u64>,
    pub(crate) burned: Vec<u64>,
    pub(crate) height: u64,
    pub(crate) last_header_hash: Hash,
    /// Each account's leaf hash, not its encoding: the encoding is `accounts`' (see
    /// `walras_trie::LeafHash`).
    pub(crate) account_trie: Trie<8, LeafHash>,
    /// Per pair index (`sell * assets + buy`): its open offers and their remaining amounts
    /// (the state's only copy of them; see [`crate::offer_book`]).
    pub(crate) offer_tries: Vec<OfferTrie>,
    /// The bridge to the payments lane, when the genesis names a committee.
    pub(crate) payments: Option<PaymentsBridge>,
    /// Last traded prices carried forward (not part of the state root: derived from headers).
    pub(crate) market: MarketPrices,
    /// The last block's clearing books, for the next block's to be edited from (not part of
    /// the state: a function of `books`; see `crate::carried`).
    pub(crate) carried: CarriedBooks,
    /// Which account pieces changed since the last checkpoint draft (not part of the state;
    /// see `crate::checkpoint_draft`).
    pub(crate) draft_memory: DraftMemory,
    /// The slots the last applied block wrote (not part of the state: what the account view
    /// after that block copies; see [`crate::account_view`]).
    pub(crate) last_writes: BlockWrites,
}

/// The slots of the accounts one block changed or created, sorted.
#[derive(Debug, Default)]
pub(crate) struct BlockWrites {
    /// Height of the state after that block (0: no block applied since this state was
    /// built).
    pub(crate) height: u64,
    pub(crate) slots: Vec<u32>,
}

impl ExchangeState {
    /// The last traded prices, carried forward (see [`crate::market`]).
    pub fn market(&self) -> &MarketPrices {
        &self.market
    }

    /// The state before the first block.
    pub fn from_genesis(genesis: &Genesis, threads: usize) -> Result<ExchangeState, StateError> {
        check_genesis(genesis)?;
        let assets = genesis.assets as usize;
        let mut issued = vec![0u64; assets];
        let mut accounts = Accounts::default();
        let mut account_ids = Vec::with_capacity(genesis.accounts.len());
        for entry in &genesis.accounts {
            for (asset, amount) in &entry.balances {
                let total = &mut issued[asset.0 as usize];
                *total = total
                    .checked_add(*amount)
                    .filter(|sum| *sum <= MAX_AMOUNT)
                    .ok_or_else(|| {
                        StateError::Genesis(format!("asset {} over issuance cap", asset.0))
                    })?;
            }
            let slot = new_slot(accounts.len(), ACCOUNTS_MAX)
                .ok_or_else(|| StateError::Genesis(format!("more than {ACCOUNTS_MAX} accounts")))?;
            debug_assert_eq!(slot as usize, account_ids.len());
            account_ids.push(entry.id);
            accounts.push(Account::new(entry.public_key, entry.balances.clone()));
        }
        // `check_genesis` refused an id listed twice.
        let slots = SlotIndex::from_ids(&account_ids, threads)
            .map_err(|id| StateError::Genesis(format!("account {} twice", id.0)))?;
        let payments = genesis
            .payments
            .as_ref()
            .map(|payments| PaymentsBridge::new(payments, assets))
            .transpose()
            .map_err(|error| StateError::Genesis(format!("payments committee: {error}")))?;
        let mut state = ExchangeState {
            payments,
            market: MarketPrices::new(assets, 0),
            carried: CarriedBooks::default(),
            draft_memory: DraftMemory::default(),
            last_writes: Default::default(),
            assets,
            accounts,
            account_ids,
            slots,
            burned: vec![0; assets],
            issued,
            height: 0,
            last_header_hash: Hash([0; 32]),
            account_trie: Trie::new(),
            offer_tries: (0..assets * assets).map(|_| Trie::new()).collect(),
        };
        state.build_account_trie(threads);
        Ok(state)
    }

    pub fn assets(&self) -> usize {
        self.assets
    }

    pub fn height(&self) -> u64 {
        self.height
    }

    pub fn account_count(&self) -> usize {
        self.accounts.len()
    }

    pub fn account(&self, id: AccountId) -> Option<&Account> {
        self.slots
            .get(&id)
            .map(|slot| &self.accounts[*slot as usize])
    }

    /// The bridge to the payments lane (committee, escrow, withdrawn set), if the genesis
    /// named a committee.
    pub fn payments(&self) -> Option<&PaymentsBridge> {
        self.payments.as_ref()
    }

    pub fn burned(&self) -> &[u64] {
        &self.burned
    }

    pub fn issued(&self) -> &[u64] {
        &self.issued
    }

    /// Open offers of a pair in canonical order, with remaining amounts.
    pub fn book(&self, pair: PairId) -> OfferBook<'_> {
        self.book_at(self.pair_index(pair.sell, pair.buy))
    }

    /// The book of pair index `index` (`sell * assets + buy`).
    pub(crate) fn book_at(&self, index: usize) -> OfferBook<'_> {
        OfferBook::new(&self.offer_tries[index])
    }

    pub fn open_offer_count(&self) -> usize {
        self.offer_tries.iter().map(OfferTrie::len).sum()
    }

    /// What this state holds in memory, by part (see [`StateMemory`]). O(shards of the id
    /// index + pairs + chunks of the carried books): a node measures it at most once a second.
    pub fn memory(&self) -> StateMemory {
        StateMemory {
            accounts: self.accounts.heap_bytes(),
            account_index: self.slots.heap_bytes()
                + (self.account_ids.capacity() * std::mem::size_of::<AccountId>()) as u64,
            account_trie: self.account_trie.memory().bytes,
            offer_tries: self
                .offer_tries
                .iter()
                .map(|trie| trie.memory().bytes)
                .sum(),
            books: self.carried.heap_bytes(),
        }
    }

    /// Per asset: balances + amounts locked in open offers + burned + payments escrow. Equals
    /// [`Self::issued`] in every reachable state (the conservation invariant).
    pub fn accounted(&self) -> Vec<u128> {
        self.accounted_on(1)
    }

    /// [`Self::accounted`], the books summed on up to `threads` threads (a checkpoint's load
    /// checks conservation over every open offer: 10M of them took 0.5 s on one thread).
    pub(crate) fn accounted_on(&self, threads: usize) -> Vec<u128> {
        let mut totals = vec![0u128; self.assets];
        for account in self.accounts.iter() {
            for (asset, amount) in account.balances() {
                totals[asset.0 as usize] += *amount as u128;
            }
        }
        let pairs: Vec<usize> = (0..self.offer_tries.len()).collect();
        let locked = walras_par::map_owned_in_order(pairs, threads, 2, |index| {
            let book = self.book_at(index);
            book.iter().map(|(_, amount)| amount as u128).sum::<u128>()
        });
        for (index, locked) in locked.into_iter().enumerate() {
            totals[index / self.assets] += locked;
        }
        for (asset, burned) in self.burned.iter().enumerate() {
            totals[asset] += *burned as u128;
        }
        if let Some(payments) = &self.payments {
            for (asset, escrow) in payments.escrow.iter().enumerate() {
                totals[asset] += *escrow as u128;
            }
        }
        totals
    }

    /// Whether [`Self::accounted`] equals [`Self::issued`] for every asset.
    pub fn conserves(&self) -> bool {
        self.conserves_on(1)
    }

    /// [`Self::conserves`], the books summed on up to `threads` threads.
    pub(crate) fn conserves_on(&self, threads: usize) -> bool {
        self.accounted_on(threads)
            .iter()
            .zip(&self.issued)
            .all(|(accounted, issued)| *accounted == u128::from(*issued))
    }

    /// Builds the account trie of every account, into the empty trie of a state just made
    /// from genesis or decoded from a checkpoint: the leaves made in id order on all threads
    /// and written straight into the trie's build ([`Trie::from_sorted_pieces`]). Through
    /// [`Self::commit_accounts`] the whole state went through a batch, its copy and its sort:
    /// at 10M accounts ~1.2 GB of memory touched once (issue 32's restart).
    pub(crate) fn build_account_trie(&mut self, threads: usize) {
        assert!(
            self.account_trie.is_empty(),
            "the account trie is built once, into an empty trie"
        );
        let order = slots_by_id(&self.account_ids, threads);
        let trie = Trie::from_sorted_pieces(order.len(), BUILD_PIECE_ACCOUNTS, threads, |range| {
            self.leaves_of(&order[range])
        });
        self.draft_memory.touch(&order);
        self.account_trie = trie;
    }

    /// Writes the given accounts into the account trie: each one's leaf hash, computed here
    /// from its encoding on all threads (the encodings themselves are not kept).
    pub(crate) fn commit_accounts(&mut self, slots: &[u32], threads: usize) {
        let pieces: Vec<&[u32]> = slots.chunks(COMMIT_PIECE_ACCOUNTS).collect();
        let hashed = walras_par::map_in_order(&pieces, threads, 2, |piece| self.leaves_of(piece));
        // Every piece but the last is full, so entry `i` is at `(i / piece, i % piece)`: laid
        // end to end on all threads (one thread took ~0.4 s for 10M at a restart).
        let batch: Vec<([u8; 8], LeafHash)> =
            walras_par::tabulate(slots.len(), threads, COMMIT_PIECE_ACCOUNTS, |i| {
                hashed[i / COMMIT_PIECE_ACCOUNTS][i % COMMIT_PIECE_ACCOUNTS]
            });
        // The same list feeds the next checkpoint draft: what changes an account changes its
        // trie entry, so no change reaches the root without reaching the draft.
        self.draft_memory.touch(slots);
        self.account_trie.insert_batch(batch, threads);
    }

    /// The account trie's entries for `slots`: key and leaf hash of each one's encoding, the
    /// encodings laid end to end in one buffer and hashed together.
    fn leaves_of(&self, slots: &[u32]) -> Vec<([u8; 8], LeafHash)> {
        let mut encoded = Vec::new();
        let mut ends = Vec::with_capacity(slots.len());
        for &slot in slots {
            self.accounts[slot as usize].encode_into(&mut encoded);
            ends.push(encoded.len());
        }
        let keys = slots
            .iter()
            .map(|&slot| self.account_ids[slot as usize].0.to_be_bytes());
        let starts = std::iter::once(0).chain(ends.iter().copied());
        let entries: Vec<([u8; 8], &[u8])> = keys
            .zip(starts.zip(&ends))
            .map(|(key, (start, &end))| (key, &encoded[start..end]))
            .collect();
        let hashes = leaf_hashes(&entries);
        entries.iter().map(|(key, _)| *key).zip(hashes).collect()
    }

    /// The commitment to the whole state:
    /// `H_state(height ‖ account root ‖ (sell ‖ buy ‖ offer root) for every pair with open
    /// offers, in pair order ‖ burned per asset [‖ bridge root])`, the bridge root only on an
    /// exchange with a payments committee (so the roots of other exchanges are unchanged).
    pub fn state_root(&mut self, threads: usize) -> Hash {
        let account_root = self.account_trie.root_hash(threads);
        let mut writer = HashWriter::new(STATE_DOMAIN);
        writer.update(&self.height.to_be_bytes());
        writer.update(account_root.as_bytes());
        for (index, trie) in self.offer_tries.iter_mut().enumerate() {
            if trie.is_empty() {
                continue;
            }
            let (sell, buy) = ((index / self.assets) as u16, (index % self.assets) as u16);
            writer.update(&sell.to_be_bytes());
            writer.update(&buy.to_be_bytes());
            // On `threads` threads: after a block the apply phase has rehashed every trie it
            // changed (this returns at once), but after a checkpoint load or a genesis with
            // resting offers every trie is stale, and one thread took 2.8 s of a restart to
            // hash 10M offers.
            writer.update(trie.root_hash(threads).as_bytes());
        }
        for burned in &self.burned {
            writer.update(&burned.to_be_bytes());
        }
        if let Some(payments) = &mut self.payments {
            writer.update(payments.root().as_bytes());
        }
        writer.finalize()
    }

    pub(crate) fn slot(&self, id: AccountId) -> Option<u32> {
        self.slots.get(&id).copied()
    }

    pub(crate) fn pair_index(&self, sell: AssetId, buy: AssetId) -> usize {
        sell.0 as usize * self.assets + buy.0 as usize
    }
}

/// Accounts encoded and hashed per task in [`ExchangeState::build_account_trie`]: a whole
/// state's are many, so pieces are larger than a block's.
const BUILD_PIECE_ACCOUNTS: usize = 4_096;

/// Every slot, in ascending order of its account's id (the account trie's key order): the
/// slots themselves where ids ascend with them (every account created in id order), else
/// sorted on up to `threads` threads. Ids are unique (the slot index refused repeats).
fn slots_by_id(ids: &[AccountId], threads: usize) -> Vec<u32> {
    if ids.windows(2).all(|pair| pair[0].0 < pair[1].0) {
        return all_slots(ids.len());
    }
    let mut pairs: Vec<(u64, u32)> = walras_par::tabulate(ids.len(), threads, 1 << 16, |slot| {
        (ids[slot].0, slot as u32)
    });
    walras_par::sort_unstable(&mut pairs, threads, 1 << 13);
    walras_par::map_owned_in_order(pairs, threads, 1 << 16, |(_, slot)| slot)
}

/// Accounts encoded and hashed per task in [`ExchangeState::commit_accounts`]: enough that a
/// task's buffers are reused work, few enough that a block's few hundred changed accounts still
/// spread over the threads.
const COMMIT_PIECE_ACCOUNTS: usize = 256;

#[cfg(test)]
mod cap_tests {
    use super::*;

    #[test]
    fn a_new_slot_is_refused_at_the_cap_and_never_wraps() {
        // A small injected cap.
        assert_eq!(new_slot(0, 3), Some(0));
        assert_eq!(new_slot(2, 3), Some(2));
        assert_eq!(new_slot(3, 3), None);
        assert_eq!(new_slot(4, 3), None);
        // The real cap: the last slot is u32::MAX - 1, and the next is refused, not 0.
        assert_eq!(new_slot(ACCOUNTS_MAX - 1, ACCOUNTS_MAX), Some(u32::MAX - 1));
        assert_eq!(new_slot(ACCOUNTS_MAX, ACCOUNTS_MAX), None);
        assert_eq!(new_slot(ACCOUNTS_MAX + 1, ACCOUNTS_MAX), None);
    }
}

#[cfg(test)]
mod account_trie_tests {
    use super::*;
    use walras_types::genesis::GenesisAccount;

    /// The account trie by definition: every account's key and canonical encoding.
    fn root_of_encodings(state: &ExchangeState) -> Hash {
        let mut trie: Trie<8> = Trie::new();
        let entries = state
            .account_ids
            .iter()
            .zip(state.accounts.iter())
            .map(|(id, account)| (id.0.to_be_bytes(), account.encode()))
            .collect();
        trie.insert_batch(entries, 1);
        trie.root_hash(1)
    }

    /// The account trie holds leaf hashes, not encodings; its root must be the root of a trie
    /// of the encodings (the state root's definition), at genesis and after accounts change,
    /// on any thread count and for pieces of every size.
    #[test]
    fn the_account_trie_of_leaf_hashes_has_the_root_of_the_accounts_encodings() {
        for threads in [1, 2, 3] {
            let genesis = Genesis {
                assets: 4,
                asset_info: Vec::new(),
                accounts: (0..1_000u64)
                    .map(|i| GenesisAccount {
                        id: AccountId(i * 7_919 + 3),
                        public_key: [(i % 251) as u8; 32],
                        balances: (0..(i % 5) as u16)
                            .map(|asset| (AssetId(asset % 4), 1 + i * 13))
                            .filter(|(asset, _)| asset.0 < 4)
                            .collect::<std::collections::BTreeMap<_, _>>()
                            .into_iter()
                            .collect(),
                    })
                    .collect(),
                payments: None,
            };
            let mut state = ExchangeState::from_genesis(&genesis, threads).expect("genesis");
            assert_eq!(
                state.account_trie.root_hash(threads),
                root_of_encodings(&state)
            );
            let changed: Vec<u32> = (0..600).step_by(3).collect();
            for &slot in &changed {
                state
                    .accounts
                    .get_mut(slot as usize)
                    .credit(AssetId(slot as u16 % 4), 5);
            }
            state.commit_accounts(&changed, threads);
            assert_eq!(
                state.account_trie.root_hash(threads),
                root_of_encodings(&state)
            );
        }
    }

    /// Trigger: a restart builds the account trie whole, in id order (`build_account_trie`),
    /// while blocks create accounts at the next slot whatever their id, so a state's ids need
    /// not ascend with its slots. Built whole from such a state (directly and through its
    /// checkpoint), the trie must have the root of the accounts' encodings.
    #[test]
    fn the_account_trie_built_whole_is_right_when_ids_do_not_ascend_with_slots() {
        for threads in [1, 2, 3] {
            let genesis = Genesis {
                assets: 2,
                asset_info: Vec::new(),
                accounts: (0..5_000u64)
                    .map(|i| GenesisAccount {
                        id: AccountId(1_000_000 + i * 13),
                        public_key: [(i % 251) as u8; 32],
                        balances: vec![(AssetId(0), 1 + i)],
                    })
                    .collect(),
                payments: None,
            };
            let mut state = ExchangeState::from_genesis(&genesis, threads).expect("genesis");
            // Accounts created by blocks, ids below, between and above genesis's.
            let created: Vec<u64> = (0..3_000u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_200_000)
                .filter(|id| !state.slots.contains_key(&AccountId(*id)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .rev()
                .collect();
            let mut touched = Vec::new();
            for id in created {
                let slot = new_slot(state.accounts.len(), ACCOUNTS_MAX).expect("a slot");
                state.slots.insert(AccountId(id), slot);
                state.account_ids.push(AccountId(id));
                state.accounts.push(Account::new([7; 32], Vec::new()));
                touched.push(slot);
            }
            state.commit_accounts(&touched, threads);
            let expected = root_of_encodings(&state);
            assert_eq!(state.account_trie.root_hash(threads), expected);

            state.account_trie = Trie::new();
            state.build_account_trie(threads);
            assert_eq!(state.account_trie.root_hash(threads), expected);

            let mut loaded = ExchangeState::decode_checkpoint(&state.encode_checkpoint(), threads)
                .expect("its checkpoint loads");
            assert_eq!(loaded.account_trie.root_hash(threads), expected);
            assert_eq!(loaded.state_root(threads), state.state_root(threads));
        }
    }
}
