//! The ABCI++ application (CometBFT 0.38): the exchange as a replicated state machine.
//!
//! | call | what it does here |
//! |---|---|
//! | `CheckTx` | the mempool's admission checks against the committed state, cheapest first: decodes, CometBFT's pending set within what commits in the commit bound (the node's overload rule, [`crate::overload`]: refused `OVERLOADED` before any signature is checked), known source, sequence window, signature (skipped on a recheck, since keys never change, and for what this node's API admitted, since admission verified it); a recheck after each block also drops what has pended too long to commit within the bound (`EXPIRED`) |
//! | `PrepareProposal` | takes CometBFT's transactions up to the byte and count limits, runs clearing (tâtonnement and LP) on them without changing the state, and puts the clearing header in front ([`walras_api::proposal`]) |
//! | `ProcessProposal` | checks the proposal exactly, as a follower checks a block (conservation, limit prices, the last offers, height, previous header, transactions root, signatures), without running tâtonnement and without changing the state; rejects what fails |
//! | `FinalizeBlock` | executes the decided block, reusing ProcessProposal's check of it when it is the block this node accepted last; the app hash is the new state root |
//! | `Commit` | appends the block to the store (synchronous), then reports it: tip, events, metrics, this node's mempool |
//! | `Info` | the last stored height and its state root, so CometBFT replays only what the store lacks |
//! | `Query` | `/status` and `/accounts/{id}` as JSON |
//!
//! Walras heights are CometBFT heights: every CometBFT block is one Walras block (possibly
//! with no transactions). A decided block that fails to execute, or a store that cannot
//! commit, stops the node: it cannot continue without diverging, and both CometBFT's block
//! store and ours survive the stop, so a restart replays from where the store is.
//!
//! Calls CometBFT never makes in that order are refused, logged, with nothing changed and the
//! node left running: a `Commit` with no finalized block, a `FinalizeBlock` while another
//! awaits its `Commit`, for a height other than the next, or of bytes that are no Walras block
//! (a proposal that does not decode is rejected by every honest ProcessProposal, so it cannot
//! be decided). Any process that reaches the ABCI port could otherwise stop the validator with
//! a 5-byte `Commit`. The answer is the empty response of the call (the ABCI library has no
//! error reply), which CometBFT itself would treat as a failure.

use crate::node::{publish_block, record_state_gauges, BlockTimings, Shared, StateCounts};
use bytes::Bytes;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{
    response_process_proposal::ProposalStatus, CheckTxType, ExecTxResult, RequestCheckTx,
    RequestFinalizeBlock, RequestInfo, RequestInitChain, RequestPrepareProposal,
    RequestProcessProposal, RequestQuery, ResponseCheckTx, ResponseCommit, ResponseFinalizeBlock,
    ResponseInfo, ResponseInitChain, ResponsePrepareProposal, ResponseProcessProposal,
    ResponseQuery,
};
use walras_api::proposal;
use walras_crypto::{Hash, Signature};
use walras_engine::transaction_hash;
use walras_engine::{self as engine, Rejection};
use walras_engine::{Block, BlockOutcome, CheckedBlock, EngineConfig, EngineError, ExchangeState};
use walras_types::{AccountId, SignedTransaction};

/// The codespace of every non-zero code this application returns.
pub const CODESPACE: &str = "walras";

/// Below this many transactions an entry's admission runs on the calling thread: a single
/// transaction, or a small bundle, is not worth the pool's hand-off.
const ADMIT_SERIAL_BELOW: usize = 32;

/// How CheckTx treats one transaction's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SignatureCheck {
    /// Verified before: this node's API admitted the transaction, or this is a recheck (keys
    /// never change, so a signature once verified stays valid).
    VerifiedBefore,
    /// Checked with its entry: the acceptance rule's verdict.
    Checked(bool),
    /// Not checked with its entry (refused before its signature, or its key or signature could
    /// not be read then): the rule decides it alone.
    Unchecked,
}

/// The signatures of an entry's transactions in CheckTx: a recheck's, or a new entry's with
/// each one's [`SignatureCheck`].
#[derive(Clone, Copy, Debug)]
enum Checks<'a> {
    Recheck,
    New(&'a [SignatureCheck]),
}

impl Checks<'_> {
    fn signature(&self, at: usize) -> SignatureCheck {
        match self {
            Checks::Recheck => SignatureCheck::VerifiedBefore,
            Checks::New(checks) => checks[at],
        }
    }
}

/// How far past the admission limit CheckTx still takes new entries. Every entry reaches
/// CheckTx after a node's HTTP admission took its transactions under the limit, counting the
/// network's pending set as its own CheckTx holds it; CheckTx is the backstop, not the edge.
/// Trigger: with the limit itself, peers refused 42,000-54,000 transactions of node 0's
/// bundles at 3x on 16 cores (their pending sets were full a moment before node 0's); only
/// node 0 could then propose them, one height in four, and 47,000 expired.
const GOSSIP_SLACK: usize = 2;

