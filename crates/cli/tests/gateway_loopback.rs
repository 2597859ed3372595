//! The fair-access gateway end to end on loopback (issue 13): a `walras node` process with
//! `--block-source gateway`, the gateway in this process, and 8 participant bots, each behind
//! its own seeded delay shim (a TCP proxy: base one-way delay 0–20 ms per bot and direction,
//! spikes up to 200 ms, order kept), each answering every block after its own response time.
//! The even bots connect over TCP, the odd ones over WebSocket (through the same kind of shim).
//!
//! - With the DBO cut, every trade whose delivery clock says it answered block N in less than W
//!   is in block N+1, and none that took W or more is.
//! - With the timer cut (arrival order, a block every W after publication) the same bots and
//!   shims are measurably unfair: the test prints and requires a positive share of trades in
//!   the wrong block.
//! - A silent bot delays a seal by at most the straggler threshold (plus the shim's delay of
//!   its last heartbeat); a bot that goes silent, or disconnects and reconnects, rejoins.
//! - The node's blocks replay: a restarted node recovers every block, checking each state root,
//!   to the same height and state root.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use walras_crypto::Keypair;
use walras_gateway_net::NoticeCode;
use walras_gateway_net::ParticipantEvent;
use walras_gateway_net::{ClientConfig, ClientEvent, CutMode, GatewayConfig, Participant};
use walras_testkit::{payment, NodeProcess, TempDir};

#[path = "support/frame.rs"]
mod frame;
use frame::read_frame;

const BOTS: u32 = 8;
const WINDOW: Duration = Duration::from_millis(55);
const TAU: Duration = Duration::from_millis(5);
const THRESHOLD: Duration = Duration::from_millis(600);
/// Nominal response times: four well under W, one just under, three over.
const RESPONSE_MS: [u64; BOTS as usize] = [5, 20, 35, 50, 62, 75, 90, 110];
const SHIM_SEED: u64 = 0x5eed;

/// One-way delays of one shim direction: a base in 0–20 ms, jitter under 1 ms, and one chunk in
/// 25 delayed by a spike of 50–200 ms.
struct Delays {
    rng: ChaCha8Rng,
    base_us: u64,
}

impl Delays {
    fn new(seed: u64) -> Delays {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let base_us = rng.next_u64() % 20_001;
        Delays { rng, base_us }
    }

    fn next(&mut self) -> Duration {
        let jitter = self.rng.next_u64() % 1_000;
        let spike = if self.rng.next_u64().is_multiple_of(25) {
            50_000 + self.rng.next_u64() % 150_001
        } else {
            0
        };
        Duration::from_micros(self.base_us + jitter + spike)
    }
}

/// Copies `from` to `to`, each chunk delayed, in order (a chunk never overtakes an earlier one).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut delays: Delays,
) {
    let (chunks, mut due) = mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, bytes)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut last = tokio::time::Instant::now();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let at = (tokio::time::Instant::now() + delays.next()).max(last);
        last = at;
        if chunks.send((at, buffer[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(chunks);
    let _ = writer.await;
}

/// A delay shim in front of the gateway for one bot; every connection gets its own delays
/// (seeded by the bot and the connection's number).
async fn start_shim(target: SocketAddr, bot: u32) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut connection = 0u64;
        while let Ok((inbound, _)) = listener.accept().await {
            connection += 1;
            let Ok(outbound) = TcpStream::connect(target).await else {
                continue;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let seed = SHIM_SEED ^ (u64::from(bot) << 32) ^ (connection << 8);
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            tokio::spawn(pump(in_read, out_write, Delays::new(seed ^ 1)));
            tokio::spawn(pump(out_read, in_write, Delays::new(seed ^ 2)));
        }
    });
    address
}

/// A trade as its bot sent it and where it landed.
#[derive(Clone, Debug)]
struct TradeRecord {
    bot: u32,
    seq: u64,
    /// The delivery clock it carried: ⟨block answered, response time⟩.
    point: u64,
    elapsed: Duration,
    landed: Option<u64>,
}

#[derive(Default)]
struct BotLog {
    trades: Vec<TradeRecord>,
    /// seq → height, from the blocks' own results.
    landed: BTreeMap<u64, u64>,
}

struct Bot {
    participant: Participant,
    log: Arc<Mutex<BotLog>>,
    answering: Arc<AtomicBool>,
    /// `HOST:PORT` (TCP) or `ws://HOST:PORT` (WebSocket), through the bot's shim.
    address: String,
}

