//! A loopback mock venue: serves a recorded or generated feed (`walras_oracle::feed`) per
//! venue over WebSocket (`/ws/{venue}`) and REST (`/rest/{venue}/...`), paced at the feed's
//! receive times, with the feed's injected faults: gaps, duplicates, reorders, crossed levels
//! and bad checksums travel in the payloads, and a disconnect record closes the connection.
//!
//! Each venue's stream has one cursor that advances only while a client is connected, so a
//! client that reconnects continues where it left off (after the feed's re-snapshots, as a
//! venue serves fresh snapshots to a new connection). A REST request answers the newest
//! snapshot the stream has reached for that path, waiting (up to `rest_wait`) for a newer one
//! than the last served, as a venue's snapshot is never older than its caller's stream.
//! Client messages (subscriptions, heartbeats) are recorded for tests, not interpreted.

use crate::connector::Endpoint;
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;
use walras_oracle::{Record, RecordKind};

#[derive(Default)]
struct RestSlot {
    /// The newest snapshot reached: (sequence, payload).
    latest: Option<(u64, String)>,
    /// The sequence last served.
    served: u64,
}

struct VenueStream {
    records: Vec<Record>,
    cursor: usize,
}

#[derive(Default)]
struct Observed {
    received: Vec<String>,
    connections: u64,
    closed_by_fault: u64,
    /// Records served, of how many (kept here, not read from the stream, whose lock a
    /// connected client holds).
    served: usize,
    total: usize,
}

struct MockState {
    speed: f64,
    rest_wait: Duration,
    streams: BTreeMap<String, tokio::sync::Mutex<VenueStream>>,
    rest: Mutex<BTreeMap<(String, String), RestSlot>>,
    rest_sequence: Mutex<u64>,
    rest_reached: Notify,
    observed: Mutex<BTreeMap<String, Observed>>,
}

