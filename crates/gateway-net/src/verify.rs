//! The gateway's check of each trade before it enters the ordering buffer, in two parts.
//!
//! In the participant's connection task (costly, in parallel, in the connection's order): the
//! transaction decodes, its source account is read ([`AccountCache`]) and its signature is
//! checked with that account's key under the one acceptance rule
//! ([`walras_crypto::signature_accepted`]).
//!
//! In the core task, against what the gateway has buffered ([`admit`]): the node's admission
//! rule itself, [`walras_engine::admit_source`] (well-formed, known source,
//! sequence number above the account's committed one and within the window, the signature
//! verdict), with the account's committed view as of the last published block, then the
//! mempool's rule for what waits: one transaction per (source, sequence) in the buffer and in
//! the block on its way to the node (a copy, or another transaction reusing that number, is a
//! duplicate). What the gateway cannot check (the payments bridge, the block-wide rules) stays
//! with the node's block filter, whose verdicts reach the participant as drops.
//!
//! Balances: the connection task also applies admission's advisory funds check
//! ([`walras_engine::check_funds`], the node's `insufficient_balance`) to a trade
//! the rule would admit, against the balance the gateway last read from the node. That read
//! may be older than the last published block (fills and payments credit accounts without the
//! gateway seeing how much), so a trade it does not cover is checked again on a fresh read
//! (within the participant's lookup budget) before it is refused: only a balance read at the
//! last published block refuses, and a trade that cannot be checked now is let through for the
//! block rule to decide. What waits in the buffer is not subtracted (the node's mempool does
//! that; the gateway keeps no amounts).
//!
//! A refused trade is never buffered: the participant gets a Notice with the rule's code, and
//! it still counts as a heartbeat (its clock).

use crate::frame::NoticeCode;
use crate::node_link::{AccountFacts, NodeLink, NodeLinkError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use walras_crypto::{PublicKey, Signature};
use walras_engine::{self as engine, Rejection, SourceView};
use walras_types::AssetId;
use walras_types::SignedTransaction;

/// Accounts whose view is remembered at most (least recently used forgotten first).
pub(crate) const ACCOUNTS_CACHED_MAX: usize = 65_536;
/// Accounts remembered as unknown at most (all forgotten when full, and after every block that
/// creates accounts).
pub(crate) const UNKNOWN_CACHED_MAX: usize = 65_536;
/// Node lookups one connection may cause: this many a second, in bursts of [`LOOKUP_BURST`].
pub(crate) const LOOKUPS_PER_S: u32 = 100;
pub(crate) const LOOKUP_BURST: u32 = 200;
/// A lookup during which a block was published is read again, at most this often in all.
const LOOKUP_ROUNDS: u32 = 3;

/// Why a trade was refused: the Notice's code and its text.
pub(crate) type Refusal = (NoticeCode, String);

/// Whether `signed`'s signature is accepted with its source account's key (`None`: the stored
/// key is not a valid Ed25519 key, so nothing verifies), by the engine's rule.
pub(crate) fn signature_ok(signed: &SignedTransaction, key: Option<&PublicKey>) -> bool {
    let (Some(key), Ok(signature)) = (key, Signature::from_bytes(&signed.signature)) else {
        return false;
    };
    let message = signed.transaction.encode();
    walras_crypto::signature_accepted(&(message.as_slice(), key, &signature))
}

/// A trade that passed the connection task's part: decoded, its signature's verdict taken with
/// the source's key (false when the account is unknown).
#[derive(Clone, Debug)]
pub(crate) struct Checked {
    pub signed: SignedTransaction,
    pub signature_ok: bool,
}

/// What the gateway knows of an account, as of the last published block.
// Returned by value once or twice per trade and never stored in bulk (the cache stores views):
// boxing the key would cost an allocation per trade for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccountState {
    Known(SourceView),
    /// The node said it does not exist, and no block has created accounts since.
    Unknown,
    /// Not remembered (never read, or forgotten since).
    Forgotten,
}

