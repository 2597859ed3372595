//! The market data of one block, as the gateway's feed publishes it at that height: what each
//! pair traded and the depth of each pair's resting book after the block.
//!
//! It travels twice: node → gateway in the seal reply ([`crate::link::SealReply`]) and gateway →
//! participant in the block frame ([`crate::frame::Downlink::Block`]), so one encoding serves
//! both. Participants must not need the node's HTTP feed (closed in gateway mode: it would let
//! them see block N before their release buffer delivers it).

use walras_types::codec::{self, count_within, Reader, Writer};

/// Price levels per pair in the depth (the lowest limit prices: the offers nearest to trading).
pub const DEPTH_LEVELS_MAX: usize = 5;
/// Pairs in one block's data (`u16` assets give at most 65,535 × 65,534 pairs; a block frame
/// must stay under the downlink limit, and a feed of this many pairs already does).
pub const MARKET_PAIRS_MAX: usize = 16_384;

/// What one pair traded in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairAmount {
    pub sell: u16,
    pub buy: u16,
    /// Amount of `sell` sold by the pair's offers (their payout follows from the valuations).
    pub sold: u64,
}

/// One price level of a resting book: the offers with one limit price.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthLevel {
    /// The limit price (fixed point, `walras_types::Price`'s 80 fraction bits).
    pub min_price: u128,
    pub amount: u64,
    pub offers: u32,
}

/// The resting offers selling `sell` for `buy` after the block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairDepth {
    pub sell: u16,
    pub buy: u16,
    /// Every resting offer of the pair (the levels hold only the first few prices).
    pub offers: u64,
    /// The lowest limit prices first, at most [`DEPTH_LEVELS_MAX`].
    pub levels: Vec<DepthLevel>,
}

/// A block's market data; pairs in (sell, buy) order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MarketData {
    pub trades: Vec<PairAmount>,
    pub depth: Vec<PairDepth>,
    /// More pairs had resting offers than [`MARKET_PAIRS_MAX`]: the depth holds the first ones.
    pub depth_truncated: bool,
}

impl MarketData {
    /// Within the encoding's limits (the node caps what it collects to them).
    pub fn within_limits(&self) -> bool {
        self.trades.len() <= MARKET_PAIRS_MAX
            && self.depth.len() <= MARKET_PAIRS_MAX
            && self
                .depth
                .iter()
                .all(|pair| pair.levels.len() <= DEPTH_LEVELS_MAX)
    }

    /// Appends the encoding; `None`, with nothing appended, if over the limits.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Option<()> {
        if !self.within_limits() {
            return None;
        }
        out.put_u32(self.trades.len() as u32);
        for trade in &self.trades {
            out.put_u16(trade.sell);
            out.put_u16(trade.buy);
            out.put_u64(trade.sold);
        }
        out.put_u8(u8::from(self.depth_truncated));
        out.put_u32(self.depth.len() as u32);
        for pair in &self.depth {
            out.put_u16(pair.sell);
            out.put_u16(pair.buy);
            out.put_u64(pair.offers);
            out.put_u8(pair.levels.len() as u8);
            for level in &pair.levels {
                out.put_u128(level.min_price);
                out.put_u64(level.amount);
                out.put_u32(level.offers);
            }
        }
        Some(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<MarketData, codec::DecodeError> {
        let trades_count = count_within(r.u32()?.into(), MARKET_PAIRS_MAX, "traded pairs")?;
        let trades = r.list(trades_count as u64, 12, |r| {
            Ok::<_, codec::DecodeError>(PairAmount {
                sell: r.u16()?,
                buy: r.u16()?,
                sold: r.u64()?,
            })
        })?;
        let depth_truncated = match r.u8()? {
            0 => false,
            1 => true,
            tag => {
                return Err(codec::DecodeError::BadTag {
                    what: "depth truncation flag",
                    tag,
                })
            }
        };
        let depth_count = count_within(r.u32()?.into(), MARKET_PAIRS_MAX, "pairs with depth")?;
        let depth = r.list(depth_count as u64, 13, |r| {
            let sell = r.u16()?;
            let buy = r.u16()?;
            let offers = r.u64()?;
            let levels_count =
                count_within(r.u8()?.into(), DEPTH_LEVELS_MAX, "depth levels of a pair")?;
            let levels = r.list(levels_count as u64, 28, |r| {
                Ok::<_, codec::DecodeError>(DepthLevel {
                    min_price: r.u128()?,
                    amount: r.u64()?,
                    offers: r.u32()?,
                })
            })?;
            Ok::<_, codec::DecodeError>(PairDepth {
                sell,
                buy,
                offers,
                levels,
            })
        })?;
        Ok(MarketData {
            trades,
            depth,
            depth_truncated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(levels: usize) -> PairDepth {
        PairDepth {
            sell: 0,
            buy: 1,
            offers: levels as u64,
            levels: vec![
                DepthLevel {
                    min_price: 1 << 80,
                    amount: 5,
                    offers: 1,
                };
                levels
            ],
        }
    }

    #[test]
    fn market_data_round_trips() {
        let data = MarketData {
            trades: vec![PairAmount {
                sell: 1,
                buy: 0,
                sold: 7,
            }],
            depth: vec![pair(DEPTH_LEVELS_MAX)],
            depth_truncated: false,
        };
        let mut out = Vec::new();
        data.encode_into(&mut out).unwrap();
        let mut reader = Reader::new(&out);
        assert_eq!(MarketData::decode(&mut reader).unwrap(), data);
        reader.finish().unwrap();
    }

    /// A pair over the level limit anywhere in the list refuses the whole encoding before a
    /// byte is written, so a caller falling back to other content never sends a torn frame.
    #[test]
    fn data_over_the_limits_appends_nothing() {
        let data = MarketData {
            trades: Vec::new(),
            depth: vec![pair(1), pair(DEPTH_LEVELS_MAX + 1)],
            depth_truncated: false,
        };
        let mut out = vec![9u8];
        assert_eq!(data.encode_into(&mut out), None);
        assert_eq!(out, vec![9u8]);
    }
}
