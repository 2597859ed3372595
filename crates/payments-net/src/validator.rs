//! The validator process: one TCP listener, S shard threads.
//!
//! Each shard thread is the only owner of its [`ValidatorShard`] (its spent set) and of its LMDB
//! effect log; connections hand it requests over a bounded channel and wait for the reply on a
//! one-shot channel. A shard thread takes every request waiting in its channel (up to
//! [`GROUP_REQUESTS_MAX`]), checks their owners' signatures as one batch
//! ([`ValidatorShard::check_client_signatures`]: the verdicts each gets alone, at about half the
//! cost), handles them in arrival order, seals the Merkle batch, commits all
//! their effects in one synchronous LMDB transaction (group commit), and only then sends the
//! replies: no vote leaves before it is durable. Shard threads share nothing and hold no handle
//! to each other, so there is no path for a cross-shard message.
//!
//! Overload (issue 31): a payment is admitted to its shard's queue only if the queue is
//! expected to drain within [`ConnectionPolicy::queue_wait_max`] (queued payments × the shard's
//! measured time per payment); otherwise it is refused at once, before any signature check, with
//! [`ErrorCode::Overloaded`] and a retry hint. Admission never waits. A payment that still waited
//! past [`ConnectionPolicy::job_age_max`] is refused unhandled by the shard thread, so no work is
//! done for a client that has likely given up. A connection over its share of requests in
//! flight gets the same refusal (up to as many again; past that it is no longer read).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore, TryAcquireError};
use walras_crypto::{Keypair, PublicKey};
use walras_payments::{
    sign_votes, Committee, Output, OutputId, PaymentId, PaymentRequest, PaymentVotes, Reply,
    Scheme, ValidatorIndex, ValidatorShard, VoteSigner,
};
use walras_payments::{DurableError, EffectLog};

use crate::config::Fault;
use crate::frame::{push_frame, write_frame, write_framed, FrameError, FrameReader};
use crate::wire::{
    decode_request_message, encode_response_message, request_id_of, ErrorCode, ErrorReply, Request,
    Response, ShardStats,
};

/// Most requests one group commit takes (bounds reply latency under a long queue).
pub(crate) const GROUP_REQUESTS_MAX: usize = 1024;
/// Jobs a shard's channel holds; payments are refused well before ([`SHARD_PAYMENTS_QUEUED_MAX`]),
/// so deposits and holder queries still find room.
pub(crate) const SHARD_QUEUE_MAX: usize = 8192;
/// Payments waiting per shard before more are refused ([`ErrorCode::Overloaded`]).
pub(crate) const SHARD_PAYMENTS_QUEUED_MAX: usize = 4096;
/// Longest a newly admitted payment is expected to wait in its shard's queue: one more is
/// refused at once. Keeps the latency of served payments near the unloaded latency.
pub(crate) const SHARD_QUEUE_WAIT_MAX: Duration = Duration::from_millis(50);
/// A payment that has waited this long in its shard's queue is refused without being handled.
pub(crate) const SHARD_JOB_AGE_MAX: Duration = Duration::from_millis(1000);
/// The shard's time per payment assumed before it has measured one.
const REQUEST_NS_INITIAL: u64 = 100_000;
/// The retry hint of a refusal for a connection's in-flight share.
const CONNECTION_RETRY_AFTER_MS: u32 = 20;
/// Requests per connection whose reply is not yet written to the socket before its reader
/// waits: the permit is held until the reply is written, so a client that sends and never reads
/// makes the validator stop reading it, not buffer replies (about 1 KiB each) without bound.
pub(crate) const CONNECTION_IN_FLIGHT_MAX: usize = 512;
/// A connection with no request for this long is closed (clients reconnect on their next
/// request): idle sockets cannot hold the connection cap for long.
pub(crate) const CONNECTION_IDLE_TIMEOUT: Duration = Duration::from_secs(20);
/// Connections one validator serves at once; one more is refused (typed) and closed.
pub(crate) const CONNECTIONS_MAX: usize = 1024;
/// Connections one client address may hold at once (its share of [`CONNECTIONS_MAX`]).
pub(crate) const CONNECTIONS_PER_ADDRESS_MAX: usize = 128;
/// The connection limits a validator serves under ([`Validator::with_policy`]; the defaults
/// are the constants above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionPolicy {
    /// Connections at once.
    pub max: usize,
    /// Connections at once from one client address.
    pub per_address_max: usize,
    /// A connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Requests per connection whose reply is not yet written.
    pub in_flight_max: usize,
    /// Most payments waiting in one shard's queue.
    pub queued_max: usize,
    /// Longest a newly admitted payment may be expected to wait in its shard's queue.
    pub queue_wait_max: Duration,
    /// A payment that waited this long in the queue is refused unhandled.
    pub job_age_max: Duration,
}

impl Default for ConnectionPolicy {
    fn default() -> ConnectionPolicy {
        ConnectionPolicy {
            max: CONNECTIONS_MAX,
            per_address_max: CONNECTIONS_PER_ADDRESS_MAX,
            idle_timeout: CONNECTION_IDLE_TIMEOUT,
            in_flight_max: CONNECTION_IN_FLIGHT_MAX,
            queued_max: SHARD_PAYMENTS_QUEUED_MAX,
            queue_wait_max: SHARD_QUEUE_WAIT_MAX,
            job_age_max: SHARD_JOB_AGE_MAX,
        }
    }
}

