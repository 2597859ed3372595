//! A Walras block as CometBFT carries it: the block's transactions are CometBFT's `txs`, and
//! the proposer's clearing result (SPEEDEX K.3: valuations, amounts sold, last offers per
//! pair) rides in front of them as one more `tx`, tagged so that it can never be a
//! transaction:
//!
//! ```text
//! txs[0]  = HEADER_TAG ‖ BlockHeader::encode()   (state root zero: not known before execution)
//! txs[1..] = SignedTransaction::encode()          (one each)
//! ```
//!
//! Every transaction encoding starts with its version byte (1); the tag starts with `W`, so
//! CheckTx refuses a tag-shaped transaction and a proposal cannot hide a header among its
//! transactions.

use bytes::Bytes;
use walras_engine::{Block, BlockHeader};
use walras_engine::{BlockDecodeError, TRADE_BYTES};
use walras_types::{DecodeError, SignedTransaction};

/// Marks the header entry of a proposal.
pub const HEADER_TAG: &[u8] = b"WALRAS-HEADER/1\0";

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
    #[error("the proposal's transaction {index}: {error}")]
    Transaction { index: usize, error: DecodeError },
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

/// The block in a proposal's `txs` for consensus height `height`; never panics.
pub fn decode(txs: &[Bytes], height: i64) -> Result<Block, ProposalError> {
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
    let transactions = rest
        .iter()
        .enumerate()
        .map(|(index, tx)| {
            SignedTransaction::decode(tx)
                .map_err(|error| ProposalError::Transaction { index, error })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Block {
        header,
        transactions,
    })
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

    proptest! {
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
