//! Blocks and their headers.
//!
//! A block is a *set* of transactions: its effect does not depend on their order, and its
//! transaction root is a Merkle root over the transaction hashes sorted. The header carries the
//! clearing result — valuations and, per traded pair, the amount sold and the key of the last
//! offer that traded (SPEEDEX K.3) — so a follower can check it exactly without re-running
//! tâtonnement.
//!
//! Encoding (big-endian):
//!
//! ```text
//! header := height:u64 previous:[32] transactions_root:[32] state_root:[32]
//!           assets:u16 valuation:u128 * assets
//!           trades:u32 (sell:u16 buy:u16 sold:u64 price:u128 account:u64 offer:u64) * trades
//! block  := header transaction_list        (see SignedTransaction::encode_list)
//! ```

use walras_crypto::{hash_in, merkle_root, Domain, Hash};
use walras_types::codec::{self, Reader, Writer};
use walras_types::{AccountId, AssetId, OfferId, OfferKey, Price, SignedTransaction, MAX_ASSETS};

/// Encoded bytes of one [`PairTrade`]: sell, buy, sold, limit price, account, offer id.
pub const TRADE_BYTES: usize = 2 + 2 + 8 + 16 + 8 + 8;

/// The most trades a header carries: one per ordered pair of distinct assets (the decoder
/// requires strict pair order). Encoded as a `u32` count.
pub(crate) const HEADER_TRADES_MAX: usize = MAX_ASSETS * (MAX_ASSETS - 1);
const _: () = assert!(HEADER_TRADES_MAX <= u32::MAX as usize);

pub(crate) const HEADER_DOMAIN: Domain = Domain::new("walras/header");
pub(crate) use walras_crypto::domain::TRANSACTION as TRANSACTION_DOMAIN;

/// What one pair traded in a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairTrade {
    pub sell: AssetId,
    pub buy: AssetId,
    /// Amount of `sell` sold by the pair's offers.
    pub sold: u64,
    /// The last offer (in canonical order) that traded, fully or partially.
    pub last_offer: OfferKey,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    pub height: u64,
    pub previous: Hash,
    pub transactions_root: Hash,
    pub state_root: Hash,
    /// Clearing valuations, one per asset (raw [`walras_types::Valuation`]s: only their ratios
    /// mean anything).
    pub valuations: Vec<u128>,
    /// Traded pairs in pair order.
    pub trades: Vec<PairTrade>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub header: BlockHeader,
    pub transactions: Vec<SignedTransaction>,
}

/// Why bytes are not a block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockDecodeError {
    /// Truncated or trailing bytes.
    #[error("block header {0}")]
    Codec(#[from] codec::DecodeError),
    #[error("block transactions: {0}")]
    Transactions(walras_types::DecodeError),
    #[error("trade names an offer with an invalid price")]
    LimitPrice,
    #[error("header trades are not in strict pair order")]
    Unsorted,
    #[error("{0} header trades: at most {HEADER_TRADES_MAX} (one per ordered pair of assets)")]
    TooManyTrades(usize),
}

impl BlockHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(110 + 16 * self.valuations.len() + TRADE_BYTES * self.trades.len());
        out.put_u64(self.height);
        out.put_bytes(self.previous.as_bytes());
        out.put_bytes(self.transactions_root.as_bytes());
        out.put_bytes(self.state_root.as_bytes());
        out.put_u16(self.valuations.len() as u16);
        for &valuation in &self.valuations {
            out.put_u128(valuation);
        }
        // Every header the engine builds or the decoder accepts has at most one trade per pair.
        assert!(
            self.trades.len() <= HEADER_TRADES_MAX,
            "{} header trades over HEADER_TRADES_MAX",
            self.trades.len()
        );
        out.put_u32(self.trades.len() as u32);
        for trade in &self.trades {
            out.put_u16(trade.sell.0);
            out.put_u16(trade.buy.0);
            out.put_u64(trade.sold);
            out.put_u128(trade.last_offer.min_price.0);
            out.put_u64(trade.last_offer.account.0);
            out.put_u64(trade.last_offer.id.0);
        }
        out
    }

    pub fn hash(&self) -> Hash {
        hash_in(HEADER_DOMAIN, &self.encode())
    }

    /// Decodes a header occupying all of `bytes`; never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<BlockHeader, BlockDecodeError> {
        let mut reader = Reader::new(bytes);
        let header = read_header(&mut reader)?;
        reader.finish()?;
        Ok(header)
    }
}

impl Block {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.header.encode();
        out.extend_from_slice(&SignedTransaction::encode_list(&self.transactions));
        out
    }

    /// Decodes a block; never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<Block, BlockDecodeError> {
        let mut reader = Reader::new(bytes);
        let header = read_header(&mut reader)?;
        let transactions = SignedTransaction::decode_list(reader.rest())
            .map_err(BlockDecodeError::Transactions)?;
        Ok(Block {
            header,
            transactions,
        })
    }
}

/// The hash of one transaction (what the transaction root commits to).
pub fn transaction_hash(transaction: &SignedTransaction) -> Hash {
    hash_in(TRANSACTION_DOMAIN, &transaction.encode())
}

/// Merkle root over transaction hashes, sorted first, on up to `threads` threads (the root
/// does not depend on the thread count: see `walras_crypto::merkle_root`).
pub(crate) fn root_of_hashes(mut hashes: Vec<Hash>, threads: usize) -> Hash {
    crate::parallel::sort_unstable(&mut hashes, threads);
    match merkle_root(&hashes, threads) {
        Ok(root) => root,
        Err(_) => hash_in(TRANSACTION_DOMAIN, b""), // no transactions
    }
}

