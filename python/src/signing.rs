//! Keys and signed transactions, made by the workspace's own code: `walras_crypto`'s Ed25519
//! keys, `walras_types`' canonical encoding (the bytes the CLI signs, `docs/formats.md`),
//! `walras_engine`'s transaction hash, `walras_client`'s key files and `walras_devnet`'s
//! development keys.

use crate::value_error;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use walras_api::wire::DevGenesisJson;
use walras_crypto::{Keypair, PublicKey};
use walras_engine::transaction_hash;
use walras_types::{AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Signer>()?;
    m.add_function(wrap_pyfunction!(hash_transaction, m)?)?;
    m.add_function(wrap_pyfunction!(transaction_json, m)?)?;
    m.add_function(wrap_pyfunction!(dev_seed, m)?)?;
    Ok(())
}

/// One account's signing key. Signs transactions as the CLI does: the canonical encoding,
/// Ed25519, then a decode of the result so an invalid transaction is refused before sending.
#[pyclass(frozen, module = "walras._walras")]
pub struct Signer {
    keypair: Keypair,
}

#[pymethods]
impl Signer {
    /// A signer from a 32-byte Ed25519 secret seed.
    #[staticmethod]
    fn from_seed(seed: &[u8]) -> PyResult<Signer> {
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| value_error(format!("a secret seed is 32 bytes, not {}", seed.len())))?;
        Ok(Signer {
            keypair: Keypair::from_seed(seed),
        })
    }

    /// A signer from a key file written by `walras keygen` (or `account create --new-key`).
    #[staticmethod]
    fn from_key_file(path: std::path::PathBuf) -> PyResult<Signer> {
        let keypair =
            walras_client::keyfile::read(&path).map_err(|error| value_error(error.to_string()))?;
        Ok(Signer { keypair })
    }

    /// The public key, 64 hex digits.
    #[getter]
    fn public_key(&self) -> String {
        self.keypair.public_key().to_string()
    }

    /// A signed payment of `amount` units of `asset` from `source` to `to`.
    fn payment<'py>(
        &self,
        py: Python<'py>,
        source: u64,
        sequence: u64,
        to: u64,
        asset: u16,
        amount: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let operation = Operation::Payment {
            to: AccountId(to),
            asset: AssetId(asset),
            amount,
        };
        self.signed(py, source, sequence, operation)
    }

    /// A signed offer selling `amount` of `sell` for `buy` at no less than `min_price` (a
    /// decimal text, rounded up to Q48.80 as everywhere).
    #[allow(clippy::too_many_arguments)]
    fn create_offer<'py>(
        &self,
        py: Python<'py>,
        source: u64,
        sequence: u64,
        sell: u16,
        buy: u16,
        amount: u64,
        min_price: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let operation = Operation::CreateOffer {
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount,
            min_price: limit(min_price)?,
        };
        self.signed(py, source, sequence, operation)
    }

    /// A signed cancel of offer `offer_id` (its pair and limit as it was created).
    #[allow(clippy::too_many_arguments)]
    fn cancel_offer<'py>(
        &self,
        py: Python<'py>,
        source: u64,
        sequence: u64,
        sell: u16,
        buy: u16,
        min_price: &str,
        offer_id: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let operation = Operation::CancelOffer {
            sell: AssetId(sell),
            buy: AssetId(buy),
            min_price: limit(min_price)?,
            offer_id: OfferId(offer_id),
        };
        self.signed(py, source, sequence, operation)
    }

    /// A signed creation of account `new_account` controlled by `public_key` (64 hex digits).
    fn create_account<'py>(
        &self,
        py: Python<'py>,
        source: u64,
        sequence: u64,
        new_account: u64,
        public_key: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let key: PublicKey = public_key
            .parse()
            .map_err(|error| value_error(format!("public_key: {error}")))?;
        let operation = Operation::CreateAccount {
            new_account: AccountId(new_account),
            public_key: *key.as_bytes(),
        };
        self.signed(py, source, sequence, operation)
    }
}

impl Signer {
    fn signed<'py>(
        &self,
        py: Python<'py>,
        source: u64,
        sequence: u64,
        operation: Operation,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let transaction = Transaction {
            source: AccountId(source),
            sequence,
            operation,
        };
        let signed = SignedTransaction {
            transaction,
            signature: *self.keypair.sign(&transaction.encode()).as_bytes(),
        };
        let encoded = signed.encode();
        // What the node would refuse as malformed is refused here, with the decoder's reason.
        SignedTransaction::decode(&encoded)
            .map_err(|error| value_error(format!("the transaction is not valid: {error}")))?;
        Ok(PyBytes::new(py, &encoded))
    }
}

fn limit(text: &str) -> PyResult<Price> {
    Price::parse_limit(text).map_err(|error| value_error(format!("min_price: {error}")))
}

fn decode(signed: &[u8]) -> PyResult<SignedTransaction> {
    SignedTransaction::decode(signed)
        .map_err(|error| value_error(format!("not a signed transaction: {error}")))
}

/// The transaction's id: BLAKE2b-256 of the signed bytes under the `walras/tx` tag, hex.
#[pyfunction]
fn hash_transaction(signed: &[u8]) -> PyResult<String> {
    Ok(transaction_hash(&decode(signed)?).to_string())
}

/// The transaction's JSON form (what `POST /v1/transactions` accepts as JSON), as text.
#[pyfunction]
fn transaction_json(signed: &[u8]) -> PyResult<String> {
    let json = walras_api::transaction_to_json(&decode(signed)?);
    serde_json::to_string(&json).map_err(|error| value_error(error.to_string()))
}

/// The secret seed of development account `account` under a node's development genesis
/// (`/v1/status`'s `dev_genesis`, as JSON text).
#[pyfunction]
fn dev_seed<'py>(
    py: Python<'py>,
    dev_genesis: &str,
    account: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let dev: DevGenesisJson = serde_json::from_str(dev_genesis)
        .map_err(|error| value_error(format!("dev_genesis: {error}")))?;
    if account >= dev.accounts {
        return Err(value_error(format!(
            "account {account} is not in the development genesis (accounts 0..{})",
            dev.accounts
        )));
    }
    let seed = walras_devnet::dev_secret_seed(&dev, AccountId(account));
    Ok(PyBytes::new(py, &seed))
}
