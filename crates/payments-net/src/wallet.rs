//! A wallet file and the payment flow around the pure `walras_payments::Client`: load coins,
//! build a payment, make the request durable in the wallet file *before* sending it, broadcast,
//! feed every reply to the client (which verifies each vote), and on the quorum store the change
//! and the history. A wallet with a persisted request (a crash after sending) resends it
//! unchanged before anything else.
//!
//! Every certificate a payment of this wallet certifies for another payee is kept in the file
//! (`undelivered`, saved in the same write that drops the pending request) until the caller
//! has delivered it ([`Wallet::mark_delivered`]): a payment resent and certified by a later
//! command is never dropped on the way to its payee.
//!
//! A loaded [`Wallet`] holds an exclusive lock on `<file>.lock` until it is dropped, so two
//! commands never read-modify-write one wallet at once (the later waits, then says it is
//! busy), and two payments from one wallet never pick the same coin.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use walras_crypto::PublicKey;
use walras_payments::{certificate_bytes, decode_certificate, decode_request, request_bytes};
use walras_payments::{
    Certificate, Client, ClientEffect, ClientError, Committee, Output, OutputId, PaymentId,
    PaymentRequest, QuorumFailure,
};
use walras_types::AssetId;

use crate::client::{CommitteeClient, NetError, ValidatorReply};
use crate::config::{key_hex, parse_seed};
use crate::wire::Response;

/// How long a wallet keeps resending a payment that validators refused for overload (after each
/// refusal's retry hint) before it reports no quorum; the request stays pending either way.
pub(crate) const OVERLOAD_RETRY_FOR: Duration = Duration::from_secs(10);

/// Why a wallet operation failed.
#[derive(Debug, Error)]
pub enum WalletError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a wallet: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(
        "{path} is in use by another command (its lock {} stayed taken for {waited:?}); run \
         this again once that command has finished",
        lock.display()
    )]
    Busy {
        path: PathBuf,
        lock: PathBuf,
        waited: Duration,
    },
    #[error("cannot lock {}: {source}", lock.display())]
    Lock {
        lock: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the certificate of coin {coin} (amount {amount}) was NOT delivered to {}: {source}; \
         the payer's wallet keeps it and delivers it on its next payment to that wallet",
        payee.display()
    )]
    NotDelivered {
        coin: String,
        amount: u128,
        payee: PathBuf,
        source: Box<WalletError>,
    },
    #[error("payment {payment} did not certify: {valid} valid votes of {quorum}; {problems}")]
    NoQuorum {
        payment: String,
        valid: usize,
        quorum: usize,
        problems: String,
    },
}

/// One coin in the file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CoinFile {
    pub id: String,
    pub asset: u16,
    pub amount: String,
    /// Canonical certificate bytes, hex; absent for a root entry (genesis, deposit).
    #[serde(default)]
    pub certificate: Option<String>,
}

/// One line of history.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HistoryEntry {
    /// `sent` or `received`.
    pub direction: String,
    pub payment: String,
    pub asset: u16,
    pub amount: String,
    /// The payee (sent) or the output id (received).
    pub counterparty: String,
    /// The inputs a sent payment spent (output ids, hex): an audit finds two certified
    /// payments of one input from the histories alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
}

/// A certificate this wallet's payment certified for another payee, kept until delivered.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UndeliveredFile {
    /// The payee's key (hex).
    pub payee: String,
    /// The output id (hex).
    pub id: String,
    pub asset: u16,
    pub amount: String,
    /// Canonical certificate bytes, hex.
    pub certificate: String,
}

/// The wallet file (JSON, readable by its owner only: it holds the secret seed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WalletFile {
    pub secret_seed: String,
    pub public_key: String,
    pub coins: Vec<CoinFile>,
    /// Requests persisted before sending and not yet certified (hex of canonical bytes).
    #[serde(default)]
    pub pending: Vec<String>,
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    /// Certificates certified for other payees and not yet delivered (oldest first).
    #[serde(default)]
    pub undelivered: Vec<UndeliveredFile>,
}

