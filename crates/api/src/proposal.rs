//! A Walras block as CometBFT carries it: the block's transactions are CometBFT's `txs`, and
//! the proposer's clearing result (SPEEDEX K.3: valuations, amounts sold, last offers per
//! pair) rides in front of them as one more `tx`, tagged so that it can never be a
//! transaction:
//!
//! ```text
//! txs[0]   = HEADER_TAG ‖ BlockHeader::encode()   (state root zero: not known before execution)
//! txs[1..] = entries, each either
//!            SignedTransaction::encode()                       (one transaction), or
//!            BUNDLE_TAG ‖ SignedTransaction::encode_list(…)    (a bundle: 1 to BUNDLE_TXS_MAX)
//! ```
//!
//! The block's transactions are the entries' transactions in order, bundles flattened: the
//! Walras block (its transactions root, its execution) is the same whichever way they were
//! carried. Bundles exist because CometBFT's mempool, gossip and CheckTx cost per CometBFT
//! transaction: a node forwards what its API admitted as bundles, and each inner transaction
//! is still judged alone by CheckTx and by the engine's filter.
//!
//! Every transaction encoding starts with its version byte (1); both tags start with `W`, so
//! a tag-shaped entry is never a transaction and a proposal cannot hide a header among its
//! transactions.

use bytes::Bytes;
use walras_engine::{Block, BlockHeader};
use walras_engine::{BlockDecodeError, TRADE_BYTES};
use walras_types::{DecodeError, SignedTransaction};

/// Marks the header entry of a proposal.
pub const HEADER_TAG: &[u8] = b"WALRAS-HEADER/1\0";
/// Marks a bundle entry: many transactions in one CometBFT transaction.
pub const BUNDLE_TAG: &[u8] = b"WALRAS-BUNDLE/1\0";
/// Transactions one bundle may carry: the forwarder's bundles are at most this, and a bundle
/// over it is malformed (CheckTx refuses it, a proposal holding it does not decode).
pub const BUNDLE_TXS_MAX: usize = 1024;

/// Why one entry (a CometBFT transaction) is neither a transaction nor a bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("{0}")]
    Transaction(DecodeError),
    #[error("bundle: {0}")]
    Bundle(DecodeError),
    #[error("bundle of {count} transactions: a bundle holds 1 to {max}")]
    BundleSize { count: usize, max: usize },
}

/// Why CometBFT `txs` are not a Walras block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    /// No entries at all: every Walras block has a header.
    #[error("the proposal has no entries (no Walras header)")]
    Empty,
    /// The first entry lacks [`HEADER_TAG`].
    #[error("the proposal's first entry is not a Walras block header")]
    NoHeader,
    #[error("the proposal's header: {0}")]
    Header(BlockDecodeError),
    #[error("the proposal's entry {index}: {error}")]
    Entry { index: usize, error: EntryError },
    /// The header is for another height than the one CometBFT is deciding.
    #[error("the proposal's header is for height {header}, consensus decides height {consensus}")]
    Height { header: u64, consensus: u64 },
}

/// The `txs` of a proposal for `block`.
pub fn encode(header: &BlockHeader, transactions: &[Bytes]) -> Vec<Bytes> {
    let mut first = HEADER_TAG.to_vec();
    first.extend_from_slice(&header.encode());
    let mut txs = Vec::with_capacity(transactions.len() + 1);
    txs.push(Bytes::from(first));
    txs.extend(transactions.iter().cloned());
    txs
}

/// One bundle entry carrying `transactions` (1 to [`BUNDLE_TXS_MAX`] of them).
pub fn encode_bundle(transactions: &[SignedTransaction]) -> Bytes {
    debug_assert!((1..=BUNDLE_TXS_MAX).contains(&transactions.len()));
    let mut entry = BUNDLE_TAG.to_vec();
    entry.extend_from_slice(&SignedTransaction::encode_list(transactions));
    Bytes::from(entry)
}

