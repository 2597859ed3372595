//! The open-loop load generator: signed transactions from development accounts at a fixed
//! rate, whatever the node does, and submit-to-commit latency measured from the block events.
//!
//! Open loop means the send schedule never waits for the node: every `batch_interval` a timer
//! releases what the schedule says is due ([`schedule`]) as one batch request, spawned without
//! waiting for earlier ones. A slow node therefore shows up as latency and as in-flight
//! requests, not as a quietly lower offered rate. What cannot be sent is counted and reported:
//! `not_sent` when the in-flight request cap is reached, `skipped_window` when every account's
//! sequence window is full ([`window`]), `skipped_busy` when every account with room is
//! waiting for the answer to a request carrying its transactions (an account never has two
//! requests in flight: see [`mix::LoadAccount::in_request`]).
//!
//! Commits are seen through `GET /v1/events`: for each block event the driver fetches the raw
//! block (to hash its transactions) and its summary (for the dropped ones), and matches them
//! against the outstanding transactions ([`tracker`]). A transaction's commit instant is when
//! its block's event arrived; its submit instant is when the schedule made it due.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod mix;
pub mod schedule;
pub mod stats;
pub mod tracker;
pub mod window;

use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mix::{LoadAccount, Market, Mix};
use schedule::{split_batches, SendSchedule};
use serde::Serialize;
use stats::LatencySummary;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
pub use tracker::Counters;
use tracker::{CommittedBlock, Planned, Presigned, Tracker};
use walras_api::wire::{AccountJson, BlockEventJson, DevGenesisJson};
use walras_client::{BlockEvents, ClientError, NodeApi, NodeClient};
use walras_crypto::{Hash, Keypair};
use walras_devnet::dev_keypair;
use walras_engine::transaction_hash;
use walras_types::{AccountId, SignedTransaction};
use window::SequenceWindow;

/// The node takes at most this many transactions per batch request.
pub const BATCH_TXS_MAX: u64 = 10_000;
/// Batch requests in flight at once; beyond it transactions are counted `not_sent`. Large, so
/// that only a node that has stopped answering reaches it.
pub const IN_FLIGHT_REQUESTS_MAX: usize = 1024;
/// Concurrent `GET /v1/accounts/{id}` while starting.
const ACCOUNT_FETCHES_MAX: usize = 32;
/// Attempts to reconnect the event stream, and to fetch one block, before giving up on it.
const RECONNECTS_MAX: u32 = 20;
const BLOCK_FETCH_TRIES: u32 = 5;
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadgenConfig {
    /// Base URL of the node (`http://127.0.0.1:8080`).
    pub node: String,
    pub rate_per_s: f64,
    pub duration: Duration,
    /// Development accounts to use (ids `0..accounts`, fewer if the genesis has fewer).
    pub accounts: usize,
    pub batch_interval: Duration,
    pub mix: Mix,
    pub seed: u64,
    /// After sending stops, how long to wait for outstanding transactions to commit.
    pub drain_timeout: Duration,
    /// Print progress on stderr (a line rewritten every second).
    pub progress: bool,
    /// Sign the whole run's transactions before the clock starts (see [`presign_count`]), so
    /// signing never limits what is offered: the schedule stays open-loop, and what the node
    /// refuses is sent again later with the same sequence number and signature.
    pub presign: bool,
    /// How many to pre-sign, instead of [`presign_count`]'s default: under overload refused
    /// transactions are sent again, so about what the node commits in the run is enough, and
    /// signing what is offered at 10x capacity takes longer than the run.
    pub presign_count: Option<u64>,
    /// Give up on an admitted transaction not in a block after this long (counted `expired`).
    /// `None`: the node's `commit_bound_ms` (from `GET /v1/status`) plus [`EXPIRY_GRACE`], or
    /// never if the node states no bound.
    pub expire_after: Option<Duration>,
}

/// Most transactions a pre-signed run signs (about 170 bytes each in memory).
pub const PRESIGN_MAX: u64 = 2_000_000;
/// Beyond the node's commit bound, how long an admitted transaction may take to be seen in a
/// block before it counts as `expired` (block events and fetches take time).
pub const EXPIRY_GRACE: Duration = Duration::from_secs(2);

