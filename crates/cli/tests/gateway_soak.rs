//! The fair-access gateway under attack (issue 26, items 3, 4 and 8): a `walras node --block-source
//! gateway` process with a low per-client rate limit, a `walras gateway` process, honest
//! participants (the client library, one payment per block each) and a hostile one (raw frames)
//! that floods trades with clocks far beyond the published height, copies and replays of signed
//! transactions, trades from unknown accounts and more valid trades than its share, while a local
//! client bursts requests at the node. The honest participants must get every trade into a block
//! (accepted), blocks must keep coming, and the gateway must keep running.
//!
//! `WALRAS_GATEWAY_SOAK_SECS` sets the attack's length (default 6 s); `scripts/gateway-soak.sh`
//! runs it for minutes and keeps the figures it prints (blocks, honest trades sent and
//! committed, hostile refusals by reason, the gateway's RSS at start and end).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use walras_crypto::Keypair;
use walras_gateway::DeliveryClock;
use walras_gateway::{
    framed, hello_signing_message, Downlink, NoticeCode, SignedHello, Uplink, PROTOCOL_VERSION,
};
use walras_gateway_net::{ClientConfig, ClientEvent, Participant};
use walras_testkit::{payment, NodeProcess, TempDir};

#[path = "support/frame.rs"]
mod frame;
use frame::read_frame;

const HONEST: u32 = 3;
const HOSTILE: u32 = HONEST;
const WINDOW_MS: u64 = 50;
/// The node's per-client rate limit: low, so that a burst gets 429s at once.
const RATE_RPS: &str = "50";
/// The gateway's buffer: 256 trades, so each of the 4 participants has a share of 64.
const QUEUE_LEN_MAX: &str = "256";
/// The hostile participant's accounts (dev accounts, keys anyone can derive).
const HOSTILE_ACCOUNTS: std::ops::Range<u64> = 150..170;

fn participant_key(index: u32) -> Keypair {
    Keypair::from_seed([200 + index as u8; 32])
}