/// Blocks' worth of transactions pending while the network keeps up: the one being decided
/// and the one filling.
const PIPELINE_BLOCKS: usize = 2;

/// The span over which the commit rate is measured: several of CometBFT's blocks.
const RATE_WINDOW: Duration = Duration::from_secs(3);

/// Codes of CheckTx and of transaction results. Stable: clients may match on them.
pub mod code {
    pub const OK: u32 = 0;
    pub const MALFORMED: u32 = 1;
    pub const UNKNOWN_ACCOUNT: u32 = 2;
    pub const BAD_SIGNATURE: u32 = 3;
    pub const REPLAYED: u32 = 4;
    pub const SEQUENCE_OUT_OF_WINDOW: u32 = 5;
    /// A payments deposit or withdrawal the bridge refuses (the log names why).
    pub const PAYMENTS: u32 = 6;
    /// CometBFT's pending transactions already take the commit bound at the measured commit
    /// rate (the node's `mempool_full` rule): retry later. Answered before any signature check.
    pub const OVERLOADED: u32 = 7;
    /// On a recheck: the transaction has pended so long that its block would commit it after
    /// the commit bound; it is dropped from the mempool rather than committed late.
    pub const EXPIRED: u32 = 8;
    /// Admission's advisory funds check: the transaction debits more than its source holds
    /// at the last committed block (the log says how much of which asset).
    pub const INSUFFICIENT_BALANCE: u32 = 9;
    /// In a block: the transaction was dropped by the block filter (the log names why).
    pub const DROPPED: u32 = 20;

    /// The `CheckTx` code of a refusal by the admission rule.
    pub fn of(rejection: super::Rejection) -> u32 {
        use super::Rejection;
        match rejection {
            Rejection::Malformed => MALFORMED,
            Rejection::UnknownSource => UNKNOWN_ACCOUNT,
            Rejection::BadSignature => BAD_SIGNATURE,
            Rejection::Replayed { .. } => REPLAYED,
            Rejection::SequenceOutOfWindow { .. } => SEQUENCE_OUT_OF_WINDOW,
            Rejection::Payments(_) => PAYMENTS,
            Rejection::InsufficientBalance { .. } => INSUFFICIENT_BALANCE,
        }
    }
}

/// How the application executes blocks.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Clearing on the proposer: a wall-clock limit is fine, the header carries the result.
    pub proposer: EngineConfig,
    /// Checking and executing decided blocks: every signature is verified.
    pub follower: EngineConfig,
    /// Most transactions in one block.
    pub max_block_txs: usize,
}

/// The application; CometBFT's four connections each get a clone.
#[derive(Clone)]
pub struct WalrasApp {
    shared: Arc<Shared>,
    config: Arc<AppConfig>,
    /// The last proposal ProcessProposal accepted (CometBFT's block hash and the check), so
    /// FinalizeBlock of that block does not check it, and verify its signatures, again.
    checked: Arc<Mutex<Option<(Bytes, CheckedBlock)>>>,
    /// The block FinalizeBlock executed, waiting for Commit to store it.
    decided: Arc<Mutex<Option<Decided>>>,
    /// What CometBFT's mempool holds, as far as CheckTx saw it: kept so that its size obeys
    /// the overload rule and what ages past the bound is dropped on recheck.
    pending: Arc<Mutex<PendingSet>>,
}

/// The transactions CheckTx admitted (first seen) and no block has committed yet, with when
/// each was first admitted, and the interval between the last two commits.
#[derive(Default)]
struct PendingSet {
    since: std::collections::HashMap<Hash, Instant>,
    /// The interval between the last two commits.
    block_interval: Duration,
    /// The commits of the last [`RATE_WINDOW`] (instant, transactions), oldest first.
    recent_commits: std::collections::VecDeque<(Instant, usize)>,
}

impl PendingSet {
    /// Forgets the block's transactions and what has pended longer than `forget_after`
    /// (CometBFT dropped it without telling: its own size limit, or a peer's block); records
    /// the commit, and answers the commit rate over the last [`RATE_WINDOW`] once two commits
    /// are known.
    fn committed(&mut self, hashes: &[Hash], now: Instant, forget_after: Duration) -> Option<f64> {
        for hash in hashes {
            self.since.remove(hash);
        }
        self.since
            .retain(|_, since| now.saturating_duration_since(*since) <= forget_after);
        if let Some((last, _)) = self.recent_commits.back() {
            self.block_interval = now.saturating_duration_since(*last);
        }
        self.windowed_rate(hashes.len(), now)
    }

    /// Whether two commits are known (so `block_interval` is one).
    fn has_interval(&self) -> bool {
        self.recent_commits.len() >= 2
    }