/// Account views, bounded: keys never change; sequence numbers change only with blocks, all of
/// which the gateway seals, so each view is read from the node once and then kept up to date
/// from the published blocks ([`AccountCache::note_block`]). A lookup during which a block was
/// published is read again, so a view is never older than the last published block.
#[derive(Debug)]
pub(crate) struct AccountCache {
    inner: Mutex<CacheInner>,
    known_max: usize,
    unknown_max: usize,
}

/// What the cache keeps of a known account.
#[derive(Debug)]
struct Cached {
    view: SourceView,
    /// Use stamp (see `recency`).
    stamp: u64,
    /// Balances as the node said at `balances_height` (the last published block then).
    balances: Arc<[(AssetId, u64)]>,
    balances_height: u64,
}

#[derive(Debug, Default)]
struct CacheInner {
    /// The last published block the views are correct for.
    height: u64,
    known: BTreeMap<u64, Cached>,
    /// Use stamp → account: the least recently used is first.
    recency: BTreeMap<u64, u64>,
    next_stamp: u64,
    unknown: BTreeSet<u64>,
}

impl CacheInner {
    fn touch(&mut self, account: u64) -> Option<SourceView> {
        let stamp = self.next_stamp;
        let cached = self.known.get_mut(&account)?;
        let view = cached.view;
        let old = std::mem::replace(&mut cached.stamp, stamp);
        self.recency.remove(&old);
        self.recency.insert(stamp, account);
        self.next_stamp += 1;
        Some(view)
    }
}

impl AccountCache {
    pub(crate) fn new(known_max: usize, unknown_max: usize) -> AccountCache {
        AccountCache {
            inner: Mutex::new(CacheInner::default()),
            known_max: known_max.max(1),
            unknown_max: unknown_max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // Every update leaves the maps consistent before the lock is released.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The account's state (a known account counts as used).
    pub(crate) fn state(&self, account: u64) -> AccountState {
        let mut inner = self.lock();
        if let Some(view) = inner.touch(account) {
            return AccountState::Known(view);
        }
        if inner.unknown.contains(&account) {
            return AccountState::Unknown;
        }
        AccountState::Forgotten
    }

    /// The last published block the views are correct for.
    pub(crate) fn height(&self) -> u64 {
        self.lock().height
    }

    /// A known account's balance of `asset` as last read from the node, and whether that read
    /// is of the last published block (`fresh`); `None` when the account is not known.
    pub(crate) fn balance(&self, account: u64, asset: AssetId) -> Option<(u64, bool)> {
        let inner = self.lock();
        let cached = inner.known.get(&account)?;
        let balance = match cached
            .balances
            .binary_search_by_key(&asset, |(held, _)| *held)
        {
            Ok(at) => cached.balances[at].1,
            Err(_) => 0,
        };
        Some((balance, cached.balances_height == inner.height))
    }

    /// Records what a lookup started when the last published block was `read_at` found; `false`
    /// (nothing recorded) when a block was published since: the lookup may predate it.
    pub(crate) fn record(&self, account: u64, read_at: u64, facts: Option<AccountFacts>) -> bool {
        let mut inner = self.lock();
        if inner.height != read_at {
            return false;
        }
        match facts {
            None => {
                if inner.unknown.len() >= self.unknown_max {
                    inner.unknown.clear();
                }
                inner.unknown.insert(account);
            }
            Some(facts) => {
                inner.unknown.remove(&account);
                let view = SourceView {
                    key: facts.key,
                    last_sequence: facts.last_sequence,
                };
                let balances: Arc<[(AssetId, u64)]> = facts.balances.into();
                if let Some(known) = inner.known.get_mut(&account) {
                    known.view.last_sequence = known.view.last_sequence.max(view.last_sequence);
                    known.balances = balances;
                    known.balances_height = read_at;
                } else {
                    while inner.known.len() >= self.known_max {
                        let Some((_, oldest)) = inner.recency.pop_first() else {
                            break;
                        };
                        inner.known.remove(&oldest);
                    }
                    let stamp = inner.next_stamp;
                    inner.next_stamp += 1;
                    let cached = Cached {
                        view,
                        stamp,
                        balances,
                        balances_height: read_at,
                    };
                    inner.known.insert(account, cached);
                    inner.recency.insert(stamp, account);
                }
            }
        }
        true
    }

    /// Block `height` was published with `accepted` (source, sequence) transactions; when
    /// `creates_accounts`, accounts remembered as unknown may exist now and are forgotten.
    pub(crate) fn note_block(&self, height: u64, accepted: &[(u64, u64)], creates_accounts: bool) {
        let mut inner = self.lock();
        for &(account, sequence) in accepted {
            if let Some(cached) = inner.known.get_mut(&account) {
                cached.view.last_sequence = cached.view.last_sequence.max(sequence);
            }
        }
        if creates_accounts {
            inner.unknown.clear();
        }
        inner.height = inner.height.max(height);
    }

    /// Accounts remembered (known, unknown); the tests check the bounds with it.
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.known.len(), inner.unknown.len())
    }
}

