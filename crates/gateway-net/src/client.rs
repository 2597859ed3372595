//! The participant's client library: a connection to the gateway and the participant's release
//! buffer (DBO §4.1.2), which runs here, next to the participant.
//!
//! Blocks arriving from the gateway go through the release buffer: each block is one batch, and
//! consecutive blocks are handed to the participant at least δ apart (pacing); trades and
//! heartbeats (every τ) leave stamped with the delivery clock ⟨last block delivered, ns since⟩.
//! Trust caveat (see `docs/gateway.md`): the paper's guarantee needs the release buffer to be
//! run by the operator next to the participant; run inside the participant's own process, the
//! participant could stamp false clocks.
//!
//! The release buffer outlives connections: after a reconnect the sequence numbers and the
//! clock continue, so the gateway's ordering buffer takes the participant back (it rejoins once
//! its round trip is under the straggler threshold again).

use crate::frame::{
    hello_signing_message, BlockData, Downlink, NoticeCode, RefusalCode, SignedHello, Uplink,
    DOWNLINK_FRAME_MAX, PROTOCOL_VERSION,
};
use crate::transport::{self, FrameReader, FrameWriter};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use walras_gateway::{
    DeliveryClock, MarketPoint, ReleaseAction, ReleaseBuffer, ReleaseConfig, UplinkKind,
};
use walras_types::SignedTransaction;

#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub participant: u32,
    /// The participant's key: it signs the Hello answering the gateway's Challenge (the
    /// gateway holds the public key as `participant`'s).
    pub key: walras_crypto::Keypair,
    /// The gateway's public key, when the participant knows it: a Challenge from any other key
    /// is refused before anything is signed.
    pub gateway_key: Option<walras_crypto::PublicKey>,
    /// δ: the gateway's window W (blocks are delivered at least this far apart).
    pub delta: Duration,
    /// τ: heartbeat period.
    pub tau: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to the gateway at {address}: {cause}")]
    Connect { address: String, cause: String },
    #[error("the gateway refused the connection ({code:?}): {text}")]
    Refused { code: RefusalCode, text: String },
    #[error("not connected to the gateway")]
    NotConnected,
    #[error("the client stopped")]
    Stopped,
    #[error(transparent)]
    Core(#[from] walras_gateway::GatewayError),
}

/// What the participant learns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// The release buffer handed over a block (at `at`, the scheduled release time).
    Block { block: BlockData, at: Instant },
    Notice {
        seq: Option<u64>,
        code: NoticeCode,
        text: String,
    },
    /// The gateway refused and closed the connection (after the handshake: rare).
    Refused { code: RefusalCode, text: String },
    /// The connection ended, and why (the client can reconnect with [`Participant::connect`]).
    Disconnected { reason: String },
}

/// A trade as sent: its sequence number and the delivery clock it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentTrade {
    pub seq: u64,
    pub clock: DeliveryClock,
}

enum Command {
    Connect {
        address: String,
        answer: oneshot::Sender<Result<(), ClientError>>,
    },
    Disconnect,
    Submit {
        // Boxed: a transaction is 304 bytes since a withdrawal certificate travels inline.
        transaction: Box<SignedTransaction>,
        answer: oneshot::Sender<Result<SentTrade, ClientError>>,
    },
    /// Stop (or resume) sending anything while staying connected: a silent participant.
    Silence(bool),
}

/// A handle to the participant's client task; the task (and its connection) ends when the last
/// handle is dropped.
#[derive(Clone)]
pub struct Participant {
    commands: mpsc::Sender<Command>,
}

impl Participant {
    /// Starts the client (its release buffer starts now); events arrive on the receiver.
    pub fn start(
        config: ClientConfig,
    ) -> Result<(Participant, mpsc::UnboundedReceiver<ClientEvent>), ClientError> {
        let started = Instant::now();
        let release = ReleaseBuffer::new(
            config.participant,
            ReleaseConfig::new(config.delta.as_nanos() as u64, config.tau.as_nanos() as u64),
            0,
        )?;
        let (commands, receiver) = mpsc::channel(1024);
        let (events, events_out) = mpsc::unbounded_channel();
        let task = ClientTask {
            config,
            started,
            release,
            writer: None,
            frames: None,
            events,
            silent: false,
            blocks: BTreeMap::new(),
            last_height: None,
            catch_up_to: None,
            pending_trades: BTreeMap::new(),
            next_trade_id: 0,
        };
        tokio::spawn(task.run(receiver));
        Ok((Participant { commands }, events_out))
    }

