//! A wallet file and the payment flow around the pure `walras_payments::Client`: load coins,
//! build a payment, make the request durable in the wallet file *before* sending it, broadcast,
//! feed every reply to the client (which verifies each vote), and on the quorum store the change
//! and the history. A wallet with a persisted request (a crash after sending) resends it
//! unchanged before anything else.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use walras_crypto::PublicKey;
use walras_payments::codec::{
    certificate_bytes, decode_certificate, decode_request, request_bytes,
};
use walras_payments::{
    Certificate, Client, ClientEffect, ClientError, Committee, Output, OutputId, PaymentId,
    PaymentRequest,
};
use walras_types::AssetId;

use crate::client::{CommitteeClient, NetError};
use crate::config::{key_hex, parse_seed};
use crate::wire::Response;

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
}

/// A loaded wallet.
pub struct Wallet {
    path: PathBuf,
    file: WalletFile,
    client: Client,
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

/// Writes `bytes` to `path` durably and readable by the owner only: a temporary file, fsync,
/// rename, fsync of the directory. A crash leaves the old file or the new one, never half.
pub fn write_private_durable(path: &Path, bytes: &[u8]) -> Result<(), std::io::Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        })?
        .sync_all()?;
    }
    Ok(())
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
        };
        Wallet::write(path, &file)
    }

    fn write(path: &Path, file: &WalletFile) -> Result<(), WalletError> {
        let text = serde_json::to_vec_pretty(file).map_err(|error| invalid(path, error))?;
        write_private_durable(path, &text).map_err(|source| WalletError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Loads a wallet under `committee`.
    pub fn load(path: &Path, committee: &Committee) -> Result<Wallet, WalletError> {
        let text = std::fs::read_to_string(path).map_err(|source| WalletError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let file: WalletFile = serde_json::from_str(&text).map_err(|error| invalid(path, error))?;
        let keypair = parse_seed(&file.secret_seed).map_err(|error| invalid(path, error))?;
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
        })
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
        });
        self.save()
    }

    /// Verifies a certificate paid to this wallet and keeps the coin.
    pub fn receive(&mut self, certificate: Certificate) -> Result<(), WalletError> {
        let id = hex::encode(certificate.id.0.as_bytes());
        if self.file.coins.iter().any(|coin| coin.id == id) {
            return Ok(());
        }
        self.client.receive(certificate.clone())?;
        self.file.history.push(HistoryEntry {
            direction: "received".into(),
            payment: String::new(),
            asset: certificate.output.asset.0,
            amount: certificate.output.amount.to_string(),
            counterparty: id,
        });
        self.save()
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
                ClientEffect::Certified { .. } => {}
            }
        }
        result.ok_or_else(|| invalid(&self.path, "the client produced no broadcast"))
    }

    async fn broadcast(
        &mut self,
        client: &Arc<CommitteeClient>,
        shard: u32,
        request: PaymentRequest,
    ) -> Result<(PaymentId, Vec<Certificate>), WalletError> {
        let id = request.signed.payment.id();
        let mut replies = client.broadcast(shard, &request);
        let mut problems = Vec::new();
        let mut valid = 0;
        while let Some(reply) = replies.recv().await {
            let validator = reply.validator;
            let effects = match reply.result {
                Ok(Response::Votes(votes)) => match self.client.on_votes(&votes) {
                    Ok(effects) => {
                        valid += 1;
                        effects
                    }
                    Err(error) => {
                        problems.push(error.to_string());
                        continue;
                    }
                },
                Ok(Response::Conflict(conflict)) => {
                    if let Err(error) = self.client.on_conflict(&conflict) {
                        problems.push(error.to_string());
                    } else {
                        problems.push(format!(
                            "validator {validator}: an input is held by another payment this key signed"
                        ));
                    }
                    continue;
                }
                Ok(_) => {
                    problems.push(NetError::Unexpected { validator }.to_string());
                    continue;
                }
                Err(error) => {
                    problems.push(error.to_string());
                    continue;
                }
            };
            for effect in effects {
                if let ClientEffect::Certified {
                    payment,
                    certificates,
                } = effect
                {
                    let text = hex::encode(request_bytes(&request));
                    self.file.pending.retain(|pending| *pending != text);
                    if let Some(first) = certificates.first() {
                        self.file.history.push(HistoryEntry {
                            direction: "sent".into(),
                            payment: hex::encode(payment.0.as_bytes()),
                            asset: first.output.asset.0,
                            amount: first.output.amount.to_string(),
                            counterparty: key_hex(&first.output.owner),
                        });
                    }
                    self.save()?;
                    return Ok((payment, certificates));
                }
            }
        }
        Err(WalletError::NoQuorum {
            payment: hex::encode(id.0.as_bytes()),
            valid,
            quorum: client.committee().quorum(),
            problems: problems.join("; "),
        })
    }
}