/// One participant's budget of node lookups (a token bucket): a participant sending trades from
/// ever new accounts gets `Busy` refusals, and the node only its share of lookups. Kept per
/// participant, not per connection, so that reconnecting does not refill it.
#[derive(Debug)]
pub(crate) struct LookupBudget {
    interval: Duration,
    tolerance: Duration,
    /// When the bucket is full again (GCRA's theoretical arrival time).
    full_at: Option<Instant>,
}

impl LookupBudget {
    pub(crate) fn new(per_s: u32, burst: u32) -> LookupBudget {
        let interval = Duration::from_secs(1) / per_s.max(1);
        LookupBudget {
            interval,
            tolerance: interval * burst.max(1),
            full_at: None,
        }
    }

    /// Takes one lookup at `now`, or says none is left.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        let start = self.full_at.map_or(now, |at| at.max(now));
        let next = start + self.interval;
        if next.saturating_duration_since(now) > self.tolerance {
            return false;
        }
        self.full_at = Some(next);
        true
    }
}

/// The connection tasks' part (shared by all of them).
pub(crate) struct TradeChecker {
    node: Arc<NodeLink>,
    accounts: Arc<AccountCache>,
    /// Each participant's lookup budget (at most one entry per configured participant).
    budgets: Mutex<BTreeMap<u32, LookupBudget>>,
}

impl TradeChecker {
    pub(crate) fn new(node: Arc<NodeLink>, accounts: Arc<AccountCache>) -> TradeChecker {
        TradeChecker {
            node,
            accounts,
            budgets: Mutex::new(BTreeMap::new()),
        }
    }

    /// Takes one node lookup from `participant`'s budget.
    fn take_lookup(&self, participant: u32) -> bool {
        self.budgets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(participant)
            .or_insert_with(|| LookupBudget::new(LOOKUPS_PER_S, LOOKUP_BURST))
            .take(Instant::now())
    }

    /// The source's state, from the cache or (within the participant's budget) the node.
    async fn source(&self, participant: u32, account: u64) -> Result<AccountState, Refusal> {
        match self.accounts.state(account) {
            AccountState::Forgotten => {}
            known_or_unknown => return Ok(known_or_unknown),
        }
        if !self.take_lookup(participant) {
            return Err((
                NoticeCode::Busy,
                format!(
                    "account {account} is not known to the gateway and participant \
                     {participant} has used its {LOOKUPS_PER_S} node lookups a second (bursts \
                     of {LOOKUP_BURST}); send the trade again shortly"
                ),
            ));
        }
        self.look_up(account).await
    }

    /// Reads `account` from the node into the cache (again when a block was published during
    /// the read) and returns its state.
    async fn look_up(&self, account: u64) -> Result<AccountState, Refusal> {
        for _ in 0..LOOKUP_ROUNDS {
            let read_at = self.accounts.height();
            let facts = self
                .node
                .account(account)
                .await
                .map_err(|error| busy(account, error))?;
            if self.accounts.record(account, read_at, facts) {
                return Ok(self.accounts.state(account));
            }
        }
        Err((
            NoticeCode::Busy,
            format!(
                "account {account}: blocks were published during each lookup; send the trade again"
            ),
        ))
    }