/// How long a command waits for another command to release a wallet.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(30);
/// How often a waiting command tries the lock again.
const LOCK_RETRY: Duration = Duration::from_millis(20);

/// An exclusive lock on a wallet (an flock on `<file>.lock`, released when dropped or when
/// the process dies). A separate file because the wallet itself is replaced by rename.
pub(crate) struct WalletLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// The lock file of the wallet at `path`.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

impl WalletLock {
    /// Takes the lock of the wallet at `path`, waiting at most `wait` for another holder.
    pub(crate) fn acquire(path: &Path, wait: Duration) -> Result<WalletLock, WalletError> {
        use nix::fcntl::{Flock, FlockArg};
        use std::os::unix::fs::OpenOptionsExt;
        let lock = lock_path(path);
        let started = Instant::now();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock)
            .map_err(|source| WalletError::Lock {
                lock: lock.clone(),
                source,
            })?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(held) => return Ok(WalletLock { _lock: held }),
                Err((returned, nix::errno::Errno::EWOULDBLOCK)) => {
                    if started.elapsed() >= wait {
                        return Err(WalletError::Busy {
                            path: path.to_path_buf(),
                            lock,
                            waited: wait,
                        });
                    }
                    file = returned;
                    std::thread::sleep(LOCK_RETRY);
                }
                Err((_, errno)) => {
                    return Err(WalletError::Lock {
                        lock,
                        source: errno.into(),
                    })
                }
            }
        }
    }
}

/// What [`Wallet::deliver_undelivered`] did.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// Delivered into the payee's wallet file (and forgotten by the payer).
    pub delivered: Vec<(Certificate, PathBuf)>,
    /// Still kept by the payer: the payee's wallet is not known here.
    pub kept: Vec<Certificate>,
}

/// A loaded wallet, locked until dropped.
pub struct Wallet {
    path: PathBuf,
    file: WalletFile,
    client: Client,
    _lock: WalletLock,
}

