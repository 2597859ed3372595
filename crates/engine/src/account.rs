//! Accounts: key, sequence number, balances.

use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use walras_crypto::PublicKey;
use walras_types::codec::Writer;
use walras_types::{AssetId, MAX_AMOUNT};

/// One account's state. Balances are sparse — an account holds a few of many assets — and kept
/// sorted by asset so the account encodes canonically.
#[derive(Clone, Debug)]
pub struct Account {
    pub public_key: [u8; 32],
    /// The key decoded for verification, on first use: decoding costs a field square root
    /// (about 10 µs), most accounts of a large state sign nothing for a long time, and a
    /// restart that decoded all of them would pay ~100 s of CPU at 10M accounts (issue 32).
    /// Behind a pointer: the decoded point is ~190 bytes, paid only by accounts that sign. An
    /// `Arc`, not a `Box`: the state's accounts are shared in chunks with the admission view
    /// (`crate::accounts`), and the first write to a shared chunk copies its 32 accounts, a
    /// reference count for a decoded key rather than an allocation and a copy. `None` inside:
    /// not a valid key. The verdict is the same whenever it is decoded: it depends only on
    /// `public_key`.
    verifying_key: OnceLock<Option<Arc<DecodedKey>>>,
    /// The highest sequence number used; the next transaction must lie in
    /// `(last_sequence, last_sequence + SEQUENCE_WINDOW]`.
    pub last_sequence: u64,
    /// Sorted by asset, no zero amounts. The first [`BALANCES_INLINE`] are held in the
    /// account itself: a block credits hundreds of thousands of accounts on all its threads,
    /// and growing a heap vector that another thread allocated (every account loaded at
    /// genesis or restart) takes that thread's allocator arena lock in glibc, so the credits
    /// of a block ran one at a time whatever the thread count (16-core device, 2026-11-26:
    /// 300k trade credits took 124 ms on 1 thread and 121–126 ms on 16).
    balances: Balances,
}

/// A decoded public key, counted while it lives: each account that signed since the node
/// started holds one (~190 bytes beside the account table), which the node's memory gauges
/// must show ([`decoded_keys_live`]).
#[derive(Debug)]
struct DecodedKey(PublicKey);

/// Decoded keys alive in this process, all states and views together.
static DECODED_KEYS_LIVE: AtomicU64 = AtomicU64::new(0);

impl DecodedKey {
    fn new(key: PublicKey) -> DecodedKey {
        DECODED_KEYS_LIVE.fetch_add(1, Ordering::Relaxed);
        DecodedKey(key)
    }
}

