//! Transactions and their canonical binary encoding.
//!
//! A transaction is signed by its source account and carries a sequence number. Within a block a
//! source's sequence numbers may leave gaps but must lie in `(last, last + 64]` (SPEEDEX K.4);
//! an offer's id is the sequence number of the transaction that created it, so (account, offer
//! id) is unique without a global counter. A cancel names the offer's full key — pair, limit
//! price, and id — so it can find the offer in its pair's book without an index.
//!
//! Encoding (big-endian throughout):
//!
//! ```text
//! transaction := version:u8 (=1) source:u64 sequence:u64 operation
//! operation   := 0x01 new_account:u64 public_key:[32]                 create account
//!              | 0x02 sell:u16 buy:u16 amount:u64 min_price:u128      create offer
//!              | 0x03 sell:u16 buy:u16 min_price:u128 offer_id:u64    cancel offer
//!              | 0x04 to:u64 asset:u16 amount:u64                     payment
//!              | 0x05 asset:u16 amount:u64 owner:[32]                 deposit to payments
//!              | 0x06 output certificate                              withdraw from payments
//! output      := id:[32] asset:u16 amount:u64 owner:[32]
//! certificate := chain_id:u64 epoch:u64 signers:u128 aggregate:[96]
//! signed      := transaction signature:[64]
//! ```
//!
//! The two payments operations are the bridge to the fast-payments lane (`docs/payments.md`):
//! a deposit moves an amount from the source's balance into the payments escrow as an output
//! owned by an ed25519 payments key; a withdrawal redeems a certified payments output for the
//! source, whose key must own it. The certificate is a BLS aggregate with a signer bitmap (bit
//! `i` = validator `i`), one fixed size whoever signed, so a transaction stays `Copy` with no
//! heap data; what it proves is checked by the engine against the committee in its state.
//!
//! Decoding accepts exactly this and nothing else (no trailing bytes, known tags, positive
//! amounts, distinct assets of an offer, limit prices in range), so every decoded transaction
//! re-encodes to the bytes it came from. The signature covers the encoded transaction.

use crate::codec::{self, Reader};
use crate::{AccountId, AssetId, OfferId, OfferKey, Price, MAX_AMOUNT};

/// The only encoding version so far.
pub const TRANSACTION_VERSION: u8 = 1;
/// How far ahead of an account's last sequence number a transaction may be.
pub const SEQUENCE_WINDOW: u64 = 64;
// The block filter and the mempool track used sequence numbers above the last in one u64.
const _: () = assert!(SEQUENCE_WINDOW >= 1 && SEQUENCE_WINDOW <= 64);

/// What a transaction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Creates an empty account controlled by `public_key`.
    CreateAccount {
        new_account: AccountId,
        public_key: [u8; 32],
    },
    /// Locks `amount` of `sell` in a new offer; its id is the transaction's sequence number.
    CreateOffer {
        sell: AssetId,
        buy: AssetId,
        amount: u64,
        min_price: Price,
    },
    /// Cancels one of the source's open offers, returning what is left of it.
    CancelOffer {
        sell: AssetId,
        buy: AssetId,
        min_price: Price,
        offer_id: OfferId,
    },
    /// Moves `amount` of `asset` to `to`.
    Payment {
        to: AccountId,
        asset: AssetId,
        amount: u64,
    },
    /// Moves `amount` of `asset` from the source into the payments escrow, as a payments
    /// output owned by `owner` (an ed25519 payments key) with id `deposit_output_id(transaction
    /// hash, 0)`; spendable in the payments lane once this block is committed.
    DepositToPayments {
        asset: AssetId,
        amount: u64,
        owner: [u8; 32],
    },
    /// Redeems a certified payments output for the source (whose key must own it): the escrow
    /// pays `output.amount` of `output.asset` to the source, once per output id.
    WithdrawFromPayments {
        output: PaymentsOutput,
        certificate: PaymentsCertificate,
    },
}

/// A fast-payments output named by a withdrawal: its id and content, exactly as the payments
/// validators voted on them (the amount is a `u64` here: the exchange's amounts are capped at
/// [`MAX_AMOUNT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PaymentsOutput {
    pub id: [u8; 32],
    pub asset: AssetId,
    pub amount: u64,
    /// The ed25519 payments key that owns the output.
    pub owner: [u8; 32],
}