    /// Connects to the gateway at `address`: `HOST:PORT` for TCP, `ws://HOST:PORT` for its
    /// WebSocket listener (the same protocol, one frame per binary message).
    pub async fn connect(&self, address: &str) -> Result<(), ClientError> {
        let (answer, result) = oneshot::channel();
        self.commands
            .send(Command::Connect {
                address: address.into(),
                answer,
            })
            .await
            .map_err(|_| ClientError::Stopped)?;
        result.await.map_err(|_| ClientError::Stopped)?
    }

    pub async fn disconnect(&self) {
        let _ = self.commands.send(Command::Disconnect).await;
    }

    pub async fn set_silent(&self, silent: bool) {
        let _ = self.commands.send(Command::Silence(silent)).await;
    }

    /// Stamps the trade with the delivery clock now and sends it.
    pub async fn submit(&self, transaction: SignedTransaction) -> Result<SentTrade, ClientError> {
        let (answer, result) = oneshot::channel();
        self.commands
            .send(Command::Submit {
                transaction: Box::new(transaction),
                answer,
            })
            .await
            .map_err(|_| ClientError::Stopped)?;
        result.await.map_err(|_| ClientError::Stopped)?
    }
}

struct ClientTask {
    config: ClientConfig,
    started: Instant,
    release: ReleaseBuffer,
    writer: Option<FrameWriter>,
    frames: Option<mpsc::Receiver<Downlink>>,
    events: mpsc::UnboundedSender<ClientEvent>,
    silent: bool,
    /// Blocks received and not yet released, by height.
    blocks: BTreeMap<u64, BlockData>,
    /// The highest block received from the gateway (over every connection so far).
    last_height: Option<u64>,
    /// After a reconnect: the gateway's tip when it welcomed us; the blocks up to it form one
    /// batch.
    catch_up_to: Option<u64>,
    pending_trades: BTreeMap<u64, Vec<u8>>,
    next_trade_id: u64,
}

async fn next_frame(frames: &mut Option<mpsc::Receiver<Downlink>>) -> Option<Downlink> {
    match frames {
        Some(frames) => frames.recv().await,
        None => std::future::pending().await,
    }
}

