//! The load generator's bookkeeping, free of networking: which accounts send next, what each
//! transaction does, which transactions are outstanding (sent, not yet in a block), what the
//! node answered, what the blocks contained, and the latencies. The async driver in
//! [`super`] calls in here under one lock and does all the sending and fetching itself.

use super::mix::{plan_operation, LoadAccount, Market, Mix, RestingOffer};
use super::stats::LatencyHistogram;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;
use walras_api::wire::{BatchSubmitResponse, BlockJson};
use walras_crypto::Hash;
use walras_engine::transaction_hash;
use walras_engine::Block;
use walras_sim::Rng;
use walras_types::{AccountId, Operation, Transaction};

/// A transaction planned for sending, before signing (or already signed, when pre-signed).
#[derive(Clone, Copy, Debug)]
pub struct Planned {
    /// Index into the tracker's accounts (and the driver's keys).
    pub account: u32,
    pub transaction: Transaction,
    /// Signed before the run started ([`Tracker::install_presigned`]).
    pub presigned: Option<Presigned>,
}

/// A signature and the transaction hash, computed before the clock started.
#[derive(Clone, Copy, Debug)]
pub struct Presigned {
    pub signature: [u8; 64],
    pub hash: Hash,
}

/// One account's pre-signed transactions: sequence numbers `first_sequence..`, no gaps.
#[derive(Clone, Debug, Default)]
struct PresignedChain {
    first_sequence: u64,
    items: Vec<(Transaction, Presigned)>,
}

impl PresignedChain {
    fn get(&self, sequence: u64) -> Option<&(Transaction, Presigned)> {
        let offset = sequence.checked_sub(self.first_sequence)?;
        self.items.get(usize::try_from(offset).ok()?)
    }
}

/// A transaction sent and not yet seen in a block.
#[derive(Clone, Copy, Debug)]
struct Outstanding {
    /// When it was due to be sent (the open-loop schedule's instant, not when the request
    /// left): latency includes any time the sender itself fell behind.
    submitted: Instant,
    account: u32,
    sequence: u64,
    /// Still counted in its account's window (false once its request failed in transit).
    in_window: bool,
}

/// A committed block as the tracker needs it: prepared before taking the tracker's lock, since
/// hashing a block of 50,000 transactions takes milliseconds.
#[derive(Clone, Debug)]
pub struct CommittedBlock {
    pub height: u64,
    pub valuations: Vec<u128>,
    pub transactions: Vec<CommittedTransaction>,
}

#[derive(Clone, Debug)]
pub struct CommittedTransaction {
    pub hash: Hash,
    pub transaction: Transaction,
    /// Why the block dropped it, if it did.
    pub dropped: Option<String>,
}

impl CommittedBlock {
    /// Joins the raw block (the transactions) with its summary (which were dropped, why).
    pub fn new(block: Block, summary: &BlockJson) -> CommittedBlock {
        let mut dropped: HashMap<Hash, &str> = summary
            .dropped
            .iter()
            .filter_map(|item| Some((item.hash.parse::<Hash>().ok()?, item.reason.as_str())))
            .collect();
        let transactions = block
            .transactions
            .iter()
            .map(|signed| {
                let hash = transaction_hash(signed);
                CommittedTransaction {
                    hash,
                    transaction: signed.transaction,
                    dropped: dropped.remove(&hash).map(str::to_string),
                }
            })
            .collect();
        CommittedBlock {
            height: block.header.height,
            valuations: block.header.valuations,
            transactions,
        }
    }
}

