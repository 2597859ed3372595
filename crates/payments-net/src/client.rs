//! The committee client: one multiplexed TCP connection per validator (requests tagged with an
//! id, replies matched as they come, in any order), broadcast of a payment request to every
//! validator's shard, and [`certify`], which feeds the replies to the core's quorum rule
//! (`walras_payments::QuorumCollector`) through a [`QuorumRound`].
//!
//! Wallets use `walras_payments::Client` (persist before send, resend identical bytes), whose
//! pending payments each hold a `QuorumCollector`, and feed it the replies of
//! [`CommitteeClient::broadcast`]; the benchmark calls [`certify`]. Both count votes by the one
//! rule; this module only sends, waits and reports.
//!
//! Overload (issue 31): the client holds back what a validator could not take, without sending
//! it: as many requests in flight on one connection as its window (an adaptive [`Window`] that
//! follows the connection's latency, at most [`CLIENT_IN_FLIGHT_MAX`]; or a fixed cap,
//! [`CommitteeClient::with_in_flight_max`]), or a validator that answered
//! [`ErrorCode::Overloaded`] within its retry hint. When fewer than a quorum of
//! validators can take a payment, it is sent to none (so the validators' work goes to payments
//! that can certify), and [`certify`] answers [`CertifyError::Overloaded`]. Nothing is lost: a
//! refused request is resent unchanged later (the wallet keeps it pending).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use walras_payments::{
    Absence, Certificate, Committee, Conflict, PaymentRequest, QuorumCollector, RootCache,
    ValidatorIndex, Verdict, VoteFault,
};

use crate::frame::{push_frame, write_framed, FrameReader};
use crate::window::{Window, WindowConfig};
use crate::wire::{
    decode_response_message, encode_request_message, ErrorCode, ErrorReply, Request, Response,
};

/// How long a request waits for its reply by default.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to a validator may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most requests one connection may have in flight; one more is held back (the validator's share
/// per connection, `validator::CONNECTION_IN_FLIGHT_MAX`). The adaptive window moves below it
/// with the measured latency; a fixed cap ([`CommitteeClient::with_in_flight_max`], the bench's
/// `--in-flight`) replaces the window: latency is then about the cap ÷ the committee's rate.
pub const CLIENT_IN_FLIGHT_MAX: usize = 512;
/// The retry hint of a request held back for the connection's in-flight share.
const IN_FLIGHT_RETRY_AFTER: Duration = Duration::from_millis(5);

/// Why the client held a request back without sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldBack {
    /// The connection has its share of requests in flight.
    InFlight { max: usize },
    /// The validator answered `Overloaded` and its retry hint has not passed.
    Backoff,
    /// Fewer than a quorum of validators can take a request now.
    NoQuorum { available: usize, quorum: usize },
}

impl std::fmt::Display for HoldBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HoldBack::InFlight { max } => write!(f, "{max} requests in flight on its connection"),
            HoldBack::Backoff => write!(f, "it answered overloaded and asked to wait"),
            HoldBack::NoQuorum { available, quorum } => write!(
                f,
                "only {available} validators can take a request now, {quorum} needed"
            ),
        }
    }
}

/// Why a request to one validator got no usable reply.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum NetError {
    #[error("validator {validator} ({address}): cannot connect: {message}")]
    Connect {
        validator: ValidatorIndex,
        address: String,
        message: String,
    },
    #[error("validator {validator}: the connection closed before the reply")]
    Closed { validator: ValidatorIndex },
    #[error("validator {validator}: no reply within {timeout:?}")]
    Timeout {
        validator: ValidatorIndex,
        timeout: Duration,
    },
    #[error("validator {validator} refused: {error}")]
    Refused {
        validator: ValidatorIndex,
        error: ErrorReply,
    },
    #[error("validator {validator} sent an unexpected reply")]
    Unexpected { validator: ValidatorIndex },
    /// The validator refused the request unhandled (its queue is full); resend it unchanged
    /// after `retry_after`.
    #[error("validator {validator} is overloaded, retry after {retry_after:?}: {message}")]
    Overloaded {
        validator: ValidatorIndex,
        retry_after: Duration,
        message: String,
    },
    /// The client did not send the request; resend it unchanged after `retry_after`.
    #[error("validator {validator}: not sent, {reason}; retry after {retry_after:?}")]
    HeldBack {
        validator: ValidatorIndex,
        reason: HoldBack,
        retry_after: Duration,
    },
}