impl LoadgenConfig {
    /// The defaults of `walras loadgen`, for `rate_per_s` over `duration`.
    pub fn new(node: &str, rate_per_s: f64, duration: Duration) -> LoadgenConfig {
        LoadgenConfig {
            node: node.to_string(),
            rate_per_s,
            duration,
            accounts: 1000,
            batch_interval: Duration::from_millis(10),
            mix: Mix::Trading,
            seed: 1,
            drain_timeout: Duration::from_secs(10),
            progress: false,
            presign: false,
            presign_count: None,
            expire_after: None,
        }
    }

    fn validate(&self) -> Result<(), LoadgenError> {
        let problem = if !(self.rate_per_s.is_finite() && self.rate_per_s > 0.0) {
            Some("--rate must be a positive number of transactions per second")
        } else if self.duration.is_zero() {
            Some("--seconds must be positive")
        } else if self.batch_interval.is_zero() {
            Some("--batch-ms must be at least 1")
        } else if self.accounts == 0 {
            Some("--accounts must be at least 1")
        } else if self.mix == Mix::Payments && self.accounts < 2 {
            Some("the payments mix needs --accounts 2 or more (payments go between them)")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(LoadgenError::Config(problem.to_string())),
            None => Ok(()),
        }
    }
}

/// Why the load generator could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// A setting out of range: the message names it.
    #[error("{0}")]
    Config(String),
    /// The node could not be reached or refused a request the run needs.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Signing the pre-signed load failed (a signing thread panicked).
    #[error("pre-signing the load failed: {0}")]
    Presign(String),
    /// The node was not started on a development genesis, so nobody knows its keys.
    #[error(
        "the node at {node} runs no development genesis (GET /v1/status has no dev_genesis), \
         so the load generator cannot sign for its accounts; start one with `walras node \
         --data DIR` on a fresh directory"
    )]
    NoDevGenesis { node: String },
    /// The node's account is not the one the development genesis describes.
    #[error(
        "account {account}'s public key on the node is not the development key the genesis \
         parameters give: is the node's dev_genesis misreported?"
    )]
    KeyMismatch { account: u64 },
}

/// The outcome of a run. Rates are per second of the configured duration, except
/// `committed_tx_per_s`, which divides by the time from the start to the last commit seen
/// (at least the configured duration).
#[derive(Clone, Debug, Serialize)]
pub struct LoadgenReport {
    pub node: String,
    pub mix: Mix,
    pub rate_per_s: f64,
    pub seconds: f64,
    pub accounts: usize,
    pub batch_ms: f64,
    /// What happened to the transactions and the blocks seen (`offered`, `sent`, `committed`,
    /// `blocks`, ...: see [`Counters`]).
    #[serde(flatten)]
    pub counts: Counters,
    pub offered_tx_per_s: f64,
    /// `committed` per second from the start to the last commit seen.
    pub committed_tx_per_s: f64,
    /// Goodput: transactions of ours a block accepted (`accepted`: committed and not dropped by
    /// the block filter), per second of the same span as `committed_tx_per_s`.
    pub goodput_tx_per_s: f64,
    /// Transactions signed before the clock started (0 without `--presign`).
    pub presigned: u64,
    /// Seconds spent pre-signing, before the clock started.
    pub presign_s: f64,
    /// Sent (or of unknown fate) and not in any block when the run ended.
    pub never_committed: u64,
    /// From the instant a transaction was due to the arrival of its block's event.
    pub latency: LatencySummary,
    /// Mean unrealized/realized utility ratio over the cleared blocks where it is finite.
    pub unrealized_utility_ratio_mean: f64,
    /// The latest block's prices (asset i in units of asset 0).
    pub prices: Vec<f64>,
    /// The whole run: start-up excluded, draining included.
    pub elapsed_s: f64,
    pub notes: Vec<String>,
}

/// Runs the load generator against `config.node` (over HTTP) and reports.
pub async fn run(config: &LoadgenConfig) -> Result<LoadgenReport, LoadgenError> {
    config.validate()?;
    let client = NodeClient::new(&config.node)?;
    run_with(&client, config).await
}