/// Counts the report is made of: the report carries them as they are (its JSON has each as a
/// top-level field), so that a count is declared, and described, once.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Due by the schedule.
    pub offered: u64,
    /// Sent to the node in a batch request.
    pub sent: u64,
    pub admitted: u64,
    pub rejected: u64,
    pub rejected_by_code: BTreeMap<String, u64>,
    /// The same refusals keyed by HTTP status and code (`"503 mempool_full"`, `"429
    /// rate_limited"`): what an overload curve counts.
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Admitted, then not seen in a block within the node's commit bound (plus a grace): the
    /// node shed it, or it was lost. A failure, counted apart from refusals.
    pub expired: u64,
    /// Due but not sent: the in-flight request cap was reached.
    pub not_sent: u64,
    /// Due but not sent: every account's sequence window was full.
    pub skipped_window: u64,
    /// Due but not sent: every account with room was waiting for the node to answer a request.
    pub skipped_busy: u64,
    /// Due but not sent: no account had a balance left to spend.
    pub skipped_no_funds: u64,
    /// Due but not sent (pre-signed runs): no account ready to send had a pre-signed
    /// transaction left for its next sequence number.
    pub skipped_unsigned: u64,
    /// Sent in requests that got no answer (fate unknown; counted as committed if they are).
    pub send_failed: u64,
    /// Our transactions seen in a block.
    pub committed: u64,
    pub accepted: u64,
    pub dropped: u64,
    pub dropped_by_reason: BTreeMap<String, u64>,
    /// Blocks examined since the start.
    pub blocks: u64,
    pub first_height: Option<u64>,
    pub last_height: u64,
    /// Transactions of any sender in those blocks.
    pub block_transactions: u64,
    /// Block events that reported the clearing's quality, how many of those converged, and the
    /// sum of their unrealized/realized utility ratios.
    pub cleared_blocks: u64,
    pub converged_blocks: u64,
    /// (Reported as their mean, `unrealized_utility_ratio_mean`.)
    #[serde(skip)]
    pub unrealized_utility_ratio_sum: f64,
    #[serde(skip)]
    pub finite_ratio_blocks: u64,
    /// Blocks whose offers could have traded and none did.
    pub nothing_traded_blocks: u64,
}

pub struct Tracker {
    mix: Mix,
    rng: Rng,
    accounts: Vec<LoadAccount>,
    index_of: HashMap<u64, u32>,
    payees: Vec<u64>,
    /// Round-robin position: consecutive transactions of one account are far apart in time,
    /// so they rarely share a request or land out of order in the mempool.
    cursor: usize,
    market: Market,
    /// `Some` in a pre-signed run: per account (by index), what was signed before the start.
    presigned: Option<Vec<PresignedChain>>,
    outstanding: HashMap<Hash, Outstanding>,
    /// Given up as expired: a block that holds one after all takes it back from `expired`
    /// (the block watcher may fall behind the node by more than the grace).
    expired: HashMap<Hash, Outstanding>,
    pub counters: Counters,
    pub latency: LatencyHistogram,
    pub last_commit: Option<Instant>,
    /// Problems worth reporting that did not stop the run (event stream lost, block unreadable).
    pub notes: Vec<String>,
}

impl Tracker {
    pub fn new(mix: Mix, seed: u64, accounts: Vec<LoadAccount>, market: Market) -> Tracker {
        let index_of = accounts
            .iter()
            .enumerate()
            .map(|(index, account)| (account.id, index as u32))
            .collect();
        let payees = accounts.iter().map(|account| account.id).collect();
        Tracker {
            mix,
            rng: Rng::new(seed),
            accounts,
            index_of,
            payees,
            cursor: 0,
            market,
            presigned: None,
            outstanding: HashMap::new(),
            expired: HashMap::new(),
            counters: Counters::default(),
            latency: LatencyHistogram::default(),
            last_commit: None,
            notes: Vec::new(),
        }
    }

    pub fn market(&self) -> &Market {
        &self.market
    }

    /// Takes a block's display prices (decimal strings, `None` where not priced).
    pub fn update_prices(&mut self, prices: &[Option<String>]) {
        self.market
            .update_from_decimals(prices.iter().map(Option::as_deref));
    }