impl NetError {
    /// The retry hint of an overload refusal (the validator's or the client's own), if it is one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            NetError::Overloaded { retry_after, .. } | NetError::HeldBack { retry_after, .. } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }
}

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Response>>>>;

struct Connection {
    requests: mpsc::UnboundedSender<Vec<u8>>,
    waiters: Waiters,
    /// Cleared when the validator closed the connection (idle timeout, restart): the next
    /// request opens a new one instead of waiting on a dead socket.
    open: Arc<std::sync::atomic::AtomicBool>,
}

/// One validator's endpoint: a lazily opened, shared connection.
struct Endpoint {
    index: ValidatorIndex,
    address: String,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Requests sent and not yet answered (or timed out).
    in_flight: AtomicUsize,
    /// Microseconds after the client's `epoch` before which nothing is sent (a retry hint).
    backoff_until_us: AtomicU64,
    /// The adaptive window, fed every reply (also under a fixed cap, for its report).
    window: Mutex<Window>,
    /// The window's limit, read without the lock by every broadcast.
    window_limit: AtomicUsize,
}

/// One connection's window as the client sees it now ([`CommitteeClient::windows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionWindow {
    pub validator: ValidatorIndex,
    /// Requests the connection may have in flight now (the fixed cap, if one is set).
    pub limit: usize,
    /// `false`: a fixed cap holds, not the window.
    pub adaptive: bool,
    /// Requests in flight now.
    pub in_flight: usize,
    /// The least latency the window remembers, in microseconds.
    pub min_latency_us: Option<u64>,
}

impl Endpoint {
    /// Why a request to this validator would be held back now, and for how long.
    fn hold_back(&self, now_us: u64, in_flight_max: usize) -> Option<(HoldBack, Duration)> {
        let until = self.backoff_until_us.load(Ordering::Relaxed);
        if until > now_us {
            return Some((HoldBack::Backoff, Duration::from_micros(until - now_us)));
        }
        if self.in_flight.load(Ordering::Relaxed) >= in_flight_max {
            return Some((
                HoldBack::InFlight { max: in_flight_max },
                IN_FLIGHT_RETRY_AFTER,
            ));
        }
        None
    }

    /// The requests this connection may have in flight now.
    fn in_flight_max(&self, fixed: Option<usize>) -> usize {
        fixed.unwrap_or_else(|| self.window_limit.load(Ordering::Relaxed))
    }

    /// Feeds the window one request's outcome (`in_flight`: requests in flight when it ended,
    /// itself included).
    fn observe(
        &self,
        now_us: u64,
        latency: Duration,
        in_flight: usize,
        result: &Result<Response, NetError>,
    ) {
        let Ok(mut window) = self.window.lock() else {
            return;
        };
        match result {
            Err(NetError::Refused { error, .. })
                if matches!(error.code, ErrorCode::Overloaded { .. }) =>
            {
                window.on_overloaded(now_us)
            }
            Err(NetError::Timeout { .. }) => window.on_overloaded(now_us),
            // A refusal of the request itself was still served: its latency counts.
            Ok(_) | Err(NetError::Refused { .. }) => {
                let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                window.on_reply(now_us, latency_us, in_flight)
            }
            // No answer to time (connection lost, broken reply): nothing to learn.
            Err(_) => return,
        }
        self.window_limit.store(window.limit(), Ordering::Relaxed);
    }