    /// Records a commit of `transactions` at `now`; the commit rate over the last
    /// [`RATE_WINDOW`] (at least two commits), once two commits are known.
    fn windowed_rate(&mut self, transactions: usize, now: Instant) -> Option<f64> {
        self.recent_commits.push_back((now, transactions));
        while self.recent_commits.len() > 2
            && self
                .recent_commits
                .get(1)
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= RATE_WINDOW)
        {
            self.recent_commits.pop_front();
        }
        let (oldest, _) = *self.recent_commits.front()?;
        let span = now.saturating_duration_since(oldest);
        let committed: usize = self.recent_commits.iter().skip(1).map(|(_, n)| n).sum();
        (span > Duration::ZERO && committed > 0).then(|| committed as f64 / span.as_secs_f64())
    }

    /// Whether a transaction first admitted at `since` would commit after `bound` if it waits
    /// for the next block (the last interval between commits, with half again as margin).
    fn too_old(&self, since: Instant, now: Instant, bound: Duration) -> bool {
        let next_block = self.block_interval.mul_f64(1.5);
        now.saturating_duration_since(since) + next_block > bound
    }
}

struct Decided {
    block: Block,
    outcome: BlockOutcome,
    hashes: Vec<Hash>,
    execute: Duration,
}

impl WalrasApp {
    pub fn new(shared: Arc<Shared>, mut config: AppConfig) -> WalrasApp {
        // What CheckTx (and this node's HTTP admission) accepted is not verified again when a
        // proposal holding it is checked: a verdict is a pure function of (message, key,
        // signature), so a recorded acceptance is what verification would answer.
        config.follower.accepted_signatures = Some(shared.accepted_signatures.clone());
        config.proposer.accepted_signatures = Some(shared.accepted_signatures.clone());
        shared
            .record_admitted_verdicts
            .store(true, std::sync::atomic::Ordering::Relaxed);
        WalrasApp {
            shared,
            config: Arc::new(config),
            checked: Arc::new(Mutex::new(None)),
            decided: Arc::new(Mutex::new(None)),
            pending: Arc::new(Mutex::new(PendingSet::default())),
        }
    }

    /// How many signature checks were answered from the node's record of accepted verdicts
    /// so far (each one a verification not repeated).
    pub fn signature_checks_saved(&self) -> u64 {
        self.shared.accepted_signatures.found()
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, PendingSet> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The overload rule of CheckTx for a new entry, before anything costly: when CometBFT's
    /// pending set cannot take the entry's transactions it does not already hold (and this
    /// node's API did not admit) and still commit them within the bound, the whole entry is
    /// `OVERLOADED`.
    fn admit_in_time(&self, hashes: &[Hash]) -> Result<(), (u32, String)> {
        let overload = self.shared.overload().clone();
        // This node's API admitted them under the same rule (its own mempool's count): not
        // refused a second time for the same load.
        let forwarded: Vec<bool> = {
            let mempool = self.shared.mempool();
            hashes.iter().map(|hash| mempool.contains(hash)).collect()
        };
        let pending = self.pending();
        let new = hashes
            .iter()
            .zip(&forwarded)
            .filter(|(hash, forwarded)| !**forwarded && !pending.since.contains_key(*hash))
            .count();
        if new == 0 {
            return Ok(());
        }
        if let (_, Some(full)) = overload.room_with_slack(GOSSIP_SLACK, pending.since.len(), new) {
            self.shared.metrics.count_rejected_many("mempool_full", new);
            return Err((
                code::OVERLOADED,
                format!("mempool_full: {}", full.message()),
            ));
        }
        Ok(())
    }

    /// A recheck after a block: each of the entry's transactions that has pended too long to
    /// commit within the bound is `EXPIRED` (and forgotten), each of the rest is judged
    /// against the new state (signatures are not checked again: keys never change). The
    /// entry stays while one of its transactions passes; the engine's filter drops the others
    /// if it is proposed.
    fn recheck(
        &self,
        transactions: &[SignedTransaction],
        hashes: &[Hash],
    ) -> Result<(), (u32, String)> {
        let now = Instant::now();
        let bound = self.shared.overload().commit_bound;
        let mut expired = Vec::new();
        let live: Vec<bool> = {
            let mut pending = self.pending();
            hashes
                .iter()
                .map(|hash| {
                    let since = pending.since.get(hash).copied();
                    match since.filter(|since| pending.too_old(*since, now, bound)) {
                        Some(since) => {
                            pending.since.remove(hash);
                            expired.push(now.saturating_duration_since(since));
                            false
                        }
                        None => true,
                    }
                })
                .collect()
        };
        if !expired.is_empty() {
            self.shared.metrics.count_shed("expired", expired.len());
        }
        let verdicts = self.admit_each(transactions, &live, Checks::Recheck);
        let mut refusal = expired.first().map(|pended| {
            (
                code::EXPIRED,
                format!(
                    "expired: pending for {} ms, its block would commit it after the \
                     commit bound of {} ms",
                    pended.as_millis(),
                    bound.as_millis()
                ),
            )
        });
        let mut kept = 0usize;
        let mut pending = self.pending();
        for (hash, verdict) in hashes.iter().zip(verdicts) {
            match verdict {
                Some(Ok(())) => {
                    kept += 1;
                    pending.since.entry(*hash).or_insert(now);
                }
                Some(Err(why)) => {
                    pending.since.remove(hash);
                    refusal.get_or_insert(why);
                }
                None => {}
            }
        }
        self.publish_pending(&pending);
        drop(pending);
        match (kept, refusal) {
            (0, Some(why)) => Err(why),
            _ => Ok(()),
        }
    }

    /// Stops the process: a decided block this node cannot execute or store leaves it no
    /// safe way on. CometBFT (a child that dies with us) and the store both keep what they
    /// committed; a restart resumes from there.
    fn halt(&self, message: &str) -> ! {
        tracing::error!("{message}; stopping this node (a restart replays from the store)");
        std::process::exit(3);
    }

    /// Refuses a call CometBFT never makes in this order: logged, nothing changed.
    fn refuse(&self, call: &str, why: &str) {
        tracing::warn!("refused an out-of-protocol ABCI {call}: {why}; nothing changed");
    }

    /// Why a FinalizeBlock at `height` is out of protocol, if it is.
    fn finalize_out_of_protocol(&self, height: i64) -> Option<String> {
        if self
            .decided
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Some("the block finalized before it awaits its Commit".into());
        }
        let next = self.state().height() + 1;
        (height != next as i64).then(|| format!("height {height}, but the next is {next}"))
    }