    /// Counts the clearing quality a block event reports (blocks the node cleared itself); an
    /// infinite utility ratio (`None`: offers could trade, none did) is counted apart.
    pub fn count_clearing(&mut self, converged: bool, unrealized_utility_ratio: Option<f64>) {
        self.counters.cleared_blocks += 1;
        self.counters.converged_blocks += u64::from(converged);
        match unrealized_utility_ratio {
            Some(ratio) => {
                self.counters.unrealized_utility_ratio_sum += ratio;
                self.counters.finite_ratio_blocks += 1;
            }
            None => self.counters.nothing_traded_blocks += 1,
        }
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Plans up to `count` transactions for one request, one account after another; what
    /// cannot be planned is counted as skipped (windows full, accounts waiting for answers, or
    /// nothing left to spend). The accounts used wait for the request's answer
    /// ([`Tracker::answered`]) before sending again.
    pub fn plan(&mut self, count: u64) -> Vec<Planned> {
        if self.presigned.is_some() {
            return self.plan_presigned(count);
        }
        let mut planned = Vec::with_capacity(count as usize);
        for attempt in 0..count {
            let Some(index) = self.next_sender() else {
                self.count_skipped(count - attempt);
                break;
            };
            let account = &mut self.accounts[index];
            let Some(operation) =
                plan_operation(&mut self.rng, self.mix, account, &self.payees, &self.market)
            else {
                self.counters.skipped_no_funds += 1;
                continue;
            };
            let sequence = account.window.take();
            planned.push(Planned {
                account: index as u32,
                transaction: Transaction {
                    source: AccountId(account.id),
                    sequence,
                    operation,
                },
                presigned: None,
            });
        }
        self.mark_in_request(&planned);
        planned
    }

    fn mark_in_request(&mut self, planned: &[Planned]) {
        for item in planned {
            self.accounts[item.account as usize].in_request = true;
        }
    }

    /// [`Tracker::plan`] in a pre-signed run: each account's next sequence number picks its
    /// pre-signed transaction (a refused one is sent again: see [`SequenceWindow::refused`]).
    fn plan_presigned(&mut self, count: u64) -> Vec<Planned> {
        let mut planned = Vec::with_capacity(count as usize);
        for attempt in 0..count {
            let Some(index) = self.next_presigned_sender() else {
                self.count_skipped_presigned(count - attempt);
                break;
            };
            let sequence = self.accounts[index].window.take();
            let chains = self.presigned.as_ref().expect("a pre-signed run");
            let (transaction, presigned) = *chains[index]
                .get(sequence)
                .expect("next_presigned_sender checked it");
            planned.push(Planned {
                account: index as u32,
                transaction,
                presigned: Some(presigned),
            });
        }
        self.mark_in_request(&planned);
        planned
    }

    /// Whether account `index` may send its pre-signed transaction for its next sequence.
    fn presigned_ready(&self, index: usize) -> bool {
        let account = &self.accounts[index];
        let chains = self.presigned.as_deref().unwrap_or_default();
        !account.in_request
            && account.window.has_room()
            && chains
                .get(index)
                .is_some_and(|chain| chain.get(account.window.peek()).is_some())
    }

    fn next_presigned_sender(&mut self) -> Option<usize> {
        for _ in 0..self.accounts.len() {
            let index = self.cursor;
            self.cursor = (self.cursor + 1) % self.accounts.len();
            if self.presigned_ready(index) {
                return Some(index);
            }
        }
        None
    }

    fn count_skipped_presigned(&mut self, count: u64) {
        let chains = self.presigned.as_deref().unwrap_or_default();
        let signed_left = self.accounts.iter().zip(chains).any(|(account, chain)| {
            account.window.has_room() && chain.get(account.window.peek()).is_some()
        });
        let counter = if signed_left {
            &mut self.counters.skipped_busy
        } else if self.accounts.iter().any(|a| a.window.has_room()) {
            &mut self.counters.skipped_unsigned
        } else {
            &mut self.counters.skipped_window
        };
        *counter += count;
    }

    /// Plans, before the run, up to `per_account` transactions of every account, with the
    /// sequence numbers that follow its window's next one, to be signed and handed back to
    /// [`Tracker::install_presigned`]. Debits the balance estimates as sending would. No
    /// cancels: which offers rest is learnt from blocks, after the signing (cancelling offers
    /// planned earlier in the chain was tried: most had traded, and 8% of what committed was
    /// dropped `unknown_offer`), so the trading mix is offers and payments here.
    pub fn plan_ahead(&mut self, per_account: u64) -> Vec<Planned> {
        let mut planned = Vec::new();
        for index in 0..self.accounts.len() {
            let first = self.accounts[index].window.peek();
            for sequence in first..first + per_account {
                let account = &mut self.accounts[index];
                let Some(operation) =
                    plan_operation(&mut self.rng, self.mix, account, &self.payees, &self.market)
                else {
                    break; // nothing left to spend: the chain ends (it has no gaps)
                };
                let transaction = Transaction {
                    source: AccountId(account.id),
                    sequence,
                    operation,
                };
                planned.push(Planned {
                    account: index as u32,
                    transaction,
                    presigned: None,
                });
            }
        }
        planned
    }

    /// Takes what [`Tracker::plan_ahead`] planned, now signed: from here on [`Tracker::plan`]
    /// sends only these.
    pub fn install_presigned(&mut self, planned: Vec<Planned>) {
        let mut chains = vec![PresignedChain::default(); self.accounts.len()];
        for item in planned {
            let Some(presigned) = item.presigned else {
                continue;
            };
            let chain = &mut chains[item.account as usize];
            if chain.items.is_empty() {
                chain.first_sequence = item.transaction.sequence;
            }
            debug_assert_eq!(
                chain.first_sequence + chain.items.len() as u64,
                item.transaction.sequence,
                "a chain has no gaps"
            );
            chain.items.push((item.transaction, presigned));
        }
        self.presigned = Some(chains);
    }

    /// Transactions pre-signed for the run.
    pub fn presigned_count(&self) -> usize {
        self.presigned.as_deref().map_or(0, |chains| {
            chains.iter().map(|chain| chain.items.len()).sum()
        })
    }

    /// The node answered the request carrying `planned` (or it failed): their accounts may
    /// send again.
    fn answered(&mut self, planned: &[Planned]) {
        for item in planned {
            self.accounts[item.account as usize].in_request = false;
        }
    }

    /// The next account, round-robin, that is not waiting for an answer, has room in its
    /// window and something to spend.
    fn next_sender(&mut self) -> Option<usize> {
        for _ in 0..self.accounts.len() {
            let index = self.cursor;
            self.cursor = (self.cursor + 1) % self.accounts.len();
            let account = &self.accounts[index];
            if !account.in_request && account.can_spend() {
                return Some(index);
            }
        }
        None
    }

    /// Counts `count` transactions that found no sender, under the most telling reason.
    fn count_skipped(&mut self, count: u64) {
        let accounts = &self.accounts;
        let counter = if accounts.iter().any(LoadAccount::can_spend) {
            &mut self.counters.skipped_busy
        } else if accounts
            .iter()
            .any(|a| a.balances.iter().any(|&(_, b)| b > 0))
        {
            &mut self.counters.skipped_window
        } else {
            &mut self.counters.skipped_no_funds
        };
        *counter += count;
    }

    /// Records signed transactions as outstanding, just before their request leaves.
    pub fn register(&mut self, planned: &[Planned], hashes: &[Hash], submitted: Instant) {
        for (item, hash) in planned.iter().zip(hashes) {
            self.outstanding.insert(
                *hash,
                Outstanding {
                    submitted,
                    account: item.account,
                    sequence: item.transaction.sequence,
                    in_window: true,
                },
            );
        }
        self.counters.sent += planned.len() as u64;
    }

    /// The node's per-item answer to the batch of `planned` (whose hashes are `hashes`).
    pub fn admission_results(
        &mut self,
        planned: &[Planned],
        hashes: &[Hash],
        response: &BatchSubmitResponse,
    ) {
        self.answered(planned);
        // Highest sequence numbers first, so a refused tail rewinds (`SequenceWindow::refused`).
        for (hash, result) in hashes.iter().zip(&response.results).rev() {
            match &result.error {
                None => self.counters.admitted += 1,
                Some(error) => self.rejected(hash, &error.code, result.status),
            }
        }
    }

    /// The node refused the whole request with an API error (`rate_limited`, `mempool_full`,
    /// `too_large`...), with HTTP status `status`.
    pub fn batch_refused(&mut self, planned: &[Planned], hashes: &[Hash], code: &str, status: u16) {
        self.answered(planned);
        for hash in hashes.iter().rev() {
            self.rejected(hash, code, Some(status));
        }
    }

    /// The request got no usable answer: its transactions may or may not have been admitted.
    /// Their sequence numbers are never reused; they stay outstanding in case they commit.
    pub fn batch_lost(&mut self, planned: &[Planned], hashes: &[Hash]) {
        self.answered(planned);
        self.counters.send_failed += hashes.len() as u64;
        for hash in hashes {
            let Some(entry) = self.outstanding.get_mut(hash) else {
                continue; // already in a block
            };
            entry.in_window = false;
            let window = &mut self.accounts[entry.account as usize].window;
            window.unavailable(entry.sequence);
            window.resolved();
        }
    }

    fn rejected(&mut self, hash: &Hash, code: &str, status: Option<u16>) {
        self.counters.rejected += 1;
        *self
            .counters
            .rejected_by_code
            .entry(code.to_string())
            .or_default() += 1;
        let reason = match status {
            Some(status) => format!("{status} {code}"),
            None => code.to_string(),
        };
        *self.counters.rejected_by_reason.entry(reason).or_default() += 1;
        let Some(entry) = self.outstanding.remove(hash) else {
            return;
        };
        let window = &mut self.accounts[entry.account as usize].window;
        match code {
            "replayed" => {
                window.committed(entry.sequence);
                window.resolved();
            }
            "duplicate" => {
                window.unavailable(entry.sequence);
                window.resolved();
            }
            // Any other refusal: the node did not use the number.
            _ => window.refused(entry.sequence),
        }
    }

    /// Gives up on what was sent before `sent_before` and is still not in a block (the node
    /// sheds what it cannot commit within its bound): each is counted `expired` and resolved,
    /// so its sequence number is handed out again once the account's other transactions are
    /// resolved (the node forgot it; in the rare case it commits after all, the next use of
    /// the number is answered `replayed`, which moves the window past it). Marking it
    /// unavailable instead would strand the account: only its own commits move its window.
    /// Returns how many expired.
    pub fn expire(&mut self, sent_before: Instant) -> u64 {
        let old: Vec<Hash> = self
            .outstanding
            .iter()
            .filter(|(_, entry)| entry.submitted < sent_before)
            .map(|(hash, _)| *hash)
            .collect();
        for hash in &old {
            let Some(mut entry) = self.outstanding.remove(hash) else {
                continue;
            };
            if entry.in_window {
                self.accounts[entry.account as usize].window.resolved();
                entry.in_window = false;
            }
            self.expired.insert(*hash, entry);
        }
        self.counters.expired += old.len() as u64;
        old.len() as u64
    }

    /// A committed block: matches its transactions against the outstanding ones, at the
    /// instant its event arrived.
    pub fn block(&mut self, block: &CommittedBlock, committed_at: Instant) {
        self.count_block(block);
        for item in &block.transactions {
            let transaction = &item.transaction;
            let index = self.index_of.get(&transaction.source.0).copied();
            if let (Some(index), None) = (index, &item.dropped) {
                self.accounts[index as usize]
                    .window
                    .committed(transaction.sequence);
            }
            let late = || {
                let entry = self.expired.remove(&item.hash)?;
                self.counters.expired -= 1;
                Some(entry)
            };
            if let Some(entry) = self.outstanding.remove(&item.hash).or_else(late) {
                let dropped = item.dropped.as_deref();
                self.commit(entry, transaction, dropped, &block.valuations, committed_at);
            }
        }
    }

    fn count_block(&mut self, block: &CommittedBlock) {
        let height = block.height;
        self.counters.blocks += 1;
        self.counters.first_height.get_or_insert(height);
        self.counters.last_height = self.counters.last_height.max(height);
        self.counters.block_transactions += block.transactions.len() as u64;
    }

    fn commit(
        &mut self,
        entry: Outstanding,
        transaction: &Transaction,
        dropped_for: Option<&str>,
        valuations: &[u128],
        committed_at: Instant,
    ) {
        let latency = committed_at.saturating_duration_since(entry.submitted);
        self.latency.record_us(latency.as_micros() as u64);
        self.last_commit = Some(committed_at);
        self.counters.committed += 1;
        match dropped_for {
            Some(reason) => {
                self.counters.dropped += 1;
                *self
                    .counters
                    .dropped_by_reason
                    .entry(reason.to_string())
                    .or_default() += 1;
            }
            None => self.counters.accepted += 1,
        }
        let account = &mut self.accounts[entry.account as usize];
        if entry.in_window {
            account.window.resolved();
        }
        if dropped_for.is_none() {
            if let Some(offer) = resting_offer(transaction, valuations) {
                account.resting.push(offer);
            }
        }
    }
}

/// The offer `transaction` created, if it did not trade in its block: its limit is above the
/// block's clearing rate, so it rests in the book.
fn resting_offer(transaction: &Transaction, valuations: &[u128]) -> Option<RestingOffer> {
    let Operation::CreateOffer {
        sell,
        buy,
        min_price,
        ..
    } = transaction.operation
    else {
        return None;
    };
    let sell_value = *valuations.get(usize::from(sell.0))? as f64;
    let buy_value = *valuations.get(usize::from(buy.0))? as f64;
    let rests = buy_value > 0.0 && min_price.to_f64() > sell_value / buy_value;
    rests.then_some(RestingOffer {
        sell: sell.0,
        buy: buy.0,
        min_price,
        id: transaction.sequence,
    })
}

#[cfg(test)]
mod tests {
    use super::super::window::{SequenceWindow, WINDOW_USE};
    use super::*;
    use walras_api::wire::{BatchItemResult, DroppedJson, ErrorBody};
    use walras_crypto::hash;
    use walras_engine::BlockHeader;
    use walras_types::SignedTransaction;