/// Runs the load generator against the node `client` reaches (any [`NodeApi`] transport:
/// HTTP, or a node in the test process); `config.node` is not used.
pub async fn run_with<C: NodeApi>(
    client: &C,
    config: &LoadgenConfig,
) -> Result<LoadgenReport, LoadgenError> {
    config.validate()?;
    let status = client.status().await?;
    let dev = status
        .dev_genesis
        .ok_or_else(|| LoadgenError::NoDevGenesis {
            node: client.base_url().to_string(),
        })?;
    // Subscribe before anything is sent, so no commit of ours can be missed.
    let events = client.events().await?;
    let mut market = Market::flat(dev.assets);
    let prices = client.prices().await?;
    if prices.height > 0 {
        market.update_from_decimals(prices.reference.assets.iter().map(|a| a.price.as_deref()));
    }
    let used = config.accounts.min(dev.accounts as usize);
    let (accounts, keys) = load_accounts(client, &dev, used, config.progress).await?;
    let tracker = Arc::new(Mutex::new(Tracker::new(
        config.mix,
        config.seed,
        accounts,
        market,
    )));
    let presign_started = Instant::now();
    if config.presign {
        let count = config
            .presign_count
            .unwrap_or_else(|| presign_count(config, used));
        presign(&tracker, &keys, count).await?;
    }
    let presign_s = presign_started.elapsed().as_secs_f64();
    let expire_after = config.expire_after.or_else(|| {
        status
            .commit_bound_ms
            .map(|bound| Duration::from_millis(bound) + EXPIRY_GRACE)
    });
    let watcher = BlockWatcher::start(client.clone(), events, tracker.clone(), status.height);
    let started = Instant::now();
    let progress = config.progress.then(|| {
        let line = ProgressLine::new();
        let task = spawn_progress(line.clone(), tracker.clone(), started, config.duration);
        (line, task)
    });
    let expiry = expire_after.map(|after| spawn_expiry(tracker.clone(), after));
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_REQUESTS_MAX));
    let sender = Sender {
        client,
        tracker: &tracker,
        keys: Arc::new(keys),
        in_flight: &in_flight,
    };
    sender.send_for(config, started).await;
    drain(&tracker, &in_flight, config.drain_timeout).await;
    let elapsed = started.elapsed();
    watcher.stop();
    if let Some(expiry) = expiry {
        expiry.abort();
    }
    if let Some((line, task)) = progress {
        task.abort();
        line.finish();
    }
    let tracker = lock(&tracker);
    let mut report = report(config, client.base_url(), used, &tracker, started, elapsed);
    report.presign_s = presign_s;
    Ok(report)
}

/// How many transactions a pre-signed run signs: what the schedule offers, at most
/// [`PRESIGN_MAX`], plus [`PRESIGN_SPARE_PER_ACCOUNT`] per account (accounts are used in
/// turn, not exactly evenly). Refused ones are sent again, so under overload far fewer than
/// offered are used up.
pub fn presign_count(config: &LoadgenConfig, accounts: usize) -> u64 {
    let offered = (config.rate_per_s * config.duration.as_secs_f64()).ceil() as u64;
    offered.min(PRESIGN_MAX) + accounts as u64 * PRESIGN_SPARE_PER_ACCOUNT
}

/// Pre-signed transactions per account beyond its even share of the run.
pub const PRESIGN_SPARE_PER_ACCOUNT: u64 = 8;

/// Plans `count` transactions over the accounts, signs them on every core, and hands them to
/// the tracker, all before the clock starts.
async fn presign(
    tracker: &Arc<Mutex<Tracker>>,
    keys: &[Keypair],
    count: u64,
) -> Result<(), LoadgenError> {
    let accounts = keys.len().max(1) as u64;
    let planned = lock(tracker).plan_ahead(count.div_ceil(accounts));
    let keys = keys.to_vec();
    let signed = tokio::task::spawn_blocking(move || sign_ahead(&keys, planned))
        .await
        .map_err(|error| LoadgenError::Presign(error.to_string()))?;
    lock(tracker).install_presigned(signed);
    Ok(())
}

/// Signs and hashes `planned` on all cores (scoped threads, one slice each).
fn sign_ahead(keys: &[Keypair], mut planned: Vec<Planned>) -> Vec<Planned> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = planned.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for slice in planned.chunks_mut(chunk) {
            scope.spawn(move || {
                for item in slice {
                    let signed = sign_one(keys, item);
                    item.presigned = Some(Presigned {
                        signature: signed.signature,
                        hash: transaction_hash(&signed),
                    });
                }
            });
        }
    });
    planned
}

/// Every second, counts what has been outstanding longer than `after` as expired.
fn spawn_expiry(tracker: Arc<Mutex<Tracker>>, after: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut timer = tokio::time::interval(Duration::from_secs(1));
        loop {
            timer.tick().await;
            if let Some(sent_before) = Instant::now().checked_sub(after) {
                lock(&tracker).expire(sent_before);
            }
        }
    })
}

