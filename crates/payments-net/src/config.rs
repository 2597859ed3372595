//! The files a payments network is described by (JSON, written by `walras payments localnet` or
//! by hand): the committee (keys and addresses), the genesis outputs, and one validator's
//! configuration. Amounts are decimal strings so that no JSON reader rounds them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use walras_crypto::{Keypair, PublicKey};
use walras_payments::{genesis_output_id, ChainId, Committee, Epoch, Output, OutputId, Scheme};
use walras_types::AssetId;

/// Default Merkle tree size (the measured optimum at 10 validators, `docs/payments.md`).
pub const MERKLE_BATCH_LEAVES_DEFAULT: usize = 128;

/// Why a configuration file is refused.
#[derive(Debug, Error)]
pub enum ConfigError {
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
    #[error("{path} is not valid: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: FieldError,
    },
}

/// A key, seed, scheme, fault or committee/genesis field that does not parse or is out of range.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum FieldError {
    #[error("key {text:?} is not hex: {source}")]
    KeyHex {
        text: String,
        #[source]
        source: hex::FromHexError,
    },
    #[error("key {text:?}: {source}")]
    Key {
        text: String,
        #[source]
        source: walras_crypto::DecodeError,
    },
    #[error("the secret seed is not hex: {0}")]
    SeedHex(#[source] hex::FromHexError),
    #[error("a secret seed is 32 bytes (64 hex digits), got {bytes} bytes")]
    SeedLength { bytes: usize },
    #[error("unknown scheme {0:?} (naive, merkle or bls)")]
    UnknownScheme(String),
    #[error(
        "scheme bls, but not every validator of the committee file has a bls_key and bls_proof"
    )]
    BlsSchemeWithoutKeys,
    #[error("batch_leaves_max must be at least 1")]
    NoBatchLeaves,
    #[error("unknown fault {0:?} (silent, equivocate or garbage)")]
    UnknownFault(String),
    #[error("a committee needs 1 to 65535 validators, got {0}")]
    ValidatorCount(usize),
    #[error("shards must be at least 1")]
    NoShards,
    #[error("{text:?} is not {bytes} bytes of hex")]
    FixedHex { text: String, bytes: usize },
    #[error("genesis output {index}: amount {amount:?} is not a decimal number of units")]
    GenesisAmount { index: usize, amount: String },
    #[error("genesis output {index}: zero amount")]
    GenesisZeroAmount { index: usize },
    #[error("more than {max} genesis outputs", max = u32::MAX)]
    GenesisOutputCount,
    #[error("genesis output {index}: {source}")]
    GenesisOwner {
        index: usize,
        #[source]
        source: Box<FieldError>,
    },
}

/// One committee member: its vote key and where it listens.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberFile {
    /// Ed25519 public key, hex.
    pub key: String,
    /// `host:port` of the validator process.
    pub address: String,
    /// BLS12-381 public key (48 bytes, hex) that signs withdrawal votes (see
    /// [`bls_seed`]); absent in committees written before the bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bls_key: Option<String>,
    /// Its proof of possession (96 bytes, hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bls_proof: Option<String>,
}

/// A member entry with its BLS key and proof, from its ed25519 seed.
pub fn member_with_bls(seed: &[u8; 32], address: String) -> MemberFile {
    let keypair = Keypair::from_seed(*seed);
    let bls = walras_payments::bls::BlsKeypair::derive(&keypair);
    MemberFile {
        key: key_hex(&keypair.public_key()),
        address,
        bls_key: Some(hex::encode(bls.public_key())),
        bls_proof: Some(hex::encode(bls.proof_of_possession())),
    }
}

/// `committee.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommitteeFile {
    pub chain_id: u64,
    pub epoch: u64,
    pub shards: u32,
    /// `naive` or `merkle`.
    pub scheme: String,
    #[serde(default = "default_batch")]
    pub batch_leaves_max: usize,
    pub validators: Vec<MemberFile>,
}

fn default_batch() -> usize {
    MERKLE_BATCH_LEAVES_DEFAULT
}

/// Each validator's BLS key and proof of possession, in committee order.
pub(crate) type BlsKeys = Vec<([u8; 48], [u8; 96])>;

/// A committee as the processes use it.
#[derive(Clone, Debug)]
pub struct CommitteeConfig {
    /// The BLS keys, when every member has one (withdrawal certificates need them).
    pub bls: Option<BlsKeys>,
    pub committee: Committee,
    pub scheme: Scheme,
    pub addresses: Vec<String>,
}