    fn state(&self) -> tokio::sync::RwLockReadGuard<'_, ExchangeState> {
        self.shared.state.blocking_read()
    }

    /// The admission checks of CheckTx for one entry (a transaction or a bundle); `Err((code,
    /// message))` when refused. A new entry is taken only if every transaction in it passes
    /// (the forwarder bundles only what this node's API admitted, so an honest bundle does);
    /// its transactions then join the pending set, and one that fails leaves it. A recheck:
    /// see [`WalrasApp::recheck`].
    fn admit(&self, entry: &[u8], recheck: bool) -> Result<(), (u32, String)> {
        let transactions = proposal::decode_entry(entry)
            .map_err(|error| (code::MALFORMED, format!("transaction: {error}")))?;
        let hashes: Vec<Hash> = transactions.iter().map(transaction_hash).collect();
        if recheck {
            return self.recheck(&transactions, &hashes);
        }
        self.admit_in_time(&hashes)?;
        let all = vec![true; transactions.len()];
        let signatures = self.entry_signature_verdicts(&transactions, &hashes);
        let verdicts = self.admit_each(&transactions, &all, Checks::New(&signatures));
        let now = Instant::now();
        let mut refusal = None;
        let mut pending = self.pending();
        for (hash, verdict) in hashes.iter().zip(&verdicts) {
            if let Some(Err(why)) = verdict {
                pending.since.remove(hash);
                refusal.get_or_insert_with(|| why.clone());
            }
        }
        if let Some(why) = refusal {
            self.publish_pending(&pending);
            return Err(why);
        }
        for hash in &hashes {
            pending.since.entry(*hash).or_insert(now);
        }
        self.publish_pending(&pending);
        Ok(())
    }

    /// Tells admission how many transactions CometBFT's mempool holds (see
    /// `Shared::replicated_pending`).
    fn publish_pending(&self, pending: &PendingSet) {
        self.shared
            .replicated_pending
            .store(pending.since.len(), std::sync::atomic::Ordering::Relaxed);
    }

    /// [`WalrasApp::admit_decoded`] for each transaction whose `wanted` flag is set (`None`
    /// for the others), on the engine's threads when there are many: a bundle from a peer
    /// carries hundreds whose signatures this node has not seen.
    fn admit_each(
        &self,
        transactions: &[SignedTransaction],
        wanted: &[bool],
        checks: Checks<'_>,
    ) -> Vec<Option<Result<(), (u32, String)>>> {
        let items: Vec<(usize, &SignedTransaction, bool)> = transactions
            .iter()
            .zip(wanted)
            .enumerate()
            .map(|(at, (signed, wanted))| (at, signed, *wanted))
            .collect();
        walras_par::map_in_order(
            &items,
            self.config.follower.threads,
            ADMIT_SERIAL_BELOW,
            |(at, signed, wanted)| {
                wanted.then(|| self.admit_decoded(signed, checks.signature(*at)))
            },
        )
    }

    /// Per transaction of a new entry, its signature's verdict under the acceptance rule,
    /// checked for the whole entry at once: in batches on the engine's threads
    /// ([`walras_crypto::AcceptedSignatures::verify_each_parallel`], whose every verdict is the
    /// one a check alone gives) and recorded, so that ProcessProposal finds it. A bundle from
    /// a peer carries hundreds of signatures this node has not seen, and checked one by one
    /// they were most of a validator's CPU (a localnet on 2 cores, `perf`: 73% of a follower's
    /// samples in single verification). [`SignatureCheck::VerifiedBefore`] where this node's
    /// API admitted the transaction (it verified the signature); [`SignatureCheck::Unchecked`]
    /// where the rule refuses it before its signature, or no key or no signature could be read
    /// (the rule decides those alone, as before).
    fn entry_signature_verdicts(
        &self,
        transactions: &[SignedTransaction],
        hashes: &[Hash],
    ) -> Vec<SignatureCheck> {
        let admitted: Vec<bool> = {
            let mempool = self.shared.mempool();
            hashes.iter().map(|hash| mempool.contains(hash)).collect()
        };
        let view = self.shared.accounts.load();
        let mut checks = Vec::with_capacity(transactions.len());
        let mut to_verify = Vec::new();
        for (at, (signed, admitted)) in transactions.iter().zip(&admitted).enumerate() {
            let source = view.source(signed.transaction.source);
            // Cheapest first, as the rule itself: a transaction its cheaper checks refuse
            // (malformed, unknown source, a used or out-of-window sequence number) costs no
            // signature check here either. Otherwise re-gossiped old transactions would buy a
            // verification each.
            let worth_checking = engine::admit_source(signed, source, |_| true).is_ok();
            let key = source.and_then(|source| source.key);
            let signature = Signature::from_bytes(&signed.signature).ok();
            match (admitted, worth_checking, key, signature) {
                (true, ..) => checks.push(SignatureCheck::VerifiedBefore),
                (false, true, Some(key), Some(signature)) => {
                    checks.push(SignatureCheck::Unchecked);
                    to_verify.push((at, signed.transaction.encode(), key, signature));
                }
                _ => checks.push(SignatureCheck::Unchecked),
            }
        }
        let items: Vec<walras_crypto::SignedItem<'_>> = to_verify
            .iter()
            .map(|(_, message, key, signature)| (message.as_slice(), key, signature))
            .collect();
        let verdicts = self
            .shared
            .accepted_signatures
            .verify_each_parallel(&items, self.config.follower.threads);
        for ((at, ..), accepted) in to_verify.iter().zip(verdicts) {
            checks[*at] = SignatureCheck::Checked(accepted);
        }
        checks
    }

    /// The admission rule for a decoded transaction, its signature as `signature` says.
    fn admit_decoded(
        &self,
        signed: &SignedTransaction,
        signature: SignatureCheck,
    ) -> Result<(), (u32, String)> {
        // The account view of the last committed block, as the HTTP API reads it.
        let view = self.shared.accounts.load();
        let source = view.source(signed.transaction.source);
        // Only a deposit or withdrawal reads the state: the bridge's checks (escrow, withdrawn
        // set, committee).
        let state = signed
            .transaction
            .operation
            .is_bridged()
            .then(|| self.state());
        let payments = state.as_ref().and_then(|state| state.payments());
        // The funds check against the view's balance alone: a transaction this node's API
        // admitted is in its mempool, and must not count against itself.
        let verdict = engine::admit(signed, source, payments, |key| match signature {
            SignatureCheck::VerifiedBefore => true,
            SignatureCheck::Checked(accepted) => accepted,
            SignatureCheck::Unchecked => self.signature_verifies(signed, key),
        })
        .and_then(|()| {
            let source = signed.transaction.source;
            engine::check_funds(&signed.transaction.operation, |asset| {
                view.balance(source, asset)
            })
        });
        drop(state);
        verdict.map_err(|rejection| {
            (
                code::of(rejection),
                format!("{}: {rejection}", rejection.code()),
            )
        })
    }

    /// The entries a proposal takes (and their transactions, bundles flattened): decodable,
    /// within the byte budget and the block's transaction count, in CometBFT's order, and no
    /// transaction twice. The same transaction can reach CometBFT's mempool in two bundles
    /// (a client that sent it to two nodes), and the engine drops every transaction of an
    /// account that uses a sequence number twice in a block: an entry's transactions already
    /// taken are left out of it (the entry is re-encoded with the rest; CometBFT's recheck
    /// then drops the original, whose transactions have all committed).
    fn select(&self, txs: Vec<Bytes>, budget_bytes: usize) -> (Vec<Bytes>, Vec<SignedTransaction>) {
        let mut seen: HashSet<Hash> = HashSet::with_capacity(txs.len());
        let mut raw = Vec::new();
        let mut decoded = Vec::new();
        let mut used_bytes = 0usize;
        for tx in txs {
            if decoded.len() >= self.config.max_block_txs {
                break;
            }
            let Ok(carried) = proposal::decode_entry(&tx) else {
                continue;
            };
            // Taken once, also within the entry: a bundle holding one transaction twice (which
            // a faulty or malicious peer can gossip) would otherwise get it dropped.
            let mut taken_here: HashSet<Hash> = HashSet::with_capacity(carried.len());
            let fresh: Vec<SignedTransaction> = carried
                .iter()
                .filter(|signed| {
                    let hash = transaction_hash(signed);
                    !seen.contains(&hash) && taken_here.insert(hash)
                })
                .copied()
                .collect();
            let entry = match fresh.as_slice() {
                [] => continue,
                _ if fresh.len() == carried.len() => tx,
                [single] => Bytes::from(single.encode()),
                _ => proposal::encode_bundle(&fresh),
            };
            if used_bytes + entry.len() > budget_bytes
                || decoded.len() + fresh.len() > self.config.max_block_txs
            {
                continue;
            }
            seen.extend(fresh.iter().map(transaction_hash));
            used_bytes += entry.len();
            raw.push(entry);
            decoded.extend(fresh);
        }
        (raw, decoded)
    }

    /// One result per CometBFT transaction of the block: the header's, then one per entry. An
    /// entry none of whose transactions was dropped is OK; a single transaction dropped, or a
    /// bundle all dropped, is `DROPPED`; a bundle partly dropped is OK with its dropped
    /// transactions named in the log (`index in the bundle: reason`).
    fn tx_results(
        &self,
        block: &Block,
        outcome: &BlockOutcome,
        entry_counts: &[usize],
    ) -> Vec<ExecTxResult> {
        let mut results = Vec::with_capacity(entry_counts.len() + 1);
        results.push(ExecTxResult {
            code: code::OK,
            info: "walras block header".into(),
            ..ExecTxResult::default()
        });
        let mut dropped = vec![None; block.transactions.len()];
        for (index, reason) in &outcome.dropped {
            if let Some(slot) = dropped.get_mut(*index as usize) {
                *slot = Some(*reason);
            }
        }
        let mut carried = dropped.as_slice();
        for count in entry_counts {
            let (entry, rest) = carried.split_at((*count).min(carried.len()));
            carried = rest;
            results.push(entry_result(entry));
        }
        debug_assert!(carried.is_empty());
        results
    }
}