/// Fetches the accounts (sequence numbers and balances) and derives their keys.
async fn load_accounts<C: NodeApi>(
    client: &C,
    dev: &DevGenesisJson,
    count: usize,
    progress: bool,
) -> Result<(Vec<LoadAccount>, Vec<Keypair>), LoadgenError> {
    let mut fetches = futures_util::stream::iter(0..count as u64)
        .map(|id| async move { client.account(id).await })
        .buffered(ACCOUNT_FETCHES_MAX);
    let mut accounts = Vec::with_capacity(count);
    let mut keys = Vec::with_capacity(count);
    // No bar at all without progress: indicatif draws an unfinished bar when it is dropped.
    let line = if progress {
        ProgressLine::new()
    } else {
        ProgressLine { bar: None }
    };
    while let Some(fetched) = fetches.next().await {
        let json = fetched?;
        let keypair = dev_keypair(dev, AccountId(json.id));
        if keypair.public_key().to_string() != json.public_key {
            return Err(LoadgenError::KeyMismatch { account: json.id });
        }
        accounts.push(load_account(json));
        keys.push(keypair);
        let done = accounts.len() == count;
        if progress && (done || (line.terminal() && accounts.len() % 100 == 0)) {
            line.show(&format!(
                "loadgen: fetched {}/{count} accounts",
                accounts.len()
            ));
        }
    }
    if progress {
        line.finish();
    }
    Ok((accounts, keys))
}

fn load_account(json: AccountJson) -> LoadAccount {
    let balances = json
        .balances
        .iter()
        .map(|balance| (balance.asset, balance.amount))
        .collect();
    LoadAccount::new(
        json.id,
        SequenceWindow::new(json.last_sequence, json.next_sequence),
        balances,
    )
}

fn lock(tracker: &Mutex<Tracker>) -> MutexGuard<'_, Tracker> {
    // A panic while holding the lock is a bug already reported by that panic; the counts
    // are still worth reporting.
    tracker
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The sending side: the schedule's timer and the batch requests it spawns.
struct Sender<'a, C: NodeApi> {
    client: &'a C,
    tracker: &'a Arc<Mutex<Tracker>>,
    keys: Arc<Vec<Keypair>>,
    in_flight: &'a Arc<Semaphore>,
}

impl<C: NodeApi> Sender<'_, C> {
    async fn send_for(&self, config: &LoadgenConfig, started: Instant) {
        let mut schedule = SendSchedule::new(config.rate_per_s, config.duration);
        let mut timer = tokio::time::interval(config.batch_interval);
        // A late tick is not repeated: the schedule releases everything due anyway.
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            timer.tick().await;
            let due_at = Instant::now();
            let elapsed = due_at - started;
            let finished = elapsed >= config.duration;
            let due = if finished {
                schedule.release_rest()
            } else {
                schedule.release(elapsed)
            };
            self.dispatch(due, due_at);
            if finished {
                break;
            }
        }
    }

    /// Plans `due` transactions and spawns their requests, without waiting for any answer.
    fn dispatch(&self, due: u64, due_at: Instant) {
        lock(self.tracker).counters.offered += due;
        for count in split_batches(due, BATCH_TXS_MAX) {
            let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                lock(self.tracker).counters.not_sent += count;
                continue;
            };
            let planned = lock(self.tracker).plan(count);
            if planned.is_empty() {
                continue;
            }
            let client = self.client.clone();
            let tracker = self.tracker.clone();
            let keys = self.keys.clone();
            tokio::spawn(async move {
                send_batch(&client, &tracker, keys, planned, due_at).await;
                drop(permit);
            });
        }
    }
}

