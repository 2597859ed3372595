//! The gateway's settings: addresses, the participants' keys, the window W, straggler and queue
//! limits, and how blocks are cut.

use std::time::Duration;

/// Most participants one gateway serves (each holds an ordering-buffer watermark).
pub const PARTICIPANTS_MAX: usize = 100_000;

/// How the gateway cuts blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutMode {
    /// DBO: block N+1 holds the trades whose delivery clock is below ⟨N, W⟩.
    Dbo,
    /// The node's timer cut, reproduced here for comparison: block N+1 holds whatever arrived
    /// within `interval` of block N's publication, in arrival order; clocks are ignored.
    Timer { interval: Duration },
}

#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Participants' TCP address.
    pub listen: String,
    /// Participants' WebSocket address (`None`: TCP only); same frames, one per binary message.
    pub listen_ws: Option<String>,
    /// `/metrics` over HTTP (`None`: not served).
    pub metrics_listen: Option<String>,
    /// The node's base URL (`http://127.0.0.1:8080`); it must run with `--block-source gateway`.
    pub node_url: String,
    /// Signs the sealed batches (the node holds its public key).
    pub key: walras_crypto::Keypair,
    /// Participant `i`'s Ed25519 public key is `participant_keys[i]`: a Hello claiming `i` must
    /// carry `i`'s signature over the connection's Challenge.
    pub participant_keys: Vec<walras_crypto::PublicKey>,
    /// W: a trade answering block N within W goes into block N+1.
    pub window: Duration,
    /// A participant whose round trip or silence exceeds this stops holding seals back.
    pub straggler_threshold: Duration,
    /// Most trades in one block (give the node's `--max-block-txs`).
    pub block_trades_max: usize,
    /// Trades held in the ordering buffer; beyond it trades are refused (`QueueFull`).
    pub queue_len_max: usize,
    /// Trades one participant may hold in the ordering buffer (its share; beyond it only its
    /// trades are refused, `ShareFull`). `None`: `queue_len_max / participants` (at least 1),
    /// so that the shares together never exceed the buffer.
    pub participant_queue_max: Option<usize>,
    pub cut: CutMode,
    /// A new connection must say Hello within this long.
    pub handshake_timeout: Duration,
    /// A connection that sends nothing for this long is closed (heartbeats keep it open).
    pub idle_timeout: Duration,
}

impl GatewayConfig {
    /// Participants are numbered `0..participants()`.
    pub fn participants(&self) -> u32 {
        self.participant_keys.len() as u32
    }

    /// Each participant's share of the ordering buffer.
    pub fn share_max(&self) -> usize {
        self.participant_queue_max
            .unwrap_or_else(|| (self.queue_len_max / self.participant_keys.len().max(1)).max(1))
    }

    pub fn new(
        node_url: &str,
        key: walras_crypto::Keypair,
        participant_keys: Vec<walras_crypto::PublicKey>,
    ) -> GatewayConfig {
        GatewayConfig {
            listen: "127.0.0.1:0".into(),
            listen_ws: None,
            metrics_listen: None,
            node_url: node_url.into(),
            key,
            participant_keys,
            window: Duration::from_millis(50),
            straggler_threshold: Duration::from_millis(500),
            block_trades_max: 50_000,
            queue_len_max: 1 << 20,
            participant_queue_max: None,
            cut: CutMode::Dbo,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
        }
    }
}