/// How long the refusal of a connection over the cap may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a validator cannot start.
#[derive(Debug, Error)]
pub enum ValidatorError {
    #[error("validator index {index} is not in the committee of {validators}")]
    NotAMember { index: u16, validators: usize },
    #[error("the key file's public key is not validator {index}'s committee key")]
    WrongKey { index: u16 },
    #[error("scheme bls, but the BLS key derived from the key file is not validator {index}'s committee bls_key (or the committee lists none)")]
    WrongBlsKey { index: u16 },
    #[error("shard {shard}'s effect log: {source}")]
    Log { shard: u32, source: DurableError },
    #[error("the validator's BLS key: {0}")]
    Bls(#[from] walras_payments::bls::BlsError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: String,
        source: std::io::Error,
    },
    /// A configuration file (the validator's, the committee, the genesis) is unreadable or wrong.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot read the key file {}: {source}", path.display())]
    KeyRead {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("the key file {}: {source}", path.display())]
    Key {
        path: std::path::PathBuf,
        source: crate::config::FieldError,
    },
    #[error(
        "{}: the configuration makes validator {index} play the deliberate fault {fault:?}; this \
         build (without dev-tools) refuses it: remove the \"fault\" field",
        path.display()
    )]
    FaultRefused {
        path: std::path::PathBuf,
        index: u16,
        fault: Fault,
    },
    #[error("validator {index} has no address in the committee (and its file names no `listen`)")]
    NoAddress { index: u16 },
}

/// Everything a validator process needs.
pub struct ValidatorSetup {
    pub committee: Committee,
    pub scheme: Scheme,
    pub index: ValidatorIndex,
    pub keypair: Keypair,
    pub genesis: Vec<(OutputId, Output)>,
    /// Directory of the shards' effect logs.
    pub data: std::path::PathBuf,
    pub fault: Option<Fault>,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    votes: AtomicU64,
    conflicts: AtomicU64,
    refused: AtomicU64,
    spent: AtomicU64,
    commits: AtomicU64,
    cross_shard_messages: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> ShardStats {
        ShardStats {
            requests: self.requests.load(Ordering::Relaxed),
            votes: self.votes.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            spent: self.spent.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            cross_shard_messages: self.cross_shard_messages.load(Ordering::Relaxed),
        }
    }
}

/// One shard's queue as admission sees it: how many payments wait and how fast the shard
/// thread drains them.
#[derive(Debug)]
struct ShardLoad {
    /// Payments admitted and not yet taken by the shard thread.
    queued: AtomicUsize,
    /// The most payments ever queued at once (what the overload test bounds).
    queued_high: AtomicUsize,
    /// Nanoseconds the shard takes per payment: a moving average over groups of each group's
    /// busy time divided by its payments. Busy time starts when the thread finished the group
    /// before or when the group's first payment was admitted, whichever is later, so it counts
    /// the wait for a core on a machine shared with other threads, not only the handling.
    request_ns: AtomicU64,
    /// Payments refused at admission.
    refused_at_admission: AtomicU64,
    /// Payments refused by the shard thread unhandled, having waited past the age limit.
    shed_stale: AtomicU64,
}

impl Default for ShardLoad {
    fn default() -> ShardLoad {
        ShardLoad {
            queued: AtomicUsize::new(0),
            queued_high: AtomicUsize::new(0),
            request_ns: AtomicU64::new(REQUEST_NS_INITIAL),
            refused_at_admission: AtomicU64::new(0),
            shed_stale: AtomicU64::new(0),
        }
    }
}

/// A shard's load counters ([`Validator::loads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardLoadStats {
    /// Payments queued now.
    pub queued: usize,
    /// The most payments queued at once since the start.
    pub queued_high: usize,
    /// The shard thread's measured nanoseconds per payment.
    pub request_ns: u64,
    /// Payments refused at admission (overloaded), before any check.
    pub refused_at_admission: u64,
    /// Payments refused unhandled after waiting past the age limit.
    pub shed_stale: u64,
}

/// Why a payment was not admitted to its shard's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NotAdmitted {
    queued: usize,
    expected_wait: Duration,
    /// When to resend: the expected wait, and at least one admission window (the queue
    /// is about full when a payment is refused, so it drains in about that long).
    retry_after: Duration,
}

impl NotAdmitted {
    fn reply(self, shard: u32) -> ErrorReply {
        let retry_after_ms = retry_hint_ms(self.retry_after);
        ErrorReply {
            code: ErrorCode::Overloaded { retry_after_ms },
            message: format!(
                "shard {shard} is overloaded: {} payments queued, about {} ms to drain; nothing \
                 changed, resend the same request after {retry_after_ms} ms",
                self.queued,
                self.expected_wait.as_millis()
            ),
        }
    }
}

/// A retry hint in milliseconds: the expected wait, at least 1 ms and at most 1 s.
fn retry_hint_ms(wait: Duration) -> u32 {
    wait.as_millis().clamp(1, 1000) as u32
}

impl ShardLoad {
    /// Counts one more payment in the queue if it is expected to drain within `policy`'s wait
    /// (its queued count times the shard's time per payment); otherwise counts nothing.
    fn admit(&self, policy: &ConnectionPolicy) -> Result<(), NotAdmitted> {
        let queued = self.queued.fetch_add(1, Ordering::AcqRel) + 1;
        let expected_wait =
            Duration::from_nanos(self.request_ns.load(Ordering::Relaxed) * queued as u64);
        if queued > policy.queued_max || expected_wait > policy.queue_wait_max {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            self.refused_at_admission.fetch_add(1, Ordering::Relaxed);
            return Err(NotAdmitted {
                queued: queued - 1,
                expected_wait,
                retry_after: expected_wait.max(policy.queue_wait_max),
            });
        }
        self.queued_high.fetch_max(queued, Ordering::Relaxed);
        Ok(())
    }