    fn tracker(accounts: u64) -> Tracker {
        let accounts = (0..accounts)
            .map(|id| {
                LoadAccount::new(
                    id,
                    SequenceWindow::new(0, 1),
                    vec![(0, 1 << 40), (1, 1 << 40)],
                )
            })
            .collect();
        Tracker::new(Mix::Trading, 1, accounts, Market::flat(3))
    }

    fn signed(planned: &[Planned]) -> (Vec<SignedTransaction>, Vec<Hash>) {
        let signed: Vec<SignedTransaction> = planned
            .iter()
            .map(|item| SignedTransaction {
                transaction: item.transaction,
                signature: [0; 64],
            })
            .collect();
        let hashes = signed.iter().map(transaction_hash).collect();
        (signed, hashes)
    }

    fn block(
        height: u64,
        transactions: Vec<SignedTransaction>,
        dropped: &[(Hash, &str)],
    ) -> (Block, BlockJson) {
        let block = Block {
            header: BlockHeader {
                height,
                previous: hash(b"p"),
                transactions_root: hash(b"t"),
                state_root: hash(b"s"),
                valuations: vec![1 << 40; 3],
                trades: Vec::new(),
            },
            transactions,
        };
        let summary = BlockJson {
            height,
            hash: String::new(),
            previous: String::new(),
            transactions_root: String::new(),
            state_root: String::new(),
            transactions: block.transactions.len() as u32,
            accepted: 0,
            dropped: dropped
                .iter()
                .map(|(hash, reason)| DroppedJson {
                    index: 0,
                    hash: hash.to_string(),
                    reason: reason.to_string(),
                })
                .collect(),
            valuations: Vec::new(),
            prices: Vec::new(),
            trades: Vec::new(),
            clearing: None,
        };
        (block, summary)
    }