impl ClientTask {
    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        loop {
            let wake = self.started + Duration::from_nanos(self.release.next_wakeup_ns());
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else { return };
                    self.command(command).await;
                }
                frame = next_frame(&mut self.frames) => match frame {
                    Some(frame) => self.downlink(frame).await,
                    None => self.lost_connection("the gateway closed the connection or sent an undecodable frame".into()),
                },
                _ = tokio::time::sleep_until(wake.into()) => {
                    let now = self.now_ns();
                    if let Ok(actions) = self.release.on_tick(now) {
                        self.act(actions).await;
                    }
                }
            }
        }
    }

    fn lost_connection(&mut self, reason: String) {
        self.writer = None;
        self.frames = None;
        let _ = self.events.send(ClientEvent::Disconnected { reason });
    }

    async fn command(&mut self, command: Command) {
        match command {
            Command::Connect { address, answer } => {
                let _ = answer.send(self.connect(&address).await);
            }
            Command::Disconnect => {
                if let Some(mut writer) = self.writer.take() {
                    writer.close().await;
                }
                self.frames = None;
            }
            Command::Silence(silent) => self.silent = silent,
            Command::Submit {
                transaction,
                answer,
            } => {
                let now = self.now_ns();
                let id = self.next_trade_id;
                self.next_trade_id += 1;
                self.pending_trades.insert(id, transaction.encode());
                match self.release.on_trade(now, id) {
                    Ok(actions) => {
                        let sent = actions.iter().find_map(|a| match a {
                            ReleaseAction::Send(m)
                                if m.kind == (UplinkKind::Trade { trade_id: id }) =>
                            {
                                Some(SentTrade {
                                    seq: m.seq,
                                    clock: m.clock,
                                })
                            }
                            _ => None,
                        });
                        self.act(actions).await;
                        let result = match (sent, self.writer.is_some()) {
                            (Some(sent), true) => Ok(sent),
                            _ => Err(ClientError::NotConnected),
                        };
                        let _ = answer.send(result);
                    }
                    Err(error) => {
                        self.pending_trades.remove(&id);
                        let _ = answer.send(Err(error.into()));
                    }
                }
            }
        }
    }

    async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
        let connect_error = |cause: String| ClientError::Connect {
            address: address.into(),
            cause,
        };
        let (host, websocket) = match address.strip_prefix("ws://") {
            Some(rest) => (rest.trim_end_matches('/'), true),
            None => (address, false),
        };
        let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(host))
            .await
            .map_err(|_| connect_error("timed out".into()))?
            .map_err(|e| connect_error(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (mut reader, mut writer) = if websocket {
            let upgrade = tokio_tungstenite::client_async_with_config(
                address,
                stream,
                Some(transport::ws_config(DOWNLINK_FRAME_MAX)),
            );
            let (ws, _) = tokio::time::timeout(Duration::from_secs(5), upgrade)
                .await
                .map_err(|_| connect_error("no WebSocket upgrade within 5 s".into()))?
                .map_err(|e| connect_error(format!("WebSocket upgrade: {e}")))?;
            transport::ws(ws)
        } else {
            transport::tcp(stream)
        };
        let first = tokio::time::timeout(Duration::from_secs(5), reader.next(DOWNLINK_FRAME_MAX))
            .await
            .map_err(|_| connect_error("no Challenge within 5 s".into()))?
            .map_err(|e| connect_error(e.to_string()))?;
        let (gateway_key, nonce) = match first.map(|payload| Downlink::decode(&payload)) {
            Some(Ok(Downlink::Challenge { gateway_key, nonce })) => (gateway_key, nonce),
            Some(Ok(Downlink::Refused { code, text })) => {
                return Err(ClientError::Refused { code, text })
            }
            other => {
                return Err(connect_error(format!(
                    "expected a Challenge, got {other:?}"
                )))
            }
        };
        if let Some(expected) = &self.config.gateway_key {
            if expected.as_bytes() != &gateway_key {
                return Err(connect_error(format!(
                    "the gateway's key is {}, not the expected {}",
                    hex::encode(gateway_key),
                    hex::encode(expected.as_bytes())
                )));
            }
        }
        // Blocks after this one that the gateway still holds are replayed to us; the height is
        // under the signature, so nobody in between can change what is replayed.
        let last_height = self.last_height;
        let message =
            hello_signing_message(&gateway_key, &nonce, self.config.participant, last_height);
        let hello = Uplink::Hello {
            version: PROTOCOL_VERSION,
            participant: self.config.participant,
            signed: Some(SignedHello {
                last_height,
                signature: *self.config.key.sign(&message).as_bytes(),
            }),
        };
        writer
            .send(&hello.encode())
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        let first = tokio::time::timeout(Duration::from_secs(5), reader.next(DOWNLINK_FRAME_MAX))
            .await
            .map_err(|_| connect_error("no Welcome within 5 s".into()))?
            .map_err(|e| connect_error(e.to_string()))?;
        match first.map(|payload| Downlink::decode(&payload)) {
            Some(Ok(Downlink::Welcome {
                height,
                last_seq,
                last_clock,
                ..
            })) => {
                // A new process of a participant the gateway heard before: go on after the
                // gateway's last number and clock, or it refuses everything up to them as out
                // of order (see `ReleaseBuffer::continue_after`).
                if let Some(last_seq) = last_seq {
                    self.release.continue_after(last_seq, last_clock);
                }
                // The blocks up to the gateway's tip that we have not received (replayed now)
                // are one batch: delivered whole, so the clock catches up in one step instead
                // of one δ per missed block (which would leave us a straggler for as long).
                self.catch_up_to =
                    Some(height).filter(|tip| self.last_height.is_none_or(|last| last < *tip));
            }
            Some(Ok(Downlink::Refused { code, text })) => {
                return Err(ClientError::Refused { code, text })
            }
            other => return Err(connect_error(format!("expected a Welcome, got {other:?}"))),
        }
        let (frames, receiver) = mpsc::channel(4096);
        tokio::spawn(read_downlink(reader, frames));
        self.writer = Some(writer);
        self.frames = Some(receiver);
        Ok(())
    }

    async fn downlink(&mut self, frame: Downlink) {
        match frame {
            Downlink::Block(block) => {
                let height = block.height;
                if self.last_height.is_some_and(|last| height <= last) {
                    // Already received (the tip resent on a reconnect): not a new point.
                    return;
                }
                self.last_height = Some(height);
                self.blocks.insert(height, block);
                let batch = match self.catch_up_to {
                    Some(tip) if height < tip => tip,
                    Some(_) => {
                        self.catch_up_to = None;
                        height
                    }
                    None => height,
                };
                let point = MarketPoint {
                    id: height,
                    batch,
                    last_in_batch: batch == height,
                    retransmission: false,
                };
                let now = self.now_ns();
                if let Ok(actions) = self.release.on_point(now, point) {
                    self.act(actions).await;
                }
            }
            Downlink::Notice { seq, code, text } => {
                let _ = self.events.send(ClientEvent::Notice { seq, code, text });
            }
            Downlink::Refused { code, text } => {
                let _ = self.events.send(ClientEvent::Refused { code, text });
            }
            // Only the first frames of a connection; a later one means nothing.
            Downlink::Welcome { .. } | Downlink::Challenge { .. } => {}
        }
    }

    async fn act(&mut self, actions: Vec<ReleaseAction>) {
        for action in actions {
            match action {
                ReleaseAction::DeliverBatch { at_ns, points, .. } => {
                    for height in points {
                        // Blocks below the released one were superseded (they were sent while
                        // this one waited); hand over the block itself.
                        let Some(block) = self.blocks.remove(&height) else {
                            continue;
                        };
                        self.blocks.retain(|&h, _| h > height);
                        let at = self.started + Duration::from_nanos(at_ns);
                        let _ = self.events.send(ClientEvent::Block { block, at });
                    }
                }
                ReleaseAction::DeliverRetransmission { point, .. } => {
                    // A block at or below the clock's (the tip sent again after a reconnect):
                    // hand it over, the clock does not move.
                    if let Some(block) = self.blocks.remove(&point) {
                        let _ = self.events.send(ClientEvent::Block {
                            block,
                            at: Instant::now(),
                        });
                    }
                }
                ReleaseAction::Send(message) => {
                    let frame = match message.kind {
                        UplinkKind::Heartbeat => Uplink::Heartbeat {
                            seq: message.seq,
                            clock: message.clock,
                        },
                        UplinkKind::Trade { trade_id } => {
                            let Some(transaction) = self.pending_trades.remove(&trade_id) else {
                                continue;
                            };
                            Uplink::Trade {
                                seq: message.seq,
                                clock: message.clock,
                                transaction,
                            }
                        }
                    };
                    if self.silent {
                        continue;
                    }
                    if let Some(writer) = &mut self.writer {
                        if let Err(error) = writer.send(&frame.encode()).await {
                            self.lost_connection(format!("writing to the gateway: {error}"));
                        }
                    }
                }
            }
        }
    }
}

