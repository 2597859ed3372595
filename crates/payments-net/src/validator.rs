//! The validator process: one TCP listener, S shard threads.
//!
//! Each shard thread is the only owner of its [`ValidatorShard`] (its spent set) and of its LMDB
//! effect log; connections hand it requests over a bounded channel and wait for the reply on a
//! one-shot channel. A shard thread takes every request waiting in its channel (up to
//! [`GROUP_REQUESTS_MAX`]), handles them in arrival order, seals the Merkle batch, commits all
//! their effects in one synchronous LMDB transaction (group commit), and only then sends the
//! replies: no vote leaves before it is durable. Shard threads share nothing and hold no handle
//! to each other, so there is no path for a cross-shard message.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};
use walras_crypto::{Keypair, PublicKey};
use walras_payments::durable::{DurableError, EffectLog};
use walras_payments::{
    sign_votes, Committee, Output, OutputId, PaymentId, PaymentRequest, PaymentVotes, Reply,
    Scheme, ValidatorIndex, ValidatorShard, VoteSigner,
};

use crate::config::Fault;
use crate::frame::{push_frame, read_frame, write_framed, FrameError};
use crate::wire::{
    decode_request_message, encode_response_message, request_id_of, ErrorCode, ErrorReply, Request,
    Response, ShardStats,
};

/// Most requests one group commit takes (bounds reply latency under a long queue).
pub const GROUP_REQUESTS_MAX: usize = 1024;
/// Requests waiting per shard before connections wait (backpressure instead of memory).
pub const SHARD_QUEUE_MAX: usize = 8192;
/// Requests in flight per connection before its reader waits.
pub const CONNECTION_IN_FLIGHT_MAX: usize = 4096;
/// A connection with no request for this long is closed.
pub const CONNECTION_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

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

enum Job {
    Pay {
        request: PaymentRequest,
        reply: oneshot::Sender<Response>,
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
}

/// A started validator: its address and its shards.
pub struct Validator {
    pub address: SocketAddr,
    committee: Committee,
    withdrawals: Arc<WithdrawalSigner>,
    shards: Arc<Vec<ShardHandle>>,
    listener: Option<TcpListener>,
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
            let mut worker = ShardWorker {
                core,
                log,
                counters: counters.clone(),
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
            shards.push(ShardHandle { jobs, counters });
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
        })
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

    /// Accepts connections until the task is dropped.
    pub async fn serve(mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(connection(
                        stream,
                        self.shards.clone(),
                        self.withdrawals.clone(),
                    ));
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

async fn connection(
    stream: TcpStream,
    shards: Arc<Vec<ShardHandle>>,
    withdrawals: Arc<WithdrawalSigner>,
) {
    let (mut reader, mut writer) = stream.into_split();
    let (out, mut replies) = mpsc::unbounded_channel::<Vec<u8>>();
    // The writer sends every reply that is ready in one write.
    let writer_task = tokio::spawn(async move {
        let mut framed = Vec::new();
        while let Some(body) = replies.recv().await {
            framed.clear();
            let mut next = Some(body);
            while let Some(body) = next {
                if push_frame(&mut framed, &body).is_err() {
                    return;
                }
                next = replies.try_recv().ok();
            }
            if write_framed(&mut writer, &framed).await.is_err() {
                return;
            }
        }
    });
    let in_flight = Arc::new(Semaphore::new(CONNECTION_IN_FLIGHT_MAX));
    loop {
        let body =
            match tokio::time::timeout(CONNECTION_IDLE_TIMEOUT, read_frame(&mut reader)).await {
                Ok(Ok(body)) => body,
                Ok(Err(FrameError::TooLarge { bytes })) => {
                    let reply = ErrorReply {
                        code: ErrorCode::Malformed,
                        message: format!("frame of {bytes} bytes is over the limit"),
                    };
                    let _ = out.send(encode_response_message(0, &Response::Error(reply)));
                    break;
                }
                Ok(Err(_)) | Err(_) => break,
            };
        let (id, request) = match decode_request_message(&body) {
            Ok(decoded) => decoded,
            Err(error) => {
                let reply = ErrorReply {
                    code: ErrorCode::Malformed,
                    message: error.to_string(),
                };
                let id = request_id_of(&body).unwrap_or(0);
                let _ = out.send(encode_response_message(id, &Response::Error(reply)));
                break;
            }
        };
        let (shard, job, receiver) = match request {
            Request::WithdrawalVote { certificate } => {
                let response = withdrawals.vote(&certificate);
                let _ = out.send(encode_response_message(id, &response));
                continue;
            }
            Request::Stats => {
                let stats = shards
                    .iter()
                    .map(|shard| shard.counters.snapshot())
                    .collect();
                let _ = out.send(encode_response_message(id, &Response::Stats(stats)));
                continue;
            }
            Request::Pay { shard, request } => {
                let (reply, receiver) = oneshot::channel();
                (shard, Job::Pay { request, reply }, receiver)
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
            let _ = out.send(encode_response_message(id, &Response::Error(reply)));
            continue;
        };
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        if handle.jobs.send(job).await.is_err() {
            break;
        }
        let out = out.clone();
        tokio::spawn(async move {
            // A dropped sender (silent fault, or the shard stopped) sends nothing.
            if let Ok(response) = receiver.await {
                let _ = out.send(encode_response_message(id, &response));
            }
            drop(permit);
        });
    }
    drop(out);
    let _ = writer_task.await;
}

struct ShardWorker {
    core: ValidatorShard,
    log: EffectLog,
    counters: Arc<Counters>,
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
        let mut effects = Vec::new();
        let mut sealed: BTreeMap<PaymentId, PaymentVotes> = BTreeMap::new();
        let mut answers = Vec::with_capacity(group.len());
        let mut admitted = Vec::new();
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
                Job::Pay { request, reply } => {
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    let answer = match self.core.handle(&request) {
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

/// Starts a validator from its configuration file and serves until the process ends.
pub async fn run_from_file(path: &Path, faults: Faults) -> Result<(), ValidatorError> {
    start_from_file(path, faults).await?.serve().await;
    Ok(())
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