fn start_bot(index: u32, address: String) -> Bot {
    let (participant, mut events) = Participant::start(ClientConfig {
        participant: index,
        key: participant_key(index),
        gateway_key: Some(gateway_key().public_key()),
        delta: WINDOW,
        tau: TAU,
    })
    .unwrap();
    let log = Arc::new(Mutex::new(BotLog::default()));
    let answering = Arc::new(AtomicBool::new(false));
    let response = Duration::from_millis(RESPONSE_MS[index as usize]);
    let account = u64::from(index) + 1;
    let sequence = Arc::new(Mutex::new(0u64));
    {
        let (participant, log, answering) = (participant.clone(), log.clone(), answering.clone());
        tokio::spawn(async move {
            let mut answered = 0u64;
            while let Some(event) = events.recv().await {
                let ClientEvent::Block { block, at } = event else {
                    continue;
                };
                {
                    let mut log = log.lock().unwrap();
                    for own in &block.own {
                        log.landed.insert(own.seq, block.height);
                    }
                }
                if block.height <= answered || !answering.load(Ordering::SeqCst) {
                    continue;
                }
                answered = block.height;
                let (participant, log, sequence) =
                    (participant.clone(), log.clone(), sequence.clone());
                tokio::spawn(async move {
                    tokio::time::sleep_until((at + response).into()).await;
                    let tx = {
                        let mut sequence = sequence.lock().unwrap();
                        *sequence += 1;
                        payment(account, *sequence, 100 + account, 0, 1)
                    };
                    if let Ok(sent) = participant.submit(tx).await {
                        log.lock().unwrap().trades.push(TradeRecord {
                            bot: index,
                            seq: sent.seq,
                            point: sent.clock.point,
                            elapsed: Duration::from_nanos(sent.clock.elapsed_ns),
                            landed: None,
                        });
                    }
                });
            }
        });
    }
    Bot {
        participant,
        log,
        answering,
        address,
    }
}

fn gateway_key() -> Keypair {
    Keypair::from_seed([7; 32])
}

fn participant_key(index: u32) -> Keypair {
    Keypair::from_seed([100 + index as u8; 32])
}

fn start_node(data: &std::path::Path) -> NodeProcess {
    let key = gateway_key().public_key().to_string();
    NodeProcess::start(
        data,
        &["--block-source", "gateway", "--gateway-key", key.as_str()],
    )
}

struct Run {
    gateway: walras_gateway_net::Gateway,
    bots: Vec<Bot>,
}

async fn start_run(node: &NodeProcess, cut: CutMode) -> Run {
    let keys = (0..BOTS).map(|i| participant_key(i).public_key()).collect();
    let mut config = GatewayConfig::new(&node.url, gateway_key(), keys);
    config.window = WINDOW;
    config.straggler_threshold = THRESHOLD;
    config.cut = cut;
    config.listen_ws = Some("127.0.0.1:0".into());
    let gateway = walras_gateway_net::start(config).await.unwrap();
    let ws = gateway.ws_address.expect("the WebSocket listener");
    let mut bots = Vec::new();
    for index in 0..BOTS {
        // Odd bots over WebSocket: the shim delays its bytes the same way.
        let address = if index % 2 == 1 {
            format!("ws://{}", start_shim(ws, index).await)
        } else {
            start_shim(gateway.address, index).await.to_string()
        };
        let bot = start_bot(index, address.clone());
        bot.participant.connect(&address).await.unwrap();
        bots.push(bot);
    }
    Run { gateway, bots }
}