/// Signs (on the blocking pool, so the event reader's timing is not held up), registers and
/// sends one batch, and records the node's answer.
async fn send_batch<C: NodeApi>(
    client: &C,
    tracker: &Mutex<Tracker>,
    keys: Arc<Vec<Keypair>>,
    planned: Vec<Planned>,
    due_at: Instant,
) {
    let (planned, signed, hashes) = if planned.iter().all(|item| item.presigned.is_some()) {
        let (signed, hashes) = presigned_parts(&planned);
        (planned, signed, hashes)
    } else {
        let signing = tokio::task::spawn_blocking(move || {
            let signed = sign_all(&keys, &planned);
            let hashes: Vec<Hash> = signed.iter().map(transaction_hash).collect();
            (planned, signed, hashes)
        });
        let Ok(signed) = signing.await else {
            return; // the runtime is shutting down
        };
        signed
    };
    lock(tracker).register(&planned, &hashes, due_at);
    let answer = client.submit_batch(&signed).await;
    let mut tracker = lock(tracker);
    match answer {
        Ok(response) if response.results.len() == hashes.len() => {
            tracker.admission_results(&planned, &hashes, &response)
        }
        Ok(response) => {
            let note = format!(
                "a batch of {} got {} results: counted as failed in transit",
                hashes.len(),
                response.results.len()
            );
            tracker.notes.push(note);
            tracker.batch_lost(&planned, &hashes);
        }
        Err(ClientError::Api { code, status, .. }) => {
            tracker.batch_refused(&planned, &hashes, &code, status)
        }
        Err(error) => {
            if tracker.counters.send_failed == 0 {
                tracker.notes.push(format!("first failed request: {error}"));
            }
            tracker.batch_lost(&planned, &hashes);
        }
    }
}

fn sign_all(keys: &[Keypair], planned: &[Planned]) -> Vec<SignedTransaction> {
    planned.iter().map(|item| sign_one(keys, item)).collect()
}

fn sign_one(keys: &[Keypair], item: &Planned) -> SignedTransaction {
    let signature = keys[item.account as usize].sign(&item.transaction.encode());
    SignedTransaction {
        transaction: item.transaction,
        signature: *signature.as_bytes(),
    }
}

/// The transactions and hashes of a request whose items were all pre-signed.
fn presigned_parts(planned: &[Planned]) -> (Vec<SignedTransaction>, Vec<Hash>) {
    planned
        .iter()
        .filter_map(|item| {
            let presigned = item.presigned?;
            let signed = SignedTransaction {
                transaction: item.transaction,
                signature: presigned.signature,
            };
            Some((signed, presigned.hash))
        })
        .unzip()
}

/// Waits until nothing is in flight or outstanding, or `timeout` passes.
async fn drain(tracker: &Mutex<Tracker>, in_flight: &Semaphore, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let requests = IN_FLIGHT_REQUESTS_MAX - in_flight.available_permits();
        let outstanding = lock(tracker).outstanding();
        if (requests == 0 && outstanding == 0) || Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two tasks: one reads the event stream and stamps each event's arrival; the other fetches
/// each block (and any the stream skipped) and hands it to the tracker. Split so that slow
/// block fetches never delay the stamping.
struct BlockWatcher {
    reader: JoinHandle<()>,
    follower: JoinHandle<()>,
}

impl BlockWatcher {
    fn start<C: NodeApi>(
        client: C,
        events: BlockEvents,
        tracker: Arc<Mutex<Tracker>>,
        start_height: u64,
    ) -> BlockWatcher {
        let (arrivals, receiver) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_events(
            client.clone(),
            events,
            arrivals,
            tracker.clone(),
        ));
        let follower = tokio::spawn(async move {
            follow_blocks(&client, &tracker, receiver, start_height + 1).await;
        });
        BlockWatcher { reader, follower }
    }

    /// Stops both tasks (closing the event stream).
    fn stop(self) {
        self.reader.abort();
        self.follower.abort();
    }
}

async fn read_events<C: NodeApi>(
    client: C,
    mut events: BlockEvents,
    arrivals: mpsc::UnboundedSender<(BlockEventJson, Instant)>,
    tracker: Arc<Mutex<Tracker>>,
) {
    let mut reconnects = 0;
    loop {
        match events.next().await {
            Some(Ok(event)) => {
                if arrivals.send((event, Instant::now())).is_err() {
                    return;
                }
                continue;
            }
            Some(Err(error)) => lock(&tracker)
                .notes
                .push(format!("event stream interrupted: {error}")),
            None => lock(&tracker)
                .notes
                .push("the node closed the event stream".to_string()),
        }
        match reconnect(&client, &mut reconnects).await {
            Some(stream) => events = stream,
            None => {
                lock(&tracker).notes.push(format!(
                    "gave up on the event stream after {RECONNECTS_MAX} reconnects: \
                     later commits were not seen"
                ));
                return;
            }
        }
    }
}