/// The result of one entry from its transactions' drop reasons.
fn entry_result(dropped: &[Option<walras_engine::DropReason>]) -> ExecTxResult {
    let named: Vec<String> = dropped
        .iter()
        .enumerate()
        .filter_map(|(index, reason)| reason.map(|reason| format!("{index}: {}", reason.name())))
        .collect();
    match (named.len(), dropped) {
        (0, _) => ExecTxResult::default(),
        (_, [Some(reason)]) => ExecTxResult {
            code: code::DROPPED,
            log: reason.name().into(),
            codespace: CODESPACE.into(),
            ..ExecTxResult::default()
        },
        (count, _) => ExecTxResult {
            code: if count == dropped.len() {
                code::DROPPED
            } else {
                code::OK
            },
            log: format!("{count} of {} dropped: {}", dropped.len(), named.join(", ")),
            codespace: CODESPACE.into(),
            ..ExecTxResult::default()
        },
    }
}

impl Application for WalrasApp {
    fn info(&self, _request: RequestInfo) -> ResponseInfo {
        let tip = self.shared.tip();
        ResponseInfo {
            data: "walras".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            app_version: 1,
            last_block_height: tip.height as i64,
            last_block_app_hash: if tip.height == 0 {
                Bytes::new()
            } else {
                Bytes::copy_from_slice(tip.state_root.as_bytes())
            },
        }
    }