/// A BLS aggregate certificate on one payments output: the committee's chain and epoch it
/// claims, which validators signed (bit `i` of `signers` is validator `i`), and the aggregate of
/// their signatures (compressed G2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PaymentsCertificate {
    pub chain_id: u64,
    pub epoch: u64,
    pub signers: u128,
    pub aggregate: [u8; 96],
}

/// A transaction before signing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transaction {
    pub source: AccountId,
    pub sequence: u64,
    pub operation: Operation,
}

/// A transaction with its source's ed25519 signature over [`Transaction::encode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignedTransaction {
    pub transaction: Transaction,
    pub signature: [u8; 64],
}

/// Why bytes are not a transaction.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Truncated, trailing bytes: what every binary format shares.
    #[error("transaction: {0}")]
    Codec(#[from] codec::DecodeError),
    #[error("unknown transaction version {0}")]
    Version(u8),
    #[error("unknown operation tag {0:#04x}")]
    UnknownOperation(u8),
    #[error("amount must be positive")]
    ZeroAmount,
    #[error("amount {0} exceeds the issuance cap 2^63-1")]
    AmountTooLarge(u64),
    #[error("offer sells and buys the same asset {0}")]
    SameAsset(u16),
    #[error("limit price outside the accepted range {}", Price::LIMIT_RANGE_TEXT)]
    LimitPrice,
}

const TAG_CREATE_ACCOUNT: u8 = 1;
const TAG_CREATE_OFFER: u8 = 2;
const TAG_CANCEL_OFFER: u8 = 3;
const TAG_PAYMENT: u8 = 4;
const TAG_DEPOSIT_TO_PAYMENTS: u8 = 5;
const TAG_WITHDRAW_FROM_PAYMENTS: u8 = 6;

/// An offer a transaction creates: its pair, its key in the book, the amount it sells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOffer {
    pub sell: AssetId,
    pub buy: AssetId,
    pub key: OfferKey,
    pub amount: u64,
}

/// An offer a transaction cancels: its pair and its key in the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CancelledOffer {
    pub sell: AssetId,
    pub buy: AssetId,
    pub key: OfferKey,
}

impl Operation {
    /// Whether the operation crosses the bridge to the payments lane (a deposit or a
    /// withdrawal): its admission reads the state's bridge, not only the source account.
    pub fn is_bridged(&self) -> bool {
        matches!(
            self,
            Operation::DepositToPayments { .. } | Operation::WithdrawFromPayments { .. }
        )
    }

    /// Every asset the operation names (none for an account creation).
    pub fn assets(&self) -> impl Iterator<Item = AssetId> {
        let (first, second) = match *self {
            Operation::CreateAccount { .. } => (None, None),
            Operation::CreateOffer { sell, buy, .. } | Operation::CancelOffer { sell, buy, .. } => {
                (Some(sell), Some(buy))
            }
            Operation::Payment { asset, .. } | Operation::DepositToPayments { asset, .. } => {
                (Some(asset), None)
            }
            Operation::WithdrawFromPayments { output, .. } => (Some(output.asset), None),
        };
        first.into_iter().chain(second)
    }
}

impl Transaction {
    /// The offer this transaction creates, if it is an offer creation: its id is the
    /// transaction's sequence number.
    pub fn new_offer(&self) -> Option<NewOffer> {
        match self.operation {
            Operation::CreateOffer {
                sell,
                buy,
                amount,
                min_price,
            } => Some(NewOffer {
                sell,
                buy,
                key: OfferKey {
                    min_price,
                    account: self.source,
                    id: OfferId(self.sequence),
                },
                amount,
            }),
            _ => None,
        }
    }

    /// The offer this transaction cancels, if it is a cancellation (always one of its
    /// source's offers).
    pub fn cancelled_offer(&self) -> Option<CancelledOffer> {
        match self.operation {
            Operation::CancelOffer {
                sell,
                buy,
                min_price,
                offer_id,
            } => Some(CancelledOffer {
                sell,
                buy,
                key: OfferKey {
                    min_price,
                    account: self.source,
                    id: offer_id,
                },
            }),
            _ => None,
        }
    }

