//! One venue's connection, kept alive: connect, subscribe, heartbeat, forward every text frame
//! as a [`Record`] with its receive time, and on any failure a disconnect record, a backoff
//! delay, and a new connection (whose books the core resyncs from fresh snapshots).

use crate::backoff::Backoff;
use crate::tls::TlsClient;
use crate::venue::{heartbeat_text, rest_snapshot_path, resubscribe_messages, subscribe_messages};
use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use walras_oracle::Protocol;
use walras_oracle::{venue_protocol, Record, RecordKind};

/// Where one venue is reached and what is read there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The venue's name: a protocol name, optionally with a suffix (`binance`, `okx-2`).
    pub venue: String,
    /// `wss://host/path` (a real venue) or `ws://host:port/path` (loopback, a local proxy).
    pub ws_url: String,
    /// `https://host` or `http://host:port` that REST snapshot paths are appended to (venues
    /// that need one).
    pub rest_base: Option<String>,
    /// The venue's instrument symbols (`BTCUSDT`, `BTC-USD`, `BTC/USD`, `btcusd`).
    pub symbols: Vec<String>,
}

/// Why an endpoint is refused before any connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("venue {0:?} is not binance, coinbase, kraken, okx or bitstamp (optionally with a suffix such as binance-2)")]
    UnknownVenue(String),
    #[error("{venue}: {url:?} is not a wss:// or ws:// URL")]
    NotWs { venue: String, url: String },
    #[error("{venue}: REST base {url:?} is not an https:// or http:// URL")]
    NotHttp { venue: String, url: String },
    #[error("{venue}: {url:?} needs TLS, but the connectors were configured without TLS roots")]
    NoTls { venue: String, url: String },
    #[error("{0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("{venue}: no symbols to subscribe to (give the asset map's venue symbols)")]
    NoSymbols { venue: String },
    #[error("{venue}: Binance books start from a REST snapshot: give the REST base (http://...)")]
    NoRest { venue: String },
}

impl Endpoint {
    pub fn protocol(&self) -> Result<Protocol, EndpointError> {
        venue_protocol(&self.venue).ok_or_else(|| EndpointError::UnknownVenue(self.venue.clone()))
    }

    pub fn check(&self) -> Result<Protocol, EndpointError> {
        let protocol = self.protocol()?;
        if !(self.ws_url.starts_with("wss://") || self.ws_url.starts_with("ws://")) {
            return Err(EndpointError::NotWs {
                venue: self.venue.clone(),
                url: self.ws_url.clone(),
            });
        }
        if let Some(rest) = &self.rest_base {
            if !(rest.starts_with("https://") || rest.starts_with("http://")) {
                return Err(EndpointError::NotHttp {
                    venue: self.venue.clone(),
                    url: rest.clone(),
                });
            }
        }
        if self.symbols.is_empty() {
            return Err(EndpointError::NoSymbols {
                venue: self.venue.clone(),
            });
        }
        if protocol == Protocol::Binance && self.rest_base.is_none() {
            return Err(EndpointError::NoRest {
                venue: self.venue.clone(),
            });
        }
        Ok(protocol)
    }

    /// Checks the endpoint against the TLS configuration it will be connected with.
    pub fn check_with(&self, tls: Option<&TlsClient>) -> Result<Protocol, EndpointError> {
        let protocol = self.check()?;
        if tls.is_none() {
            let secure = std::iter::once(&self.ws_url)
                .chain(self.rest_base.as_ref())
                .find(|url| url.starts_with("wss://") || url.starts_with("https://"));
            if let Some(url) = secure {
                return Err(EndpointError::NoTls {
                    venue: self.venue.clone(),
                    url: url.clone(),
                });
            }
        }
        Ok(protocol)
    }
}

#[derive(Clone, Debug)]
pub struct ConnectorConfig {
    /// A heartbeat is sent this often.
    pub heartbeat_every: Duration,
    /// A connection that delivers no frame for this long is presumed dead and replaced.
    pub idle_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Jitter seed (each connector derives its own from it and its venue).
    pub seed: u64,
    /// Kraken book subscription depth (the core truncates to the same depth).
    pub kraken_depth: usize,
    pub connect_timeout: Duration,
    pub rest_timeout: Duration,
    /// Trust anchors for `wss://` and `https://` endpoints; `None` allows plain `ws://` and
    /// `http://` only (an endpoint that needs TLS is then refused before anything starts).
    pub tls: Option<TlsClient>,
}