/// A running mock venue; stops when dropped.
pub struct MockVenue {
    pub ws_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    state: Arc<MockState>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for MockVenue {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl MockVenue {
    /// Serves `records` (any venues) on two loopback ports; `speed` 2.0 plays twice as fast.
    pub async fn start(records: Vec<Record>, speed: f64) -> std::io::Result<MockVenue> {
        let mut by_venue: BTreeMap<String, Vec<Record>> = BTreeMap::new();
        for record in records {
            by_venue
                .entry(record.venue.clone())
                .or_default()
                .push(record);
        }
        let streams = by_venue
            .into_iter()
            .map(|(venue, mut records)| {
                records.sort_by_key(|r| r.recv_ns);
                (
                    venue,
                    tokio::sync::Mutex::new(VenueStream { records, cursor: 0 }),
                )
            })
            .collect();
        let state = Arc::new(MockState {
            speed: if speed > 0.0 { speed } else { 1.0 },
            rest_wait: Duration::from_secs(2),
            streams,
            rest: Mutex::new(BTreeMap::new()),
            rest_sequence: Mutex::new(0),
            rest_reached: Notify::new(),
            observed: Mutex::new(BTreeMap::new()),
        });
        for (venue, stream) in &state.streams {
            let total = stream.lock().await.records.len();
            observe(&state, venue, |o| o.total = total);
        }
        let ws = TcpListener::bind("127.0.0.1:0").await?;
        let rest = TcpListener::bind("127.0.0.1:0").await?;
        let (ws_addr, rest_addr) = (ws.local_addr()?, rest.local_addr()?);
        let ws_state = state.clone();
        let ws_task = tokio::spawn(async move {
            while let Ok((socket, _)) = ws.accept().await {
                tokio::spawn(serve_ws(ws_state.clone(), socket));
            }
        });
        let app = axum::Router::new()
            .fallback(rest_answer)
            .with_state(state.clone());
        let rest_task = tokio::spawn(async move {
            let _ = axum::serve(rest, app).await;
        });
        Ok(MockVenue {
            ws_addr,
            rest_addr,
            state,
            tasks: vec![ws_task, rest_task],
        })
    }

    /// The endpoint a connector uses for `venue`.
    pub fn endpoint(&self, venue: &str, symbols: Vec<String>) -> Endpoint {
        Endpoint {
            venue: venue.to_string(),
            ws_url: format!("ws://{}/ws/{venue}", self.ws_addr),
            rest_base: Some(format!("http://{}/rest/{venue}", self.rest_addr)),
            symbols,
        }
    }

    /// Text messages clients sent to `venue`.
    pub fn received(&self, venue: &str) -> Vec<String> {
        self.observe(venue, |o| o.received.clone())
    }

    /// Connections `venue` accepted, and those it closed for an injected disconnect.
    pub fn connections(&self, venue: &str) -> (u64, u64) {
        self.observe(venue, |o| (o.connections, o.closed_by_fault))
    }

    /// Whether every record of `venue` has been served.
    pub fn finished(&self, venue: &str) -> bool {
        self.observe(venue, |o| o.served >= o.total)
    }

    fn observe<T>(&self, venue: &str, f: impl FnOnce(&Observed) -> T) -> T {
        let observed = self
            .state
            .observed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f(observed.get(venue).unwrap_or(&Observed::default()))
    }
}

fn observe(state: &MockState, venue: &str, f: impl FnOnce(&mut Observed)) {
    let mut observed = state.observed.lock().unwrap_or_else(|p| p.into_inner());
    f(observed.entry(venue.to_string()).or_default());
}

// The callback's error type is tungstenite's (an HTTP response): not ours to shrink.
#[allow(clippy::result_large_err)]
async fn serve_ws(state: Arc<MockState>, socket: tokio::net::TcpStream) {
    let mut path = String::new();
    let accepted =
        tokio_tungstenite::accept_hdr_async(socket, |request: &Request, response: Response| {
            path = request.uri().path().to_string();
            Ok(response)
        })
        .await;
    let Ok(ws) = accepted else { return };
    let Some(venue) = path.strip_prefix("/ws/").map(str::to_string) else {
        return;
    };
    let Some(stream) = state.streams.get(&venue) else {
        return;
    };
    // One client per venue stream at a time: a reconnecting client waits for the old
    // connection to be torn down.
    let mut stream = stream.lock().await;
    observe(&state, &venue, |o| o.connections += 1);
    let (mut sink, mut incoming) = ws.split();
    let start_ns = stream.records.get(stream.cursor).map_or(0, |r| r.recv_ns);
    let base = Instant::now();
    loop {
        let Some(record) = stream.records.get(stream.cursor).cloned() else {
            // The feed is over: stay connected (quiet) until the client leaves.
            while let Some(Ok(message)) = incoming.next().await {
                if let Message::Text(text) = message {
                    observe(&state, &venue, |o| {
                        o.received.push(text.as_str().to_string())
                    });
                }
            }
            return;
        };
        let offset = (record.recv_ns.saturating_sub(start_ns) as f64 / state.speed) as u64;
        let due = base + Duration::from_nanos(offset);
        tokio::select! {
            _ = tokio::time::sleep_until(due.into()) => {
                stream.cursor += 1;
                let served = stream.cursor;
                observe(&state, &venue, |o| o.served = served);
                match record.kind {
                    RecordKind::Ws => {
                        if sink.send(Message::text(record.payload)).await.is_err() {
                            return;
                        }
                    }
                    RecordKind::Rest => {
                        let sequence = {
                            let mut next = state.rest_sequence.lock().unwrap_or_else(|p| p.into_inner());
                            *next += 1;
                            *next
                        };
                        let path = record.path.unwrap_or_default();
                        let mut rest = state.rest.lock().unwrap_or_else(|p| p.into_inner());
                        rest.entry((venue.clone(), path)).or_default().latest =
                            Some((sequence, record.payload));
                        drop(rest);
                        state.rest_reached.notify_waiters();
                    }
                    RecordKind::Disconnect => {
                        // The injected fault: the venue drops the connection.
                        observe(&state, &venue, |o| o.closed_by_fault += 1);
                        let _ = sink.send(Message::Close(None)).await;
                        return;
                    }
                }
            }
            message = incoming.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    observe(&state, &venue, |o| o.received.push(text.as_str().to_string()));
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return,
            }
        }
    }
}

async fn rest_answer(
    axum::extract::State(state): axum::extract::State<Arc<MockState>>,
    uri: axum::http::Uri,
) -> (axum::http::StatusCode, String) {
    let path_and_query = uri.path_and_query().map_or("", |p| p.as_str());
    let Some(rest) = path_and_query.strip_prefix("/rest/") else {
        return (axum::http::StatusCode::NOT_FOUND, "no such venue".into());
    };
    let (venue, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let key = (venue.to_string(), path.to_string());
    let deadline = tokio::time::Instant::now() + state.rest_wait;
    loop {
        let reached = state.rest_reached.notified();
        {
            let mut slots = state.rest.lock().unwrap_or_else(|p| p.into_inner());
            let slot = slots.entry(key.clone()).or_default();
            if let Some((sequence, payload)) = slot.latest.clone() {
                if sequence > slot.served {
                    slot.served = sequence;
                    return (axum::http::StatusCode::OK, payload);
                }
            }
        }
        if tokio::time::timeout_at(deadline, reached).await.is_err() {
            return (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "no newer snapshot yet".into(),
            );
        }
    }
}