/// A `walras gateway` process, killed on drop.
struct GatewayProcess {
    child: Child,
    address: String,
    metrics_url: String,
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GatewayProcess {
    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Resident memory in KiB (`VmRSS` of /proc).
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

/// A node in gateway mode (rate limit `RATE_RPS`) and a gateway process for `participants`.
fn start(dir: &TempDir, participants: u32) -> (NodeProcess, GatewayProcess) {
    let key_file = dir.path().join("gateway.key");
    let keygen = Command::new(walras_testkit::walras_bin())
        .args(["keygen", "--out"])
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(keygen.status.success());
    let printed = String::from_utf8_lossy(&keygen.stdout).to_string();
    let public_key = printed
        .trim()
        .rsplit("public key ")
        .next()
        .unwrap()
        .trim_end_matches(')')
        .to_string();
    let node = NodeProcess::start(
        &dir.path().join("node"),
        &[
            "--block-source",
            "gateway",
            "--gateway-key",
            public_key.as_str(),
            "--rate-limit-rps",
            RATE_RPS,
            "--rate-limit-burst",
            RATE_RPS,
        ],
    );
    let participants_file = dir.path().join("participants.txt");
    let keys: String = (0..participants)
        .map(|i| format!("{}\n", participant_key(i).public_key()))
        .collect();
    std::fs::write(&participants_file, keys).unwrap();
    let mut child = Command::new(walras_testkit::walras_bin())
        .args(["gateway", "--node", node.url.as_str(), "--key"])
        .arg(&key_file)
        .arg("--participant-keys")
        .arg(&participants_file)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .args(["--window-ms", &WINDOW_MS.to_string()])
        .args(["--straggler-threshold-ms", "1000"])
        .args(["--queue-len-max", QUEUE_LEN_MAX])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let address = first
        .strip_prefix("walras gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    let second = lines.next().unwrap().unwrap();
    let metrics_url = second.strip_prefix("metrics on ").unwrap().to_string();
    std::thread::spawn(move || for _ in lines {});
    let gateway = GatewayProcess {
        child,
        address,
        metrics_url,
    };
    (node, gateway)
}

async fn metrics(gateway: &GatewayProcess) -> BTreeMap<String, u64> {
    let text = reqwest::get(&gateway.metrics_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (name, value) = line.split_once(' ')?;
            Some((name.to_string(), value.parse::<f64>().ok()? as u64))
        })
        .collect()
}

/// What an honest participant sent and what the blocks said of it.
#[derive(Default)]
struct HonestLog {
    /// Uplink seq → the payment's sequence number.
    sent: BTreeMap<u64, u64>,
    /// Uplink seq → `None` accepted, `Some(reason)` dropped.
    results: BTreeMap<u64, Option<String>>,
    notices: Vec<(Option<u64>, NoticeCode, String)>,
    /// When each block was released to it.
    blocks: Vec<Instant>,
}

struct Honest {
    participant: Participant,
    log: Arc<Mutex<HonestLog>>,
    sending: Arc<AtomicBool>,
}

/// An honest participant: one payment from its own account per block it receives.
fn honest(index: u32) -> Honest {
    let (participant, mut events) = Participant::start(ClientConfig {
        participant: index,
        key: participant_key(index),
        gateway_key: None,
        delta: Duration::from_millis(WINDOW_MS),
        tau: Duration::from_millis(5),
    })
    .unwrap();
    let log = Arc::new(Mutex::new(HonestLog::default()));
    let sending = Arc::new(AtomicBool::new(true));
    let account = 10 + u64::from(index);
    {
        let (participant, log, sending) = (participant.clone(), log.clone(), sending.clone());
        tokio::spawn(async move {
            let mut sequence = 0u64;
            while let Some(event) = events.recv().await {
                match event {
                    ClientEvent::Block { block, .. } => {
                        {
                            let mut log = log.lock().unwrap();
                            log.blocks.push(Instant::now());
                            for own in &block.own {
                                log.results.insert(own.seq, own.dropped.clone());
                            }
                        }
                        if sending.load(Ordering::SeqCst) {
                            sequence += 1;
                            let tx = payment(account, sequence, 100 + account, 0, 1);
                            if let Ok(sent) = participant.submit(tx).await {
                                log.lock().unwrap().sent.insert(sent.seq, sequence);
                            }
                        }
                    }
                    ClientEvent::Notice { seq, code, text } => {
                        log.lock().unwrap().notices.push((seq, code, text));
                    }
                    _ => {}
                }
            }
        });
    }
    Honest {
        participant,
        log,
        sending,
    }
}

/// The hostile participant's view: the latest height it received, its committed sequence
/// numbers, and the Notices it got by code.
#[derive(Default)]
struct HostileState {
    height: AtomicU64,
    /// When the latest height arrived: its clocks measure the time since (a fast participant's,
    /// so that it holds no seal back; holding seals back is bounded by the straggler rule).
    height_at: Mutex<Option<Instant>>,
    committed: Mutex<BTreeMap<u64, u64>>,
    /// Uplink seq → (account, sequence) of the valid trades it sent.
    sent: Mutex<BTreeMap<u64, (u64, u64)>>,
    notices: Mutex<BTreeMap<String, u64>>,
}

/// Connects as `participant` over raw frames; returns the stream after the Welcome.
async fn connect_raw(address: &str, participant: u32) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let first = read_frame(&mut stream, 1 << 20).await.unwrap().unwrap();
    let Downlink::Challenge { gateway_key, nonce } = Downlink::decode(&first).unwrap() else {
        panic!("the first frame is not a Challenge");
    };
    let signature = participant_key(participant).sign(&hello_signing_message(
        &gateway_key,
        &nonce,
        participant,
        None,
    ));
    let hello = Uplink::Hello {
        version: PROTOCOL_VERSION,
        participant,
        signed: Some(SignedHello {
            last_height: None,
            signature: *signature.as_bytes(),
        }),
    };
    stream.write_all(&framed(&hello.encode())).await.unwrap();
    stream
}

/// Reads the hostile participant's downlink: heights, own results, Notices by code.
async fn hostile_reader(mut reader: tokio::net::tcp::OwnedReadHalf, state: Arc<HostileState>) {
    while let Ok(Some(frame)) = read_frame(&mut reader, 8 << 20).await {
        match Downlink::decode(&frame) {
            Ok(Downlink::Block(block)) => {
                let sent = state.sent.lock().unwrap();
                let mut committed = state.committed.lock().unwrap();
                for own in block.own.iter().filter(|own| own.dropped.is_none()) {
                    if let Some(&(account, sequence)) = sent.get(&own.seq) {
                        let last = committed.entry(account).or_default();
                        *last = (*last).max(sequence);
                    }
                }
                if state.height.fetch_max(block.height, Ordering::SeqCst) < block.height {
                    *state.height_at.lock().unwrap() = Some(Instant::now());
                }
            }
            Ok(Downlink::Welcome { height, .. }) => {
                state.height.fetch_max(height, Ordering::SeqCst);
            }
            Ok(Downlink::Notice { code, text, .. }) => {
                if code == NoticeCode::Refused {
                    eprintln!("the hostile participant was refused: {text}");
                }
                *state
                    .notices
                    .lock()
                    .unwrap()
                    .entry(format!("{code:?}"))
                    .or_default() += 1;
            }
            _ => {}
        }
    }
}

/// The hostile participant until `stop`: each round, valid trades beyond its share, copies of
/// waiting ones, replays of committed ones, trades stamped 10^15 blocks ahead, trades from
/// unknown accounts. Returns the messages sent.
async fn hostile(address: String, state: Arc<HostileState>, stop: Arc<AtomicBool>) -> u64 {
    let stream = connect_raw(&address, HOSTILE).await;
    let (reader, mut writer) = stream.into_split();
    tokio::spawn(hostile_reader(reader, state.clone()));
    let stranger = Keypair::from_seed([9; 32]);
    let (mut seq, mut sent, mut round) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::SeqCst) {
        round += 1;
        let (height, elapsed) = {
            let at = state.height_at.lock().unwrap();
            let height = state.height.load(Ordering::SeqCst);
            (height, at.map_or(0, |at| at.elapsed().as_nanos() as u64))
        };
        let mut tick = 0u64;
        let mut frames = Vec::new();
        // `None`: the current clock ⟨height, elapsed⟩.
        let mut trade = |clock: Option<DeliveryClock>, tx: walras_types::SignedTransaction| {
            seq += 1;
            tick += 1;
            let clock = clock.unwrap_or(DeliveryClock::new(height, elapsed + tick));
            let message = Uplink::Trade {
                seq,
                clock,
                transaction: tx.encode(),
            };
            frames.extend_from_slice(&framed(&message.encode()));
            seq
        };
        let committed = state.committed.lock().unwrap().clone();
        let mut valid = Vec::new();
        for account in HOSTILE_ACCOUNTS {
            let last = committed.get(&account).copied().unwrap_or(0);
            // Four fresh sequence numbers each (80: more than its share of 64), sent again
            // every round until committed (copies of waiting ones), and one already committed
            // (a replay).
            for k in 1..=4 {
                let id = trade(None, payment(account, last + k, 1, 0, 1));
                valid.push((id, (account, last + k)));
            }
            if last > 0 {
                trade(None, payment(account, last, 1, 0, 1));
            }
        }
        state.sent.lock().unwrap().extend(valid);
        for k in 0..50 {
            let far = DeliveryClock::new(1_000_000_000_000_000, k);
            trade(Some(far), payment(HOSTILE_ACCOUNTS.start, 1, 1, 0, 1));
        }
        for k in 0..5 {
            // Unknown accounts: a fresh one each round (a node lookup, within the connection's
            // budget), and four repeats of one (remembered as unknown).
            let source = if k == 0 { 1_000_000 + round } else { 999_999 };
            let tx = walras_types::Transaction {
                source: walras_types::AccountId(source),
                sequence: 1,
                operation: walras_types::Operation::Payment {
                    to: walras_types::AccountId(1),
                    asset: walras_types::AssetId(0),
                    amount: 1,
                },
            };
            let signature = *stranger.sign(&tx.encode()).as_bytes();
            trade(
                None,
                walras_types::SignedTransaction {
                    transaction: tx,
                    signature,
                },
            );
        }
        // A heartbeat at the current clock keeps it from holding seals back.
        seq += 1;
        tick += 1;
        frames.extend_from_slice(&framed(
            &Uplink::Heartbeat {
                seq,
                clock: DeliveryClock::new(height, elapsed + tick),
            }
            .encode(),
        ));
        if let Err(error) = writer.write_all(&frames).await {
            eprintln!("the hostile participant's connection ended after {round} rounds: {error}");
            break;
        }
        sent = seq;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sent
}

/// A local client bursting `requests` GETs at the node; returns how many got 429.
async fn burst(url: &str, requests: usize) -> usize {
    let client = reqwest::Client::new();
    let mut limited = 0;
    for chunk in 0..requests.div_ceil(50) {
        let answers =
            futures_util::future::join_all((0..50.min(requests - chunk * 50)).map(|_| {
                let client = client.clone();
                let url = format!("{url}/v1/status");
                async move { client.get(url).send().await.map(|r| r.status().as_u16()) }
            }))
            .await;
        limited += answers.iter().filter(|a| matches!(a, Ok(429))).count();
    }
    limited
}

fn soak_seconds() -> u64 {
    std::env::var("WALRAS_GATEWAY_SOAK_SECS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(6)
}

/// Issue 26 acceptance (items 3, 4, 8). Trigger: a hostile participant floods trades stamped
/// with clock point 10^15, copies and replays of signed transactions, trades from unknown
/// accounts and more valid trades than its share, and a local client bursts requests at the
/// node (rate limit 50/s), beside three honest participants. Before the fixes the gateway
/// stopped on the node's 429 for a seal, the buffer filled with trades that never seal, and
/// copies reached blocks. Every honest trade must land in a block, accepted; blocks keep coming;
/// the gateway keeps running; and the hostile's trades are refused by reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn honest_participants_get_every_trade_into_blocks_beside_a_hostile_one() {
    let seconds = soak_seconds();
    let dir = TempDir::new("gateway-soak");
    let (node, mut gateway) = start(&dir, HONEST + 1);
    let rss_start = gateway.rss_kib();
    let honest: Vec<Honest> = (0..HONEST).map(honest).collect();
    for bot in &honest {
        bot.participant.connect(&gateway.address).await.unwrap();
    }
    // The honest accounts are read once (then cached) before the attack starts.
    let warm = Instant::now() + Duration::from_secs(20);
    while honest.iter().any(|bot| {
        !bot.log
            .lock()
            .unwrap()
            .results
            .values()
            .any(Option::is_none)
    }) {
        assert!(
            Instant::now() < warm,
            "the honest participants' first trades landed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let blocks_before = metrics(&gateway).await["walras_gateway_blocks_sealed_total"];
    let state = Arc::new(HostileState::default());
    let stop = Arc::new(AtomicBool::new(false));
    let attack = tokio::spawn(hostile(
        gateway.address.clone(),
        state.clone(),
        stop.clone(),
    ));
    let started = Instant::now();
    let end = started + Duration::from_secs(seconds);
    let (mut limited, mut requests) = (0, 0);
    let mut rss_max = rss_start;
    while Instant::now() < end {
        limited += burst(&node.url, 500).await;
        requests += 500;
        rss_max = rss_max.max(gateway.rss_kib());
        assert!(gateway.running(), "the gateway stopped during the attack");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let hostile_sent = attack.await.unwrap();
    for bot in &honest {
        bot.sending.store(false, Ordering::SeqCst);
    }
    // The last honest trades land within a few blocks.
    let settle = Instant::now() + Duration::from_secs(10);
    loop {
        let pending: usize = honest
            .iter()
            .map(|bot| {
                let log = bot.log.lock().unwrap();
                log.sent
                    .keys()
                    .filter(|s| !log.results.contains_key(s))
                    .count()
            })
            .sum();
        if pending == 0 || Instant::now() > settle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let figures = metrics(&gateway).await;
    let rss_end = gateway.rss_kib();
    assert!(gateway.running(), "the gateway kept running");
    let blocks = figures["walras_gateway_blocks_sealed_total"] - blocks_before;
    let (mut sent, mut committed, mut worst_gap) = (0, 0, Duration::ZERO);
    for (index, bot) in honest.iter().enumerate() {
        let log = bot.log.lock().unwrap();
        for (seq, sequence) in &log.sent {
            sent += 1;
            match log.results.get(seq) {
                Some(None) => committed += 1,
                other => panic!("honest participant {index}'s trade {sequence}: {other:?}"),
            }
        }
        let refused: Vec<_> = log
            .notices
            .iter()
            .filter(|(_, code, _)| {
                !matches!(
                    code,
                    NoticeCode::Late | NoticeCode::Straggler | NoticeCode::Rejoined
                )
            })
            .collect();
        assert!(
            refused.is_empty(),
            "honest participant {index} was refused: {refused:?}"
        );
        let attack_blocks: Vec<&Instant> = log.blocks.iter().filter(|at| **at >= started).collect();
        for pair in attack_blocks.windows(2) {
            worst_gap = worst_gap.max(pair[1].duration_since(*pair[0]));
        }
    }
    let notices = state.notices.lock().unwrap().clone();
    println!(
        "gateway soak: {seconds} s of attack; {blocks} blocks (longest gap at an honest \
         participant {worst_gap:?}); honest trades sent {sent}, committed {committed}; hostile \
         messages sent {hostile_sent}, its Notices {notices:?}; node 429s to the burst \
         {limited} of {requests}; gateway counters: clock_ahead {} share_full {} duplicates {} \
         replays {} unknown_sources {} busy {} node_retries {} trades_sealed {}; gateway RSS \
         {rss_start} KiB at start, {rss_max} KiB at most, {rss_end} KiB at end",
        figures["walras_gateway_clock_ahead_total"],
        figures["walras_gateway_share_full_total"],
        figures["walras_gateway_duplicates_total"],
        figures["walras_gateway_replays_total"],
        figures["walras_gateway_unknown_sources_total"],
        figures["walras_gateway_busy_total"],
        figures["walras_gateway_node_retries_total"],
        figures["walras_gateway_trades_sealed_total"],
    );
    assert_eq!(committed, sent, "every honest trade committed");
    assert!(
        sent >= HONEST as u64 * seconds,
        "the honest participants kept trading: {sent}"
    );
    assert!(
        blocks >= seconds * 2,
        "blocks kept coming: {blocks} in {seconds} s"
    );
    assert!(
        worst_gap < Duration::from_secs(3),
        "a gap of {worst_gap:?} between blocks"
    );
    assert!(
        limited > 0,
        "the burst was rate limited (the scenario happened)"
    );
    for counter in [
        "walras_gateway_clock_ahead_total",
        "walras_gateway_share_full_total",
        "walras_gateway_duplicates_total",
        "walras_gateway_replays_total",
    ] {
        assert!(
            figures[counter] > 0,
            "{counter} counted the hostile's trades"
        );
    }
    assert!(
        figures["walras_gateway_unknown_sources_total"] + figures["walras_gateway_busy_total"] > 0,
        "trades from unknown accounts were refused"
    );
}

/// Issue 26, item 3. Trigger: a local client bursts requests at the node (rate limit 50/s per
/// client address, shared by everything on 127.0.0.1); before the fix the gateway's next seal
/// got `429 rate_limited` and `walras gateway` exited ("the node refused block N (429)"), so
/// blocks stopped. The authenticated seal is not rate limited, and refusals that can pass are
/// retried: blocks keep coming through repeated bursts and the gateway keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_client_requests_does_not_stop_the_gateway() {
    let dir = TempDir::new("gateway-burst");
    let (node, mut gateway) = start(&dir, 1);
    let bot = honest(0);
    bot.participant.connect(&gateway.address).await.unwrap();
    let started = Instant::now();
    let (mut limited, mut rounds) = (0, 0);
    let before = metrics(&gateway).await["walras_gateway_blocks_sealed_total"];
    while started.elapsed() < Duration::from_secs(3) {
        limited += burst(&node.url, 1_000).await;
        rounds += 1;
        assert!(
            gateway.running(),
            "the gateway stopped after burst {rounds}"
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(gateway.running(), "the gateway stopped");
    assert!(limited > 500, "the bursts were rate limited: {limited}");
    let figures = metrics(&gateway).await;
    let after = figures["walras_gateway_blocks_sealed_total"];
    // The node let every seal through (authenticated, not rate limited): none was sent again.
    assert_eq!(figures["walras_gateway_node_retries_total"], 0);
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{rounds} bursts of 1,000 requests, {limited} answered 429; {} blocks in {elapsed:.1} s",
        after - before
    );
    assert!(
        (after - before) as f64 >= elapsed * 4.0,
        "blocks kept coming: {} in {elapsed:.1} s",
        after - before
    );
    let log = bot.log.lock().unwrap();
    assert!(
        log.results.values().filter(|r| r.is_none()).count() >= 10,
        "the participant's trades committed"
    );
}

/// Issue 26, item 8. Trigger: one participant sends a signed transaction that has committed
/// 300 more times, then 100 copies of a fresh one at once; before the fix the gateway sealed
/// every copy (the block filter dropped them as replays, 2.2 MB of block log from one
/// participant), and the copies of the fresh one in one block got the original dropped too.
/// Now the gateway applies the node's admission rule: only the first of each reaches a block,
/// accepted; the rest are refused as `Replayed` and `Duplicate` and never sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_and_replays_of_a_signed_transaction_never_reach_a_block() {
    let dir = TempDir::new("gateway-replays");
    let (_node, gateway) = start(&dir, 1);
    let (participant, mut events) = Participant::start(ClientConfig {
        participant: 0,
        key: participant_key(0),
        gateway_key: None,
        delta: Duration::from_millis(WINDOW_MS),
        tau: Duration::from_millis(5),
    })
    .unwrap();
    participant.connect(&gateway.address).await.unwrap();
    /// (uplink seq, drop reason) of the participant's transactions in blocks, in order.
    type Results = Arc<Mutex<Vec<(u64, Option<String>)>>>;
    let results: Results = Arc::default();
    let notices: Arc<Mutex<BTreeMap<u64, NoticeCode>>> = Arc::default();
    {
        let (results, notices) = (results.clone(), notices.clone());
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    ClientEvent::Block { block, .. } => results
                        .lock()
                        .unwrap()
                        .extend(block.own.into_iter().map(|own| (own.seq, own.dropped))),
                    ClientEvent::Notice {
                        seq: Some(seq),
                        code,
                        ..
                    } => {
                        notices.lock().unwrap().insert(seq, code);
                    }
                    _ => {}
                }
            }
        });
    }
    let wait_for = |count: usize| {
        let results = results.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while results.lock().unwrap().len() < count {
                assert!(Instant::now() < deadline, "{count} results within 10 s");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let used = payment(20, 1, 21, 0, 1);
    let first = participant.submit(used).await.unwrap().seq;
    wait_for(1).await;
    let mut replays = Vec::new();
    for _ in 0..300 {
        replays.push(participant.submit(used).await.unwrap().seq);
    }
    let fresh = payment(20, 2, 21, 0, 1);
    let mut copies = Vec::new();
    for _ in 0..100 {
        copies.push(participant.submit(fresh).await.unwrap().seq);
    }
    wait_for(2).await;
    // A few more blocks: nothing else may arrive.
    tokio::time::sleep(Duration::from_millis(20 * WINDOW_MS)).await;
    let results = results.lock().unwrap().clone();
    assert_eq!(
        results,
        vec![(first, None), (copies[0], None)],
        "only the original and the first copy of the fresh one reached blocks, accepted"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while notices.lock().unwrap().len() < replays.len() + copies.len() - 1 {
        assert!(
            Instant::now() < deadline,
            "a notice for every refusal within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let notices = notices.lock().unwrap().clone();
    assert!(replays
        .iter()
        .all(|seq| notices.get(seq) == Some(&NoticeCode::Replayed)));
    // A copy sent while the first is pending is a duplicate; one sent after the first
    // committed (a slow machine: CI ran this at 10 s where it takes 1 s alone) is a replay.
    // Either way it is refused and never sealed.
    assert!(copies[1..].iter().all(|seq| matches!(
        notices.get(seq),
        Some(NoticeCode::Duplicate | NoticeCode::Replayed)
    )));
    let late_copies = copies[1..]
        .iter()
        .filter(|seq| notices.get(seq) == Some(&NoticeCode::Replayed))
        .count() as u64;
    let figures = metrics(&gateway).await;
    assert_eq!(figures["walras_gateway_replays_total"], 300 + late_copies);
    assert_eq!(figures["walras_gateway_duplicates_total"], 99 - late_copies);
}