    /// A payment counted by `admit` left the queue (taken by the shard thread, or never sent).
    fn left(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    /// The shard thread spent `elapsed` on a group of `payments` payments.
    fn measured(&self, elapsed: Duration, payments: usize) {
        if payments == 0 {
            return;
        }
        let sample = (elapsed.as_nanos() / payments as u128).min(u128::from(u32::MAX)) as u64;
        let old = self.request_ns.load(Ordering::Relaxed);
        // A moving average over about eight groups: quick to follow the machine, not one group.
        let new = old - old / 8 + sample / 8;
        self.request_ns.store(new.max(1), Ordering::Relaxed);
    }

    fn stats(&self) -> ShardLoadStats {
        ShardLoadStats {
            queued: self.queued.load(Ordering::Relaxed),
            queued_high: self.queued_high.load(Ordering::Relaxed),
            request_ns: self.request_ns.load(Ordering::Relaxed),
            refused_at_admission: self.refused_at_admission.load(Ordering::Relaxed),
            shed_stale: self.shed_stale.load(Ordering::Relaxed),
        }
    }
}

enum Job {
    Pay {
        request: PaymentRequest,
        reply: oneshot::Sender<Response>,
        /// When it was admitted to the queue.
        admitted: Instant,
        /// Past this instant the payment is refused unhandled (its client has likely given up).
        stale_at: Instant,
    },
    HolderOf {
        input: OutputId,
        reply: oneshot::Sender<Response>,
    },
    /// A deposit output whose exchange block is committed: admitted as a root, answered once
    /// durable.
    AdmitRoot {
        id: OutputId,
        output: Output,
        reply: oneshot::Sender<()>,
    },
}

/// Hands committed exchange deposits to the shards that own them ([`Validator::deposits`]).
#[derive(Clone)]
pub struct DepositAdmitter {
    committee: Committee,
    shards: Arc<Vec<ShardHandle>>,
}

/// Why deposits could not be admitted.
#[derive(Debug, Error)]
pub enum AdmitError {
    #[error("shard {shard} stopped")]
    ShardStopped { shard: u32 },
}

impl DepositAdmitter {
    /// Admits each deposit output at the shard of its owner and returns once every one is
    /// durable there. Admitting an output twice changes nothing, so a poller that restarts
    /// from the beginning is safe. Call it only with outputs of committed exchange blocks:
    /// until then a payment spending the deposit is refused as `UnknownInput`.
    pub async fn admit(&self, deposits: &[(OutputId, Output)]) -> Result<(), AdmitError> {
        let mut waiting = Vec::with_capacity(deposits.len());
        for (id, output) in deposits {
            let shard = self.committee.shard_of(&output.owner);
            let handle = self
                .shards
                .get(shard as usize)
                .ok_or(AdmitError::ShardStopped { shard })?;
            let (reply, answer) = oneshot::channel();
            handle
                .jobs
                .send(Job::AdmitRoot {
                    id: *id,
                    output: *output,
                    reply,
                })
                .await
                .map_err(|_| AdmitError::ShardStopped { shard })?;
            waiting.push((shard, answer));
        }
        for (shard, answer) in waiting {
            answer
                .await
                .map_err(|_| AdmitError::ShardStopped { shard })?;
        }
        Ok(())
    }
}

#[derive(Clone)]
struct ShardHandle {
    jobs: mpsc::Sender<Job>,
    counters: Arc<Counters>,
    load: Arc<ShardLoad>,
}

/// A started validator: its address and its shards.
pub struct Validator {
    pub address: SocketAddr,
    committee: Committee,
    withdrawals: Arc<WithdrawalSigner>,
    shards: Arc<Vec<ShardHandle>>,
    listener: Option<TcpListener>,
    policy: ConnectionPolicy,
}

impl Validator {
    /// Opens every shard's effect log, replays it, admits genesis, starts the shard threads and
    /// binds `listen`. Nothing is served until [`Validator::serve`].
    pub async fn start(setup: ValidatorSetup, listen: &str) -> Result<Validator, ValidatorError> {
        let members = setup.committee.validators.len();
        let key: PublicKey =
            *setup
                .committee
                .validator(setup.index)
                .ok_or(ValidatorError::NotAMember {
                    index: setup.index,
                    validators: members,
                })?;
        if key != setup.keypair.public_key() {
            return Err(ValidatorError::WrongKey { index: setup.index });
        }
        let signer = VoteSigner::new(setup.keypair.clone());
        if setup.scheme == Scheme::Bls
            && setup.committee.bls_member(setup.index) != Some(&signer.bls_member())
        {
            return Err(ValidatorError::WrongBlsKey { index: setup.index });
        }
        let mut shards = Vec::new();
        for shard in 0..setup.committee.shards {
            let log = EffectLog::open(&setup.data.join(format!("shard{shard}")))
                .map_err(|source| ValidatorError::Log { shard, source })?;
            let mut core = ValidatorShard::new(
                setup.committee.clone(),
                setup.index,
                shard,
                setup.keypair.clone(),
                setup.scheme,
            );
            // Genesis is configuration, the same at every start: admitted, not logged.
            for (id, output) in &setup.genesis {
                core.admit_root(*id, *output);
            }
            for effect in log
                .replay()
                .map_err(|source| ValidatorError::Log { shard, source })?
            {
                core.apply(&effect);
            }
            let counters = Arc::new(Counters::default());
            counters
                .spent
                .store(core.spent_count() as u64, Ordering::Relaxed);
            let (jobs, receiver) = mpsc::channel(SHARD_QUEUE_MAX);
            let load = Arc::new(ShardLoad::default());
            let mut worker = ShardWorker {
                core,
                log,
                counters: counters.clone(),
                load: load.clone(),
                last_group_end: None,
                fault: setup.fault,
                committee: setup.committee.clone(),
                scheme: setup.scheme,
                signer: signer.clone(),
                garbage_signer: VoteSigner::new(Keypair::from_seed([0x5a; 32])),
            };
            std::thread::Builder::new()
                .name(format!("pay-shard-{shard}"))
                .spawn(move || worker.run(receiver))
                .map_err(|source| ValidatorError::Listen {
                    address: format!("(shard thread {shard})"),
                    source,
                })?;
            shards.push(ShardHandle {
                jobs,
                counters,
                load,
            });
        }
        let listener =
            TcpListener::bind(listen)
                .await
                .map_err(|source| ValidatorError::Listen {
                    address: listen.to_string(),
                    source,
                })?;
        let address = listener
            .local_addr()
            .map_err(|source| ValidatorError::Listen {
                address: listen.to_string(),
                source,
            })?;
        let bls = walras_payments::bls::BlsKeypair::derive(&setup.keypair);
        Ok(Validator {
            address,
            withdrawals: Arc::new(WithdrawalSigner {
                committee: setup.committee.clone(),
                index: setup.index,
                bls,
            }),
            committee: setup.committee.clone(),
            shards: Arc::new(shards),
            listener: Some(listener),
            policy: ConnectionPolicy::default(),
        })
    }