    /// The canonical bytes (what is signed and hashed).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(&mut out);
        out
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(TRANSACTION_VERSION);
        out.extend_from_slice(&self.source.0.to_be_bytes());
        out.extend_from_slice(&self.sequence.to_be_bytes());
        match self.operation {
            Operation::CreateAccount {
                new_account,
                public_key,
            } => {
                out.push(TAG_CREATE_ACCOUNT);
                out.extend_from_slice(&new_account.0.to_be_bytes());
                out.extend_from_slice(&public_key);
            }
            Operation::CreateOffer {
                sell,
                buy,
                amount,
                min_price,
            } => {
                out.push(TAG_CREATE_OFFER);
                out.extend_from_slice(&sell.0.to_be_bytes());
                out.extend_from_slice(&buy.0.to_be_bytes());
                out.extend_from_slice(&amount.to_be_bytes());
                out.extend_from_slice(&min_price.0.to_be_bytes());
            }
            Operation::CancelOffer {
                sell,
                buy,
                min_price,
                offer_id,
            } => {
                out.push(TAG_CANCEL_OFFER);
                out.extend_from_slice(&sell.0.to_be_bytes());
                out.extend_from_slice(&buy.0.to_be_bytes());
                out.extend_from_slice(&min_price.0.to_be_bytes());
                out.extend_from_slice(&offer_id.0.to_be_bytes());
            }
            Operation::Payment { to, asset, amount } => {
                out.push(TAG_PAYMENT);
                out.extend_from_slice(&to.0.to_be_bytes());
                out.extend_from_slice(&asset.0.to_be_bytes());
                out.extend_from_slice(&amount.to_be_bytes());
            }
            Operation::DepositToPayments {
                asset,
                amount,
                owner,
            } => {
                out.push(TAG_DEPOSIT_TO_PAYMENTS);
                out.extend_from_slice(&asset.0.to_be_bytes());
                out.extend_from_slice(&amount.to_be_bytes());
                out.extend_from_slice(&owner);
            }
            Operation::WithdrawFromPayments {
                output,
                certificate,
            } => {
                out.push(TAG_WITHDRAW_FROM_PAYMENTS);
                out.extend_from_slice(&output.id);
                out.extend_from_slice(&output.asset.0.to_be_bytes());
                out.extend_from_slice(&output.amount.to_be_bytes());
                out.extend_from_slice(&output.owner);
                out.extend_from_slice(&certificate.chain_id.to_be_bytes());
                out.extend_from_slice(&certificate.epoch.to_be_bytes());
                out.extend_from_slice(&certificate.signers.to_be_bytes());
                out.extend_from_slice(&certificate.aggregate);
            }
        }
    }

    /// Decodes exactly one transaction occupying all of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Transaction, DecodeError> {
        let mut reader = Reader::new(bytes);
        let transaction = reader.transaction()?;
        reader.finish()?;
        Ok(transaction)
    }
}

impl SignedTransaction {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        self.encode_into(&mut out);
        out
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        self.transaction.encode_into(out);
        out.extend_from_slice(&self.signature);
    }

    /// Decodes exactly one signed transaction occupying all of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<SignedTransaction, DecodeError> {
        let mut reader = Reader::new(bytes);
        let signed = reader.signed_transaction()?;
        reader.finish()?;
        Ok(signed)
    }

    /// Decodes a sequence of signed transactions, each prefixed by its length as a u16.
    pub fn decode_list(bytes: &[u8]) -> Result<Vec<SignedTransaction>, DecodeError> {
        let mut reader = Reader::new(bytes);
        let mut list = Vec::new();
        while !reader.is_empty() {
            let length = reader.u16()? as usize;
            let body = reader.take(length)?;
            list.push(SignedTransaction::decode(body)?);
        }
        Ok(list)
    }

    /// Encodes a list in the format [`SignedTransaction::decode_list`] reads.
    pub fn encode_list(list: &[SignedTransaction]) -> Vec<u8> {
        let mut out = Vec::with_capacity(list.len() * 130);
        let mut body = Vec::with_capacity(128);
        for signed in list {
            body.clear();
            signed.encode_into(&mut body);
            out.extend_from_slice(&(body.len() as u16).to_be_bytes());
            out.extend_from_slice(&body);
        }
        out
    }
}

/// The transaction grammar on top of the shared codec reader.
trait ReadTransaction {
    fn amount(&mut self) -> Result<u64, DecodeError>;
    fn limit_price(&mut self) -> Result<Price, DecodeError>;
    fn pair(&mut self) -> Result<(AssetId, AssetId), DecodeError>;
    fn transaction(&mut self) -> Result<Transaction, DecodeError>;
    fn signed_transaction(&mut self) -> Result<SignedTransaction, DecodeError>;
}