    fn init_chain(&self, request: RequestInitChain) -> ResponseInitChain {
        let height = self.state().height();
        if height != 0 {
            self.halt(&format!(
                "CometBFT asks to start a new chain but the store already holds {height} blocks: \
                 give this node a fresh data directory or its own CometBFT home back"
            ));
        }
        if request.initial_height > 1 {
            self.halt(&format!(
                "the CometBFT genesis starts at height {}; Walras heights are CometBFT heights \
                 and start at 1",
                request.initial_height
            ));
        }
        // The app hash stays empty: genesis.json has none either, and the first block's
        // execution commits to the genesis state through the state root.
        ResponseInitChain::default()
    }

    fn query(&self, request: RequestQuery) -> ResponseQuery {
        let tip = self.shared.tip();
        let answer = match request.path.as_str() {
            "/status" => Ok(serde_json::json!({
                "height": tip.height,
                "state_root": tip.state_root.to_string(),
                "block_hash": tip.block_hash.to_string(),
            })),
            path => match path.strip_prefix("/accounts/").map(str::parse::<u64>) {
                Some(Ok(id)) => {
                    let state = self.state();
                    match state.account(AccountId(id)) {
                        Some(account) => Ok(serde_json::json!({
                            "id": id,
                            "last_sequence": account.last_sequence,
                            "balances": account
                                .balances()
                                .iter()
                                .map(|(asset, amount)| (asset.0.to_string(), serde_json::Value::from(*amount)))
                                .collect::<serde_json::Map<String, serde_json::Value>>(),
                        })),
                        None => Err(format!("account {id} does not exist")),
                    }
                }
                _ => Err(format!(
                    "unknown query path {path:?}: use /status or /accounts/{{id}}"
                )),
            },
        };
        match answer {
            Ok(value) => ResponseQuery {
                value: Bytes::from(value.to_string()),
                height: tip.height as i64,
                ..ResponseQuery::default()
            },
            Err(message) => ResponseQuery {
                code: code::MALFORMED,
                log: message,
                codespace: CODESPACE.into(),
                height: tip.height as i64,
                ..ResponseQuery::default()
            },
        }
    }

