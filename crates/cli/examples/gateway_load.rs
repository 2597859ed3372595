//! Throughput and latency of the fair-access gateway against direct submission (issue 13).
//!
//! Starts a fresh `walras node` per mode (the development genesis of `walras_testkit`, 200
//! accounts) and offers `RATE` payments per second for `SECONDS`, open loop:
//! - `direct`: the node cuts on its timer (`--block-interval-ms W`), and the load generator
//!   (`walras_loadgen`, payments) submits batches to it;
//! - `gateway`: the node runs with `--block-source gateway`, the gateway (W, in this process)
//!   cuts, and `PARTICIPANTS` clients (release buffers in the client library, no added delay)
//!   each send `RATE / PARTICIPANTS` per second.
//!
//! Latency: from the instant a transaction was due by the schedule to the instant its block
//! reached its sender (the block event for `direct`, the participant's block delivery for
//! `gateway`). Prints one line per mode and the command line that reproduces it.
//!
//! `cargo run --profile test -p walras-cli --example gateway_load -- RATE SECONDS [PARTICIPANTS] [W_MS]`
//! (build `cargo test -p walras-cli --no-run` first: the node is the `walras` binary beside it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use walras_crypto::Keypair;
use walras_gateway_net::{ClientConfig, ClientEvent, GatewayConfig, Participant};
use walras_testkit::{dev_key, NodeProcess, TempDir, DEV_ACCOUNTS};
use walras_types::transaction::SEQUENCE_WINDOW;
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

#[derive(Default)]
struct Tally {
    offered: u64,
    sent: u64,
    skipped_window: u64,
    committed: u64,
    accepted: u64,
    latencies_us: Vec<u64>,
    last_commit: Option<Instant>,
    /// Own results received (matched or not), and those still unmatched at the end.
    own_results: u64,
    /// Heights skipped between consecutive blocks a participant was handed.
    height_gaps: u64,
}

impl Tally {
    fn record(&mut self, at: Instant, due: Instant, accepted: bool) {
        self.committed += 1;
        self.accepted += u64::from(accepted);
        self.latencies_us.push((at - due).as_micros() as u64);
        self.last_commit = Some(self.last_commit.map_or(at, |t| t.max(at)));
    }
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index] as f64 / 1e3
}

fn report(mode: &str, rate: f64, seconds: f64, tally: &Tally, started: Instant) {
    let mut lat = tally.latencies_us.clone();
    lat.sort_unstable();
    let span = tally
        .last_commit
        .map_or(seconds, |t| (t - started).as_secs_f64().max(seconds));
    println!(
        "{mode}: offered {:.0}/s for {seconds} s: sent {}, skipped (sequence window) {}, \
         committed {} ({} accepted), {:.0} committed tx/s; latency ms p50 {:.1} p99 {:.1} \
         p999 {:.1}",
        rate,
        tally.sent,
        tally.skipped_window,
        tally.committed,
        tally.accepted,
        tally.committed as f64 / span,
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        quantile(&lat, 0.999),
    );
}

async fn direct(rate: f64, seconds: f64, window: Duration) {
    let dir = TempDir::new("gateway-load-direct");
    let interval = window.as_millis().to_string();
    let node = NodeProcess::start(
        dir.path(),
        &[
            "--block-interval-ms",
            interval.as_str(),
            "--rate-limit-rps",
            "0",
            "--max-block-txs",
            "50000",
        ],
    );
    let config = walras_loadgen::LoadgenConfig {
        accounts: DEV_ACCOUNTS as usize,
        mix: walras_loadgen::mix::Mix::Payments,
        batch_interval: Duration::from_millis(5),
        ..walras_loadgen::LoadgenConfig::new(&node.url, rate, Duration::from_secs_f64(seconds))
    };
    let r = walras_loadgen::run(&config).await.expect("the load runs");
    println!(
        "direct: offered {:.0}/s for {seconds} s: sent {}, skipped (sequence window) {}, \
         committed {} ({} accepted), {:.0} committed tx/s; latency ms p50 {:.1} p99 {:.1} \
         p999 {:.1}",
        rate,
        r.counts.sent,
        r.counts.skipped_window,
        r.counts.committed,
        r.counts.accepted,
        r.committed_tx_per_s,
        r.latency.p50_ms,
        r.latency.p99_ms,
        r.latency.p999_ms,
    );
}