fn read_header(reader: &mut Reader<'_>) -> Result<BlockHeader, BlockDecodeError> {
    let height = reader.u64()?;
    let previous = Hash(reader.array()?);
    let transactions_root = Hash(reader.array()?);
    let state_root = Hash(reader.array()?);
    let assets = reader.u16()?;
    let valuations = reader.list(assets.into(), 16, Reader::u128)?;
    let trade_count = reader.u32()? as usize;
    if trade_count > HEADER_TRADES_MAX {
        return Err(BlockDecodeError::TooManyTrades(trade_count));
    }
    // Refuse counts the input cannot hold before allocating. (This once said 52 bytes a
    // trade, which refused every header with trades and no transactions after it.)
    reader.ensure_items(trade_count, TRADE_BYTES)?;
    let mut trades: Vec<PairTrade> = Vec::with_capacity(trade_count);
    for _ in 0..trade_count {
        let trade = read_trade(reader)?;
        if let Some(previous) = trades.last() {
            if (previous.sell, previous.buy) >= (trade.sell, trade.buy) {
                return Err(BlockDecodeError::Unsorted);
            }
        }
        trades.push(trade);
    }
    Ok(BlockHeader {
        height,
        previous,
        transactions_root,
        state_root,
        valuations,
        trades,
    })
}

fn read_trade(reader: &mut Reader<'_>) -> Result<PairTrade, BlockDecodeError> {
    let sell = AssetId(reader.u16()?);
    let buy = AssetId(reader.u16()?);
    let sold = reader.u64()?;
    let min_price = Price(reader.u128()?);
    if !min_price.is_valid_limit() {
        return Err(BlockDecodeError::LimitPrice);
    }
    let account = AccountId(reader.u64()?);
    let id = OfferId(reader.u64()?);
    Ok(PairTrade {
        sell,
        buy,
        sold,
        last_offer: OfferKey {
            min_price,
            account,
            id,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header whose trade count is over `HEADER_TRADES_MAX` is refused by its count, before
    /// anything is read or reserved for the trades.
    #[test]
    fn a_header_claiming_more_trades_than_pairs_is_refused() {
        let header = BlockHeader {
            height: 1,
            previous: Hash([1; 32]),
            transactions_root: Hash([2; 32]),
            state_root: Hash([3; 32]),
            valuations: vec![1, 2],
            trades: Vec::new(),
        };
        let mut bytes = header.encode();
        assert_eq!(BlockHeader::decode(&bytes), Ok(header));
        let count_at = bytes.len() - 4;
        for (count, refused) in [
            (HEADER_TRADES_MAX + 1, true),
            (u32::MAX as usize, true),
            (HEADER_TRADES_MAX, false),
        ] {
            bytes[count_at..].copy_from_slice(&(count as u32).to_be_bytes());
            let decoded = BlockHeader::decode(&bytes);
            if refused {
                assert_eq!(decoded, Err(BlockDecodeError::TooManyTrades(count)));
            } else {
                // Within the cap, the count is checked against the bytes that follow.
                assert!(matches!(
                    decoded,
                    Err(BlockDecodeError::Codec(
                        codec::DecodeError::Truncated { .. }
                    ))
                ));
            }
        }
    }

    /// The header layout of the module documentation, byte for byte (written out by hand, not
    /// by the encoder), and a block of it round-trips through the shared codec reader.
    #[test]
    fn the_header_encoding_is_the_documented_layout() {
        let header = BlockHeader {
            height: 7,
            previous: Hash([1; 32]),
            transactions_root: Hash([2; 32]),
            state_root: Hash([3; 32]),
            valuations: vec![1 << 100, 5],
            trades: vec![PairTrade {
                sell: AssetId(0),
                buy: AssetId(1),
                sold: 1000,
                last_offer: OfferKey {
                    min_price: Price::ONE,
                    account: AccountId(9),
                    id: OfferId(11),
                },
            }],
        };
        let golden = concat!(
            "0000000000000007",
            "0101010101010101010101010101010101010101010101010101010101010101",
            "0202020202020202020202020202020202020202020202020202020202020202",
            "0303030303030303030303030303030303030303030303030303030303030303",
            "0002",
            "00000010000000000000000000000000",
            "00000000000000000000000000000005",
            "00000001",
            "0000",
            "0001",
            "00000000000003e8",
            "00000000000100000000000000000000",
            "0000000000000009",
            "000000000000000b",
        );
        let bytes = header.encode();
        assert_eq!(hex(&bytes), golden);
        assert_eq!(BlockHeader::decode(&bytes), Ok(header.clone()));
        let block = Block {
            header,
            transactions: Vec::new(),
        };
        assert_eq!(block.encode(), bytes);
        assert_eq!(Block::decode(&bytes), Ok(block));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            BlockHeader::decode(&longer),
            Err(BlockDecodeError::Codec(codec::DecodeError::TrailingBytes {
                extra: 1
            }))
        );
        for cut in 0..bytes.len() {
            assert!(matches!(
                BlockHeader::decode(&bytes[..cut]),
                Err(BlockDecodeError::Codec(
                    codec::DecodeError::Truncated { .. }
                ))
            ));
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}