    /// Serves under `policy` instead of the default limits (tests use short timeouts).
    pub fn with_policy(mut self, policy: ConnectionPolicy) -> Validator {
        self.policy = policy;
        self
    }

    /// The handle that admits committed exchange deposits (the bridge; see `docs/payments.md`).
    pub fn deposits(&self) -> DepositAdmitter {
        DepositAdmitter {
            committee: self.committee.clone(),
            shards: self.shards.clone(),
        }
    }

    /// Per-shard counters now.
    pub fn stats(&self) -> Vec<ShardStats> {
        self.shards
            .iter()
            .map(|shard| shard.counters.snapshot())
            .collect()
    }

    /// Per-shard queue counters now (admission and shedding under overload).
    pub fn loads(&self) -> Vec<ShardLoadStats> {
        self.shards.iter().map(|shard| shard.load.stats()).collect()
    }

    /// A handle on the per-shard queue counters that outlives [`Validator::serve`].
    pub fn load_probe(&self) -> LoadProbe {
        LoadProbe {
            shards: self.shards.clone(),
        }
    }

    /// Accepts connections until the task is dropped.
    pub async fn serve(mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        let policy = self.policy;
        let limits = Arc::new(std::sync::Mutex::new(ConnectionLimits::new(
            policy.max,
            policy.per_address_max,
        )));
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let admitted = lock_limits(&limits).admit(peer.ip());
                    match admitted {
                        Ok(()) => {
                            let slot = ConnectionSlot {
                                limits: limits.clone(),
                                address: peer.ip(),
                            };
                            let (reader, writer) = stream.into_split();
                            tokio::spawn(connection(
                                reader,
                                writer,
                                self.shards.clone(),
                                self.withdrawals.clone(),
                                policy,
                                slot,
                            ));
                        }
                        Err(refusal) => {
                            tracing::warn!(%peer, %refusal, "connection refused");
                            tokio::spawn(refuse(stream, refusal));
                        }
                    }
                }
                Err(error) => {
                    // Out of descriptors and the like: wait rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Reads the per-shard queue counters of a serving validator ([`Validator::load_probe`]).
#[derive(Clone)]
pub struct LoadProbe {
    shards: Arc<Vec<ShardHandle>>,
}

impl LoadProbe {
    /// Per-shard queue counters now.
    pub fn loads(&self) -> Vec<ShardLoadStats> {
        self.shards.iter().map(|shard| shard.load.stats()).collect()
    }
}

/// Why a connection is refused at accept.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub(crate) enum ConnectionRefusal {
    #[error("the validator serves its cap of {max} connections; retry later")]
    Total { max: usize },
    #[error(
        "address {address} holds its share of {max} connections; close idle ones or retry later"
    )]
    PerAddress { address: IpAddr, max: usize },
}

/// The connection cap, pure: how many connections are open overall and per client address.
#[derive(Debug)]
pub(crate) struct ConnectionLimits {
    max: usize,
    per_address_max: usize,
    open: usize,
    by_address: HashMap<IpAddr, usize>,
}

impl ConnectionLimits {
    /// At most `max` connections, at most `per_address_max` from one address.
    pub(crate) fn new(max: usize, per_address_max: usize) -> ConnectionLimits {
        ConnectionLimits {
            max,
            per_address_max,
            open: 0,
            by_address: HashMap::new(),
        }
    }

    /// Counts a new connection from `address`, or says why it is refused (nothing counted).
    pub(crate) fn admit(&mut self, address: IpAddr) -> Result<(), ConnectionRefusal> {
        if self.open >= self.max {
            return Err(ConnectionRefusal::Total { max: self.max });
        }
        let held = self.by_address.entry(address).or_insert(0);
        if *held >= self.per_address_max {
            return Err(ConnectionRefusal::PerAddress {
                address,
                max: self.per_address_max,
            });
        }
        *held += 1;
        self.open += 1;
        Ok(())
    }

    /// A connection from `address` closed.
    pub(crate) fn release(&mut self, address: IpAddr) {
        if let Some(held) = self.by_address.get_mut(&address) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                self.by_address.remove(&address);
            }
            self.open = self.open.saturating_sub(1);
        }
    }

    /// Connections open now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.open
    }
}

/// One admitted connection's place under the cap, given back when the connection ends.
struct ConnectionSlot {
    limits: Arc<std::sync::Mutex<ConnectionLimits>>,
    address: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        lock_limits(&self.limits).release(self.address);
    }
}

/// The counts, even if a thread panicked while holding them: `admit` and `release` finish
/// their changes before returning, so a poisoned lock still holds consistent counts (refusing
/// every connection, or leaking a slot, for ever would be worse).
fn lock_limits(
    limits: &std::sync::Mutex<ConnectionLimits>,
) -> std::sync::MutexGuard<'_, ConnectionLimits> {
    limits
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Answers a connection over the cap with one typed error, then closes it.
async fn refuse(mut stream: TcpStream, refusal: ConnectionRefusal) {
    let reply = ErrorReply {
        code: ErrorCode::TooManyConnections,
        message: refusal.to_string(),
    };
    let body = encode_response_message(0, &Response::Error(reply));
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, write_frame(&mut stream, &body)).await;
}

