//! The node's wire contract, shared by server and client: the JSON bodies ([`wire`]), the
//! conversion between a transaction and its JSON form, the OpenAPI schemas of those bodies
//! (`utoipa::ToSchema`, assembled into the document by `walras-server` next to its routes) and
//! the CometBFT proposal encoding ([`proposal`]). The only crate that knows JSON.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod proposal;
pub mod wire;

use walras_crypto::{PublicKey, Signature};
use walras_types::{
    AccountId, AssetId, DecodeError, OfferId, Operation, PaymentsCertificate, PaymentsOutput,
    Price, PriceError, SignedTransaction, Transaction,
};
use wire::{OperationJson, TransactionJson};

/// The JSON form of a signed transaction.
pub fn transaction_to_json(signed: &SignedTransaction) -> TransactionJson {
    let transaction = &signed.transaction;
    let operation = match transaction.operation {
        Operation::CreateAccount {
            new_account,
            public_key,
        } => OperationJson::CreateAccount {
            new_account: new_account.0,
            public_key: hex(&public_key),
        },
        Operation::CreateOffer {
            sell,
            buy,
            amount,
            min_price,
        } => OperationJson::CreateOffer {
            sell: sell.0,
            buy: buy.0,
            amount,
            min_price: min_price.to_exact_decimal(),
        },
        Operation::CancelOffer {
            sell,
            buy,
            min_price,
            offer_id,
        } => OperationJson::CancelOffer {
            sell: sell.0,
            buy: buy.0,
            min_price: min_price.to_exact_decimal(),
            offer_id: offer_id.0,
        },
        Operation::Payment { to, asset, amount } => OperationJson::Payment {
            to: to.0,
            asset: asset.0,
            amount,
        },
        Operation::DepositToPayments {
            asset,
            amount,
            owner,
        } => OperationJson::DepositToPayments {
            asset: asset.0,
            amount,
            owner: hex(&owner),
        },
        Operation::WithdrawFromPayments {
            output,
            certificate,
        } => OperationJson::WithdrawFromPayments {
            output_id: hex(&output.id),
            asset: output.asset.0,
            amount: output.amount,
            owner: hex(&output.owner),
            chain_id: certificate.chain_id,
            epoch: certificate.epoch,
            signers: hex(&certificate.signers.to_be_bytes()),
            aggregate: hex(&certificate.aggregate),
        },
    };
    TransactionJson {
        source: transaction.source.0,
        sequence: transaction.sequence,
        operation,
        signature: hex(&signed.signature),
    }
}

/// Parses the JSON form; the result is checked exactly as a decoded binary transaction is (it
/// goes through `SignedTransaction::decode`), so both forms accept the same transactions.
pub fn transaction_from_json(
    json: &TransactionJson,
) -> Result<SignedTransaction, TransactionJsonError> {
    let operation = match &json.operation {
        OperationJson::CreateAccount {
            new_account,
            public_key,
        } => {
            let key: PublicKey = public_key
                .parse()
                .map_err(TransactionJsonError::PublicKey)?;
            Operation::CreateAccount {
                new_account: AccountId(*new_account),
                public_key: *key.as_bytes(),
            }
        }
        OperationJson::CreateOffer {
            sell,
            buy,
            amount,
            min_price,
        } => Operation::CreateOffer {
            sell: AssetId(*sell),
            buy: AssetId(*buy),
            amount: *amount,
            min_price: parse_price(min_price)?,
        },
        OperationJson::CancelOffer {
            sell,
            buy,
            min_price,
            offer_id,
        } => Operation::CancelOffer {
            sell: AssetId(*sell),
            buy: AssetId(*buy),
            min_price: parse_price(min_price)?,
            offer_id: OfferId(*offer_id),
        },
        OperationJson::Payment { to, asset, amount } => Operation::Payment {
            to: AccountId(*to),
            asset: AssetId(*asset),
            amount: *amount,
        },
        OperationJson::DepositToPayments {
            asset,
            amount,
            owner,
        } => Operation::DepositToPayments {
            asset: AssetId(*asset),
            amount: *amount,
            owner: hex_array("owner", owner)?,
        },
        OperationJson::WithdrawFromPayments {
            output_id,
            asset,
            amount,
            owner,
            chain_id,
            epoch,
            signers,
            aggregate,
        } => Operation::WithdrawFromPayments {
            output: PaymentsOutput {
                id: hex_array("output_id", output_id)?,
                asset: AssetId(*asset),
                amount: *amount,
                owner: hex_array("owner", owner)?,
            },
            certificate: PaymentsCertificate {
                chain_id: *chain_id,
                epoch: *epoch,
                signers: u128::from_be_bytes(hex_array("signers", signers)?),
                aggregate: hex_array("aggregate", aggregate)?,
            },
        },
    };
    let signature: Signature = json
        .signature
        .parse()
        .map_err(TransactionJsonError::Signature)?;
    let signed = SignedTransaction {
        transaction: Transaction {
            source: AccountId(json.source),
            sequence: json.sequence,
            operation,
        },
        signature: *signature.as_bytes(),
    };
    SignedTransaction::decode(&signed.encode()).map_err(TransactionJsonError::Transaction)
}