    fn check_tx(&self, request: RequestCheckTx) -> ResponseCheckTx {
        let recheck = request.r#type == CheckTxType::Recheck as i32;
        match self.admit(&request.tx, recheck) {
            Ok(()) => ResponseCheckTx::default(),
            Err((code, log)) => ResponseCheckTx {
                code,
                log,
                codespace: CODESPACE.into(),
                ..ResponseCheckTx::default()
            },
        }
    }

    fn prepare_proposal(&self, request: RequestPrepareProposal) -> ResponsePrepareProposal {
        let state = self.state();
        let header_max = proposal::header_bytes_max(state.assets());
        let budget = (request.max_tx_bytes.max(0) as usize).saturating_sub(header_max);
        let (mut raw, transactions) = self.select(request.txs, budget);
        let started = Instant::now();
        let proposer = &self.config.proposer;
        let cleared = state
            .propose_header(&transactions, proposer)
            .or_else(|error| {
                tracing::warn!(
                    "clearing a proposal of {} transactions failed ({error}); \
                 proposing an empty block",
                    transactions.len()
                );
                raw.clear();
                state.propose_header(&[], proposer)
            });
        let Ok(header) = cleared else {
            // No header: every validator rejects the proposal and the round moves on.
            return ResponsePrepareProposal { txs: Vec::new() };
        };
        if header.height as i64 != request.height {
            tracing::warn!(
                "asked to propose height {} at state height {}",
                request.height,
                state.height()
            );
        }
        self.shared.metrics.count_proposal(started.elapsed());
        ResponsePrepareProposal {
            txs: proposal::encode(&header, &raw),
        }
    }

    fn process_proposal(&self, request: RequestProcessProposal) -> ResponseProcessProposal {
        let started = Instant::now();
        let verdict = proposal::decode(&request.txs, request.height)
            .map_err(|error| error.to_string())
            .and_then(|block| {
                self.state()
                    .check(&block, &self.config.follower)
                    .map_err(|error| error.to_string())
            });
        self.shared
            .metrics
            .proposal_check_micros_total
            .inc_by(started.elapsed().as_micros() as u64);
        let status = match verdict {
            Ok(checked) => {
                *self.checked.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((request.hash, checked));
                ProposalStatus::Accept
            }
            Err(reason) => {
                tracing::warn!(
                    "rejected the proposal for height {}: {reason}",
                    request.height
                );
                self.shared.metrics.count_rejected_proposal();
                ProposalStatus::Reject
            }
        };
        ResponseProcessProposal {
            status: status as i32,
        }
    }

    fn finalize_block(&self, request: RequestFinalizeBlock) -> ResponseFinalizeBlock {
        if let Some(why) = self.finalize_out_of_protocol(request.height) {
            self.refuse("FinalizeBlock", &why);
            return ResponseFinalizeBlock::default();
        }
        let (block, entry_counts) =
            match proposal::decode_with_entries(&request.txs, request.height) {
                Ok(decoded) => decoded,
                Err(error) => {
                    self.refuse(
                        "FinalizeBlock",
                        &format!("height {} is not a Walras block: {error}", request.height),
                    );
                    return ResponseFinalizeBlock::default();
                }
            };
        let started = Instant::now();
        let checked = self
            .checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .filter(|(hash, _)| *hash == request.hash)
            .map(|(_, checked)| checked);
        let outcome = {
            let mut state = self.shared.state.blocking_write();
            let follower = &self.config.follower;
            let applied = match checked {
                Some(checked) => match state.apply_checked(&block, checked, follower) {
                    Err(EngineError::StaleCheck) => state.apply_decided(&block, follower),
                    result => result,
                },
                None => state.apply_decided(&block, follower),
            };
            applied.unwrap_or_else(|error| {
                self.halt(&format!(
                    "the decided block at height {} does not execute: {error}",
                    request.height
                ))
            })
        };
        let executed = Block {
            header: outcome.header.clone(),
            transactions: block.transactions,
        };
        let response = ResponseFinalizeBlock {
            tx_results: self.tx_results(&executed, &outcome, &entry_counts),
            app_hash: Bytes::copy_from_slice(outcome.header.state_root.as_bytes()),
            ..ResponseFinalizeBlock::default()
        };
        let hashes = executed.transactions.iter().map(transaction_hash).collect();
        *self
            .decided
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Decided {
            block: executed,
            outcome,
            hashes,
            execute: started.elapsed(),
        });
        response
    }

    fn commit(&self) -> ResponseCommit {
        let decided = self
            .decided
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let Some(decided) = decided else {
            self.refuse("Commit", "no block was finalized since the last Commit");
            return ResponseCommit::default();
        };
        let started = Instant::now();
        // FinalizeBlock applied this block: the state is the one after it, to checkpoint.
        let appended = self.shared.store.append_with_results(
            &decided.block,
            &decided.outcome.dropped,
            decided.outcome.clearing.as_ref(),
            Some(&decided.outcome.fills),
            &self.state(),
        );
        if let Err(error) = appended {
            self.halt(&format!(
                "committing block {} to the store failed: {error}",
                decided.block.header.height
            ));
        }
        let persist = started.elapsed();
        self.record_commit(&decided.hashes);
        let batch: Vec<(Hash, SignedTransaction)> = decided
            .hashes
            .iter()
            .copied()
            .zip(decided.block.transactions.iter().copied())
            .collect();
        // The view and the counts from one read of the state after the block.
        let counts = {
            let state = self.state();
            self.shared.committed(&batch, &state);
            StateCounts::after_block(&self.shared, &state)
        };
        let timings = BlockTimings {
            execute: decided.execute,
            persist,
        };
        record_state_gauges(&self.shared, counts);
        publish_block(
            &self.shared,
            &decided.block,
            &decided.outcome,
            decided.hashes,
            &timings,
            counts,
        );
        ResponseCommit::default()
    }
}