/// Signs withdrawal votes: a BLS signature on the vote message of an output that carries a
/// valid certificate of this committee. Stateless: a certified output is final, so signing it
/// again (or for anyone) promises nothing new; the exchange's withdrawn set stops a second
/// redemption.
struct WithdrawalSigner {
    committee: Committee,
    index: ValidatorIndex,
    bls: walras_payments::bls::BlsKeypair,
}

impl WithdrawalSigner {
    fn vote(&self, certificate: &walras_payments::Certificate) -> Response {
        let mut roots = walras_payments::RootCache::new(0);
        match walras_payments::verify_certificate(certificate, &self.committee, &mut roots) {
            Err(error) => Response::Error(ErrorReply {
                code: ErrorCode::Refused,
                message: format!("no withdrawal vote: {error}"),
            }),
            Ok(()) => {
                let message = walras_payments::vote_message(
                    certificate.chain_id,
                    certificate.epoch,
                    &certificate.id,
                    &certificate.output,
                );
                Response::BlsVote {
                    validator: self.index,
                    signature: self.bls.sign_vote(&message),
                }
            }
        }
    }
}

/// A reply and the in-flight permit of its request, released once the reply is written.
type Outgoing = (Vec<u8>, Option<OwnedSemaphorePermit>);

async fn connection<R, W>(
    reader: R,
    mut writer: W,
    shards: Arc<Vec<ShardHandle>>,
    withdrawals: Arc<WithdrawalSigner>,
    policy: ConnectionPolicy,
    _slot: ConnectionSlot,
) where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut replies) = mpsc::unbounded_channel::<Outgoing>();
    // The writer sends every reply that is ready in one write, then releases their permits.
    // If the peer does not read, the write times out and the connection ends.
    let writer_task = tokio::spawn(async move {
        let mut framed = Vec::new();
        let mut permits = Vec::new();
        while let Some(first) = replies.recv().await {
            framed.clear();
            let mut next = Some(first);
            while let Some((body, permit)) = next {
                if push_frame(&mut framed, &body).is_err() {
                    return;
                }
                permits.push(permit);
                next = replies.try_recv().ok();
            }
            if write_framed(&mut writer, &framed).await.is_err() {
                return;
            }
            permits.clear();
        }
    });
    // Every request takes a permit before it is read further: at most `in_flight_max`
    // replies of one connection are queued or being computed. A request over that share is
    // refused at once (typed, with a retry hint) under a second pool of as many permits, so a
    // client that sends faster than it is served learns it now instead of its requests aging
    // in the socket; only a client that also does not read its refusals is no longer read.
    let in_flight = Arc::new(Semaphore::new(policy.in_flight_max));
    let refusals = Arc::new(Semaphore::new(policy.in_flight_max));
    let mut frames = FrameReader::new(reader);
    loop {
        let body = match tokio::time::timeout(policy.idle_timeout, frames.next()).await {
            Ok(Ok(body)) => body,
            Ok(Err(FrameError::TooLarge { bytes })) => {
                let reply = ErrorReply {
                    code: ErrorCode::Malformed,
                    message: format!("frame of {bytes} bytes is over the limit"),
                };
                let _ = out.send((encode_response_message(0, &Response::Error(reply)), None));
                break;
            }
            Ok(Err(_)) | Err(_) => break,
        };
        let permit = match in_flight.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => break,
            Err(TryAcquireError::NoPermits) => match refusals.clone().try_acquire_owned() {
                Ok(refusal) => {
                    let reply = ErrorReply {
                        code: ErrorCode::Overloaded {
                            retry_after_ms: CONNECTION_RETRY_AFTER_MS,
                        },
                        message: format!(
                            "this connection has {} requests in flight, its share; nothing \
                             changed, resend after {CONNECTION_RETRY_AFTER_MS} ms",
                            policy.in_flight_max
                        ),
                    };
                    let id = request_id_of(&body).unwrap_or(0);
                    let refused = encode_response_message(id, &Response::Error(reply));
                    if out.send((refused, Some(refusal))).is_err() {
                        break;
                    }
                    continue;
                }
                Err(_) => match in_flight.clone().acquire_owned().await {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            },
        };
        let answer = |id: u64, response: &Response, permit: OwnedSemaphorePermit| {
            out.send((encode_response_message(id, response), Some(permit)))
                .is_ok()
        };
        let (id, request) = match decode_request_message(&body) {
            Ok(decoded) => decoded,
            Err(error) => {
                let reply = ErrorReply {
                    code: ErrorCode::Malformed,
                    message: error.to_string(),
                };
                let id = request_id_of(&body).unwrap_or(0);
                answer(id, &Response::Error(reply), permit);
                break;
            }
        };
        let (shard, job, receiver) = match request {
            Request::WithdrawalVote { certificate } => {
                let response = withdrawals.vote(&certificate);
                if !answer(id, &response, permit) {
                    break;
                }
                continue;
            }
            Request::Stats => {
                let stats = shards
                    .iter()
                    .map(|shard| shard.counters.snapshot())
                    .collect();
                if !answer(id, &Response::Stats(stats), permit) {
                    break;
                }
                continue;
            }
            Request::Pay { shard, request } => {
                let (reply, receiver) = oneshot::channel();
                let admitted = Instant::now();
                let job = Job::Pay {
                    request,
                    reply,
                    admitted,
                    stale_at: admitted + policy.job_age_max,
                };
                (shard, job, receiver)
            }
            Request::HolderOf { shard, input } => {
                let (reply, receiver) = oneshot::channel();
                (shard, Job::HolderOf { input, reply }, receiver)
            }
        };
        let Some(handle) = shards.get(shard as usize) else {
            let reply = ErrorReply {
                code: ErrorCode::UnknownShard,
                message: format!("shard {shard}: this validator has {} shards", shards.len()),
            };
            if !answer(id, &Response::Error(reply), permit) {
                break;
            }
            continue;
        };
        let is_payment = matches!(job, Job::Pay { .. });
        if is_payment {
            if let Err(refusal) = handle.load.admit(&policy) {
                if !answer(id, &Response::Error(refusal.reply(shard)), permit) {
                    break;
                }
                continue;
            }
        }
        // Never waits: a full channel is an overloaded shard, refused like one.
        match handle.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                if is_payment {
                    handle.load.left();
                }
                let refusal = NotAdmitted {
                    queued: SHARD_QUEUE_MAX,
                    expected_wait: policy.queue_wait_max,
                    retry_after: policy.queue_wait_max,
                };
                if !answer(id, &Response::Error(refusal.reply(shard)), permit) {
                    break;
                }
                continue;
            }
            Err(TrySendError::Closed(_)) => break,
        }
        // The writer has gone (the peer stopped reading or closed): read nothing more.
        if out.is_closed() {
            break;
        }
        let out = out.clone();
        tokio::spawn(async move {
            // A dropped sender (silent fault, or the shard stopped) sends nothing; the permit
            // travels with the reply and is released when it is written.
            if let Ok(response) = receiver.await {
                let _ = out.send((encode_response_message(id, &response), Some(permit)));
            }
        });
    }
    drop(out);
    let _ = writer_task.await;
}