    /// Sends nothing to this validator until `retry_after` past `now_us`.
    fn back_off(&self, now_us: u64, retry_after: Duration) {
        let until = now_us.saturating_add(retry_after.as_micros() as u64);
        self.backoff_until_us.fetch_max(until, Ordering::Relaxed);
    }

    /// The open connection (`true`: reused) or a new one (`false`).
    async fn connection(&self) -> Result<(Arc<Connection>, bool), NetError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            if !connection.requests.is_closed() && connection.open.load(Ordering::Acquire) {
                return Ok((connection.clone(), true));
            }
        }
        let connect_error = |message: String| NetError::Connect {
            validator: self.index,
            address: self.address.clone(),
            message,
        };
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.address))
            .await
            .map_err(|_| connect_error("timed out".into()))?
            .map_err(|error| connect_error(error.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (reader, mut writer) = stream.into_split();
        let (requests, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
        let waiters: Waiters = Arc::default();
        tokio::spawn(async move {
            let mut framed = Vec::new();
            while let Some(body) = outgoing.recv().await {
                framed.clear();
                let mut next = Some(body);
                while let Some(body) = next {
                    if push_frame(&mut framed, &body).is_err() {
                        return;
                    }
                    next = outgoing.try_recv().ok();
                }
                if write_framed(&mut writer, &framed).await.is_err() {
                    return;
                }
            }
        });
        let reader_waiters = waiters.clone();
        let closer = requests.clone();
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let reader_open = open.clone();
        tokio::spawn(async move {
            let mut frames = FrameReader::new(reader);
            while let Ok(body) = frames.next().await {
                // A reply that does not decode is a broken peer: drop the connection.
                let Ok((id, response)) = decode_response_message(&body) else {
                    break;
                };
                let waiter = reader_waiters
                    .lock()
                    .ok()
                    .and_then(|mut waiters| waiters.remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(response);
                }
            }
            // Wake everyone still waiting (their senders drop) and mark the connection dead.
            reader_open.store(false, Ordering::Release);
            if let Ok(mut waiters) = reader_waiters.lock() {
                waiters.clear();
            }
            drop(closer);
        });
        let connection = Arc::new(Connection {
            requests,
            waiters,
            open,
        });
        *slot = Some(connection.clone());
        Ok((connection, false))
    }
}

/// A client of one committee.
pub struct CommitteeClient {
    committee: Committee,
    endpoints: Vec<Endpoint>,
    next_id: AtomicU64,
    timeout: Duration,
    /// A fixed cap of requests in flight per connection, in place of the adaptive window.
    fixed_in_flight_max: Option<usize>,
    /// The origin of the endpoints' backoff instants.
    epoch: Instant,
}

/// One validator's answer to a broadcast.
#[derive(Debug)]
pub struct ValidatorReply {
    pub validator: ValidatorIndex,
    pub result: Result<Response, NetError>,
}

impl CommitteeClient {
    /// A client for `committee` whose validator `i` listens on `addresses[i]`, each connection
    /// under an adaptive window of at most [`CLIENT_IN_FLIGHT_MAX`].
    pub fn new(committee: Committee, addresses: Vec<String>) -> Arc<CommitteeClient> {
        CommitteeClient::with_window(
            committee,
            addresses,
            WindowConfig::up_to(CLIENT_IN_FLIGHT_MAX),
        )
    }

    /// A client whose connections' windows move under `window`.
    pub fn with_window(
        committee: Committee,
        addresses: Vec<String>,
        window: WindowConfig,
    ) -> Arc<CommitteeClient> {
        let window = Window::new(window);
        let endpoints = addresses
            .into_iter()
            .enumerate()
            .map(|(index, address)| Endpoint {
                index: index as ValidatorIndex,
                address,
                connection: tokio::sync::Mutex::new(None),
                in_flight: AtomicUsize::new(0),
                backoff_until_us: AtomicU64::new(0),
                window_limit: AtomicUsize::new(window.limit()),
                window: Mutex::new(window.clone()),
            })
            .collect();
        Arc::new(CommitteeClient {
            committee,
            endpoints,
            next_id: AtomicU64::new(1),
            timeout: REQUEST_TIMEOUT,
            fixed_in_flight_max: None,
            epoch: Instant::now(),
        })
    }

    /// A client that holds back more than a fixed `in_flight_max` requests per connection,
    /// whatever the latency (no adaptive window).
    pub fn with_in_flight_max(
        committee: Committee,
        addresses: Vec<String>,
        in_flight_max: usize,
    ) -> Arc<CommitteeClient> {
        let mut client = CommitteeClient::new(committee, addresses);
        if let Some(client) = Arc::get_mut(&mut client) {
            client.fixed_in_flight_max = Some(in_flight_max.max(1));
        }
        client
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// The committee.
    pub fn committee(&self) -> &Committee {
        &self.committee
    }

    /// Each connection's window now, in validator order.
    pub fn windows(&self) -> Vec<ConnectionWindow> {
        self.endpoints
            .iter()
            .map(|endpoint| ConnectionWindow {
                validator: endpoint.index,
                limit: endpoint.in_flight_max(self.fixed_in_flight_max),
                adaptive: self.fixed_in_flight_max.is_none(),
                in_flight: endpoint.in_flight.load(Ordering::Relaxed),
                min_latency_us: endpoint
                    .window
                    .lock()
                    .ok()
                    .and_then(|window| window.min_latency_us()),
            })
            .collect()
    }

    /// Sends `request` to validator `validator` and waits for its reply.
    pub async fn call(
        &self,
        validator: ValidatorIndex,
        request: &Request,
    ) -> Result<Response, NetError> {
        let endpoint = self
            .endpoints
            .get(usize::from(validator))
            .ok_or(NetError::Unexpected { validator })?;
        endpoint.in_flight.fetch_add(1, Ordering::Relaxed);
        self.call_reserved(validator, endpoint, request).await
    }

    /// [`CommitteeClient::call`] of a request already counted in `endpoint.in_flight`.
    async fn call_reserved(
        &self,
        validator: ValidatorIndex,
        endpoint: &Endpoint,
        request: &Request,
    ) -> Result<Response, NetError> {
        let sent = Instant::now();
        let result = self.call_counted(validator, endpoint, request).await;
        let in_flight = endpoint.in_flight.fetch_sub(1, Ordering::Relaxed);
        // Payments only: a stats or holder query costs the validator a fraction of a payment,
        // and its latency as the minimum would set the target below any payment's.
        if matches!(request, Request::Pay { .. }) {
            endpoint.observe(self.now_us(), sent.elapsed(), in_flight, &result);
        }
        match result {
            Err(NetError::Refused { validator, error }) => match error.code {
                ErrorCode::Overloaded { retry_after_ms } => {
                    let retry_after = Duration::from_millis(u64::from(retry_after_ms));
                    endpoint.back_off(self.now_us(), retry_after);
                    Err(NetError::Overloaded {
                        validator,
                        retry_after,
                        message: error.message,
                    })
                }
                _ => Err(NetError::Refused { validator, error }),
            },
            result => result,
        }
    }

    async fn call_counted(
        &self,
        validator: ValidatorIndex,
        endpoint: &Endpoint,
        request: &Request,
    ) -> Result<Response, NetError> {
        let (connection, reused) = endpoint.connection().await?;
        match self.call_on(validator, &connection, request).await {
            // A reused connection the validator closed meanwhile (its idle timeout): once more
            // on a fresh one. Requests are idempotent (a payment is resent unchanged).
            Err(NetError::Closed { .. }) if reused => {
                let (connection, _) = endpoint.connection().await?;
                self.call_on(validator, &connection, request).await
            }
            result => result,
        }
    }

    async fn call_on(
        &self,
        validator: ValidatorIndex,
        connection: &Connection,
        request: &Request,
    ) -> Result<Response, NetError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut waiters) = connection.waiters.lock() {
            waiters.insert(id, sender);
        }
        if connection
            .requests
            .send(encode_request_message(id, request))
            .is_err()
        {
            return Err(NetError::Closed { validator });
        }
        let result = tokio::time::timeout(self.timeout, receiver).await;
        if let Ok(mut waiters) = connection.waiters.lock() {
            waiters.remove(&id);
        }
        match result {
            Err(_) => Err(NetError::Timeout {
                validator,
                timeout: self.timeout,
            }),
            Ok(Err(_)) => Err(NetError::Closed { validator }),
            Ok(Ok(Response::Error(error))) => Err(NetError::Refused { validator, error }),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Why each validator would be held back now (`None`: it would be sent the request).
    fn held_back_endpoints(&self) -> Vec<Option<(HoldBack, Duration)>> {
        let now_us = self.now_us();
        self.endpoints
            .iter()
            .map(|endpoint| {
                endpoint.hold_back(now_us, endpoint.in_flight_max(self.fixed_in_flight_max))
            })
            .collect()
    }

    /// When fewer than a quorum of validators can take a payment now (a payment would be held
    /// back without being sent): how long until one may be sent. A load generator checks this
    /// before it spends anything on a payment.
    pub fn held_back(&self) -> Option<Duration> {
        let held = self.held_back_endpoints();
        let available = held.iter().filter(|held| held.is_none()).count();
        (available < self.committee.quorum()).then(|| quorum_retry_after(&held))
    }

    /// Sends `request` to shard `shard` of every validator at once; replies arrive on the
    /// returned channel as they come (one per validator, errors included). A validator the
    /// client holds back gets nothing and its reply is [`NetError::HeldBack`] at once; when
    /// fewer than a quorum can take the request, none is sent it.
    pub fn broadcast(
        self: &Arc<Self>,
        shard: u32,
        request: &PaymentRequest,
    ) -> mpsc::UnboundedReceiver<ValidatorReply> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let held = self.held_back_endpoints();
        let available = held.iter().filter(|held| held.is_none()).count();
        let quorum = self.committee.quorum();
        if available < quorum {
            // Sending to fewer than a quorum only spends validators' work on a payment that
            // cannot certify now: hold it back everywhere.
            let retry_after = quorum_retry_after(&held);
            for validator in 0..self.endpoints.len() {
                let validator = validator as ValidatorIndex;
                let reason = held[usize::from(validator)]
                    .map_or(HoldBack::NoQuorum { available, quorum }, |(reason, _)| {
                        reason
                    });
                let _ = sender.send(ValidatorReply {
                    validator,
                    result: Err(NetError::HeldBack {
                        validator,
                        reason,
                        retry_after,
                    }),
                });
            }
            return receiver;
        }
        let message = Request::Pay {
            shard,
            request: request.clone(),
        };
        let message = Arc::new(message);
        for (validator, held) in held.into_iter().enumerate() {
            if let Some((reason, retry_after)) = held {
                let validator = validator as ValidatorIndex;
                let _ = sender.send(ValidatorReply {
                    validator,
                    result: Err(NetError::HeldBack {
                        validator,
                        reason,
                        retry_after,
                    }),
                });
                continue;
            }
            // Counted in flight now, not when the task runs: a load generator that checks
            // `held_back` between broadcasts sees every request it already sent.
            self.endpoints[validator]
                .in_flight
                .fetch_add(1, Ordering::Relaxed);
            let client = self.clone();
            let sender = sender.clone();
            let message = message.clone();
            tokio::spawn(async move {
                let endpoint = &client.endpoints[validator];
                let validator = validator as ValidatorIndex;
                let result = client.call_reserved(validator, endpoint, &message).await;
                let _ = sender.send(ValidatorReply { validator, result });
            });
        }
        receiver
    }
}

/// How long until a quorum of validators may be sent a request again: the shortest wait among
/// the held-back ones (one more available at a time).
fn quorum_retry_after(held: &[Option<(HoldBack, Duration)>]) -> Duration {
    held.iter()
        .flatten()
        .map(|(_, after)| *after)
        .min()
        .unwrap_or(IN_FLIGHT_RETRY_AFTER)
}

/// Why a payment did not certify.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CertifyError {
    #[error("{valid} valid votes of {quorum} needed; faults: {faults:?}")]
    NoQuorum {
        valid: usize,
        quorum: usize,
        faults: Vec<String>,
    },
    /// Validators refused the payment unhandled for overload, or the client held it back:
    /// nothing is lost, resend the same request after `retry_after`.
    #[error(
        "{valid} valid votes of {quorum} needed: {overloaded} validators overloaded (refused by \
         {refused_by_validators}, held back by the client for the rest); resend the same request \
         after {retry_after:?}"
    )]
    Overloaded {
        valid: usize,
        quorum: usize,
        /// Validators that refused it or that the client held it back from.
        overloaded: usize,
        /// Of those, the validators that answered `Overloaded` (0: nothing was sent).
        refused_by_validators: usize,
        retry_after: Duration,
    },
}