/// Reads the gateway's frames until the connection ends or a frame does not decode.
async fn read_downlink(mut reader: FrameReader, frames: mpsc::Sender<Downlink>) {
    while let Ok(Some(payload)) = reader.next(DOWNLINK_FRAME_MAX).await {
        let Ok(frame) = Downlink::decode(&payload) else {
            return;
        };
        if frames.send(frame).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GatewayConfig;
    use walras_crypto::Keypair;
    use walras_types::{AccountId, AssetId, Operation, Transaction};

    /// Events until one satisfies `wanted` (within 15 s), and every one seen on the way.
    async fn until(
        events: &mut mpsc::UnboundedReceiver<ClientEvent>,
        what: &str,
        wanted: impl Fn(&ClientEvent) -> bool,
    ) -> Vec<ClientEvent> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => {
                    let done = wanted(&event);
                    seen.push(event);
                    if done {
                        return seen;
                    }
                }
                _ => panic!("no {what} within 15 s; events: {seen:#?}"),
            }
        }
    }

    fn is_block(event: &ClientEvent, height: u64) -> bool {
        matches!(event, ClientEvent::Block { block, .. } if block.height == height)
    }

    /// Trigger (CI of stop 53, `two_participant_processes_trade_through_a_gateway_and_see_their_fills`):
    /// a second process for a participant was handed the gateway's tip, the block its first
    /// process had last seen (no block had come since), and traded at once; its clock, measured
    /// from its own delivery of that block, was below the first process's last heartbeat on
    /// the same block, and the gateway refused the trade: "sent a delivery clock older than its
    /// previous message". The Welcome now carries the last clock seen, and the new process
    /// stamps nothing below it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_process_handed_the_block_its_predecessor_last_saw_has_its_trade_taken() {
        let key = Keypair::from_seed([4; 32]);
        let (url, _, _) = crate::node_link::stand_in_node(Duration::ZERO, key.public_key()).await;
        let mut config =
            GatewayConfig::new(&url, Keypair::from_seed([3; 32]), vec![key.public_key()]);
        config.window = Duration::from_secs(1);
        // Nobody turns straggler here: block 2 waits for participant 0's clock to pass ⟨1, W⟩.
        config.straggler_threshold = Duration::from_secs(60);
        let gateway = crate::start(config).await.expect("the gateway starts");
        let address = gateway.address.to_string();
        let client = ClientConfig {
            participant: 0,
            key: key.clone(),
            gateway_key: None,
            delta: Duration::from_secs(1),
            tau: Duration::from_millis(10),
        };

        // The first process sees block 1, heartbeats on it for 300 ms, and ends.
        let (first, mut first_events) = Participant::start(client.clone()).unwrap();
        first
            .connect(&address)
            .await
            .expect("the first process connects");
        until(&mut first_events, "block 1", |event| is_block(event, 1)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(first);

        // The second process is handed block 1 (the tip) and trades at once.
        let (second, mut events) = Participant::start(client).unwrap();
        let waited = Instant::now();
        while let Err(error) = second.connect(&address).await {
            // Until the gateway has seen the first connection close, the place is taken.
            assert!(waited.elapsed() < Duration::from_secs(10), "{error}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        until(&mut events, "the tip, block 1", |event| is_block(event, 1)).await;
        let transaction = Transaction {
            source: AccountId(7),
            sequence: 1,
            operation: Operation::Payment {
                to: AccountId(8),
                asset: AssetId(0),
                amount: 5,
            },
        };
        let signature = *key.sign(&transaction.encode()).as_bytes();
        let sent = second
            .submit(SignedTransaction {
                transaction,
                signature,
            })
            .await
            .expect("the trade is sent");
        let seen = until(&mut events, "the trade's block", |event| {
            matches!(event, ClientEvent::Block { block, .. }
                if block.own.iter().any(|own| own.seq == sent.seq))
        })
        .await;
        let notices: Vec<&ClientEvent> = seen
            .iter()
            .filter(|event| matches!(event, ClientEvent::Notice { .. }))
            .collect();
        assert!(notices.is_empty(), "{notices:#?}");
        let Some(ClientEvent::Block { block, .. }) = seen.last() else {
            unreachable!("`until` ends on the block")
        };
        assert!(
            block.own.iter().all(|own| own.dropped.is_none()),
            "{block:?}"
        );
        gateway.stop().await.expect("a clean stop");
    }
}