impl Drop for DecodedKey {
    fn drop(&mut self) {
        DECODED_KEYS_LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Decoded public keys alive in this process (every state and account view together; a key
/// shared by copies of an account counts once).
pub fn decoded_keys_live() -> u64 {
    DECODED_KEYS_LIVE.load(Ordering::Relaxed)
}

/// Heap bytes of one decoded key: the key and its `Arc`'s two counters.
pub const DECODED_KEY_BYTES: u64 =
    (std::mem::size_of::<DecodedKey>() + 2 * std::mem::size_of::<usize>()) as u64;

/// An account's balances as it holds them (see [`Account::balances`]).
pub(crate) type Balances = SmallVec<[(AssetId, u64); BALANCES_INLINE]>;

/// Balances an account holds without a heap allocation (16 bytes each; the generator's
/// accounts hold 4 assets at genesis).
const BALANCES_INLINE: usize = 4;

/// Equal when the committed fields are: the decoded-key cache is not state.
impl PartialEq for Account {
    fn eq(&self, other: &Account) -> bool {
        self.public_key == other.public_key
            && self.last_sequence == other.last_sequence
            && self.balances == other.balances
    }
}

impl Eq for Account {}

impl Account {
    pub fn new(public_key: [u8; 32], balances: Vec<(AssetId, u64)>) -> Account {
        // Collected, not converted: `SmallVec::from_vec` would keep the vector's heap buffer
        // even where the balances fit inline.
        let mut balances: Balances = balances
            .into_iter()
            .filter(|(_, amount)| *amount > 0)
            .collect();
        balances.sort_by_key(|(asset, _)| *asset);
        Account {
            public_key,
            verifying_key: OnceLock::new(),
            last_sequence: 0,
            balances,
        }
    }

    /// An account read back from a checkpoint: `balances` already ascending by asset with no
    /// zero amount (the reader checks both), collected where they fit inline rather than
    /// through a heap vector as [`Account::new`] takes them: a restart at 10M accounts made and
    /// freed 10M of those.
    pub(crate) fn from_checked(
        public_key: [u8; 32],
        last_sequence: u64,
        balances: Balances,
    ) -> Account {
        debug_assert!(balances.windows(2).all(|two| two[0].0 < two[1].0));
        debug_assert!(balances.iter().all(|(_, amount)| *amount > 0));
        Account {
            public_key,
            verifying_key: OnceLock::new(),
            last_sequence,
            balances,
        }
    }

    /// The decoded public key, or `None` if the stored bytes are not a valid key.
    pub fn verifying_key(&self) -> Option<&PublicKey> {
        self.verifying_key
            .get_or_init(|| {
                PublicKey::from_bytes(&self.public_key)
                    .ok()
                    .map(|key| Arc::new(DecodedKey::new(key)))
            })
            .as_deref()
            .map(|decoded| &decoded.0)
    }

    /// The decoded key if [`Self::verifying_key`] has decoded it already (`Some(None)`: not a
    /// valid key); `None` if not yet. Never decodes.
    pub fn decoded_key(&self) -> Option<Option<&PublicKey>> {
        self.verifying_key
            .get()
            .map(|decoded| decoded.as_deref().map(|decoded| &decoded.0))
    }

    /// Takes `older`'s decoded key if it has one and `self` has none yet: `older` is the same
    /// account in a copy of its chunk made before (keys never change, so the verdict is the
    /// same).
    pub(crate) fn keep_decoded_key(&self, older: &Account) {
        debug_assert_eq!(self.public_key, older.public_key, "the same account");
        if self.verifying_key.get().is_none() {
            if let Some(decoded) = older.verifying_key.get() {
                let _ = self.verifying_key.set(decoded.clone());
            }
        }
    }

    /// Whether [`Self::verifying_key`] has decoded the key yet (for tests of when keys are
    /// decoded: a loaded state decodes none).
    #[doc(hidden)]
    pub fn key_is_decoded(&self) -> bool {
        self.verifying_key.get().is_some()
    }

    /// What the admission rule reads of this account.
    pub fn admission_view(&self) -> crate::admission::SourceView {
        crate::admission::SourceView {
            key: self.verifying_key().copied(),
            last_sequence: self.last_sequence,
        }
    }

    pub fn balance(&self, asset: AssetId) -> u64 {
        match self
            .balances
            .binary_search_by_key(&asset, |(held, _)| *held)
        {
            Ok(at) => self.balances[at].1,
            Err(_) => 0,
        }
    }

    pub fn balances(&self) -> &[(AssetId, u64)] {
        &self.balances
    }

    /// Adds to a balance. Panics past the issuance cap: every credit is matched by a debit or
    /// a trade within the asset's issuance, so that would be a bug, not bad input.
    pub fn credit(&mut self, asset: AssetId, amount: u64) {
        if amount == 0 {
            return;
        }
        match self
            .balances
            .binary_search_by_key(&asset, |(held, _)| *held)
        {
            Ok(at) => {
                let balance = &mut self.balances[at].1;
                *balance = balance
                    .checked_add(amount)
                    .filter(|sum| *sum <= MAX_AMOUNT)
                    .expect("a balance exceeded the issuance cap");
            }
            Err(at) => self.balances.insert(at, (asset, amount)),
        }
    }

    /// Subtracts from a balance. Panics on overdraft: filtering admits only debits the balance
    /// covers, so that would be a bug, not bad input.
    pub fn debit(&mut self, asset: AssetId, amount: u64) {
        if amount == 0 {
            return;
        }
        let at = self
            .balances
            .binary_search_by_key(&asset, |(held, _)| *held)
            .expect("debit of an asset the account does not hold");
        let balance = &mut self.balances[at].1;
        *balance = balance
            .checked_sub(amount)
            .expect("overdraft past filtering");
        if *balance == 0 {
            self.balances.remove(at);
        }
    }

    /// Canonical bytes, committed in the account trie:
    /// `public_key[32] last_sequence:u64 count:u16 (asset:u16 amount:u64)*`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(42 + 10 * self.balances.len());
        self.encode_into(&mut out);
        out
    }

    /// The length of [`Self::encode`]'s bytes.
    pub fn encoded_len(&self) -> usize {
        32 + 8 + 2 + 10 * self.balances.len()
    }

    /// [`Self::encode`], appended to `out` (a checkpoint writes millions: no buffer each).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.public_key);
        out.put_u64(self.last_sequence);
        out.put_u16(self.balances.len() as u16);
        for &(asset, amount) in &self.balances {
            out.put_u16(asset.0);
            out.put_u64(amount);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credits_and_debits_keep_balances_sparse_and_sorted() {
        let mut account = Account::new([0; 32], vec![(AssetId(3), 5), (AssetId(1), 0)]);
        assert_eq!(account.balances(), &[(AssetId(3), 5)]);
        account.credit(AssetId(1), 7);
        account.credit(AssetId(3), 1);
        assert_eq!(account.balances(), &[(AssetId(1), 7), (AssetId(3), 6)]);
        account.debit(AssetId(1), 7);
        assert_eq!(account.balance(AssetId(1)), 0);
        assert_eq!(account.balances(), &[(AssetId(3), 6)]);
    }

    /// Trigger: on the 16-core device (2026-11-26) a block's 300k trade credits took the same
    /// 121–126 ms on 16 threads as on 1. Growing a balances vector means `realloc`, and glibc
    /// takes the allocator arena lock of the thread that allocated the buffer: for accounts
    /// loaded at genesis or restart that is one thread's arena, so every credit that added an
    /// asset waited on one lock. An account's first balances now live in the account.
    #[test]
    fn an_account_of_up_to_four_assets_keeps_its_balances_without_a_heap_allocation() {
        let assets = |ids: &[u16]| ids.iter().map(|id| (AssetId(*id), 10)).collect::<Vec<_>>();
        let mut account = Account::new([0; 32], assets(&[7, 2, 5]));
        assert!(!account.balances.spilled(), "genesis balances are inline");
        account.credit(AssetId(1), 3);
        assert_eq!(account.balances().len(), 4);
        assert!(!account.balances.spilled(), "a fourth asset stays inline");
        account.credit(AssetId(9), 3);
        assert!(account.balances.spilled(), "a fifth asset goes to the heap");
        assert_eq!(
            account.balances(),
            &[
                (AssetId(1), 3),
                (AssetId(2), 10),
                (AssetId(5), 10),
                (AssetId(7), 10),
                (AssetId(9), 3)
            ]
        );
    }

    proptest::proptest! {
        /// Credits and debits give the balances a sorted map of the non-zero amounts gives,
        /// inline or spilled, and the encoding commits exactly those.
        #[test]
        fn balances_follow_a_sorted_map_of_nonzero_amounts(
            genesis in proptest::collection::vec((0u16..10, 0u64..50), 0..8),
            operations in proptest::collection::vec((proptest::bool::ANY, 0u16..10, 1u64..40), 0..60),
        ) {
            let mut model = std::collections::BTreeMap::new();
            let mut seen = std::collections::BTreeSet::new();
            // Genesis lists each asset once.
            let genesis: Vec<(AssetId, u64)> = genesis
                .into_iter()
                .filter(|(asset, _)| seen.insert(*asset))
                .map(|(asset, amount)| (AssetId(asset), amount))
                .collect();
            for (asset, amount) in &genesis {
                if *amount > 0 {
                    model.insert(*asset, *amount);
                }
            }
            let mut account = Account::new([1; 32], genesis);
            let mut most_held = model.len();
            for (credit, asset, amount) in operations {
                let asset = AssetId(asset);
                let held = model.get(&asset).copied().unwrap_or(0);
                if credit {
                    account.credit(asset, amount);
                    model.insert(asset, held + amount);
                } else if held >= amount {
                    account.debit(asset, amount);
                    if held == amount {
                        model.remove(&asset);
                    } else {
                        model.insert(asset, held - amount);
                    }
                }
                let expected: Vec<(AssetId, u64)> = model.iter().map(|(a, v)| (*a, *v)).collect();
                proptest::prop_assert_eq!(account.balances(), expected.as_slice());
                most_held = most_held.max(model.len());
                // Never more than four at once: never a heap buffer.
                if most_held <= BALANCES_INLINE {
                    proptest::prop_assert!(!account.balances.spilled());
                }
            }
            let rebuilt = Account::new([1; 32], account.balances().to_vec());
            proptest::prop_assert_eq!(rebuilt.encode(), account.encode());
        }
    }

    #[test]
    #[should_panic(expected = "overdraft")]
    fn overdraft_is_a_bug() {
        let mut account = Account::new([0; 32], vec![(AssetId(0), 5)]);
        account.debit(AssetId(0), 6);
    }
}