    #[test]
    fn accounts_take_turns_and_windows_cap_what_is_sent() {
        let mut tracker = tracker(2);
        let planned = tracker.plan(10);
        let sources: Vec<u64> = planned.iter().map(|p| p.transaction.source.0).collect();
        assert_eq!(sources, vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
        tracker.answered(&planned);
        let more = tracker.plan(200);
        assert_eq!(planned.len() + more.len(), 2 * WINDOW_USE as usize);
        assert_eq!(
            tracker.counters.skipped_window,
            210 - 2 * WINDOW_USE,
            "the rest is skipped, not queued"
        );
        let sequences: Vec<u64> = planned
            .iter()
            .chain(&more)
            .filter(|p| p.transaction.source.0 == 0)
            .map(|p| p.transaction.sequence)
            .collect();
        assert_eq!(sequences, (1..=WINDOW_USE).collect::<Vec<_>>());
    }

    #[test]
    fn commits_measure_latency_and_free_the_window() {
        let mut tracker = tracker(1);
        let planned = tracker.plan(WINDOW_USE);
        let (signed, hashes) = signed(&planned);
        let sent_at = Instant::now();
        tracker.register(&planned, &hashes, sent_at);
        let response = BatchSubmitResponse {
            admitted: WINDOW_USE as u32 - 1,
            rejected: 1,
            results: hashes
                .iter()
                .enumerate()
                .map(|(index, hash)| BatchItemResult {
                    hash: hash.to_string(),
                    status: (index == 0).then_some(429),
                    error: (index == 0).then(|| ErrorBody {
                        code: "rate_limited".to_string(),
                        message: String::new(),
                    }),
                })
                .collect(),
        };
        tracker.admission_results(&planned, &hashes, &response);
        assert!(tracker.plan(1).is_empty(), "the window is full");
        assert_eq!(tracker.counters.skipped_window, 1);
        assert_eq!(tracker.counters.rejected_by_code["rate_limited"], 1);
        assert_eq!(tracker.counters.rejected_by_reason["429 rate_limited"], 1);
        assert_eq!(tracker.outstanding(), WINDOW_USE as usize - 1);
        // The block holds the rest; one of them is dropped.
        let (block, summary) = block(5, signed[1..].to_vec(), &[(hashes[1], "account_overdraft")]);
        let committed_at = sent_at + std::time::Duration::from_millis(300);
        tracker.block(&CommittedBlock::new(block, &summary), committed_at);
        assert_eq!(tracker.outstanding(), 0);
        assert_eq!(tracker.counters.committed, WINDOW_USE - 1);
        assert_eq!(tracker.counters.dropped_by_reason["account_overdraft"], 1);
        let p50_us = tracker.latency.quantile_us(0.5).unwrap();
        assert!(p50_us.abs_diff(300_000) < 600, "p50 {p50_us} µs");
        assert_eq!(
            (tracker.counters.blocks, tracker.counters.last_height),
            (1, 5)
        );
        // Sequence 1 was rejected and 2 dropped, the rest accepted: the window moved past 48.
        let next = tracker.plan(1);
        assert_eq!(next[0].transaction.sequence, WINDOW_USE + 1);
    }

    #[test]
    fn an_account_waits_for_the_answer_to_its_request_before_sending_again() {
        let mut tracker = tracker(3);
        let first = tracker.plan(2);
        let second = tracker.plan(5);
        let sources = |planned: &[Planned]| -> Vec<u64> {
            planned.iter().map(|p| p.transaction.source.0).collect()
        };
        assert_eq!(sources(&first), vec![0, 1]);
        assert_eq!(
            sources(&second),
            vec![2, 2, 2, 2, 2],
            "only account 2 was free"
        );
        assert!(tracker.plan(4).is_empty());
        assert_eq!(tracker.counters.skipped_busy, 4);
        assert_eq!(tracker.counters.skipped_window, 0);
        tracker.answered(&first);
        assert_eq!(sources(&tracker.plan(2)), vec![0, 1]);
    }

    #[test]
    fn lost_requests_never_reuse_their_sequences_but_still_count_if_committed() {
        let mut tracker = tracker(1);
        let planned = tracker.plan(3);
        let (signed, hashes) = signed(&planned);
        tracker.register(&planned, &hashes, Instant::now());
        tracker.batch_lost(&planned, &hashes);
        assert_eq!(tracker.counters.send_failed, 3);
        assert_eq!(tracker.plan(1)[0].transaction.sequence, 4);
        let (block, summary) = block(1, signed.clone(), &[]);
        tracker.block(&CommittedBlock::new(block, &summary), Instant::now());
        assert_eq!(tracker.counters.accepted, 3);
    }

    /// Signs what `plan_ahead` planned (zero signatures: the tracker never checks them) and
    /// installs it.
    fn presigned_tracker(accounts: u64, per_account: u64) -> Tracker {
        let mut tracker = tracker(accounts);
        let mut planned = tracker.plan_ahead(per_account);
        for item in &mut planned {
            let (_, hashes) = signed(std::slice::from_ref(item));
            item.presigned = Some(Presigned {
                signature: [0; 64],
                hash: hashes[0],
            });
        }
        tracker.install_presigned(planned);
        tracker
    }

    /// Under overload most of a request is refused; in a pre-signed run the refused tail of an
    /// account is sent again, the same transactions with the same sequence numbers, so the
    /// run neither runs out of pre-signed transactions nor strands the account's window.
    #[test]
    fn a_presigned_run_sends_refused_transactions_again() {
        let mut tracker = presigned_tracker(2, 10);
        assert_eq!(tracker.presigned_count(), 20);
        let first = tracker.plan(6);
        assert!(first.iter().all(|item| item.presigned.is_some()));
        let (_, hashes) = signed(&first);
        tracker.register(&first, &hashes, Instant::now());
        // Everything but the first transaction of each account is refused, the whole request
        // at once (503 mempool_full before any item was looked at).
        let response = BatchSubmitResponse {
            admitted: 2,
            rejected: 4,
            results: hashes
                .iter()
                .enumerate()
                .map(|(index, hash)| BatchItemResult {
                    hash: hash.to_string(),
                    status: (index >= 2).then_some(503),
                    error: (index >= 2).then(|| ErrorBody {
                        code: "mempool_full".to_string(),
                        message: String::new(),
                    }),
                })
                .collect(),
        };
        tracker.admission_results(&first, &hashes, &response);
        assert_eq!(tracker.counters.rejected_by_reason["503 mempool_full"], 4);
        let again = tracker.plan(4);
        let sequences: Vec<(u64, u64)> = again
            .iter()
            .map(|item| (item.transaction.source.0, item.transaction.sequence))
            .collect();
        assert_eq!(sequences, vec![(0, 2), (1, 2), (0, 3), (1, 3)]);
        let (_, again_hashes) = signed(&again);
        assert_eq!(&again_hashes[..], &hashes[2..], "the same transactions");
        // Past the pre-signed chains nothing more is sent, and that is counted.
        tracker.answered(&again);
        let _ = tracker.plan(100);
        assert!(tracker.counters.skipped_unsigned > 0 || tracker.counters.skipped_window > 0);
    }

    /// The node drops what it could not commit within its bound; the load generator counts
    /// such transactions `expired` (a failure, not a refusal) and frees their accounts.
    #[test]
    fn transactions_outstanding_past_the_bound_expire_and_free_their_window() {
        let mut tracker = tracker(1);
        let planned = tracker.plan(WINDOW_USE);
        let (_, hashes) = signed(&planned);
        let sent_at = Instant::now();
        tracker.register(&planned, &hashes, sent_at);
        tracker.answered(&planned);
        assert!(tracker.plan(1).is_empty(), "the window is full");
        let later = sent_at + std::time::Duration::from_millis(1);
        assert_eq!(tracker.expire(sent_at), 0, "nothing sent before");
        assert_eq!(tracker.expire(later), WINDOW_USE);
        assert_eq!(tracker.counters.expired, WINDOW_USE);
        assert_eq!(tracker.outstanding(), 0);
        let next = tracker.plan(1);
        assert_eq!(next[0].transaction.sequence, 1, "the node forgot them");
        // One of them is seen in a block after all (the watcher was behind): committed.
        let (signed, _) = signed(&planned[..1]);
        let (block, summary) = block(1, signed, &[]);
        tracker.block(&CommittedBlock::new(block, &summary), Instant::now());
        assert_eq!(tracker.counters.expired, WINDOW_USE - 1);
        assert_eq!(tracker.counters.committed, 1);
    }

    #[test]
    fn offers_that_did_not_trade_become_cancel_candidates() {
        let valuations = [100, 50];
        let offer = |min_price: f64| Transaction {
            source: AccountId(1),
            sequence: 7,
            operation: Operation::CreateOffer {
                sell: walras_types::AssetId(0),
                buy: walras_types::AssetId(1),
                amount: 5,
                min_price: walras_types::Price::from_f64(min_price),
            },
        };
        assert!(resting_offer(&offer(2.5), &valuations).is_some());
        assert!(resting_offer(&offer(1.5), &valuations).is_none());
    }
}