/// One round of one payment's replies, for callers without a wallet (the benchmark, tests):
/// the votes go to the core's [`QuorumCollector`] (the quorum rule wallets use too); this keeps
/// only what the network adds, the errors and conflict replies, to report them.
pub struct QuorumRound<'a> {
    committee: &'a Committee,
    collector: QuorumCollector,
    /// Refused votes, naming the validator, in the order they were found.
    pub faults: Vec<(ValidatorIndex, VoteFault)>,
    /// Conflict replies (the signed payment that holds an input).
    pub conflicts: Vec<Conflict>,
    /// Errors of validators that did not answer with votes.
    pub errors: Vec<NetError>,
}

impl<'a> QuorumRound<'a> {
    /// A round for `request` under `committee`.
    pub fn new(committee: &'a Committee, request: &PaymentRequest) -> QuorumRound<'a> {
        QuorumRound {
            committee,
            collector: QuorumCollector::new(&request.signed.payment),
            faults: Vec::new(),
            conflicts: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Takes one validator's reply: [`Verdict::Certified`] once, at the quorum;
    /// [`Verdict::Failed`] once every validator answered without a quorum.
    pub fn take(&mut self, reply: ValidatorReply, cache: &Mutex<RootCache>) -> Verdict {
        let Ok(mut cache) = cache.lock() else {
            // A thread panicked holding the cache: count nothing rather than trust it.
            self.errors.push(NetError::Unexpected {
                validator: reply.validator,
            });
            return Verdict::NeedMore;
        };
        let validator = reply.validator;
        let step = match reply.result {
            Ok(Response::Votes(votes)) => {
                self.collector
                    .add_votes(self.committee, &mut cache, validator, &votes)
            }
            Ok(Response::Conflict(conflict)) => {
                self.conflicts.push(conflict);
                self.collector
                    .add_absent(self.committee, &mut cache, validator, Absence::Conflict)
            }
            Ok(_) => {
                self.errors.push(NetError::Unexpected { validator });
                self.collector.add_absent(
                    self.committee,
                    &mut cache,
                    validator,
                    Absence::Unavailable,
                )
            }
            Err(error) => {
                self.errors.push(error);
                self.collector.add_absent(
                    self.committee,
                    &mut cache,
                    validator,
                    Absence::Unavailable,
                )
            }
        };
        self.faults.extend(step.refused);
        step.verdict
    }

    /// No more replies are coming: the certificates, or why not.
    pub fn finish(&mut self, cache: &Mutex<RootCache>) -> Verdict {
        let Ok(mut cache) = cache.lock() else {
            return Verdict::NeedMore;
        };
        let step = self.collector.finish(self.committee, &mut cache);
        self.faults.extend(step.refused);
        step.verdict
    }

    /// Distinct validators whose votes verified so far.
    pub fn valid(&self) -> usize {
        self.collector.valid()
    }

    /// The error to report when no quorum formed: `Overloaded` when overload refusals are what
    /// kept the quorum away (no conflict, and no fault or the valid votes and the overloaded
    /// validators together make a quorum: resending can still certify, nothing is lost).
    pub fn no_quorum(&self) -> CertifyError {
        let overloaded = self
            .errors
            .iter()
            .filter(|error| error.retry_after().is_some())
            .count();
        let overload_kept_the_quorum = self.valid() + overloaded >= self.committee.quorum();
        if overloaded > 0
            && self.conflicts.is_empty()
            && (self.faults.is_empty() || overload_kept_the_quorum)
        {
            let refused_by_validators = self
                .errors
                .iter()
                .filter(|error| matches!(error, NetError::Overloaded { .. }))
                .count();
            let retry_after = self
                .errors
                .iter()
                .filter_map(NetError::retry_after)
                .max()
                .unwrap_or_default();
            return CertifyError::Overloaded {
                valid: self.valid(),
                quorum: self.committee.quorum(),
                overloaded,
                refused_by_validators,
                retry_after,
            };
        }
        CertifyError::NoQuorum {
            valid: self.valid(),
            quorum: self.committee.quorum(),
            faults: self
                .faults
                .iter()
                .map(|(validator, fault)| format!("validator {validator}: {fault}"))
                .chain(self.errors.iter().map(ToString::to_string))
                .chain(self.conflicts.iter().map(|conflict| {
                    format!(
                        "validator {}: input {} is held by another payment",
                        conflict.validator,
                        hex_short(&conflict.input.0 .0)
                    )
                }))
                .collect(),
        }
    }
}

/// Sends `request` to its shard of every validator and waits for a verified quorum (or until
/// every validator answered without one).
pub async fn certify(
    client: &Arc<CommitteeClient>,
    request: &PaymentRequest,
    cache: &Mutex<RootCache>,
) -> Result<Vec<Certificate>, CertifyError> {
    let replies = broadcast_payment(client, request);
    certify_replies(client, request, replies, cache).await
}

/// The first half of [`certify`]: sends `request` to its shard of every validator now (or
/// holds it back) and returns the channel of their replies for [`certify_replies`]. A load
/// generator calls it before spawning the wait, so the requests it sent count in flight before
/// it offers the next.
pub fn broadcast_payment(
    client: &Arc<CommitteeClient>,
    request: &PaymentRequest,
) -> mpsc::UnboundedReceiver<ValidatorReply> {
    let owner = request
        .signed
        .payment
        .inputs
        .first()
        .map(|input| input.output.owner);
    let shard = owner.map_or(0, |owner| client.committee().shard_of(&owner));
    client.broadcast(shard, request)
}

/// The second half of [`certify`]: waits on the replies of [`broadcast_payment`] for a verified
/// quorum (or until every validator answered without one).
pub async fn certify_replies(
    client: &Arc<CommitteeClient>,
    request: &PaymentRequest,
    mut replies: mpsc::UnboundedReceiver<ValidatorReply>,
    cache: &Mutex<RootCache>,
) -> Result<Vec<Certificate>, CertifyError> {
    let mut round = QuorumRound::new(client.committee(), request);
    while let Some(reply) = replies.recv().await {
        match round.take(reply, cache) {
            Verdict::Certified(certificates) => return Ok(certificates),
            Verdict::Failed(_) => return Err(round.no_quorum()),
            Verdict::NeedMore | Verdict::Finished => {}
        }
    }
    match round.finish(cache) {
        Verdict::Certified(certificates) => Ok(certificates),
        _ => Err(round.no_quorum()),
    }
}

fn hex_short(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
