//! The HTTP server's connections: how many may be open, how long one may stay silent, and how
//! long a stopping node waits for them.
//!
//! - At most `connections_max` connections are served at once, shared max-min fairly between
//!   client addresses ([`ClientSlots`]): one address may use them all while nobody else wants
//!   one, but when all are open a newcomer holding fewer than the heaviest address minus one
//!   closes that address's newest connection and is served. Otherwise one more is answered 503
//!   at once and closed, so a client learns why instead of waiting in the listen backlog; the
//!   cap stays below the descriptor limit, so a flood of sockets never leaves the node unable to
//!   open its store or accept anything at all.
//! - A connection that has not sent a complete request head within `header_timeout` is closed:
//!   a new one (a slowloris client sending its head byte by byte, or a silent socket) and one
//!   kept alive between requests alike (hyper starts the same timer whenever it waits for a
//!   request head), so idle connections do not hold slots for ever.
//! - On shutdown the listener closes, open connections are asked to finish their current
//!   request, and after `shutdown_grace` whatever is still open is dropped: no client can keep
//!   the process alive.

use super::limits::{ClientSlots, SlotRefusal};
use super::NodeError;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// The most connections served at once when none is asked for (fewer if the descriptor limit
/// does not leave room for them).
pub const CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Descriptors kept for everything but connections: the store, standard streams, the runtime's
/// own, CometBFT's sockets and child, and files opened while serving.
pub(crate) const DESCRIPTORS_RESERVED: u64 = 64;
/// How long a stopping node waits for open requests before dropping their connections.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (descriptors exhausted by something else): no busy loop.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The limits the server applies to connections.
#[derive(Clone, Debug)]
pub(crate) struct ConnectionLimits {
    pub connections_max: usize,
    pub header_timeout: Duration,
    pub shutdown_grace: Duration,
}

/// Raises the soft limit on open descriptors to the hard limit (a default soft limit of 1024
/// is far below what a busy server needs); returns the soft limit now in force.
pub(crate) fn raise_descriptor_limit() -> Result<u64, NodeError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).map_err(|errno| descriptor_error("reading", errno))?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            .map_err(|errno| descriptor_error("raising", errno))?;
        return Ok(hard);
    }
    Ok(soft)
}

fn descriptor_error(doing: &'static str, source: nix::errno::Errno) -> NodeError {
    NodeError::DescriptorLimit { doing, source }
}

/// The connection cap: `requested`, or the default, checked against `descriptors` (the soft
/// descriptor limit) so that connections can never take the descriptors the node needs.
pub(crate) fn connections_max(
    requested: Option<usize>,
    descriptors: u64,
) -> Result<usize, NodeError> {
    let available = descriptors.saturating_sub(DESCRIPTORS_RESERVED);
    if available == 0 {
        return Err(NodeError::Config(format!(
            "the open-file limit is {descriptors}, which leaves no room for connections (the \
             node keeps {DESCRIPTORS_RESERVED} for itself): raise it with `ulimit -n`"
        )));
    }
    let available = usize::try_from(available).unwrap_or(usize::MAX);
    match requested {
        None => Ok(CONNECTIONS_MAX_DEFAULT.min(available)),
        Some(0) => Err(NodeError::Config(
            "--connections-max must be positive".into(),
        )),
        Some(requested) if requested > available => Err(NodeError::Config(format!(
            "--connections-max {requested} needs {} open files but the limit is {descriptors}: \
             lower --connections-max to at most {available} or raise the limit with `ulimit -n`",
            requested as u64 + DESCRIPTORS_RESERVED
        ))),
        Some(requested) => Ok(requested),
    }
}

/// Serves `app` on `listener` until `stop` resolves, then shuts down within the grace period.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: &ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(ClientSlots::new(usize::MAX, limits.connections_max));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut refusals = RefusalLog::default();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(cause) => {
                        tracing::warn!("accepting a connection failed: {cause}");
                        tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                        continue;
                    }
                };
                let slot = match slots.take(peer.ip()) {
                    Ok(slot) => slot,
                    Err(SlotRefusal::Total { .. } | SlotRefusal::Client { .. }) => {
                        refuse(&stream, limits.connections_max);
                        refusals.note(limits.connections_max);
                        continue;
                    }
                };
                // Responses are written whole: no reason to let Nagle delay them.
                let _ = stream.set_nodelay(true);
                let connection = graceful.watch(http.serve_connection(
                    TokioIo::new(stream),
                    service(app.clone(), peer),
                ));
                connections.spawn(async move {
                    // A connection ending in an error (a timeout, a reset) concerns only its
                    // client; one whose slot went to a newcomer is dropped (closed) at once.
                    tokio::select! {
                        _ = connection => {},
                        () = slot.evicted() => {},
                    }
                    drop(slot);
                });
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {},
        }
    }
    drop(listener);
    finish(graceful, connections, limits.shutdown_grace).await;
}

/// The axum app as a hyper service for one connection, telling handlers the client's address.
fn service(
    app: Router,
    peer: SocketAddr,
) -> impl hyper::service::HttpService<Incoming, ResBody = axum::body::Body, Future: Send> {
    hyper::service::service_fn(move |mut request: axum::http::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(request)
    })
}

/// Answers a connection over the cap with 503 and closes it. The socket is new, so its send
/// buffer is empty and a non-blocking write of this short answer does not block.
fn refuse(stream: &TcpStream, connections_max: usize) {
    let body = format!(
        "{{\"error\":{{\"code\":\"too_many_connections\",\"message\":\"the node serves at most \
         {connections_max} connections at once; retry shortly\"}}}}"
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// Says that connections are being refused, at most once every few seconds (a flood must not
/// flood the log too).
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    unreported: u64,
}

impl RefusalLog {
    const EVERY: Duration = Duration::from_secs(5);

    fn note(&mut self, connections_max: usize) {
        self.unreported += 1;
        if self.last.is_none_or(|last| last.elapsed() >= Self::EVERY) {
            tracing::warn!(
                "{} connections refused: {connections_max} are open (--connections-max)",
                self.unreported
            );
            self.unreported = 0;
            self.last = Some(Instant::now());
        }
    }
}

/// Asks every connection to finish its current request, waits at most `grace`, then drops
/// whatever is still open.
async fn finish(graceful: GracefulShutdown, mut connections: JoinSet<()>, grace: Duration) {
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!(
            "{} connections still open after {} s; closing them",
            connections.len(),
            grace.as_secs_f64()
        );
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_leaves_descriptors_for_the_node() {
        assert_eq!(
            connections_max(None, 1 << 20).unwrap(),
            CONNECTIONS_MAX_DEFAULT
        );
        assert_eq!(connections_max(None, 256).unwrap(), 256 - 64);
        assert_eq!(connections_max(Some(100), 256).unwrap(), 100);
        let too_many = connections_max(Some(300), 256).unwrap_err().to_string();
        assert!(too_many.contains("at most 192"), "{too_many}");
        assert!(connections_max(Some(0), 256).is_err());
        assert!(connections_max(None, 64).is_err());
    }
}