impl WalrasApp {
    /// A block of `hashes` committed: they leave the pending set (with what CometBFT dropped
    /// silently, pending past twice the bound), and the block feeds the commit-rate estimate:
    /// the transactions committed over the last [`RATE_WINDOW`] (in replicated mode the
    /// cadence is CometBFT's, not this node's work). Trigger: one block over one commit
    /// interval, the rate followed CometBFT's uneven cadence (a large block after a short
    /// interval), and since a block that does not leave its size waiting can only raise the
    /// estimate, one such sample raised it for good: node 0 of a localnet on 16 cores admitted
    /// all of 160,000 offered at 20,000/s while the network committed 7,200/s, and 96,000
    /// expired.
    fn record_commit(&self, hashes: &[Hash]) {
        let now = Instant::now();
        let bound = self.shared.overload().commit_bound;
        let mut pending = self.pending();
        let rate = pending.committed(hashes, now, bound * 2);
        let left_waiting = pending.since.len();
        let cadence = pending.has_interval().then_some(pending.block_interval);
        self.publish_pending(&pending);
        drop(pending);
        if let Some(cadence) = cadence {
            self.shared.overload().pipeline = cadence;
        }
        // Saturated when more than the pipeline waits: in CometBFT mode one block is being
        // decided while the next fills, so a block's worth pending is the network keeping up
        // (counted as saturation, it kept the estimate at the offered rate and admission
        // refused a sixth of what a localnet at its capacity was offered).
        let saturated = left_waiting >= PIPELINE_BLOCKS * hashes.len();
        if let Some(rate) = rate.filter(|_| !hashes.is_empty()) {
            self.shared.record_drain_rate(rate, saturated);
        }
    }
}

impl WalrasApp {
    /// Whether `signed`'s signature verifies with `key` under the one acceptance rule, through
    /// the node's record of accepted verdicts (which this check adds to, so that ProcessProposal
    /// finds it there).
    fn signature_verifies(
        &self,
        signed: &SignedTransaction,
        key: &walras_crypto::PublicKey,
    ) -> bool {
        match Signature::from_bytes(&signed.signature) {
            Ok(signature) => {
                let message = signed.transaction.encode();
                let item = (message.as_slice(), key, &signature);
                self.shared
                    .accepted_signatures
                    .verify_each_parallel(std::slice::from_ref(&item), 1)
                    .first()
                    .copied()
                    .unwrap_or(false)
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trigger: the commit rate was one block over one commit interval, so a large block
    /// after a short interval (CometBFT's cadence is uneven) read as a rate many times the
    /// network's, which admission then kept (see [`WalrasApp::record_commit`]).
    #[test]
    fn the_commit_rate_is_measured_over_seconds_not_over_one_interval() {
        let start = Instant::now();
        let at = |millis: u64| start + Duration::from_millis(millis);
        let mut pending = PendingSet::default();
        assert_eq!(
            pending.windowed_rate(0, at(0)),
            None,
            "one commit: no interval yet"
        );
        let commits = [
            (1_000, 5_000),
            (1_100, 5_000),
            (2_000, 5_000),
            (3_000, 5_000),
        ];
        let rates: Vec<f64> = commits
            .iter()
            .map(|(millis, txs)| pending.windowed_rate(*txs, at(*millis)).unwrap())
            .collect();
        // One interval of 100 ms with 5,000 transactions would read 50,000/s.
        assert!(rates.iter().all(|rate| *rate <= 10_000.0), "{rates:?}");
        assert!((rates[3] - 20_000.0 / 3.0).abs() < 1.0, "{rates:?}");
        // Older commits leave the window: at 7 s only the last 3 s count.
        let later = pending.windowed_rate(3_000, at(7_000)).unwrap();
        assert!((later - 3_000.0 / 4.0).abs() < 1.0, "{later}");
    }
}