struct ShardWorker {
    core: ValidatorShard,
    log: EffectLog,
    counters: Arc<Counters>,
    load: Arc<ShardLoad>,
    /// When the last group was answered (the start of the next busy time, if it queued).
    last_group_end: Option<Instant>,
    fault: Option<Fault>,
    committee: Committee,
    scheme: Scheme,
    signer: VoteSigner,
    garbage_signer: VoteSigner,
}

enum Answer {
    Ready(Response),
    /// Waiting for the Merkle batch that signs this payment.
    Sealing(PaymentId),
}

impl ShardWorker {
    fn run(&mut self, mut receiver: mpsc::Receiver<Job>) {
        while let Some(first) = receiver.blocking_recv() {
            let mut group = vec![first];
            while group.len() < GROUP_REQUESTS_MAX {
                match receiver.try_recv() {
                    Ok(job) => group.push(job),
                    Err(_) => break,
                }
            }
            self.handle_group(group);
        }
    }

    fn handle_group(&mut self, group: Vec<Job>) {
        let started = Instant::now();
        let mut payments = 0;
        let mut first_admitted = started;
        for job in &group {
            if let Job::Pay { admitted, .. } = job {
                payments += 1;
                first_admitted = first_admitted.min(*admitted);
            }
        }
        for _ in 0..payments {
            self.load.left();
        }
        self.handle_jobs(group, started);
        let finished = Instant::now();
        let busy_since = first_admitted.max(self.last_group_end.unwrap_or(first_admitted));
        self.load
            .measured(finished.saturating_duration_since(busy_since), payments);
        self.last_group_end = Some(finished);
    }

    fn handle_jobs(&mut self, group: Vec<Job>, started: Instant) {
        let mut effects = Vec::new();
        let mut sealed: BTreeMap<PaymentId, PaymentVotes> = BTreeMap::new();
        let mut answers = Vec::with_capacity(group.len());
        let mut admitted = Vec::new();
        // The group's client signatures, checked together (same verdicts as one by one).
        let payments: Vec<&PaymentRequest> = group
            .iter()
            .filter_map(|job| match job {
                Job::Pay {
                    request, stale_at, ..
                } if *stale_at > started => Some(request),
                _ => None,
            })
            .collect();
        let checked = self.core.check_client_signatures(&payments);
        drop(payments);
        for job in group {
            match job {
                Job::AdmitRoot { id, output, reply } => {
                    effects.extend(self.core.admit_root(id, output).effects);
                    admitted.push(reply);
                }
                Job::HolderOf { input, reply } => {
                    let holder = self.core.holder_of(&input).cloned();
                    answers.push((reply, Answer::Ready(Response::Holder(holder))));
                }
                Job::Pay {
                    reply, stale_at, ..
                } if stale_at <= started => {
                    // Refused before any check: nothing changed, the client may resend.
                    self.load.shed_stale.fetch_add(1, Ordering::Relaxed);
                    let refusal = NotAdmitted {
                        queued: 0,
                        expected_wait: Duration::ZERO,
                        retry_after: Duration::ZERO,
                    };
                    let mut error = refusal.reply(self.core.shard());
                    error.message = format!(
                        "shard {}: the payment waited in the queue past its age limit and was \
                         not handled; nothing changed, resend the same request",
                        self.core.shard()
                    );
                    answers.push((reply, Answer::Ready(Response::Error(error))));
                }
                Job::Pay { request, reply, .. } => {
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    let answer = match self.core.handle_checked(&request, &checked) {
                        Err(error) => {
                            self.counters.refused.fetch_add(1, Ordering::Relaxed);
                            Answer::Ready(Response::Error(ErrorReply::refused(&error)))
                        }
                        Ok(outcome) => {
                            effects.extend(outcome.effects);
                            let payment = request.signed.payment.id();
                            let mut answer = Answer::Sealing(payment);
                            for reply in outcome.replies {
                                match reply {
                                    Reply::Votes(votes) => {
                                        sealed.insert(votes.payment, votes);
                                    }
                                    Reply::Pending { .. } => {}
                                    Reply::Conflict(conflict) => {
                                        answer = match self.fault {
                                            Some(Fault::Equivocate) => Answer::Ready(
                                                Response::Votes(self.equivocate(&request)),
                                            ),
                                            _ => {
                                                self.counters
                                                    .conflicts
                                                    .fetch_add(1, Ordering::Relaxed);
                                                Answer::Ready(Response::Conflict(conflict))
                                            }
                                        };
                                    }
                                }
                            }
                            answer
                        }
                    };
                    answers.push((reply, answer));
                }
            }
        }
        // Sign the pooled outputs now that the queue is empty (the paper's pooling of signing
        // requests), in the same transaction as the payments they vote for.
        let seal = self.core.seal_batch();
        effects.extend(seal.effects);
        for reply in seal.replies {
            if let Reply::Votes(votes) = reply {
                sealed.insert(votes.payment, votes);
            }
        }
        if !effects.is_empty() {
            if let Err(error) = self.log.append(&effects) {
                // The in-memory state is ahead of the disk: nothing may be answered, and the
                // process must not go on with a state it cannot reproduce. Stop; a restart
                // replays what is durable.
                tracing::error!(%error, "effect log append failed; stopping");
                eprintln!("error: the effect log failed ({error}); the validator stops");
                std::process::exit(74);
            }
            self.counters.commits.fetch_add(1, Ordering::Relaxed);
        }
        self.counters
            .spent
            .store(self.core.spent_count() as u64, Ordering::Relaxed);
        for reply in admitted {
            let _ = reply.send(());
        }
        for (reply, answer) in answers {
            let response = match answer {
                Answer::Ready(response) => response,
                Answer::Sealing(payment) => match sealed
                    .get(&payment)
                    .cloned()
                    .or_else(|| self.core.votes_for(&payment))
                {
                    Some(votes) => Response::Votes(votes),
                    None => Response::Error(ErrorReply {
                        code: ErrorCode::Unavailable,
                        message: "the payment is recorded but not yet signed; resend it".into(),
                    }),
                },
            };
            let response = match (self.fault, response) {
                (Some(Fault::Silent), Response::Votes(_) | Response::Conflict(_)) => continue,
                (Some(Fault::Garbage), Response::Votes(votes)) => {
                    Response::Votes(self.garbage(votes))
                }
                (_, response) => response,
            };
            if matches!(response, Response::Votes(_)) {
                self.counters.votes.fetch_add(1, Ordering::Relaxed);
            }
            let _ = reply.send(response);
        }
    }