impl Default for ConnectorConfig {
    fn default() -> Self {
        ConnectorConfig {
            heartbeat_every: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            seed: 1,
            kraken_depth: walras_oracle::KRAKEN_DEPTH,
            connect_timeout: Duration::from_secs(10),
            rest_timeout: Duration::from_secs(10),
            tls: None,
        }
    }
}

/// Counters of one connector.
#[derive(Debug, Default)]
pub struct ConnectorStats {
    pub connects: AtomicU64,
    pub connect_failures: AtomicU64,
    pub disconnects: AtomicU64,
    pub idle_timeouts: AtomicU64,
    pub frames: AtomicU64,
    pub snapshots: AtomicU64,
    pub snapshot_failures: AtomicU64,
    pub resubscribes: AtomicU64,
}

impl ConnectorStats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The receive clock: nanoseconds since the connectors started (monotonic; the core's
/// staleness and pacing use the same clock).
#[derive(Clone, Copy, Debug)]
pub struct Clock(Instant);

impl Clock {
    pub fn start() -> Clock {
        Clock(Instant::now())
    }
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A running connector: send it a symbol to resync that book.
pub struct Connector {
    pub venue: String,
    pub resync: mpsc::Sender<String>,
    pub stats: Arc<ConnectorStats>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts one venue's connector on the current runtime. Records go to `records` until `stop`
/// turns true.
pub fn spawn(
    endpoint: Endpoint,
    protocol: Protocol,
    config: ConnectorConfig,
    http: reqwest::Client,
    clock: Clock,
    records: mpsc::Sender<Record>,
    stop: watch::Receiver<bool>,
) -> Connector {
    let (resync_tx, resync_rx) = mpsc::channel(256);
    let stats = Arc::new(ConnectorStats::default());
    let venue = endpoint.venue.clone();
    let task = tokio::spawn(run(
        endpoint,
        protocol,
        config,
        http,
        clock,
        records,
        resync_rx,
        stats.clone(),
        stop,
    ));
    Connector {
        venue,
        resync: resync_tx,
        stats,
        task,
    }
}

/// The REST client for snapshots, trusting what the WebSocket connections trust.
pub fn http_client(config: &ConnectorConfig) -> Result<reqwest::Client, EndpointError> {
    match &config.tls {
        Some(tls) => Ok(tls.http_client(config.rest_timeout)?),
        None => reqwest::Client::builder()
            .timeout(config.rest_timeout)
            .build()
            .map_err(|error| {
                EndpointError::Tls(crate::tls::TlsError::Config(format!(
                    "REST client: {error}"
                )))
            }),
    }
}

/// A seed per venue from the configured one, so venues do not share jitter.
fn venue_seed(seed: u64, venue: &str) -> u64 {
    venue.bytes().fold(seed ^ 0x9E37_79B9_7F4A_7C15, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}

#[allow(clippy::too_many_arguments)]
async fn run(
    endpoint: Endpoint,
    protocol: Protocol,
    config: ConnectorConfig,
    http: reqwest::Client,
    clock: Clock,
    records: mpsc::Sender<Record>,
    mut resync: mpsc::Receiver<String>,
    stats: Arc<ConnectorStats>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(
        config.backoff_initial,
        config.backoff_max,
        venue_seed(config.seed, &endpoint.venue),
    );
    let tls = config
        .tls
        .as_ref()
        .map(|tls| tokio_tungstenite::Connector::Rustls(tls.config.clone()));
    let mut conn: u32 = 0;
    while !*stop.borrow() {
        let connected = tokio::time::timeout(
            config.connect_timeout,
            tokio_tungstenite::connect_async_tls_with_config(
                endpoint.ws_url.as_str(),
                None,
                false,
                tls.clone(),
            ),
        )
        .await;
        match connected {
            Ok(Ok((ws, _))) => {
                bump(&stats.connects);
                let session = Session {
                    endpoint: &endpoint,
                    protocol,
                    config: &config,
                    clock,
                    records: &records,
                    stats: &stats,
                    http: &http,
                    conn,
                };
                let delivered = session.run(ws, &mut resync, &mut stop).await;
                // The core resyncs every book of the venue: what was lost while down is unknown.
                let _ = records
                    .send(Record {
                        recv_ns: clock.now_ns(),
                        venue: endpoint.venue.clone(),
                        conn,
                        kind: RecordKind::Disconnect,
                        path: None,
                        payload: String::new(),
                    })
                    .await;
                bump(&stats.disconnects);
                conn = conn.wrapping_add(1);
                if delivered {
                    backoff.reset();
                }
            }
            Ok(Err(error)) => {
                bump(&stats.connect_failures);
                tracing::debug!("{}: connecting failed: {error}", endpoint.venue);
            }
            Err(_) => {
                bump(&stats.connect_failures);
                tracing::debug!("{}: connecting timed out", endpoint.venue);
            }
        }
        if *stop.borrow() || records.is_closed() {
            break;
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => break,
        }
    }
}

struct Session<'a> {
    endpoint: &'a Endpoint,
    protocol: Protocol,
    config: &'a ConnectorConfig,
    clock: Clock,
    records: &'a mpsc::Sender<Record>,
    stats: &'a Arc<ConnectorStats>,
    http: &'a reqwest::Client,
    conn: u32,
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Session<'_> {
    /// Runs one connection until it fails, goes quiet, or `stop`; returns whether any frame
    /// arrived (a session that worked resets the backoff).
    async fn run(
        &self,
        ws: Ws,
        resync: &mut mpsc::Receiver<String>,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        let (mut sink, mut stream) = ws.split();
        for message in subscribe_messages(
            self.protocol,
            &self.endpoint.symbols,
            self.config.kraken_depth,
        ) {
            if sink.send(Message::text(message)).await.is_err() {
                return false;
            }
        }
        for symbol in &self.endpoint.symbols {
            self.fetch_snapshot(symbol);
        }
        let mut heartbeat = tokio::time::interval(self.config.heartbeat_every);
        heartbeat.tick().await;
        let mut delivered = false;
        loop {
            tokio::select! {
                frame = tokio::time::timeout(self.config.idle_timeout, stream.next()) => {
                    let payload = match frame {
                        Err(_) => {
                            bump(&self.stats.idle_timeouts);
                            return delivered;
                        }
                        Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => return delivered,
                        Ok(Some(Ok(Message::Text(text)))) => text.as_str().to_string(),
                        Ok(Some(Ok(Message::Binary(bytes)))) => match String::from_utf8(bytes.to_vec()) {
                            Ok(text) => text,
                            // Not a documented frame of any of these venues: the core would
                            // refuse it too; dropping it loses no book state (sequencing catches
                            // anything that mattered).
                            Err(_) => continue,
                        },
                        // Ping, pong, raw frames: liveness only (tungstenite answers pings).
                        Ok(Some(Ok(_))) => {
                            delivered = true;
                            continue;
                        }
                    };
                    delivered = true;
                    bump(&self.stats.frames);
                    let record = Record {
                        recv_ns: self.clock.now_ns(),
                        venue: self.endpoint.venue.clone(),
                        conn: self.conn,
                        kind: RecordKind::Ws,
                        path: None,
                        payload,
                    };
                    if self.records.send(record).await.is_err() {
                        return delivered;
                    }
                }
                _ = heartbeat.tick() => {
                    let message = match heartbeat_text(self.protocol) {
                        Some(text) => Message::text(text),
                        None => Message::Ping(Vec::new().into()),
                    };
                    if sink.send(message).await.is_err() {
                        return delivered;
                    }
                }
                Some(symbol) = resync.recv() => {
                    if rest_snapshot_path(self.protocol, &symbol).is_some() {
                        self.fetch_snapshot(&symbol);
                    } else {
                        bump(&self.stats.resubscribes);
                        for message in resubscribe_messages(self.protocol, &symbol, self.config.kraken_depth) {
                            if sink.send(Message::text(message)).await.is_err() {
                                return delivered;
                            }
                        }
                    }
                }
                _ = stop.changed() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return delivered;
                }
            }
        }
    }

    /// Fetches a REST snapshot in its own task (the connection keeps being read meanwhile, and
    /// the core buffers diffs until the snapshot arrives).
    fn fetch_snapshot(&self, symbol: &str) {
        let (Some(path), Some(base)) = (
            rest_snapshot_path(self.protocol, symbol),
            self.endpoint.rest_base.as_ref(),
        ) else {
            return;
        };
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let (http, records, stats) = (self.http.clone(), self.records.clone(), self.stats.clone());
        let (venue, conn, clock) = (self.endpoint.venue.clone(), self.conn, self.clock);
        tokio::spawn(async move {
            let answer = match http.get(&url).send().await {
                Ok(response) if response.status().is_success() => response.text().await.ok(),
                _ => None,
            };
            let Some(payload) = answer else {
                bump(&stats.snapshot_failures);
                return;
            };
            bump(&stats.snapshots);
            let _ = records
                .send(Record {
                    recv_ns: clock.now_ns(),
                    venue,
                    conn,
                    kind: RecordKind::Rest,
                    path: Some(path),
                    payload,
                })
                .await;
        });
    }
}