/// Why a committee cannot become the exchange genesis's payments section.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ExchangeGenesisError {
    #[error(
        "not every validator of the committee file has a bls_key and bls_proof: the exchange \
         checks withdrawals against BLS keys only (regenerate the committee with \
         `walras payments localnet`, or add both to each member)"
    )]
    MissingBlsKeys,
    #[error(
        "{validators} validators: the exchange's signer bitmap holds at most {max}",
        max = walras_types::genesis::PAYMENTS_VALIDATORS_MAX
    )]
    TooManyValidators { validators: usize },
    #[error("the committee's BLS keys are refused: {0}")]
    Bls(#[from] walras_payments::bls::BlsError),
}

impl CommitteeConfig {
    /// The exchange genesis's payments section for this committee: every member's ed25519
    /// key, BLS key and proof of possession, in committee order (the order of the withdrawal
    /// certificate's signer bitmap). Each proof is checked here, as the exchange checks it at
    /// load, so a bad committee file is refused before a genesis is written from it.
    pub fn exchange_genesis(&self) -> Result<walras_types::PaymentsGenesis, ExchangeGenesisError> {
        let validators = self.committee.validators.len();
        if validators > walras_types::genesis::PAYMENTS_VALIDATORS_MAX {
            return Err(ExchangeGenesisError::TooManyValidators { validators });
        }
        let keys = match &self.bls {
            Some(keys) => keys.clone(),
            // `to_config` keeps BLS keys only when every member has both.
            None => return Err(ExchangeGenesisError::MissingBlsKeys),
        };
        walras_payments::bls::BlsCommittee::new(self.committee.clone(), &keys)?;
        Ok(walras_types::PaymentsGenesis {
            chain_id: self.committee.chain_id.0,
            epoch: self.committee.epoch.0,
            shards: self.committee.shards,
            validators: self
                .committee
                .validators
                .iter()
                .zip(&keys)
                .map(
                    |(key, (bls_key, bls_proof))| walras_types::PaymentsValidator {
                        key: *key.as_bytes(),
                        bls_key: *bls_key,
                        bls_proof: *bls_proof,
                    },
                )
                .collect(),
        })
    }
}

/// Parses `naive`, `merkle`, `bls`.
pub fn parse_scheme(name: &str, batch_leaves_max: usize) -> Result<Scheme, FieldError> {
    match name {
        "naive" => Ok(Scheme::Naive),
        "bls" => Ok(Scheme::Bls),
        "merkle" if batch_leaves_max >= 1 => Ok(Scheme::Merkle { batch_leaves_max }),
        "merkle" => Err(FieldError::NoBatchLeaves),
        other => Err(FieldError::UnknownScheme(other.to_string())),
    }
}

/// Hex of a public key.
pub fn key_hex(key: &PublicKey) -> String {
    hex::encode(key.as_bytes())
}

/// Parses a hex public key.
pub fn parse_key(text: &str) -> Result<PublicKey, FieldError> {
    let bytes = hex::decode(text.trim()).map_err(|source| FieldError::KeyHex {
        text: text.to_string(),
        source,
    })?;
    PublicKey::from_bytes(&bytes).map_err(|source| FieldError::Key {
        text: text.to_string(),
        source,
    })
}