/// The wallet file at `path` and its key pair (no lock taken: callers that write take it
/// first).
fn read_file(path: &Path) -> Result<(WalletFile, walras_crypto::Keypair), WalletError> {
    let text = std::fs::read_to_string(path).map_err(|source| WalletError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: WalletFile = serde_json::from_str(&text).map_err(|error| invalid(path, error))?;
    let keypair = parse_seed(&file.secret_seed).map_err(|error| invalid(path, error))?;
    Ok((file, keypair))
}

fn invalid(path: &Path, message: impl ToString) -> WalletError {
    WalletError::Invalid {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn hex32(text: &str) -> Result<[u8; 32], String> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| format!("{text:?} is not 32 bytes of hex"))
}

/// How long to wait before resending a payment refused for overload for the `attempts`-th time:
/// the hint times the attempts (at most 8), plus up to one hint more picked by the payment id
/// and the attempt, so that wallets refused together do not all come back together.
fn overload_backoff(hint: Duration, attempts: u32, payment: &PaymentId) -> Duration {
    let bytes = payment.0.as_bytes();
    let spread = u32::from(bytes[attempts as usize % bytes.len()]);
    hint * attempts.clamp(1, 8) + hint * spread / 255
}

impl Wallet {
    /// A new wallet file for `seed` holding the root entries `roots` (genesis outputs).
    pub fn create(
        path: &Path,
        seed: &[u8; 32],
        roots: &[(OutputId, Output)],
    ) -> Result<(), WalletError> {
        let keypair = walras_crypto::Keypair::from_seed(*seed);
        let file = WalletFile {
            secret_seed: hex::encode(seed),
            public_key: key_hex(&keypair.public_key()),
            coins: roots
                .iter()
                .map(|(id, output)| CoinFile {
                    id: hex::encode(id.0.as_bytes()),
                    asset: output.asset.0,
                    amount: output.amount.to_string(),
                    certificate: None,
                })
                .collect(),
            pending: Vec::new(),
            history: Vec::new(),
            undelivered: Vec::new(),
        };
        let _lock = WalletLock::acquire(path, LOCK_WAIT)?;
        Wallet::write(path, &file)
    }

    fn write(path: &Path, file: &WalletFile) -> Result<(), WalletError> {
        let text = serde_json::to_vec_pretty(file).map_err(|error| invalid(path, error))?;
        crate::file::write_private_durable(path, &text).map_err(|source| WalletError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The key of the wallet at `path`, read without taking its lock (the file is replaced
    /// whole by rename, so a read sees one version).
    pub fn read_key(path: &Path) -> Result<PublicKey, WalletError> {
        Ok(read_file(path)?.1.public_key())
    }

    /// Loads a wallet under `committee`, taking its lock first (waiting at most [`LOCK_WAIT`]).
    pub fn load(path: &Path, committee: &Committee) -> Result<Wallet, WalletError> {
        Wallet::load_waiting(path, committee, LOCK_WAIT)
    }

    /// [`Wallet::load`], waiting at most `wait` for the lock.
    pub fn load_waiting(
        path: &Path,
        committee: &Committee,
        wait: Duration,
    ) -> Result<Wallet, WalletError> {
        // Locked before the read: what is read is what the next write replaces.
        let lock = WalletLock::acquire(path, wait)?;
        let (file, keypair) = read_file(path)?;
        let mut client = Client::new(keypair, committee.clone());
        for coin in &file.coins {
            let id = OutputId(walras_crypto::Hash(
                hex32(&coin.id).map_err(|error| invalid(path, error))?,
            ));
            match &coin.certificate {
                Some(text) => {
                    let bytes = hex::decode(text).map_err(|error| invalid(path, error))?;
                    let certificate =
                        decode_certificate(&bytes).map_err(|error| invalid(path, error))?;
                    client.receive(certificate)?;
                }
                None => {
                    let amount = coin
                        .amount
                        .parse()
                        .map_err(|_| invalid(path, format!("amount {:?}", coin.amount)))?;
                    client.add_root(
                        id,
                        Output {
                            asset: AssetId(coin.asset),
                            amount,
                            owner: client.public_key(),
                        },
                    )?;
                }
            }
        }
        Ok(Wallet {
            path: path.to_path_buf(),
            file,
            client,
            _lock: lock,
        })
    }

    /// Loads the wallet at `path` (locked), keeps each certificate paid to it, saves, and
    /// releases it. Returns how many coins were new.
    pub fn deliver(
        path: &Path,
        committee: &Committee,
        certificates: &[Certificate],
    ) -> Result<usize, WalletError> {
        let mut wallet = Wallet::load(path, committee)?;
        let mut new = 0;
        for certificate in certificates {
            if wallet.receive(certificate.clone())? {
                new += 1;
            }
        }
        Ok(new)
    }

    /// Certificates certified for other payees and not yet delivered.
    pub fn undelivered(&self) -> Result<Vec<Certificate>, WalletError> {
        self.file
            .undelivered
            .iter()
            .map(|entry| {
                hex::decode(&entry.certificate)
                    .map_err(|error| invalid(&self.path, error))
                    .and_then(|bytes| {
                        decode_certificate(&bytes).map_err(|error| invalid(&self.path, error))
                    })
            })
            .collect()
    }

    /// Delivers each undelivered certificate whose payee has a wallet file (`wallet_of` its
    /// key): the payee is locked, re-read, verified and saved, then the payer forgets it.
    /// Never holds two wallets' locks at once: this wallet's lock is released first and taken
    /// again at the end (two wallets paying each other at once would otherwise wait for each
    /// other until one gave up). Returns this wallet, locked again, with the certificates
    /// delivered (and the payee's file) and those kept because their payee has no known
    /// wallet. A delivery that fails stops there and is reported; what was delivered before it
    /// is forgotten, the rest kept for the next attempt (delivering twice keeps one coin).
    pub fn deliver_undelivered(
        self,
        committee: &Committee,
        wallet_of: impl Fn(&PublicKey) -> Option<PathBuf>,
    ) -> Result<(Wallet, Deliveries), WalletError> {
        let certificates = self.undelivered()?;
        let path = self.path.clone();
        let mut deliveries = Deliveries::default();
        let mut failure = None;
        let mut payer = Some(self);
        for certificate in certificates {
            let Some(payee) = wallet_of(&certificate.output.owner) else {
                deliveries.kept.push(certificate);
                continue;
            };
            // Released before the payee's lock is taken.
            payer = None;
            if let Err(error) =
                Wallet::deliver(&payee, committee, std::slice::from_ref(&certificate))
            {
                failure = Some(WalletError::NotDelivered {
                    coin: hex::encode(certificate.id.0.as_bytes()),
                    amount: certificate.output.amount,
                    payee,
                    source: Box::new(error),
                });
                break;
            }
            deliveries.delivered.push((certificate, payee));
        }
        let mut payer = match payer {
            Some(payer) => payer,
            None => Wallet::load(&path, committee)?,
        };
        let ids: Vec<OutputId> = deliveries
            .delivered
            .iter()
            .map(|(certificate, _)| certificate.id)
            .collect();
        payer.mark_delivered(&ids)?;
        match failure {
            Some(error) => Err(error),
            None => Ok((payer, deliveries)),
        }
    }

    /// Forgets the undelivered certificates of `ids` (their payees hold them now, or the user
    /// was handed them), durably.
    pub fn mark_delivered(&mut self, ids: &[OutputId]) -> Result<(), WalletError> {
        let ids: BTreeSet<String> = ids.iter().map(|id| hex::encode(id.0.as_bytes())).collect();
        let before = self.file.undelivered.len();
        self.file
            .undelivered
            .retain(|entry| !ids.contains(&entry.id));
        if self.file.undelivered.len() != before {
            self.save()?;
        }
        Ok(())
    }

    /// The wallet file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This wallet's key.
    pub fn public_key(&self) -> PublicKey {
        self.client.public_key()
    }

    /// The file's contents.
    pub fn file(&self) -> &WalletFile {
        &self.file
    }

    /// The state machine (balances, stuck inputs).
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn sync_coins(&mut self) {
        self.file.coins = self
            .client
            .coins()
            .into_iter()
            .map(|coin| CoinFile {
                id: hex::encode(coin.id.0.as_bytes()),
                asset: coin.output.asset.0,
                amount: coin.output.amount.to_string(),
                certificate: coin
                    .certificate
                    .as_ref()
                    .map(|certificate| hex::encode(certificate_bytes(certificate))),
            })
            .collect();
    }

    fn save(&mut self) -> Result<(), WalletError> {
        self.sync_coins();
        Wallet::write(&self.path, &self.file)
    }

    /// Keeps the payments output of an exchange deposit this wallet's key owns (a root entry:
    /// no certificate; validators admit it once its exchange block is committed, and refuse
    /// to spend it as `UnknownInput` until then).
    pub fn add_deposit(
        &mut self,
        id: OutputId,
        asset: AssetId,
        amount: u128,
    ) -> Result<(), WalletError> {
        let hex_id = hex::encode(id.0.as_bytes());
        if self.file.coins.iter().any(|coin| coin.id == hex_id) {
            return Ok(());
        }
        let owner = self.client.public_key();
        self.client.add_root(
            id,
            Output {
                asset,
                amount,
                owner,
            },
        )?;
        self.file.history.push(HistoryEntry {
            direction: "deposited".into(),
            payment: String::new(),
            asset: asset.0,
            amount: amount.to_string(),
            counterparty: hex_id,
            inputs: Vec::new(),
        });
        self.save()
    }

    /// Verifies a certificate paid to this wallet and keeps the coin. Returns whether the coin
    /// is new (a certificate delivered twice is kept once).
    pub fn receive(&mut self, certificate: Certificate) -> Result<bool, WalletError> {
        let id = hex::encode(certificate.id.0.as_bytes());
        if self.file.coins.iter().any(|coin| coin.id == id)
            || self
                .file
                .history
                .iter()
                .any(|entry| entry.direction == "received" && entry.counterparty == id)
        {
            // Held, or held once and spent since: keeping it again would mint it twice.
            return Ok(false);
        }
        self.client.receive(certificate.clone())?;
        self.file.history.push(HistoryEntry {
            direction: "received".into(),
            payment: String::new(),
            asset: certificate.output.asset.0,
            amount: certificate.output.amount.to_string(),
            counterparty: id,
            inputs: Vec::new(),
        });
        self.save()?;
        Ok(true)
    }

    /// Resends every persisted request (a crash after sending) and finishes them.
    pub async fn recover(
        &mut self,
        client: &Arc<CommitteeClient>,
    ) -> Result<Vec<(PaymentId, Vec<Certificate>)>, WalletError> {
        let path = self.path.clone();
        let requests = self
            .file
            .pending
            .iter()
            .map(|text| {
                hex::decode(text)
                    .map_err(|error| invalid(&path, error))
                    .and_then(|bytes| decode_request(&bytes).map_err(|error| invalid(&path, error)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let effects = self.client.recover(requests);
        let mut done = Vec::new();
        for effect in effects {
            if let ClientEffect::Broadcast { shard, request } = effect {
                done.push(self.broadcast(client, shard, request).await?);
            }
        }
        Ok(done)
    }

    /// Pays `amount` of `asset` to `payee`: persist, broadcast, verify, aggregate. Returns the
    /// payment id and its certificates (the payee's first).
    pub async fn pay(
        &mut self,
        client: &Arc<CommitteeClient>,
        payee: PublicKey,
        asset: AssetId,
        amount: u128,
    ) -> Result<(PaymentId, Vec<Certificate>), WalletError> {
        self.recover(client).await?;
        let (_, effects) = self.client.pay(payee, asset, amount)?;
        let mut result = None;
        for effect in effects {
            match effect {
                ClientEffect::Persist(request) => {
                    self.file.pending.push(hex::encode(request_bytes(&request)));
                    // Durable before it is sent: after a crash `recover` finds it.
                    self.save()?;
                }
                ClientEffect::Broadcast { shard, request } => {
                    result = Some(self.broadcast(client, shard, request).await?);
                }
                // `pay` only persists and broadcasts; votes come through `broadcast`.
                ClientEffect::Certified { .. }
                | ClientEffect::VoteRefused { .. }
                | ClientEffect::NoQuorum { .. } => {}
            }
        }
        result.ok_or_else(|| invalid(&self.path, "the client produced no broadcast"))
    }

    /// Sends `request` to every validator and feeds each reply to the client's quorum
    /// collector until it certifies or says no quorum can form in this round; a round that
    /// validators refused for overload is resent unchanged after the hint, for a while.
    async fn broadcast(
        &mut self,
        client: &Arc<CommitteeClient>,
        shard: u32,
        request: PaymentRequest,
    ) -> Result<(PaymentId, Vec<Certificate>), WalletError> {
        let id = request.signed.payment.id();
        let started = Instant::now();
        let mut attempts = 0u32;
        let mut problems = Vec::new();
        loop {
            problems.clear();
            // The longest retry hint of an overload refusal in this round, if there was one.
            let mut overloaded: Option<Duration> = None;
            let mut failure = None;
            let mut replies = client.broadcast(shard, &request);
            while let Some(reply) = replies.recv().await {
                if let Some(after) = reply.result.as_ref().err().and_then(NetError::retry_after) {
                    overloaded = Some(overloaded.unwrap_or_default().max(after));
                }
                let effects = self.take_reply(&id, reply, &mut problems);
                if let Some(done) = self.apply(&request, effects, &mut problems, &mut failure)? {
                    return Ok(done);
                }
                if failure.is_some() {
                    break;
                }
            }
            if failure.is_none() {
                let effects = self.client.end_round(&id);
                if let Some(done) = self.apply(&request, effects, &mut problems, &mut failure)? {
                    return Ok(done);
                }
            }
            // Refused for overload: nothing changed, so the same request is resent after the hint
            // (the validators that voted answer with the same votes), for a while.
            attempts += 1;
            match overloaded {
                Some(after) if started.elapsed() + after < OVERLOAD_RETRY_FOR => {
                    tokio::time::sleep(overload_backoff(after, attempts, &id)).await;
                    self.client.resend(&id)?;
                }
                _ => {
                    return Err(WalletError::NoQuorum {
                        payment: hex::encode(id.0.as_bytes()),
                        valid: failure.map_or(0, |failure| failure.valid),
                        quorum: client.committee().quorum(),
                        problems: problems.join("; "),
                    })
                }
            }
        }
    }

    /// Feeds one validator's reply to the client; what the client cannot take (errors,
    /// unexpected replies, conflicts) is described in `problems`.
    fn take_reply(
        &mut self,
        payment: &PaymentId,
        reply: ValidatorReply,
        problems: &mut Vec<String>,
    ) -> Vec<ClientEffect> {
        let validator = reply.validator;
        match reply.result {
            Ok(Response::Votes(votes)) => self.client.on_votes_from(validator, &votes),
            Ok(Response::Conflict(conflict)) => match self.client.on_conflict(&conflict) {
                Ok(effects) => {
                    problems.push(format!(
                        "validator {validator}: an input is held by another payment this key signed"
                    ));
                    effects
                }
                Err(error) => {
                    problems.push(error.to_string());
                    self.client.on_unavailable(payment, validator)
                }
            },
            Ok(_) => {
                problems.push(NetError::Unexpected { validator }.to_string());
                self.client.on_unavailable(payment, validator)
            }
            Err(error) => {
                problems.push(error.to_string());
                self.client.on_unavailable(payment, validator)
            }
        }
    }

    /// Carries out the client's effects for one reply: refused votes become problems, a
    /// failed round is kept in `failure`, and a certification is saved and returned.
    fn apply(
        &mut self,
        request: &PaymentRequest,
        effects: Vec<ClientEffect>,
        problems: &mut Vec<String>,
        failure: &mut Option<QuorumFailure>,
    ) -> Result<Option<(PaymentId, Vec<Certificate>)>, WalletError> {
        for effect in effects {
            match effect {
                ClientEffect::VoteRefused {
                    validator, fault, ..
                } => problems.push(format!("validator {validator}: {fault}")),
                ClientEffect::NoQuorum { failure: found, .. } => *failure = Some(found),
                ClientEffect::Certified {
                    payment,
                    certificates,
                } => {
                    self.save_certified(request, payment, &certificates)?;
                    return Ok(Some((payment, certificates)));
                }
                ClientEffect::Persist(_) | ClientEffect::Broadcast { .. } => {}
            }
        }
        Ok(None)
    }

    /// Drops the pending request, keeps the payees' certificates until delivered and the
    /// history line, in one durable write.
    fn save_certified(
        &mut self,
        request: &PaymentRequest,
        payment: PaymentId,
        certificates: &[Certificate],
    ) -> Result<(), WalletError> {
        let text = hex::encode(request_bytes(request));
        self.file.pending.retain(|pending| *pending != text);
        let me = self.client.public_key();
        // The payees' certificates are kept in the same write that drops the pending request:
        // from here on nothing but delivery removes them.
        for certificate in certificates {
            let id = hex::encode(certificate.id.0.as_bytes());
            if certificate.output.owner == me
                || self.file.undelivered.iter().any(|entry| entry.id == id)
            {
                continue;
            }
            self.file.undelivered.push(UndeliveredFile {
                payee: key_hex(&certificate.output.owner),
                id,
                asset: certificate.output.asset.0,
                amount: certificate.output.amount.to_string(),
                certificate: hex::encode(certificate_bytes(certificate)),
            });
        }
        if let Some(first) = certificates.first() {
            self.file.history.push(HistoryEntry {
                direction: "sent".into(),
                payment: hex::encode(payment.0.as_bytes()),
                asset: first.output.asset.0,
                amount: first.output.amount.to_string(),
                counterparty: key_hex(&first.output.owner),
                inputs: request
                    .signed
                    .payment
                    .inputs
                    .iter()
                    .map(|input| hex::encode(input.id.0.as_bytes()))
                    .collect(),
            });
        }
        self.save()
    }
}