/// The transactions of one entry: a transaction, or a bundle's in order; never panics.
pub fn decode_entry(entry: &[u8]) -> Result<Vec<SignedTransaction>, EntryError> {
    let Some(list) = entry.strip_prefix(BUNDLE_TAG) else {
        return SignedTransaction::decode(entry)
            .map(|signed| vec![signed])
            .map_err(EntryError::Transaction);
    };
    let transactions = SignedTransaction::decode_list(list).map_err(EntryError::Bundle)?;
    if transactions.is_empty() || transactions.len() > BUNDLE_TXS_MAX {
        return Err(EntryError::BundleSize {
            count: transactions.len(),
            max: BUNDLE_TXS_MAX,
        });
    }
    Ok(transactions)
}

/// Whether an entry is a bundle (by its tag; it may still fail to decode).
pub fn is_bundle(entry: &[u8]) -> bool {
    entry.starts_with(BUNDLE_TAG)
}

/// The block in a proposal's `txs` for consensus height `height`; never panics.
pub fn decode(txs: &[Bytes], height: i64) -> Result<Block, ProposalError> {
    decode_with_entries(txs, height).map(|(block, _)| block)
}

/// [`decode`], with how many of the block's transactions each entry carried (in order).
pub fn decode_with_entries(
    txs: &[Bytes],
    height: i64,
) -> Result<(Block, Vec<usize>), ProposalError> {
    let (first, rest) = txs.split_first().ok_or(ProposalError::Empty)?;
    let encoded = first
        .strip_prefix(HEADER_TAG)
        .ok_or(ProposalError::NoHeader)?;
    let header = BlockHeader::decode(encoded).map_err(ProposalError::Header)?;
    if height < 0 || header.height != height as u64 {
        return Err(ProposalError::Height {
            header: header.height,
            consensus: height.max(0) as u64,
        });
    }
    let mut transactions = Vec::with_capacity(rest.len());
    let mut entry_counts = Vec::with_capacity(rest.len());
    for (index, entry) in rest.iter().enumerate() {
        let carried = decode_entry(entry).map_err(|error| ProposalError::Entry { index, error })?;
        entry_counts.push(carried.len());
        transactions.extend(carried);
    }
    debug_assert_eq!(entry_counts.iter().sum::<usize>(), transactions.len());
    let block = Block {
        header,
        transactions,
    };
    Ok((block, entry_counts))
}