async fn reconnect<C: NodeApi>(client: &C, reconnects: &mut u32) -> Option<BlockEvents> {
    while *reconnects < RECONNECTS_MAX {
        *reconnects += 1;
        tokio::time::sleep(RETRY_PAUSE).await;
        if let Ok(stream) = client.events().await {
            return Some(stream);
        }
    }
    None
}

async fn follow_blocks<C: NodeApi>(
    client: &C,
    tracker: &Mutex<Tracker>,
    mut arrivals: mpsc::UnboundedReceiver<(BlockEventJson, Instant)>,
    mut next_height: u64,
) {
    while let Some((event, arrived)) = arrivals.recv().await {
        lock(tracker).update_prices(&event.prices);
        if let Some(quality) = event.clearing {
            lock(tracker).count_clearing(event.converged, quality.unrealized_utility_ratio);
        }
        // Heights the stream skipped (a reconnect) are fetched too, stamped with this arrival.
        while next_height <= event.height {
            match fetch_block(client, next_height).await {
                Ok((block, summary)) => {
                    let committed = CommittedBlock::new(block, &summary);
                    lock(tracker).block(&committed, arrived);
                }
                Err(error) => lock(tracker)
                    .notes
                    .push(format!("block {next_height} skipped: {error}")),
            }
            next_height += 1;
        }
    }
}

async fn fetch_block<C: NodeApi>(
    client: &C,
    height: u64,
) -> Result<(walras_engine::Block, walras_api::wire::BlockJson), ClientError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let fetched = tokio::try_join!(client.block_raw(height), client.block(height));
        match fetched {
            Ok(pair) => return Ok(pair),
            Err(error) if tries >= BLOCK_FETCH_TRIES => return Err(error),
            Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
        }
    }
}

/// Rewrites one line on stderr every second.
fn spawn_progress(
    line: ProgressLine,
    tracker: Arc<Mutex<Tracker>>,
    started: Instant,
    duration: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut timer = tokio::time::interval(Duration::from_secs(1));
        timer.tick().await;
        loop {
            timer.tick().await;
            line.show(&progress_line(&lock(&tracker), started.elapsed(), duration));
        }
    })
}

/// Progress on stderr: on a terminal an `indicatif` bar whose template is the message alone
/// (one line rewritten in place); otherwise plain lines, so a log file gets no control
/// characters and still sees the progress (indicatif's own non-terminal target is hidden).
#[derive(Clone)]
struct ProgressLine {
    /// `Some` when stderr is a terminal.
    bar: Option<ProgressBar>,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let bar = terminal.then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            // The template is a constant; fall back to the default spinner style rather than
            // panic if a future indicatif rejected it.
            let style = ProgressStyle::with_template("{wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar
        });
        ProgressLine { bar }
    }

    fn terminal(&self) -> bool {
        self.bar.is_some()
    }

    fn show(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(line.to_string()),
            None => eprintln!("{line}"),
        }
    }

    /// Ends the rewritten line, leaving its last text on screen.
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

fn progress_line(tracker: &Tracker, elapsed: Duration, duration: Duration) -> String {
    let counters = &tracker.counters;
    let phase = if elapsed < duration {
        format!("{:>4.0}/{} s", elapsed.as_secs_f64(), duration.as_secs())
    } else {
        format!("draining ({:.0} s)", (elapsed - duration).as_secs_f64())
    };
    let p50 = tracker.latency.quantile_us(0.5).map_or_else(
        || "-".to_string(),
        |us| format!("{:.0} ms", us as f64 / 1e3),
    );
    format!(
        "loadgen {phase}  offered {}  admitted {}  committed {}  in flight {}  p50 {p50}",
        counters.offered,
        counters.admitted,
        counters.committed,
        tracker.outstanding()
    )
}