/// Parses a hex 32-byte secret seed into a keypair.
pub fn parse_seed(text: &str) -> Result<Keypair, FieldError> {
    let bytes = hex::decode(text.trim()).map_err(FieldError::SeedHex)?;
    let seed: [u8; 32] = bytes
        .try_into()
        .map_err(|bytes: Vec<u8>| FieldError::SeedLength { bytes: bytes.len() })?;
    Ok(Keypair::from_seed(seed))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ConfigError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `value` as pretty JSON, durably and readable by the owner only (validator files
/// hold secret keys): [`crate::file::write_private_durable`], the one atomic write, so a
/// reader never sees half a file and a crash leaves the old file or the new one.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ConfigError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| ConfigError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    crate::file::write_private_durable(path, text.as_bytes()).map_err(|source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    })
}

impl CommitteeFile {
    /// Reads and checks `committee.json`.
    pub fn load(path: &Path) -> Result<CommitteeConfig, ConfigError> {
        let file: CommitteeFile = read_json(path)?;
        file.to_config().map_err(|source| ConfigError::Invalid {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The committee this file describes.
    pub fn to_config(&self) -> Result<CommitteeConfig, FieldError> {
        if self.validators.is_empty() || self.validators.len() > usize::from(u16::MAX) {
            return Err(FieldError::ValidatorCount(self.validators.len()));
        }
        if self.shards == 0 {
            return Err(FieldError::NoShards);
        }
        let validators = self
            .validators
            .iter()
            .map(|member| parse_key(&member.key))
            .collect::<Result<Vec<_>, _>>()?;
        let bls = self
            .validators
            .iter()
            .map(|member| match (&member.bls_key, &member.bls_proof) {
                (Some(key), Some(proof)) => {
                    Some(fixed_hex::<48>(key).and_then(|key| Ok((key, fixed_hex::<96>(proof)?))))
                }
                _ => None,
            })
            .collect::<Option<Result<Vec<_>, FieldError>>>()
            .transpose()?;
        let scheme = parse_scheme(&self.scheme, self.batch_leaves_max)?;
        if scheme == Scheme::Bls && bls.is_none() {
            return Err(FieldError::BlsSchemeWithoutKeys);
        }
        Ok(CommitteeConfig {
            committee: Committee {
                chain_id: ChainId(self.chain_id),
                epoch: Epoch(self.epoch),
                validators,
                shards: self.shards,
                bls: bls
                    .iter()
                    .flatten()
                    .map(|(key, proof)| walras_payments::BlsMember {
                        key: *key,
                        proof: *proof,
                    })
                    .collect(),
            },
            bls,
            scheme,
            addresses: self
                .validators
                .iter()
                .map(|member| member.address.clone())
                .collect(),
        })
    }
}

fn fixed_hex<const N: usize>(text: &str) -> Result<[u8; N], FieldError> {
    hex::decode(text.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| FieldError::FixedHex {
            text: text.to_string(),
            bytes: N,
        })
}

/// One genesis output.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GenesisOutputFile {
    pub asset: u16,
    /// Decimal.
    pub amount: String,
    /// Owner public key, hex.
    pub owner: String,
}

/// `genesis.json`: output `i` has id `genesis_output_id(chain_id, i)`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GenesisFile {
    pub outputs: Vec<GenesisOutputFile>,
}

impl GenesisFile {
    /// Reads `genesis.json` and returns its outputs with their ids.
    pub fn load(path: &Path, chain_id: ChainId) -> Result<Vec<(OutputId, Output)>, ConfigError> {
        let file: GenesisFile = read_json(path)?;
        file.outputs(chain_id)
            .map_err(|source| ConfigError::Invalid {
                path: path.to_path_buf(),
                source,
            })
    }

    /// The outputs with their ids.
    pub fn outputs(&self, chain_id: ChainId) -> Result<Vec<(OutputId, Output)>, FieldError> {
        self.outputs
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                let amount: u128 = entry
                    .amount
                    .parse()
                    .map_err(|_| FieldError::GenesisAmount {
                        index,
                        amount: entry.amount.clone(),
                    })?;
                if amount == 0 {
                    return Err(FieldError::GenesisZeroAmount { index });
                }
                let owner = parse_key(&entry.owner).map_err(|source| FieldError::GenesisOwner {
                    index,
                    source: Box::new(source),
                })?;
                let index = u32::try_from(index).map_err(|_| FieldError::GenesisOutputCount)?;
                Ok((
                    genesis_output_id(chain_id, index),
                    Output {
                        asset: AssetId(entry.asset),
                        amount,
                        owner,
                    },
                ))
            })
            .collect()
    }
}

/// A fault a validator plays on purpose (benchmarks and tests of the client's checks only).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// Records and commits, never answers a payment.
    Silent,
    /// Votes on every payment, also on one that conflicts with what it recorded.
    Equivocate,
    /// Answers with votes signed by a key that is not its committee key.
    Garbage,
}

impl Fault {
    /// Parses `silent`, `equivocate`, `garbage`.
    pub fn parse(name: &str) -> Result<Fault, FieldError> {
        match name {
            "silent" => Ok(Fault::Silent),
            "equivocate" => Ok(Fault::Equivocate),
            "garbage" => Ok(Fault::Garbage),
            other => Err(FieldError::UnknownFault(other.to_string())),
        }
    }
}

/// `validatorI.json`: one validator process.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ValidatorFile {
    pub committee: PathBuf,
    pub genesis: PathBuf,
    pub index: u16,
    /// File holding the validator's secret seed (64 hex digits).
    pub key: PathBuf,
    /// Directory of the shards' effect logs (`shardK/`).
    pub data: PathBuf,
    /// Listen address; default: this validator's address in the committee.
    #[serde(default)]
    pub listen: Option<String>,
    /// Deliberate fault (benchmarks only).
    #[serde(default)]
    pub fault: Option<Fault>,
}

impl ValidatorFile {
    /// Reads a validator configuration; relative paths are relative to its directory.
    pub fn load(path: &Path) -> Result<ValidatorFile, ConfigError> {
        let mut file: ValidatorFile = read_json(path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        for entry in [
            &mut file.committee,
            &mut file.genesis,
            &mut file.key,
            &mut file.data,
        ] {
            if entry.is_relative() {
                *entry = base.join(&*entry);
            }
        }
        Ok(file)
    }
}