/// Bytes the header entry can take for `assets` assets: every ordered pair trading.
pub fn header_bytes_max(assets: usize) -> usize {
    HEADER_TAG.len() + 110 + 8 * assets + TRADE_BYTES * assets * assets.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use walras_crypto::Hash;

    fn header(height: u64) -> BlockHeader {
        BlockHeader {
            height,
            previous: Hash([1; 32]),
            transactions_root: Hash([2; 32]),
            state_root: Hash::default(),
            valuations: vec![5, 6, 7],
            trades: vec![walras_engine::PairTrade {
                sell: walras_types::AssetId(0),
                buy: walras_types::AssetId(2),
                sold: 40,
                last_offer: walras_types::OfferKey {
                    min_price: walras_types::Price::parse_limit("2").unwrap(),
                    account: walras_types::AccountId(1),
                    id: walras_types::OfferId(1),
                },
            }],
        }
    }

    #[test]
    fn a_proposal_round_trips() {
        let txs = encode(&header(3), &[]);
        let block = decode(&txs, 3).unwrap();
        assert_eq!(block.header, header(3));
        assert!(block.transactions.is_empty());
        assert!(txs[0].len() <= header_bytes_max(3));
    }

    #[test]
    fn a_header_for_another_height_or_a_missing_tag_is_refused() {
        let txs = encode(&header(3), &[]);
        assert_eq!(
            decode(&txs, 4),
            Err(ProposalError::Height {
                header: 3,
                consensus: 4
            })
        );
        assert_eq!(decode(&[], 1), Err(ProposalError::Empty));
        let untagged = vec![Bytes::from(header(3).encode())];
        assert_eq!(decode(&untagged, 3), Err(ProposalError::NoHeader));
    }

    fn payment(source: u64, sequence: u64) -> SignedTransaction {
        SignedTransaction {
            transaction: walras_types::Transaction {
                source: walras_types::AccountId(source),
                sequence,
                operation: walras_types::Operation::Payment {
                    to: walras_types::AccountId(source + 1),
                    asset: walras_types::AssetId(0),
                    amount: 1 + sequence,
                },
            },
            signature: [sequence as u8; 64],
        }
    }

    #[test]
    fn a_bundle_of_none_or_of_too_many_transactions_is_malformed() {
        let empty: Vec<u8> = BUNDLE_TAG.to_vec();
        assert_eq!(
            decode_entry(&empty),
            Err(EntryError::BundleSize {
                count: 0,
                max: BUNDLE_TXS_MAX
            })
        );
        let many: Vec<SignedTransaction> =
            (0..=BUNDLE_TXS_MAX as u64).map(|i| payment(1, i)).collect();
        let mut over = BUNDLE_TAG.to_vec();
        over.extend_from_slice(&SignedTransaction::encode_list(&many));
        assert!(matches!(
            decode_entry(&over),
            Err(EntryError::BundleSize { count, .. }) if count == BUNDLE_TXS_MAX + 1
        ));
        assert_eq!(decode_entry(&encode_bundle(&many[1..])).unwrap(), many[1..]);
    }

    #[test]
    fn a_bundle_cannot_carry_a_bundle_or_a_header() {
        let inner = encode_bundle(&[payment(1, 1)]);
        let mut nested = BUNDLE_TAG.to_vec();
        nested.extend_from_slice(&(inner.len() as u16).to_be_bytes());
        nested.extend_from_slice(&inner);
        assert!(matches!(decode_entry(&nested), Err(EntryError::Bundle(_))));
        let header_entry = encode(&header(3), &[]).remove(0);
        assert!(decode_entry(&header_entry).is_err());
        assert!(decode_entry(BUNDLE_TAG).is_err());
    }

    proptest! {
        /// Whichever way transactions are carried (one per entry, bundles of any size, or a
        /// mix), the decoded block holds them in the entries' order and the entry counts
        /// say which entry carried which.
        #[test]
        fn bundles_flatten_to_the_same_block_in_order(sizes in proptest::collection::vec(0usize..6, 0..8)) {
            let mut entries = Vec::new();
            let mut expected = Vec::new();
            let mut counts = Vec::new();
            for (index, size) in sizes.iter().enumerate() {
                let carried: Vec<SignedTransaction> =
                    (0..(*size).max(1) as u64).map(|i| payment(index as u64, i)).collect();
                if *size == 0 {
                    entries.push(Bytes::from(carried[0].encode()));
                } else {
                    entries.push(encode_bundle(&carried));
                }
                counts.push(carried.len());
                expected.extend(carried);
            }
            let txs = encode(&header(3), &entries);
            let (block, entry_counts) = decode_with_entries(&txs, 3).unwrap();
            prop_assert_eq!(block.transactions, expected);
            prop_assert_eq!(entry_counts, counts);
        }

        #[test]
        fn arbitrary_bundle_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut entry = BUNDLE_TAG.to_vec();
            entry.extend_from_slice(&body);
            if let Ok(transactions) = decode_entry(&entry) {
                prop_assert!((1..=BUNDLE_TXS_MAX).contains(&transactions.len()));
                prop_assert_eq!(encode_bundle(&transactions), Bytes::from(entry));
            }
        }

        #[test]
        fn arbitrary_entries_never_panic(entries in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6), tagged in any::<bool>(), height in any::<i64>()) {
            let mut txs: Vec<Bytes> = entries.into_iter().map(Bytes::from).collect();
            if tagged && !txs.is_empty() {
                let mut first = HEADER_TAG.to_vec();
                first.extend_from_slice(&txs[0]);
                txs[0] = Bytes::from(first);
            }
            let _ = decode(&txs, height);
        }
    }
}