impl ReadTransaction for Reader<'_> {
    fn amount(&mut self) -> Result<u64, DecodeError> {
        match self.u64()? {
            0 => Err(DecodeError::ZeroAmount),
            amount if amount > MAX_AMOUNT => Err(DecodeError::AmountTooLarge(amount)),
            amount => Ok(amount),
        }
    }

    fn limit_price(&mut self) -> Result<Price, DecodeError> {
        let price = Price(self.u128()?);
        if !price.is_valid_limit() {
            return Err(DecodeError::LimitPrice);
        }
        Ok(price)
    }

    fn pair(&mut self) -> Result<(AssetId, AssetId), DecodeError> {
        let (sell, buy) = (AssetId(self.u16()?), AssetId(self.u16()?));
        if sell == buy {
            return Err(DecodeError::SameAsset(sell.0));
        }
        Ok((sell, buy))
    }

    fn transaction(&mut self) -> Result<Transaction, DecodeError> {
        let version = self.u8()?;
        if version != TRANSACTION_VERSION {
            return Err(DecodeError::Version(version));
        }
        let source = AccountId(self.u64()?);
        let sequence = self.u64()?;
        let operation = match self.u8()? {
            TAG_CREATE_ACCOUNT => Operation::CreateAccount {
                new_account: AccountId(self.u64()?),
                public_key: self.array()?,
            },
            TAG_CREATE_OFFER => {
                let (sell, buy) = self.pair()?;
                let amount = self.amount()?;
                Operation::CreateOffer {
                    sell,
                    buy,
                    amount,
                    min_price: self.limit_price()?,
                }
            }
            TAG_CANCEL_OFFER => {
                let (sell, buy) = self.pair()?;
                let min_price = self.limit_price()?;
                Operation::CancelOffer {
                    sell,
                    buy,
                    min_price,
                    offer_id: OfferId(self.u64()?),
                }
            }
            TAG_PAYMENT => Operation::Payment {
                to: AccountId(self.u64()?),
                asset: AssetId(self.u16()?),
                amount: self.amount()?,
            },
            TAG_DEPOSIT_TO_PAYMENTS => Operation::DepositToPayments {
                asset: AssetId(self.u16()?),
                amount: self.amount()?,
                owner: self.array()?,
            },
            TAG_WITHDRAW_FROM_PAYMENTS => Operation::WithdrawFromPayments {
                output: PaymentsOutput {
                    id: self.array()?,
                    asset: AssetId(self.u16()?),
                    amount: self.amount()?,
                    owner: self.array()?,
                },
                certificate: PaymentsCertificate {
                    chain_id: self.u64()?,
                    epoch: self.u64()?,
                    signers: self.u128()?,
                    aggregate: self.array()?,
                },
            },
            tag => return Err(DecodeError::UnknownOperation(tag)),
        };
        Ok(Transaction {
            source,
            sequence,
            operation,
        })
    }

    fn signed_transaction(&mut self) -> Result<SignedTransaction, DecodeError> {
        let transaction = self.transaction()?;
        Ok(SignedTransaction {
            transaction,
            signature: self.array()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn operation() -> impl Strategy<Value = Operation> {
        let price = (Price::MIN_LIMIT.0..=Price::MAX_LIMIT.0).prop_map(Price);
        let pair = (0u16..100, 0u16..100).prop_filter("distinct assets", |(a, b)| a != b);
        prop_oneof![
            (any::<u64>(), any::<[u8; 32]>()).prop_map(|(account, public_key)| {
                Operation::CreateAccount {
                    new_account: AccountId(account),
                    public_key,
                }
            }),
            (pair.clone(), 1..=MAX_AMOUNT, price.clone()).prop_map(
                |((s, b), amount, min_price)| {
                    Operation::CreateOffer {
                        sell: AssetId(s),
                        buy: AssetId(b),
                        amount,
                        min_price,
                    }
                }
            ),
            (pair, price, any::<u64>()).prop_map(|((s, b), min_price, id)| {
                Operation::CancelOffer {
                    sell: AssetId(s),
                    buy: AssetId(b),
                    min_price,
                    offer_id: OfferId(id),
                }
            }),
            (any::<u64>(), any::<u16>(), 1..=MAX_AMOUNT).prop_map(|(to, asset, amount)| {
                Operation::Payment {
                    to: AccountId(to),
                    asset: AssetId(asset),
                    amount,
                }
            }),
            (any::<u16>(), 1..=MAX_AMOUNT, any::<[u8; 32]>()).prop_map(|(asset, amount, owner)| {
                Operation::DepositToPayments {
                    asset: AssetId(asset),
                    amount,
                    owner,
                }
            }),
            (
                (
                    any::<[u8; 32]>(),
                    any::<u16>(),
                    1..=MAX_AMOUNT,
                    any::<[u8; 32]>()
                ),
                (
                    any::<u64>(),
                    any::<u64>(),
                    any::<u128>(),
                    any::<[u8; 32]>(),
                    any::<[u8; 32]>(),
                    any::<[u8; 32]>()
                ),
            )
                .prop_map(
                    |((id, asset, amount, owner), (chain_id, epoch, signers, a, b, c))| {
                        let mut aggregate = [0u8; 96];
                        aggregate[..32].copy_from_slice(&a);
                        aggregate[32..64].copy_from_slice(&b);
                        aggregate[64..].copy_from_slice(&c);
                        Operation::WithdrawFromPayments {
                            output: PaymentsOutput {
                                id,
                                asset: AssetId(asset),
                                amount,
                                owner,
                            },
                            certificate: PaymentsCertificate {
                                chain_id,
                                epoch,
                                signers,
                                aggregate,
                            },
                        }
                    }
                ),
        ]
    }

    fn signed() -> impl Strategy<Value = SignedTransaction> {
        (
            any::<u64>(),
            any::<u64>(),
            operation(),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
        )
            .prop_map(|(source, sequence, operation, low, high)| {
                let mut signature = [0u8; 64];
                signature[..32].copy_from_slice(&low);
                signature[32..].copy_from_slice(&high);
                SignedTransaction {
                    transaction: Transaction {
                        source: AccountId(source),
                        sequence,
                        operation,
                    },
                    signature,
                }
            })
    }

    proptest! {
        #[test]
        fn encoding_round_trips(signed in signed()) {
            let bytes = signed.encode();
            prop_assert_eq!(SignedTransaction::decode(&bytes), Ok(signed));
            prop_assert_eq!(Transaction::decode(&signed.transaction.encode()), Ok(signed.transaction));
        }

        #[test]
        fn lists_round_trip(list in proptest::collection::vec(signed(), 0..20)) {
            let bytes = SignedTransaction::encode_list(&list);
            prop_assert_eq!(SignedTransaction::decode_list(&bytes), Ok(list));
        }

        /// Arbitrary bytes decode to an error or to a transaction that re-encodes to them.
        #[test]
        fn decoding_is_canonical_and_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(signed) = SignedTransaction::decode(&bytes) {
                prop_assert_eq!(signed.encode(), bytes.clone());
            }
            let _ = SignedTransaction::decode_list(&bytes);
            let _ = Transaction::decode(&bytes);
        }

        #[test]
        fn truncation_and_trailing_bytes_are_errors(signed in signed(), cut in 1usize..40) {
            let bytes = signed.encode();
            let cut = cut.min(bytes.len());
            prop_assert!(SignedTransaction::decode(&bytes[..bytes.len() - cut]).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert_eq!(SignedTransaction::decode(&longer), Err(DecodeError::Codec(codec::DecodeError::TrailingBytes { extra: 1 })));
        }
    }

    #[test]
    fn invalid_fields_are_named() {
        let offer = Transaction {
            source: AccountId(1),
            sequence: 2,
            operation: Operation::CreateOffer {
                sell: AssetId(0),
                buy: AssetId(1),
                amount: 5,
                min_price: Price::ONE,
            },
        };
        let mut bytes = offer.encode();
        bytes[0] = 9;
        assert_eq!(Transaction::decode(&bytes), Err(DecodeError::Version(9)));
        let mut bytes = offer.encode();
        bytes[17] = 0x77;
        assert_eq!(
            Transaction::decode(&bytes),
            Err(DecodeError::UnknownOperation(0x77))
        );
        let mut bytes = offer.encode();
        bytes[21] = 0; // low byte of the buy asset: 1 -> 0
        assert_eq!(Transaction::decode(&bytes), Err(DecodeError::SameAsset(0)));
        let mut bytes = offer.encode();
        bytes[22..30].copy_from_slice(&0u64.to_be_bytes());
        assert_eq!(Transaction::decode(&bytes), Err(DecodeError::ZeroAmount));
    }
}