    /// Admission's advisory funds check (see the module documentation): refuses only on a
    /// balance read at the last published block; a trade the cached balance does not cover is
    /// read again first, and one that cannot be read again now is let through.
    async fn check_funds(
        &self,
        participant: u32,
        signed: &SignedTransaction,
    ) -> Result<(), Refusal> {
        let Some((asset, asked)) = engine::debit(&signed.transaction.operation) else {
            return Ok(());
        };
        let account = signed.transaction.source.0;
        let covered = |balance: Option<(u64, bool)>| match balance {
            Some((balance, _)) if asked <= balance => Some(true),
            Some((_, true)) => Some(false),
            _ => None,
        };
        let mut balance = self.accounts.balance(account, asset);
        if covered(balance).is_none() {
            if !self.take_lookup(participant) || self.look_up(account).await.is_err() {
                return Ok(()); // advisory: the block rule decides
            }
            balance = self.accounts.balance(account, asset);
        }
        match (covered(balance), balance) {
            (Some(false), Some((available, _))) => {
                engine::check_funds(&signed.transaction.operation, |_| available)
                    .map_err(|rejection| rejection_notice(rejection, account))
            }
            _ => Ok(()),
        }
    }

    /// The connection task's part: `Ok` with the signature's verdict when the trade decodes and
    /// its source's key could be read (the source may be unknown: the core's rule refuses it).
    pub(crate) async fn check(
        &self,
        participant: u32,
        transaction: &[u8],
    ) -> Result<Checked, Refusal> {
        let signed = SignedTransaction::decode(transaction)
            .map_err(|error| (NoticeCode::Refused, format!("not a transaction: {error}")))?;
        let account = signed.transaction.source.0;
        let (signature_ok, view) = match self.source(participant, account).await? {
            AccountState::Known(view) => (signature_ok(&signed, view.key.as_ref()), Some(view)),
            AccountState::Unknown | AccountState::Forgotten => (false, None),
        };
        // The funds check follows the rule, as at the node: only for what the rule admits
        // (the core applies the rule again, against the view at that moment).
        if engine::admit_source(&signed, view, |_| signature_ok).is_ok() {
            self.check_funds(participant, &signed).await?;
        }
        Ok(Checked {
            signed,
            signature_ok,
        })
    }
}

fn busy(account: u64, error: NodeLinkError) -> Refusal {
    (
        NoticeCode::Busy,
        format!(
            "the gateway could not read account {account} from the node ({error}); send the \
             trade again"
        ),
    )
}

/// The Notice for a refusal by the admission rule.
pub(crate) fn rejection_notice(rejection: Rejection, account: u64) -> Refusal {
    let code = match rejection {
        Rejection::UnknownSource => NoticeCode::UnknownSource,
        Rejection::BadSignature => NoticeCode::BadSignature,
        Rejection::Replayed { .. } => NoticeCode::Replayed,
        Rejection::SequenceOutOfWindow { .. } => NoticeCode::SequenceOutOfWindow,
        Rejection::InsufficientBalance { .. } => NoticeCode::InsufficientBalance,
        Rejection::Malformed | Rejection::Payments(_) => NoticeCode::Refused,
    };
    let text = match rejection {
        Rejection::UnknownSource => format!(
            "account {account} does not exist at the last published block; a new account can \
             trade once the block creating it is published"
        ),
        other => format!("account {account}: {other}"),
    };
    (code, text)
}