/// Waits until the gateway has sealed `blocks` more blocks (or panics after `limit`).
async fn wait_for_seals(gateway: &walras_gateway_net::Gateway, blocks: usize, limit: Duration) {
    let target = gateway.seals().len() + blocks;
    let deadline = Instant::now() + limit;
    while gateway.seals().len() < target {
        assert!(
            Instant::now() < deadline,
            "only {} of {target} blocks sealed within {limit:?}",
            gateway.seals().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Answers blocks for `blocks` blocks, stops, lets the last trades land; returns every trade.
async fn answer_for(run: &Run, blocks: usize) -> Vec<TradeRecord> {
    for bot in &run.bots {
        bot.answering.store(true, Ordering::SeqCst);
    }
    wait_for_seals(&run.gateway, blocks, Duration::from_secs(20)).await;
    for bot in &run.bots {
        bot.answering.store(false, Ordering::SeqCst);
    }
    // The slowest answer (110 ms, plus a spike) and two more blocks for it to land.
    tokio::time::sleep(Duration::from_millis(400)).await;
    wait_for_seals(&run.gateway, 3, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut trades = Vec::new();
    for bot in &run.bots {
        let log = bot.log.lock().unwrap();
        for trade in &log.trades {
            let mut trade = trade.clone();
            trade.landed = log.landed.get(&trade.seq).copied();
            trades.push(trade);
        }
    }
    trades
}

/// Trades in the wrong block by the rule "answered block N within W ⇒ block N+1, else later".
fn misplaced(trades: &[TradeRecord]) -> Vec<&TradeRecord> {
    trades
        .iter()
        .filter(|t| {
            let landed = t.landed.expect("every trade landed");
            if t.elapsed < WINDOW {
                landed != t.point + 1
            } else {
                landed <= t.point + 1
            }
        })
        .collect()
}

/// The paper's fairness (§6.1): over pairs of trades from different bots that answered the same
/// block, the share where the faster answer landed in the same block or an earlier one.
fn pairwise_fairness(trades: &[TradeRecord]) -> f64 {
    let (mut pairs, mut fair) = (0u64, 0u64);
    for a in trades {
        for b in trades {
            if a.bot != b.bot && a.point == b.point && a.elapsed < b.elapsed {
                pairs += 1;
                if a.landed <= b.landed {
                    fair += 1;
                }
            }
        }
    }
    fair as f64 / pairs.max(1) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gateway_puts_every_answer_within_w_into_the_next_block_and_the_timer_cut_does_not() {
    let started = Instant::now();
    // --- DBO cut.
    let dbo_dir = TempDir::new("gateway-dbo");
    let node = start_node(dbo_dir.path());
    let client = reqwest::Client::new();
    let refused = client
        .post(format!("{}/v1/transactions", node.url))
        .header("content-type", "application/octet-stream")
        .body(payment(1, 1, 2, 0, 1).encode())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403, "public submit is closed");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "gateway_only");
    // The link itself: a batch signed by another key, and one for a height that is not next.
    let post_batch = |key: Keypair, height: u64| {
        let client = client.clone();
        let url = format!("{}/v1/gateway/seal", node.url);
        async move {
            let body = walras_gateway::SealedBatch {
                height,
                stats: walras_gateway::GatewayStats::default(),
                transactions: vec![payment(1, 1, 2, 0, 1).encode()],
            }
            .encode()
            .unwrap();
            let signature = key.sign(&walras_gateway::seal_signing_message(&body));
            let response = client
                .post(url)
                .header(walras_gateway::SEAL_SIGNATURE_HEADER, signature.to_string())
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap();
            (
                status,
                body["error"]["code"].as_str().unwrap_or("").to_string(),
            )
        }
    };
    assert_eq!(
        post_batch(Keypair::from_seed([8; 32]), 1).await,
        (401, "bad_gateway_signature".to_string())
    );
    assert_eq!(
        post_batch(gateway_key(), 5).await,
        (409, "wrong_height".to_string())
    );

    let run = start_run(&node, CutMode::Dbo).await;
    // Bots that connected late (their clock still at point 0) straggle until block 1 reaches
    // them; after three blocks every bot holds seals again.
    wait_for_seals(&run.gateway, 3, Duration::from_secs(10)).await;
    let trades = answer_for(&run, 12).await;
    assert!(
        trades.iter().all(|t| t.landed.is_some()),
        "some trades never landed: {:?}",
        trades
            .iter()
            .filter(|t| t.landed.is_none())
            .collect::<Vec<_>>()
    );
    let within = trades.iter().filter(|t| t.elapsed < WINDOW).count();
    assert!(
        within >= 30 && trades.len() - within >= 30,
        "{within} of {} trades within W: the run must exercise both sides",
        trades.len()
    );
    let wrong = misplaced(&trades);
    assert!(wrong.is_empty(), "DBO misplaced {wrong:#?}");
    let seals = run.gateway.seals();
    assert!(seals.iter().all(|s| s.late == 0 && s.spilled == 0));
    let normal_wait = seals
        .iter()
        .map(|s| s.sealed_ns - s.previous_published_ns)
        .max()
        .unwrap();
    let fairness = pairwise_fairness(&trades);
    assert_eq!(fairness, 1.0);
    println!(
        "dbo: {} trades ({within} within W = {WINDOW:?}), 0 misplaced, pairwise fairness \
         {fairness:.3}; {} blocks, longest seal wait {:.1} ms",
        trades.len(),
        seals.len(),
        normal_wait as f64 / 1e6
    );
    let ws_trades = trades.iter().filter(|t| t.bot % 2 == 1).count();
    assert!(ws_trades >= 20, "{ws_trades} trades over WebSocket");

    // --- The node's view of the gateway: the counters sent with the last sealed batch.
    let gateway_status: serde_json::Value = client
        .get(format!("{}/v1/gateway", node.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sealed = gateway_status["sealed_height"].as_u64().unwrap();
    assert_eq!(gateway_status["block_source"], "gateway");
    assert_eq!(gateway_status["participants_configured"], BOTS);
    assert_eq!(gateway_status["participants_connected"], BOTS);
    assert_eq!(gateway_status["stragglers"], 0);
    assert_eq!(gateway_status["late_trades_total"], 0);
    assert_eq!(gateway_status["queue_full_total"], 0);
    let delay_us = gateway_status["last_seal_delay_us"].as_u64().unwrap();
    // Never sooner than W after the previous publication; no straggler held it back.
    assert!(
        delay_us >= WINDOW.as_micros() as u64 && delay_us < (WINDOW + THRESHOLD).as_micros() as u64,
        "{gateway_status}"
    );
    assert!(
        sealed > 10 && sealed <= node_height(&node.url).await,
        "{gateway_status}"
    );
    println!("GET /v1/gateway: {gateway_status}");

    // --- Gateway mode closes the participants' bypasses on the public listener (each with a
    // typed error naming the mode) and serves them on the operator's listener.
    let operator = node.operator_url.clone().expect("the operator listener");
    for (method, path) in [
        ("POST", "/v1/transactions"),
        ("POST", "/v1/transactions/batch"),
        ("GET", "/v1/events"),
        ("GET", "/v1/blocks/1"),
        ("GET", "/v1/blocks/1/raw"),
        ("GET", "/v1/books/0/1"),
        ("GET", "/v1/prices"),
        ("GET", "/v1/offers/1/explain?account=1"),
    ] {
        let response = client
            .request(method.parse().unwrap(), format!("{}{path}", node.url))
            .header("content-type", "application/octet-stream")
            .body(payment(1, 1, 2, 0, 1).encode())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 403, "{method} {path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "gateway_only", "{method} {path}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("--block-source gateway"), "{message}");
        if method == "GET" {
            let response = client
                .get(format!("{operator}{path}"))
                .send()
                .await
                .unwrap();
            if path.starts_with("/v1/offers/") {
                // Served (whether this offer exists is not the point here).
                assert_ne!(response.status().as_u16(), 403, "operator {path}");
            } else {
                assert_eq!(response.status().as_u16(), 200, "operator {path}");
            }
            // The event stream stays open; the others answer whole.
            drop(response);
        }
    }
    // Submitting stays closed on the operator's listener too: blocks hold only sealed
    // batches, so a transaction in the mempool would never commit.
    let response = client
        .post(format!("{operator}/v1/transactions"))
        .header("content-type", "application/octet-stream")
        .body(payment(1, 1, 2, 0, 1).encode())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    // What the gateway itself needs stays open on the public listener.
    for path in ["/v1/status", "/v1/accounts/1", "/v1/gateway"] {
        let response = client
            .get(format!("{}{path}", node.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
    }

    // --- A silent bot, then it speaks again.
    let silent_from = run.gateway.now_ns();
    run.bots[0].participant.set_silent(true).await;
    tokio::time::sleep(THRESHOLD + Duration::from_millis(600)).await;
    let detected = run
        .gateway
        .participant_events()
        .iter()
        .find_map(|e| match e {
            ParticipantEvent::Straggler {
                participant: 0,
                at_ns,
            } if *at_ns >= silent_from => Some(*at_ns),
            _ => None,
        })
        .expect("the silent bot became a straggler");
    let after = detected - silent_from;
    // Its last heartbeat left at most τ before the silence and spent at most 221 ms in the shim.
    let threshold = THRESHOLD.as_nanos() as u64;
    assert!(
        after + TAU.as_nanos() as u64 >= threshold && after <= threshold + 250_000_000,
        "detected {after} ns after the silence began"
    );
    // The seal it held back came right after the detection (not later), and it waited at most
    // the threshold (plus the shim's delay) beyond the longest normal wait.
    let held = run
        .gateway
        .seals()
        .into_iter()
        .find(|s| s.sealed_ns >= silent_from)
        .expect("a seal during the silence");
    assert!(
        held.sealed_ns <= detected + 20_000_000,
        "{held:?} vs detection at {detected}"
    );
    let held_wait = held.sealed_ns - held.previous_published_ns;
    assert!(
        held_wait <= normal_wait + threshold + 250_000_000,
        "a silent bot delayed a seal by {held_wait} ns"
    );
    println!(
        "silent bot: straggler {:.1} ms after going silent (threshold {THRESHOLD:?}); the held seal \
         waited {:.1} ms",
        after as f64 / 1e6,
        held_wait as f64 / 1e6
    );
    run.bots[0].participant.set_silent(false).await;

    // --- A bot disconnects and reconnects.
    run.bots[1].participant.disconnect().await;
    tokio::time::sleep(THRESHOLD + Duration::from_millis(300)).await;
    let reconnected_at = run.gateway.now_ns();
    run.bots[1]
        .participant
        .connect(&run.bots[1].address)
        .await
        .expect("the bot reconnects");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let events = run.gateway.participant_events();
    for (participant, since) in [(0u32, silent_from), (1, reconnected_at)] {
        assert!(
            events.iter().any(|e| matches!(e,
                ParticipantEvent::Rejoined { participant: p, at_ns } if *p == participant && *at_ns >= since)),
            "participant {participant} rejoined: {events:?}"
        );
    }
    // After rejoining, both answer blocks by the rule again.
    let before: Vec<usize> = run
        .bots
        .iter()
        .map(|b| b.log.lock().unwrap().trades.len())
        .collect();
    let trades = answer_for(&run, 5).await;
    let again: Vec<TradeRecord> = trades
        .into_iter()
        .filter(|t| {
            t.bot <= 1 && {
                let log = run.bots[t.bot as usize].log.lock().unwrap();
                log.trades
                    .iter()
                    .skip(before[t.bot as usize])
                    .any(|u| u.seq == t.seq)
            }
        })
        .collect();
    assert!(again.len() >= 6, "{again:?}");
    let wrong = misplaced(&again);
    assert!(wrong.is_empty(), "after rejoining: {wrong:#?}");
    // Every straggler and rejoin is on /metrics; since the silence began, exactly the two bots
    // straggled and rejoined (the shims' worst round trip stays under the threshold). Bots still
    // connecting at the start may have straggled then.
    let detections = events
        .iter()
        .filter(|e| matches!(e, ParticipantEvent::Straggler { .. }))
        .count();
    let since_silence: Vec<&ParticipantEvent> = events
        .iter()
        .filter(|e| match e {
            ParticipantEvent::Straggler { at_ns, .. }
            | ParticipantEvent::Rejoined { at_ns, .. } => *at_ns >= silent_from,
        })
        .collect();
    assert_eq!(since_silence.len(), 4, "{since_silence:?}");
    let metrics = run.gateway.metrics_text();
    assert!(
        metrics.contains(&format!(
            "walras_gateway_stragglers_detected_total {detections}"
        )) && metrics.contains(&format!(
            "walras_gateway_straggler_rejoins_total {}",
            events.len() - detections
        )),
        "{metrics}"
    );
    run.gateway.stop().await.unwrap();

    // --- The node's blocks replay: restart, recover, same tip.
    let status = |url: String| {
        let client = client.clone();
        async move {
            let s: serde_json::Value = client
                .get(format!("{url}/v1/status"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (s["height"].as_u64().unwrap(), s["state_root"].clone())
        }
    };
    let tip = status(node.url.clone()).await;
    assert!(node.terminate(), "the node stops cleanly");
    let node = start_node(dbo_dir.path());
    assert_eq!(
        status(node.url.clone()).await,
        tip,
        "replayed to the same state root"
    );
    drop(node);

    // --- Timer cut: the same bots and shims, arrival order.
    let timer_dir = TempDir::new("gateway-timer");
    let node = start_node(timer_dir.path());
    let run = start_run(&node, CutMode::Timer { interval: WINDOW }).await;
    wait_for_seals(&run.gateway, 2, Duration::from_secs(10)).await;
    let trades = answer_for(&run, 12).await;
    assert!(trades.iter().all(|t| t.landed.is_some()));
    let wrong = misplaced(&trades);
    let share = wrong.len() as f64 / trades.len() as f64;
    let wrong_within = wrong.iter().filter(|t| t.elapsed < WINDOW).count();
    println!(
        "timer cut: {} of {} trades in the wrong block ({:.1}%; {wrong_within} answered within W \
         but missed block N+1), pairwise fairness {:.3}",
        wrong.len(),
        trades.len(),
        share * 100.0,
        pairwise_fairness(&trades)
    );
    assert!(!wrong.is_empty(), "the timer cut was fair on this run");
    run.gateway.stop().await.unwrap();
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
}

/// `walras gateway` as a process: a key file from `walras keygen`, the node started with its
/// public key, a participants file; every bad Hello refused with a typed reason (a number it
/// does not serve, a participant signing as another, a Hello signed for another connection's
/// challenge, the unsigned version-1 Hello, the version-2 Hello whose signature does not cover
/// the last height, a Hello whose last height was changed after signing), a good one welcomed,
/// seals advancing (the absent participant becomes a straggler), and the counters on
/// `/metrics`. Over WebSocket: garbage, text and oversized messages are refused (the connection
/// closed, counted) without harm to the gateway, which goes on serving.
///
/// Before Hellos were signed, any client could claim any participant number and take that
/// participant's place in the ordering buffer (its watermark, its results).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walras_gateway_process_serves_participants_and_metrics() {
    use futures_util::{SinkExt, StreamExt};
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use tokio_tungstenite::tungstenite::Message;
    use walras_gateway::{
        framed, hello_signing_message, Downlink, RefusalCode, SignedHello, Uplink,
        PROTOCOL_VERSION, UPLINK_FRAME_MAX,
    };

    let dir = TempDir::new("gateway-process");
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
        ],
    );
    let participants_file = dir.path().join("participants.txt");
    std::fs::write(
        &participants_file,
        format!(
            "# participant 0\n{}\n{}  # participant 1\n",
            participant_key(0).public_key(),
            participant_key(1).public_key()
        ),
    )
    .unwrap();
    let mut gateway = Command::new(walras_testkit::walras_bin())
        .args(["gateway", "--node", node.url.as_str(), "--key"])
        .arg(&key_file)
        .arg("--participant-keys")
        .arg(&participants_file)
        .args(["--listen", "127.0.0.1:0", "--listen-ws", "127.0.0.1:0"])
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--straggler-threshold-ms",
            "300",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(gateway.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let address = first
        .strip_prefix("walras gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    let second = lines.next().unwrap().unwrap();
    let ws_url = second.strip_prefix("websocket on ").unwrap().to_string();
    let third = lines.next().unwrap().unwrap();
    let metrics_url = third.strip_prefix("metrics on ").unwrap().to_string();

    /// Connects, reads the Challenge, sends the Hello `sign` makes of it; returns the answer.
    async fn handshake(
        address: &str,
        sign: impl FnOnce([u8; 32], [u8; 32]) -> Uplink,
    ) -> (TcpStream, Downlink) {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let first = read_frame(&mut stream, 1 << 20).await.unwrap().unwrap();
        let Downlink::Challenge { gateway_key, nonce } = Downlink::decode(&first).unwrap() else {
            panic!("the first frame is not a Challenge");
        };
        let hello = sign(gateway_key, nonce);
        stream.write_all(&framed(&hello.encode())).await.unwrap();
        let answer = read_frame(&mut stream, 1 << 20).await.unwrap().unwrap();
        (stream, Downlink::decode(&answer).unwrap())
    }
    let signed = |participant: u32, key: Keypair| {
        move |gateway_key: [u8; 32], nonce: [u8; 32]| Uplink::Hello {
            version: PROTOCOL_VERSION,
            participant,
            signed: Some(SignedHello {
                last_height: None,
                signature: *key
                    .sign(&hello_signing_message(
                        &gateway_key,
                        &nonce,
                        participant,
                        None,
                    ))
                    .as_bytes(),
            }),
        }
    };
    let refusal = |answer: Downlink| match answer {
        Downlink::Refused { code, text } => (code, text),
        other => panic!("expected a refusal, got {other:?}"),
    };
    // A number this gateway does not serve.
    let (_, answer) = handshake(&address, signed(7, participant_key(7))).await;
    let (code, text) = refusal(answer);
    assert_eq!(code, RefusalCode::UnknownParticipant);
    assert!(text.contains("participant 7"), "{text}");
    // Participant 1's number, participant 0's key.
    let (_, answer) = handshake(&address, signed(1, participant_key(0))).await;
    let (code, text) = refusal(answer);
    assert_eq!(code, RefusalCode::BadSignature);
    assert!(text.contains("does not verify"), "{text}");
    // A correct signature, but over another connection's challenge (a replayed Hello).
    let (_, answer) = handshake(&address, |gateway_key, _nonce| {
        signed(1, participant_key(1))(gateway_key, [9; 32])
    })
    .await;
    let (code, text) = refusal(answer);
    assert_eq!(code, RefusalCode::BadSignature);
    assert!(text.contains("does not verify"), "{text}");
    // The unsigned Hello of protocol version 1.
    let (_, answer) = handshake(&address, |_, _| Uplink::Hello {
        version: 1,
        participant: 0,
        signed: None,
    })
    .await;
    let (code, text) = refusal(answer);
    assert_eq!(code, RefusalCode::Version);
    assert!(text.contains("protocol version 1"), "{text}");
    // Version 2 signed the challenge and the number, not the last height: refused by its
    // version, whatever its signature.
    let (_, answer) = handshake(&address, |gateway_key, nonce| {
        let Uplink::Hello { signed, .. } = signed(0, participant_key(0))(gateway_key, nonce) else {
            unreachable!()
        };
        Uplink::Hello {
            version: 2,
            participant: 0,
            signed,
        }
    })
    .await;
    let (code, text) = refusal(answer);
    assert_eq!(code, RefusalCode::Version);
    assert!(text.contains("protocol version 2"), "{text}");
    // Signed with last height 40, sent with last height 3 (someone in between wants the
    // gateway to replay more, or fewer, blocks): the signature no longer verifies.
    let (_, answer) = handshake(&address, |gateway_key, nonce| {
        let signature = *participant_key(0)
            .sign(&hello_signing_message(&gateway_key, &nonce, 0, Some(40)))
            .as_bytes();
        Uplink::Hello {
            version: PROTOCOL_VERSION,
            participant: 0,
            signed: Some(SignedHello {
                last_height: Some(3),
                signature,
            }),
        }
    })
    .await;
    let (code, text) = refusal(answer);
    assert_eq!(code, RefusalCode::BadSignature);
    assert!(text.contains("does not verify"), "{text}");

    // WebSocket: the same handshake, one frame per binary message.
    type Ws = tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >;
    async fn ws_challenge(url: &str) -> (Ws, [u8; 32], [u8; 32]) {
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let Some(Ok(Message::Binary(first))) = ws.next().await else {
            panic!("no Challenge message");
        };
        let Downlink::Challenge { gateway_key, nonce } = Downlink::decode(&first).unwrap() else {
            panic!("the first message is not a Challenge");
        };
        (ws, gateway_key, nonce)
    }
    /// Reads until the gateway closes the connection; returns the refusal it sent, if any.
    async fn ws_until_closed(ws: &mut Ws) -> Option<(RefusalCode, String)> {
        let mut refused = None;
        loop {
            match tokio::time::timeout(Duration::from_secs(5), ws.next())
                .await
                .expect("the gateway closes the connection")
            {
                Some(Ok(Message::Binary(bytes))) => {
                    if let Ok(Downlink::Refused { code, text }) = Downlink::decode(&bytes) {
                        refused = Some((code, text));
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return refused,
                Some(Ok(_)) => {}
            }
        }
    }
    // Before the Hello: a text message, garbage, a message over the uplink limit.
    for bad in [
        Message::text("hello"),
        Message::binary(vec![0xee; 40]),
        Message::binary(vec![1u8; UPLINK_FRAME_MAX + 1]),
    ] {
        let oversized = bad.len() > UPLINK_FRAME_MAX;
        let (mut ws, _, _) = ws_challenge(&ws_url).await;
        let _ = ws.send(bad).await;
        match ws_until_closed(&mut ws).await {
            Some((code, _)) => assert_eq!(code, RefusalCode::NotAHello),
            // Closing on unread bytes may reset the connection before the refusal is read;
            // the refusal is still counted (below).
            None => assert!(oversized, "no refusal"),
        }
    }
    // After a good Hello over WebSocket: garbage (participant 1), a message over the limit
    // (participant 0); each closes that connection only.
    let refused_before = metric(
        &client_metrics(&metrics_url).await,
        "walras_gateway_refused_messages_total",
    );
    for (participant, bad) in [
        (1, Message::binary(vec![0xee; 40])),
        (0, Message::binary(vec![2u8; UPLINK_FRAME_MAX + 1])),
    ] {
        let (mut ws, gateway_key, nonce) = ws_challenge(&ws_url).await;
        let hello = signed(participant, participant_key(participant))(gateway_key, nonce);
        ws.send(Message::binary(hello.encode())).await.unwrap();
        let Some(Ok(Message::Binary(answer))) = ws.next().await else {
            panic!("no answer to the Hello");
        };
        let answer = Downlink::decode(&answer).unwrap();
        assert!(
            matches!(answer, Downlink::Welcome { participant: p, .. } if p == participant),
            "{answer:?}"
        );
        let _ = ws.send(bad).await;
        ws_until_closed(&mut ws).await;
    }
    let refused_after = metric(
        &client_metrics(&metrics_url).await,
        "walras_gateway_refused_messages_total",
    );
    assert_eq!(refused_after, refused_before + 2);
    // The closed connections leave the gateway (asynchronously) before the numbers are reused.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The gateway still serves WebSocket participants: participant 1 connects again, and the
    // client library speaks ws:// too.
    let (ws_client, _events) = Participant::start(ClientConfig {
        participant: 1,
        key: participant_key(1),
        gateway_key: None,
        delta: WINDOW,
        tau: TAU,
    })
    .unwrap();
    ws_client
        .connect(&ws_url)
        .await
        .expect("a WebSocket participant connects");
    ws_client.disconnect().await;

    let (_member, answer) = handshake(&address, signed(0, participant_key(0))).await;
    assert!(
        matches!(answer, Downlink::Welcome { participant: 0, .. }),
        "{answer:?}"
    );
    // Participant 0 sends nothing and participant 1 never comes: both become stragglers after
    // 300 ms, and then blocks are sealed without them.
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = client
            .get(&metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let height = text
            .lines()
            .find_map(|l| l.strip_prefix("walras_gateway_height "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if height >= 3 {
            // Participants 0 and 1 at least (1 may have rejoined and straggled again after its
            // WebSocket visits).
            assert!(
                metric(&text, "walras_gateway_stragglers_detected_total") >= 2,
                "{text}"
            );
            assert!(
                text.contains("walras_gateway_participants_connected 1"),
                "{text}"
            );
            // Six bad Hellos over TCP, three bad first messages over WebSocket.
            assert!(
                text.contains("walras_gateway_handshakes_refused_total 9"),
                "{text}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no blocks sealed:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = gateway.kill();
    let _ = gateway.wait();
}

/// The feed is enough to follow the market without the node: each Block frame carries what each
/// pair sold in that block (equal to the node's own block) and the depth of each pair's resting
/// book at that height (the offers a participant placed, level by level); and a participant that
/// disconnects and comes back gets every block it missed (before, only the tip: a gap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_carries_each_blocks_pair_amounts_and_the_book_depth_at_its_height() {
    use walras_types::{AccountId, AssetId, Operation, Price, Transaction};

    let dir = TempDir::new("gateway-feed");
    let node = start_node(dir.path());
    let mut config = GatewayConfig::new(
        &node.url,
        gateway_key(),
        vec![participant_key(0).public_key()],
    );
    config.window = WINDOW;
    let gateway = walras_gateway_net::start(config).await.unwrap();
    let (client, mut events) = Participant::start(ClientConfig {
        participant: 0,
        key: participant_key(0),
        gateway_key: Some(gateway_key().public_key()),
        delta: WINDOW,
        tau: TAU,
    })
    .unwrap();
    client.connect(&gateway.address.to_string()).await.unwrap();
    let offer = |account: u64, sequence: u64, sell: u16, amount: u64, price: &str| {
        walras_testkit::sign(Transaction {
            source: AccountId(account),
            sequence,
            operation: Operation::CreateOffer {
                sell: AssetId(sell),
                buy: AssetId(1 - sell),
                amount,
                min_price: Price::parse_limit(price).unwrap(),
            },
        })
    };
    /// Waits for the block holding every one of `seqs` (all accepted); returns that block.
    async fn landed(
        events: &mut mpsc::UnboundedReceiver<ClientEvent>,
        heights: &mut Vec<u64>,
        seqs: &[u64],
    ) -> walras_gateway_net::BlockData {
        let mut left: Vec<u64> = seqs.to_vec();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let event = tokio::time::timeout_at(deadline.into(), events.recv())
                .await
                .expect("the trades landed within 20 s")
                .expect("the client runs");
            let ClientEvent::Block { block, .. } = event else {
                continue;
            };
            heights.push(block.height);
            for own in &block.own {
                assert_eq!(own.dropped, None, "seq {} dropped", own.seq);
                left.retain(|seq| *seq != own.seq);
            }
            if left.is_empty() {
                return block;
            }
        }
    }
    // Resting offers far above any clearing rate: 100 and 200 at 4, 300 at 8.
    let mut seqs = Vec::new();
    for (sequence, (amount, price)) in [(100, "4"), (200, "4"), (300, "8")].into_iter().enumerate()
    {
        let sent = client
            .submit(offer(1, sequence as u64 + 1, 0, amount, price))
            .await
            .unwrap();
        seqs.push(sent.seq);
    }
    let mut heights = Vec::new();
    let block = landed(&mut events, &mut heights, &seqs).await;
    let pair = block
        .market
        .depth
        .iter()
        .find(|pair| (pair.sell, pair.buy) == (0, 1))
        .expect("the pair's depth is in the feed");
    assert_eq!(pair.offers, 3);
    let levels: Vec<(u128, u64, u32)> = pair
        .levels
        .iter()
        .map(|level| (level.min_price, level.amount, level.offers))
        .collect();
    assert_eq!(
        levels,
        vec![
            (Price::parse_limit("4").unwrap().0, 300, 2),
            (Price::parse_limit("8").unwrap().0, 300, 1)
        ]
    );
    // Two offers that cross: each pair sells, and the feed's amounts are the node's block's.
    let a = client.submit(offer(2, 1, 0, 1_000, "0.5")).await.unwrap();
    let b = client.submit(offer(3, 1, 1, 1_000, "0.5")).await.unwrap();
    let block = landed(&mut events, &mut heights, &[a.seq, b.seq]).await;
    assert!(!block.market.trades.is_empty(), "{:?}", block.market);
    let operator = node.operator_url.clone().expect("the operator listener");
    let json: serde_json::Value = reqwest::get(format!("{operator}/v1/blocks/{}", block.height))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let node_trades: Vec<(u16, u16, u64)> = json["trades"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["sell"].as_u64().unwrap() as u16,
                t["buy"].as_u64().unwrap() as u16,
                t["sold"].as_u64().unwrap(),
            )
        })
        .collect();
    let feed_trades: Vec<(u16, u16, u64)> = block
        .market
        .trades
        .iter()
        .map(|t| (t.sell, t.buy, t.sold))
        .collect();
    assert_eq!(feed_trades, node_trades);
    // A trade whose signature does not verify with its source account's key, and one from an
    // account that does not exist: each refused before the ordering buffer with a typed
    // Notice, counted, and in no block (a good trade sent after them lands alone).
    let mut forged = offer(5, 1, 0, 10, "9");
    forged.signature[0] ^= 1;
    let forged = client.submit(forged).await.unwrap();
    let ghost = client
        .submit(offer(1_000_000, 1, 0, 10, "9"))
        .await
        .unwrap();
    let good = client.submit(offer(6, 1, 0, 10, "9")).await.unwrap();
    let mut notices = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut good_landed = false;
    while notices.len() < 2 || !good_landed {
        let event = tokio::time::timeout_at(deadline.into(), events.recv())
            .await
            .expect("the notices and the good trade within 20 s")
            .expect("the client runs");
        match event {
            ClientEvent::Notice {
                seq: Some(seq),
                code,
                ..
            } => {
                notices.insert(seq, code);
            }
            ClientEvent::Block { block, .. } => {
                heights.push(block.height);
                for own in &block.own {
                    assert_eq!(own.seq, good.seq, "only the good trade lands: {own:?}");
                    assert_eq!(own.dropped, None);
                    good_landed = true;
                }
            }
            _ => {}
        }
    }
    assert_eq!(notices.get(&forged.seq), Some(&NoticeCode::BadSignature));
    assert_eq!(notices.get(&ghost.seq), Some(&NoticeCode::UnknownSource));
    let text = gateway.metrics_text();
    assert_eq!(metric(&text, "walras_gateway_bad_signatures_total"), 1);
    assert_eq!(metric(&text, "walras_gateway_unknown_sources_total"), 1);
    // Away for a while (empty blocks keep being sealed), then back: the blocks in between are
    // replayed, so the heights the participant sees have no gap.
    client.disconnect().await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    client.connect(&gateway.address.to_string()).await.unwrap();
    let back_at = node_height(&node.url).await;
    let c = client.submit(offer(4, 1, 0, 10, "9")).await.unwrap();
    let block = landed(&mut events, &mut heights, &[c.seq]).await;
    assert!(block.height > back_at);
    let first = heights[0];
    assert_eq!(
        heights,
        (first..first + heights.len() as u64).collect::<Vec<u64>>(),
        "the heights seen have a gap"
    );
    assert!(
        heights.len() >= 5,
        "too few blocks to show a replay: {heights:?}"
    );
    gateway.stop().await.unwrap();
}

async fn client_metrics(url: &str) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}

/// The value of an unlabelled metric in a Prometheus text page.
fn metric(text: &str, name: &str) -> u64 {
    walras_testkit::metric(text, name)
}

async fn node_height(url: &str) -> u64 {
    let json: serde_json::Value = reqwest::get(format!("{url}/v1/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    json["height"].as_u64().unwrap()
}

/// Trigger: the node committed a sealed batch and was killed before its answer reached the
/// gateway; restarted, it refused the same batch sent again as `409 wrong_height` (its memory
/// of the last answer died with the process), and the gateway stopped. Now the answer is
/// rebuilt from the store, byte for byte the one the first node gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_after_committing_a_batch_answers_it_again_after_restart() {
    let dir = TempDir::new("gateway-restart");
    let body = walras_gateway::SealedBatch {
        height: 1,
        stats: walras_gateway::GatewayStats::default(),
        transactions: vec![payment(1, 1, 2, 0, 1).encode()],
    }
    .encode()
    .unwrap();
    let signature = gateway_key().sign(&walras_gateway::seal_signing_message(&body));
    let post = |url: String| {
        let body = body.clone();
        async move {
            let response = reqwest::Client::new()
                .post(format!("{url}/v1/gateway/seal"))
                .header(walras_gateway::SEAL_SIGNATURE_HEADER, signature.to_string())
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.bytes().await.unwrap().to_vec())
        }
    };
    let node = start_node(dir.path());
    let (status, first) = post(node.url.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&first));
    node.sigkill();
    let node = start_node(dir.path());
    let (status, again) = post(node.url.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&again));
    assert_eq!(again, first, "the same answer, rebuilt from the store");
    assert_eq!(node_height(&node.url).await, 1, "no second block");
    let other = walras_gateway::SealedBatch {
        height: 1,
        stats: walras_gateway::GatewayStats::default(),
        transactions: vec![payment(1, 2, 2, 0, 1).encode()],
    }
    .encode()
    .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/gateway/seal", node.url))
        .header(
            walras_gateway::SEAL_SIGNATURE_HEADER,
            gateway_key()
                .sign(&walras_gateway::seal_signing_message(&other))
                .to_string(),
        )
        .body(other)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        409,
        "another batch for a committed height is still refused"
    );
}