    fn messages(&self, request: &PaymentRequest) -> Vec<walras_crypto::Hash> {
        let payment = &request.signed.payment;
        walras_payments::payment_vote_messages(
            self.committee.chain_id,
            self.committee.epoch,
            payment.id(),
            &payment.outputs,
        )
    }

    /// The equivocation fault: votes for a payment that conflicts with the one it recorded,
    /// with its real key (what a Byzantine validator can do; honest quorums still intersect).
    fn equivocate(&self, request: &PaymentRequest) -> PaymentVotes {
        PaymentVotes {
            validator: self.core.index(),
            payment: request.signed.payment.id(),
            signatures: sign_votes(&self.signer, self.scheme, &self.messages(request)),
        }
    }

    /// The garbage fault: the same votes signed by a key outside the committee.
    fn garbage(&self, votes: PaymentVotes) -> PaymentVotes {
        let count = votes.signatures.len();
        // The messages are not known here without the payment; signing the payment id's hash
        // gives well-formed signatures that cannot verify against the committee key.
        let messages = vec![votes.payment.0; count];
        PaymentVotes {
            signatures: sign_votes(&self.garbage_signer, self.scheme, &messages),
            ..votes
        }
    }
}

/// Whether a validator configuration may carry a deliberate fault (`"fault": ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Faults {
    /// Benchmarks and tests: the fault is played (with a warning).
    Allowed,
    /// A production build: a configuration with a fault is refused, so that a test file copied
    /// into production cannot make an honest validator equivocate.
    Refused,
}