/// Participant `p`'s key in this benchmark (any key works: the gateway is given the public ones).
fn participant_key(p: u32) -> Keypair {
    let mut seed = [0x70u8; 32];
    seed[..4].copy_from_slice(&p.to_be_bytes());
    Keypair::from_seed(seed)
}

async fn gateway(rate: f64, seconds: f64, participants: u32, window: Duration) {
    let dir = TempDir::new("gateway-load-gateway");
    let key = Keypair::from_seed([9; 32]);
    let public = key.public_key().to_string();
    let node = NodeProcess::start(
        dir.path(),
        &[
            "--block-source",
            "gateway",
            "--gateway-key",
            public.as_str(),
            "--max-block-txs",
            "50000",
        ],
    );
    let participant_keys = (0..participants)
        .map(|p| participant_key(p).public_key())
        .collect();
    let mut config = GatewayConfig::new(&node.url, key, participant_keys);
    config.window = window;
    config.straggler_threshold = Duration::from_millis(500);
    let gw = walras_gateway_net::start(config)
        .await
        .expect("the gateway starts");
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start_at = Instant::now() + Duration::from_millis(1500);
    let mut tasks = Vec::new();
    // A client runs while a handle to it exists: keep one until the drain is over.
    let mut handles = Vec::new();
    for p in 0..participants {
        let (client, mut events) = Participant::start(ClientConfig {
            participant: p,
            key: participant_key(p),
            gateway_key: None,
            delta: window,
            tau: Duration::from_millis(5),
        })
        .unwrap();
        client.connect(&gw.address.to_string()).await.unwrap();
        handles.push(client.clone());
        // seq → (account, due instant); and results that came back before their trade's
        // `submit` returned to the load task (a starved task can lose that race).
        let pending: Arc<Mutex<BTreeMap<u64, (u64, Instant)>>> = Arc::default();
        let early: Arc<Mutex<BTreeMap<u64, (Instant, bool)>>> = Arc::default();
        let outstanding: Arc<Mutex<BTreeMap<u64, u64>>> = Arc::default();
        {
            let (pending, outstanding, tally, early) = (
                pending.clone(),
                outstanding.clone(),
                tally.clone(),
                early.clone(),
            );
            tokio::spawn(async move {
                let mut last_height = 0u64;
                while let Some(event) = events.recv().await {
                    let block = match event {
                        ClientEvent::Block { block, .. } => block,
                        ClientEvent::Disconnected { reason } => {
                            eprintln!("participant {p} disconnected: {reason}");
                            continue;
                        }
                        ClientEvent::Notice { .. } | ClientEvent::Refused { .. } => continue,
                    };
                    if last_height > 0 && block.height > last_height + 1 {
                        tally.lock().unwrap().height_gaps += block.height - last_height - 1;
                    }
                    last_height = last_height.max(block.height);
                    let now = Instant::now();
                    let mut pending = pending.lock().unwrap();
                    let mut outstanding = outstanding.lock().unwrap();
                    let mut tally = tally.lock().unwrap();
                    tally.own_results += block.own.len() as u64;
                    for own in block.own {
                        match pending.remove(&own.seq) {
                            Some((account, due)) => {
                                *outstanding.entry(account).or_default() -= 1;
                                tally.record(now, due, own.dropped.is_none());
                            }
                            None => {
                                early
                                    .lock()
                                    .unwrap()
                                    .insert(own.seq, (now, own.dropped.is_none()));
                            }
                        }
                    }
                }
            });
        }
        let accounts: Vec<u64> = (0..DEV_ACCOUNTS)
            .filter(|a| a % u64::from(participants) == u64::from(p))
            .collect();
        let per_participant = rate / f64::from(participants);
        let (tally, duration) = (tally.clone(), Duration::from_secs_f64(seconds));
        let early = early.clone();
        tasks.push(tokio::spawn(async move {
            let mut sequence: BTreeMap<u64, u64> = BTreeMap::new();
            // Deriving a key costs as much as a signature: derive each account's once.
            let keys: BTreeMap<u64, Keypair> = accounts.iter().map(|&a| (a, dev_key(a))).collect();
            let mut released = 0u64;
            let mut next_account = 0usize;
            tokio::time::sleep_until(start_at.into()).await;
            let mut tick = tokio::time::interval(Duration::from_millis(2));
            loop {
                tick.tick().await;
                let elapsed = start_at.elapsed().min(duration);
                let due_total = (elapsed.as_secs_f64() * per_participant) as u64;
                while released < due_total {
                    let due = start_at + Duration::from_secs_f64(released as f64 / per_participant);
                    released += 1;
                    tally.lock().unwrap().offered += 1;
                    // The next account with room in its sequence window.
                    let mut chosen = None;
                    for _ in 0..accounts.len() {
                        let a = accounts[next_account % accounts.len()];
                        next_account += 1;
                        if outstanding.lock().unwrap().get(&a).copied().unwrap_or(0)
                            < SEQUENCE_WINDOW - 1
                        {
                            chosen = Some(a);
                            break;
                        }
                    }
                    let Some(account) = chosen else {
                        tally.lock().unwrap().skipped_window += 1;
                        continue;
                    };
                    let seq = sequence.entry(account).or_insert(0);
                    *seq += 1;
                    let to = (account + 1) % DEV_ACCOUNTS;
                    let transaction = Transaction {
                        source: AccountId(account),
                        sequence: *seq,
                        operation: Operation::Payment {
                            to: AccountId(to),
                            asset: AssetId(0),
                            amount: 1,
                        },
                    };
                    let tx = SignedTransaction {
                        signature: *keys[&account].sign(&transaction.encode()).as_bytes(),
                        transaction,
                    };
                    *outstanding.lock().unwrap().entry(account).or_default() += 1;
                    match client.submit(tx).await {
                        Ok(sent) => {
                            // Lock order as in the event task: pending, then early.
                            let mut pending = pending.lock().unwrap();
                            let landed = early.lock().unwrap().remove(&sent.seq);
                            let mut tally = tally.lock().unwrap();
                            tally.sent += 1;
                            match landed {
                                Some((at, accepted)) => {
                                    *outstanding.lock().unwrap().entry(account).or_default() -= 1;
                                    tally.record(at, due, accepted);
                                }
                                None => {
                                    pending.insert(sent.seq, (account, due));
                                }
                            }
                        }
                        Err(_) => *outstanding.lock().unwrap().entry(account).or_default() -= 1,
                    }
                }
                if elapsed >= duration {
                    return;
                }
            }
        }));
    }
    let started = start_at;
    for task in tasks {
        task.await.unwrap();
    }
    // Drain: until nothing is pending or 30 s pass.
    let drain_started = Instant::now();
    let drain_until = drain_started + Duration::from_secs(30);
    loop {
        let done = {
            let t = tally.lock().unwrap();
            t.committed >= t.sent
        };
        if done || Instant::now() > drain_until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(handles);
    let tally = tally.lock().unwrap();
    report("gateway", rate, seconds, &tally, started);
    println!(
        "gateway: sent but never seen in a block: {} (own results received: {}, blocks \
         skipped: {})",
        tally.sent - tally.committed.min(tally.sent),
        tally.own_results,
        tally.height_gaps
    );
    let seals = gw.seals();
    let blocks = seals.len().max(1);
    let mean_wait_ms = seals
        .iter()
        .map(|s| (s.sealed_ns - s.previous_published_ns) as f64 / 1e6)
        .sum::<f64>()
        / blocks as f64;
    println!(
        "gateway: {} blocks, mean wait from block N's publication to the seal of N+1 {:.1} ms",
        seals.len(),
        mean_wait_ms
    );
    let metrics = gw.metrics_text();
    let counters: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            [
                "stragglers_detected",
                "late_trades",
                "queue_overflows",
                "cut_off",
                "refused",
                "trades_received",
                "trades_sealed",
                "own_results",
            ]
            .iter()
            .any(|name| l.starts_with("walras_gateway_") && l.contains(name))
        })
        .collect();
    println!("gateway: {}", counters.join(", "));
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let rate: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000.0);
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let participants: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(16);
    let window_ms: u64 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(20);
    println!(
        "cargo run --profile test -p walras-cli --example gateway_load -- {rate} {seconds} \
         {participants} {window_ms}"
    );
    let window = Duration::from_millis(window_ms);
    direct(rate, seconds, window).await;
    gateway(rate, seconds, participants, window).await;
}