fn report(
    config: &LoadgenConfig,
    node: &str,
    accounts: usize,
    tracker: &Tracker,
    started: Instant,
    elapsed: Duration,
) -> LoadgenReport {
    let counters = &tracker.counters;
    let seconds = config.duration.as_secs_f64();
    let commit_span_s = tracker
        .last_commit
        .map_or(seconds, |last| (last - started).as_secs_f64().max(seconds));
    LoadgenReport {
        node: node.to_string(),
        mix: config.mix,
        rate_per_s: config.rate_per_s,
        seconds,
        accounts,
        batch_ms: config.batch_interval.as_secs_f64() * 1e3,
        counts: counters.clone(),
        offered_tx_per_s: counters.offered as f64 / seconds,
        committed_tx_per_s: counters.committed as f64 / commit_span_s,
        goodput_tx_per_s: counters.accepted as f64 / commit_span_s,
        presigned: tracker.presigned_count() as u64,
        presign_s: 0.0,
        never_committed: tracker.outstanding() as u64,
        latency: tracker.latency.summary(),
        unrealized_utility_ratio_mean: counters.unrealized_utility_ratio_sum
            / counters.finite_ratio_blocks.max(1) as f64,
        prices: tracker.market().prices.clone(),
        elapsed_s: elapsed.as_secs_f64(),
        notes: tracker.notes.clone(),
    }
}

impl LoadgenReport {
    /// The report for a person, several lines.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        line(
            &mut out,
            format!(
                "loadgen: {} tx/s for {} s, {} mix, {} accounts, a batch every {} ms, node {}",
                self.rate_per_s,
                self.seconds,
                self.mix.name(),
                self.accounts,
                self.batch_ms,
                self.node
            ),
        );
        line(
            &mut out,
            format!(
                "  offered    {} ({:.1} tx/s); sent {}; not sent {} (in-flight cap), {} (sequence windows full), {} (accounts awaiting answers), {} (no funds), {} (no pre-signed left); {} in failed requests",
                self.counts.offered,
                self.offered_tx_per_s,
                self.counts.sent,
                self.counts.not_sent,
                self.counts.skipped_window,
                self.counts.skipped_busy,
                self.counts.skipped_no_funds,
                self.counts.skipped_unsigned,
                self.counts.send_failed
            ),
        );
        if self.presigned > 0 {
            line(
                &mut out,
                format!(
                    "  presigned  {} before the start, in {:.1} s",
                    self.presigned, self.presign_s
                ),
            );
        }
        line(
            &mut out,
            format!(
                "  admitted   {}; refused {}{}",
                self.counts.admitted,
                self.counts.rejected,
                by_key(&self.counts.rejected_by_reason)
            ),
        );
        line(
            &mut out,
            format!(
                "  committed  {} in {} blocks ({:.1} tx/s): accepted {} (goodput {:.1} tx/s), dropped {}{}; expired {}; never committed {}",
                self.counts.committed,
                self.counts.blocks,
                self.committed_tx_per_s,
                self.counts.accepted,
                self.goodput_tx_per_s,
                self.counts.dropped,
                by_key(&self.counts.dropped_by_reason),
                self.counts.expired,
                self.never_committed
            ),
        );
        let latency = &self.latency;
        line(
            &mut out,
            format!(
                "  latency    submit to commit, of what committed: p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms",
                latency.p50_ms, latency.p99_ms, latency.p999_ms, latency.max_ms
            ),
        );
        for note in &self.notes {
            line(&mut out, format!("  note: {note}"));
        }
        out
    }
}

/// ` (a 3, b 1)`, or nothing for an empty map.
pub fn by_key(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|(key, count)| format!("{key} {count}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_that_cannot_run_are_refused_with_the_flag_to_fix() {
        let good = LoadgenConfig::new("http://127.0.0.1:1", 100.0, Duration::from_secs(1));
        assert!(good.validate().is_ok());
        let zero_rate = LoadgenConfig {
            rate_per_s: 0.0,
            ..good.clone()
        };
        assert!(zero_rate
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--rate"));
        let lonely_payer = LoadgenConfig {
            mix: Mix::Payments,
            accounts: 1,
            ..good.clone()
        };
        assert!(lonely_payer
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--accounts 2"));
    }

    #[test]
    fn counts_by_key_read_naturally() {
        let mut counts = BTreeMap::new();
        assert_eq!(by_key(&counts), "");
        counts.insert("replayed".to_string(), 2);
        counts.insert("duplicate".to_string(), 1);
        assert_eq!(by_key(&counts), " (duplicate 1, replayed 2)");
    }

    #[tokio::test]
    async fn an_unreachable_node_is_named_in_the_error() {
        let config = LoadgenConfig::new("http://127.0.0.1:9", 10.0, Duration::from_secs(1));
        let error = run(&config).await.unwrap_err().to_string();
        assert!(error.contains("http://127.0.0.1:9"), "{error}");
        assert!(error.contains("cannot reach"), "{error}");
    }
}