/// Starts a validator from its configuration file (listening, not yet serving): the caller
/// may take [`Validator::deposits`] before [`Validator::serve`].
pub async fn start_from_file(path: &Path, faults: Faults) -> Result<Validator, ValidatorError> {
    let file = crate::config::ValidatorFile::load(path)?;
    if let (Some(fault), Faults::Refused) = (file.fault, faults) {
        return Err(ValidatorError::FaultRefused {
            path: path.to_path_buf(),
            index: file.index,
            fault,
        });
    }
    let committee = crate::config::CommitteeFile::load(&file.committee)?;
    let genesis = crate::config::GenesisFile::load(&file.genesis, committee.committee.chain_id)?;
    let seed = std::fs::read_to_string(&file.key).map_err(|source| ValidatorError::KeyRead {
        path: file.key.clone(),
        source,
    })?;
    let keypair = crate::config::parse_seed(&seed).map_err(|source| ValidatorError::Key {
        path: file.key.clone(),
        source,
    })?;
    let listen = file
        .listen
        .clone()
        .or_else(|| committee.addresses.get(usize::from(file.index)).cloned())
        .ok_or(ValidatorError::NoAddress { index: file.index })?;
    if let Some(fault) = file.fault {
        // Benchmarks only: say so loudly, a production configuration must not carry it.
        eprintln!(
            "warning: validator {} plays the deliberate fault {fault:?} (benchmark configuration)",
            file.index
        );
    }
    let validator = Validator::start(
        ValidatorSetup {
            committee: committee.committee,
            scheme: committee.scheme,
            index: file.index,
            keypair,
            genesis,
            data: file.data,
            fault: file.fault,
        },
        &listen,
    )
    .await?;
    println!(
        "walras payments validator {} listening on {}",
        file.index, validator.address
    );
    Ok(validator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::write_frame;
    use crate::wire::encode_request_message;
    use tokio::io::AsyncReadExt;

    fn withdrawals() -> Arc<WithdrawalSigner> {
        let keypair = Keypair::from_seed([7; 32]);
        Arc::new(WithdrawalSigner {
            committee: Committee {
                chain_id: walras_payments::ChainId(1),
                epoch: walras_payments::Epoch(0),
                validators: vec![keypair.public_key()],
                shards: 1,
                bls: Vec::new(),
            },
            index: 0,
            bls: walras_payments::bls::BlsKeypair::derive(&keypair),
        })
    }

    fn slot() -> ConnectionSlot {
        ConnectionSlot {
            limits: Arc::new(std::sync::Mutex::new(ConnectionLimits::new(1, 1))),
            address: IpAddr::from([127, 0, 0, 1]),
        }
    }

    /// Trigger: a client writes requests as fast as it can and never reads a reply (issue 26
    /// item 5: 11 → 294 MB in 10 s). The validator must stop reading once its in-flight
    /// replies are queued, so the client's writes stall after a bounded number of requests
    /// (before the fix every request was read and its reply queued without bound).
    #[tokio::test]
    async fn a_client_that_never_reads_makes_the_validator_stop_reading_it() {
        let (client, server) = tokio::io::duplex(4096);
        let (server_reader, server_writer) = tokio::io::split(server);
        let policy = ConnectionPolicy {
            in_flight_max: 64,
            ..ConnectionPolicy::default()
        };
        tokio::spawn(connection(
            server_reader,
            server_writer,
            Arc::new(Vec::new()),
            withdrawals(),
            policy,
            slot(),
        ));
        let (_unread, mut writer) = tokio::io::split(client);
        let request = encode_request_message(1, &Request::Stats);
        let mut sent = 0;
        while sent < 20_000 {
            match tokio::time::timeout(
                Duration::from_millis(300),
                write_frame(&mut writer, &request),
            )
            .await
            {
                Ok(Ok(())) => sent += 1,
                Ok(Err(error)) => panic!("write failed after {sent}: {error}"),
                Err(_) => break,
            }
        }
        // 64 in flight plus what the two 4 KiB pipes hold (a request or a reply is ~20 bytes).
        assert!(
            sent < 1_500,
            "the validator read {sent} requests from a client that reads nothing"
        );
    }

    /// Trigger: a connection opened and never used (issue 26 item 9: idle sockets held for
    /// 600 s). It is closed after the idle timeout.
    #[tokio::test]
    async fn an_idle_connection_is_closed_after_the_idle_timeout() {
        let (client, server) = tokio::io::duplex(4096);
        let (server_reader, server_writer) = tokio::io::split(server);
        let policy = ConnectionPolicy {
            idle_timeout: Duration::from_millis(100),
            ..ConnectionPolicy::default()
        };
        tokio::spawn(connection(
            server_reader,
            server_writer,
            Arc::new(Vec::new()),
            withdrawals(),
            policy,
            slot(),
        ));
        let (mut reader, _writer) = tokio::io::split(client);
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), reader.read(&mut byte))
            .await
            .expect("closed within 2 s");
        assert_eq!(read.expect("a clean close"), 0);
    }

    /// Issue 31, the admission rule alone: a payment is admitted while the queued count times
    /// the shard's time per payment stays within the window (100 µs each, 1 ms: ten); the
    /// eleventh is refused with the count and a hint of at least the window, and counts nothing;
    /// one leaving makes room; a slower measured shard admits fewer.
    #[test]
    fn admission_refuses_past_the_expected_wait_and_counts_nothing_it_refused() {
        let load = ShardLoad::default();
        let policy = ConnectionPolicy {
            queued_max: 1000,
            queue_wait_max: Duration::from_millis(1),
            ..ConnectionPolicy::default()
        };
        for _ in 0..10 {
            assert_eq!(load.admit(&policy), Ok(()));
        }
        let refused = load.admit(&policy).expect_err("the eleventh is over 1 ms");
        assert_eq!(refused.queued, 10);
        assert_eq!(refused.expected_wait, Duration::from_micros(1100));
        assert_eq!(refused.retry_after, Duration::from_micros(1100));
        assert_eq!(load.stats().queued, 10);
        assert_eq!(load.stats().refused_at_admission, 1);
        load.left();
        assert_eq!(load.admit(&policy), Ok(()));
        // Groups measured at 1 ms per payment move the average toward it.
        for _ in 0..16 {
            load.measured(Duration::from_millis(10), 10);
        }
        assert!(load.stats().request_ns > 800_000, "{:?}", load.stats());
        for _ in 0..10 {
            load.left();
        }
        assert_eq!(load.admit(&policy), Ok(()));
        assert!(
            load.admit(&policy).is_err(),
            "two at about 0.9 ms each exceed 1 ms"
        );
        // The count caps the queue whatever the speed.
        let capped = ConnectionPolicy {
            queued_max: 1,
            queue_wait_max: Duration::from_secs(3600),
            ..policy
        };
        assert!(ShardLoad::default().admit(&capped).is_ok());
        assert_eq!(load.stats().queued_high, 10);
        let one = ShardLoad::default();
        assert!(one.admit(&capped).is_ok());
        assert!(one.admit(&capped).is_err());
    }

    /// The cap counts connections overall and per address; a closed one gives its place back.
    #[test]
    fn the_connection_cap_refuses_over_the_total_and_over_one_addresss_share() {
        let one = IpAddr::from([127, 0, 0, 1]);
        let two = IpAddr::from([127, 0, 0, 2]);
        let three = IpAddr::from([127, 0, 0, 3]);
        let mut limits = ConnectionLimits::new(3, 2);
        assert_eq!(limits.admit(one), Ok(()));
        assert_eq!(limits.admit(one), Ok(()));
        assert_eq!(
            limits.admit(one),
            Err(ConnectionRefusal::PerAddress {
                address: one,
                max: 2
            })
        );
        assert_eq!(limits.admit(two), Ok(()));
        assert_eq!(
            limits.admit(three),
            Err(ConnectionRefusal::Total { max: 3 })
        );
        limits.release(one);
        assert_eq!(limits.open(), 2);
        assert_eq!(limits.admit(three), Ok(()));
        // Releasing an address that holds nothing changes nothing.
        limits.release(IpAddr::from([10, 0, 0, 1]));
        assert_eq!(limits.open(), 3);
    }
}