/// The core's part: the admission rule against the account's view as of the last published
/// block, then one transaction per (source, sequence) waiting (`waiting`: the buffer's and the
/// in-flight block's). `Ok` when the trade may be buffered.
pub(crate) fn admit(
    checked: &Checked,
    state: AccountState,
    waiting: &BTreeSet<(u64, u64)>,
) -> Result<(), Refusal> {
    let account = checked.signed.transaction.source.0;
    let view = match state {
        AccountState::Known(view) => Some(view),
        AccountState::Unknown => None,
        AccountState::Forgotten => {
            return Err((
                NoticeCode::Busy,
                format!(
                    "account {account} was forgotten by the gateway's cache; send the trade again"
                ),
            ))
        }
    };
    engine::admit_source(&checked.signed, view, |_| checked.signature_ok)
        .map_err(|rejection| rejection_notice(rejection, account))?;
    let slot = (account, checked.signed.transaction.sequence);
    if waiting.contains(&slot) {
        return Err((
            NoticeCode::Duplicate,
            format!(
                "account {account} already has a transaction with sequence {} waiting for a \
                 block (a copy, or another transaction reusing the number)",
                slot.1
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::{AccountId, AssetId, Operation, Transaction};

    fn signed(key: &walras_crypto::Keypair) -> SignedTransaction {
        let transaction = Transaction {
            source: AccountId(3),
            sequence: 1,
            operation: Operation::Payment {
                to: AccountId(4),
                asset: AssetId(0),
                amount: 5,
            },
        };
        let signature = *key.sign(&transaction.encode()).as_bytes();
        SignedTransaction {
            transaction,
            signature,
        }
    }

    #[test]
    fn only_the_source_accounts_signature_over_the_transaction_is_accepted() {
        let owner = walras_crypto::Keypair::from_seed([1; 32]);
        let other = walras_crypto::Keypair::from_seed([2; 32]);
        let good = signed(&owner);
        assert!(signature_ok(&good, Some(&owner.public_key())));
        assert!(!signature_ok(&good, Some(&other.public_key())));
        assert!(!signature_ok(&good, None));
        let mut tampered = good;
        if let Operation::Payment { amount, .. } = &mut tampered.transaction.operation {
            *amount = 6;
        }
        assert!(!signature_ok(&tampered, Some(&owner.public_key())));
        let mut flipped = good;
        flipped.signature[10] ^= 1;
        assert!(!signature_ok(&flipped, Some(&owner.public_key())));
    }

    fn facts(key: &walras_crypto::Keypair, last_sequence: u64) -> Option<AccountFacts> {
        Some(AccountFacts {
            key: Some(key.public_key()),
            last_sequence,
            balances: vec![(AssetId(0), 100)],
        })
    }

    fn with_sequence(key: &walras_crypto::Keypair, sequence: u64) -> Checked {
        let mut transaction = signed(key).transaction;
        transaction.sequence = sequence;
        let signature = *key.sign(&transaction.encode()).as_bytes();
        let signed = SignedTransaction {
            transaction,
            signature,
        };
        Checked {
            signature_ok: signature_ok(&signed, Some(&key.public_key())),
            signed,
        }
    }

    fn code(result: Result<(), Refusal>) -> Option<NoticeCode> {
        result.err().map(|(code, _)| code)
    }

    /// Issue 26, item 8, at the rule: the gateway sealed 20,000 copies of an already used
    /// signed transaction (the node answers `409 replayed`) and 513 copies of a fresh one (the
    /// block filter then dropped the original too). The node's rule now decides before the
    /// buffer: a used sequence number is `Replayed`, a second transaction on a waiting (source,
    /// sequence) is a `Duplicate`, and a block's accepted transactions make their numbers used.
    #[test]
    fn copies_and_replays_of_a_signed_transaction_are_refused_by_the_nodes_rule() {
        let owner = walras_crypto::Keypair::from_seed([1; 32]);
        let cache = AccountCache::new(8, 8);
        cache.note_block(10, &[], false);
        assert!(cache.record(3, 10, facts(&owner, 4)));
        let mut waiting = BTreeSet::new();
        let used = with_sequence(&owner, 4);
        assert_eq!(
            code(admit(&used, cache.state(3), &waiting)),
            Some(NoticeCode::Replayed)
        );
        let fresh = with_sequence(&owner, 5);
        assert_eq!(code(admit(&fresh, cache.state(3), &waiting)), None);
        waiting.insert((3, 5));
        assert_eq!(
            code(admit(&fresh, cache.state(3), &waiting)),
            Some(NoticeCode::Duplicate)
        );
        let far = with_sequence(&owner, 5 + walras_types::transaction::SEQUENCE_WINDOW);
        assert_eq!(
            code(admit(&far, cache.state(3), &waiting)),
            Some(NoticeCode::SequenceOutOfWindow)
        );
        let mut forged = with_sequence(&owner, 6);
        forged.signature_ok = false;
        assert_eq!(
            code(admit(&forged, cache.state(3), &waiting)),
            Some(NoticeCode::BadSignature)
        );
        // Block 11 commits sequence 5: it is used now, and 6 is next.
        cache.note_block(11, &[(3, 5)], false);
        waiting.remove(&(3, 5));
        assert_eq!(
            code(admit(&fresh, cache.state(3), &waiting)),
            Some(NoticeCode::Replayed)
        );
        assert_eq!(
            code(admit(&with_sequence(&owner, 6), cache.state(3), &waiting)),
            None
        );
    }

    #[test]
    fn a_lookup_overtaken_by_a_block_is_not_recorded_and_unknown_accounts_are_remembered_until_accounts_are_created(
    ) {
        let owner = walras_crypto::Keypair::from_seed([1; 32]);
        let cache = AccountCache::new(8, 8);
        cache.note_block(5, &[], false);
        assert!(
            !cache.record(3, 4, facts(&owner, 0)),
            "read before block 5 was published"
        );
        assert_eq!(cache.state(3), AccountState::Forgotten);
        assert!(cache.record(9, 5, None));
        assert_eq!(cache.state(9), AccountState::Unknown);
        let ghost = with_sequence(&owner, 1);
        let mut ghost = ghost;
        ghost.signed.transaction.source = walras_types::AccountId(9);
        assert_eq!(
            code(admit(&ghost, cache.state(9), &BTreeSet::new())),
            Some(NoticeCode::UnknownSource)
        );
        cache.note_block(6, &[], false);
        assert_eq!(cache.state(9), AccountState::Unknown);
        cache.note_block(7, &[], true);
        assert_eq!(
            cache.state(9),
            AccountState::Forgotten,
            "a block created accounts"
        );
    }

    #[test]
    fn the_cache_is_bounded_and_forgets_the_least_recently_used() {
        let owner = walras_crypto::Keypair::from_seed([1; 32]);
        let cache = AccountCache::new(2, 2);
        assert!(cache.record(1, 0, facts(&owner, 0)));
        assert!(cache.record(2, 0, facts(&owner, 0)));
        assert!(matches!(cache.state(1), AccountState::Known(_)));
        assert!(cache.record(3, 0, facts(&owner, 0)));
        assert_eq!(cache.state(2), AccountState::Forgotten);
        assert!(matches!(cache.state(1), AccountState::Known(_)));
        for unknown in 10..20 {
            assert!(cache.record(unknown, 0, None));
        }
        let (known, unknown) = cache.len();
        assert!(known <= 2 && unknown <= 2, "{known} {unknown}");
    }

    #[test]
    fn a_connection_gets_its_burst_of_lookups_then_its_rate() {
        let mut budget = LookupBudget::new(100, 5);
        let start = Instant::now();
        let taken = (0..20).filter(|_| budget.take(start)).count();
        assert_eq!(taken, 5);
        assert!(budget.take(start + Duration::from_millis(10)));
        assert!(!budget.take(start + Duration::from_millis(10)));
    }

    /// The funds check's view of the cache: a balance read at the last published block is
    /// fresh; once a block is published it is not (credits may have arrived), until read again.
    #[test]
    fn a_cached_balance_is_fresh_only_for_the_block_it_was_read_at() {
        let owner = walras_crypto::Keypair::from_seed([1; 32]);
        let cache = AccountCache::new(8, 8);
        cache.note_block(3, &[], false);
        assert_eq!(cache.balance(3, AssetId(0)), None);
        assert!(cache.record(3, 3, facts(&owner, 0)));
        assert_eq!(cache.balance(3, AssetId(0)), Some((100, true)));
        assert_eq!(cache.balance(3, AssetId(1)), Some((0, true)));
        cache.note_block(4, &[(3, 1)], false);
        assert_eq!(cache.balance(3, AssetId(0)), Some((100, false)));
        let mut richer = facts(&owner, 1).unwrap();
        richer.balances = vec![(AssetId(0), 250)];
        assert!(cache.record(3, 4, Some(richer)));
        assert_eq!(cache.balance(3, AssetId(0)), Some((250, true)));
        assert_eq!(
            cache.state(3),
            AccountState::Known(SourceView {
                key: Some(owner.public_key()),
                last_sequence: 1,
            })
        );
    }
}