/// Why a [`TransactionJson`] is not a signed transaction; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransactionJsonError {
    /// `public_key` of a create-account operation is not an acceptable key.
    #[error("public_key: {0}")]
    PublicKey(walras_crypto::DecodeError),
    /// `min_price` of an offer operation is not an acceptable limit price.
    #[error("min_price: {0}")]
    MinPrice(PriceError),
    /// `signature` is not 64 bytes of hex.
    #[error("signature: {0}")]
    Signature(walras_crypto::DecodeError),
    /// A fixed-size hex field (`field`) is not hex or not `bytes` long.
    #[error("{field}: expected {bytes} bytes as {} hex digits", 2 * .bytes)]
    Hex { field: &'static str, bytes: usize },
    /// The fields parse but do not make a valid transaction (a zero amount, the same asset
    /// on both sides ...): the binary decoder's own message.
    #[error("{0}")]
    Transaction(DecodeError),
}

fn parse_price(text: &str) -> Result<Price, TransactionJsonError> {
    Price::parse_limit(text).map_err(TransactionJsonError::MinPrice)
}

/// Exactly `N` bytes from hex, or the field named.
fn hex_array<const N: usize>(
    field: &'static str,
    text: &str,
) -> Result<[u8; N], TransactionJsonError> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| <[u8; N]>::try_from(bytes).ok())
        .ok_or(TransactionJsonError::Hex { field, bytes: N })
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_crypto::Keypair;

    fn signed(operation: Operation) -> SignedTransaction {
        SignedTransaction {
            transaction: Transaction {
                source: AccountId(3),
                sequence: 9,
                operation,
            },
            signature: [5; 64],
        }
    }

    #[test]
    fn every_operation_round_trips_through_json() {
        let key = *Keypair::from_seed([1; 32]).public_key().as_bytes();
        let price = Price::parse_limit("1.2345").unwrap();
        let operations = [
            Operation::CreateAccount {
                new_account: AccountId(77),
                public_key: key,
            },
            Operation::CreateOffer {
                sell: AssetId(0),
                buy: AssetId(1),
                amount: 10,
                min_price: price,
            },
            Operation::CancelOffer {
                sell: AssetId(1),
                buy: AssetId(0),
                min_price: price,
                offer_id: OfferId(4),
            },
            Operation::Payment {
                to: AccountId(8),
                asset: AssetId(2),
                amount: 1,
            },
            Operation::DepositToPayments {
                asset: AssetId(1),
                amount: 12,
                owner: key,
            },
            Operation::WithdrawFromPayments {
                output: PaymentsOutput {
                    id: [3; 32],
                    asset: AssetId(2),
                    amount: 40,
                    owner: key,
                },
                certificate: PaymentsCertificate {
                    chain_id: 7,
                    epoch: 1,
                    signers: 0b1011 | 1 << 127,
                    aggregate: [9; 96],
                },
            },
        ];
        for operation in operations {
            let original = signed(operation);
            let json = serde_json::to_string(&transaction_to_json(&original)).unwrap();
            let parsed: TransactionJson = serde_json::from_str(&json).unwrap();
            assert_eq!(transaction_from_json(&parsed), Ok(original), "{json}");
        }
    }

    #[test]
    fn json_with_invalid_fields_is_refused_with_the_field_named() {
        let mut json = transaction_to_json(&signed(Operation::Payment {
            to: AccountId(8),
            asset: AssetId(2),
            amount: 0,
        }));
        assert!(transaction_from_json(&json)
            .unwrap_err()
            .to_string()
            .contains("amount"));
        json.operation = OperationJson::CreateOffer {
            sell: 1,
            buy: 2,
            amount: 5,
            min_price: "1e13".into(),
        };
        assert!(transaction_from_json(&json)
            .unwrap_err()
            .to_string()
            .contains("min_price"));
        json.signature = "00".into();
        assert!(transaction_from_json(&json)
            .unwrap_err()
            .to_string()
            .contains("min_price"));
        json.operation = OperationJson::Payment {
            to: 1,
            asset: 1,
            amount: 1,
        };
        assert!(transaction_from_json(&json)
            .unwrap_err()
            .to_string()
            .contains("signature"));
        assert_eq!(
            transaction_from_json(&json).unwrap_err().to_string(),
            "signature: a signature is 128 hex digits, got 2"
        );
    }
}
