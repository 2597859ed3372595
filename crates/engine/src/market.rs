//! Reference prices: what the market last traded at, carried forward from block to block.
//!
//! A block's clearing valuations mean something only for the assets that traded in it, and
//! only relative to assets they traded with (directly or through other traded pairs of the
//! same block). After a block holding only payments every valuation is the tâtonnement's
//! starting point, which is not a price. So a trader's "latest price" is kept apart from the
//! block's valuations:
//!
//! - per ordered pair, the exchange rate of the last block in which the pair traded (the
//!   clearing rate `floor(p_sell · 2^80 / p_buy)`, before commission) and that block's height;
//! - per asset, the height of the last block in which it traded, and its price in units of
//!   asset 0. Within one block, valuations share one scale only across a connected group of
//!   traded pairs. A group holding asset 0 is priced against it directly; another group is
//!   priced through the last price of its lowest asset that has one (the group's rates from
//!   this block, that asset's level from the block that priced it); a group with neither is
//!   not priced. An asset never priced so has no price: it is marked, not given a number.
//!
//! The record is a pure function of the sequence of block headers since `since_height`: every
//! node that applies the same blocks holds the same record. It is not part of the state root
//! (it adds nothing a header does not already commit to); checkpoints carry it so that a
//! restart does not need the whole history. A state restored from a checkpoint of the earlier
//! format starts an empty record at the checkpoint's height, and says so (`since_height`).

use crate::block::BlockHeader;
use ethnum::U256;
use std::collections::BTreeMap;
use walras_types::codec::{DecodeError, Reader, Writer};
use walras_types::{Price, Valuation};

/// A rate and the height of the block that traded at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastTrade {
    /// Q48.80: units of the second asset per unit of the first.
    pub rate: Price,
    pub height: u64,
}

/// What the market knows of one asset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AssetMarket {
    /// The last block in which an offer sold or bought the asset; `None` if none since
    /// `since_height`.
    pub last_traded_height: Option<u64>,
    /// Units of asset 0 per unit of this asset, from the last block where it traded in the
    /// same group of traded pairs as asset 0.
    pub price_in_asset0: Option<LastTrade>,
}

/// Reference prices carried forward (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarketPrices {
    since_height: u64,
    assets: Vec<AssetMarket>,
    pairs: BTreeMap<(u16, u16), LastTrade>,
}

/// Why checkpoint bytes do not hold a market record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarketDecodeError {
    #[error("{0}")]
    Codec(#[from] DecodeError),
    #[error("market record: {0}")]
    Invalid(&'static str),
}

impl MarketPrices {
    /// An empty record that is complete from `since_height` on (0: from genesis).
    pub fn new(assets: usize, since_height: u64) -> MarketPrices {
        MarketPrices {
            since_height,
            assets: vec![AssetMarket::default(); assets],
            pairs: BTreeMap::new(),
        }
    }

    /// The height after which every block is reflected (0: since genesis).
    pub fn since_height(&self) -> u64 {
        self.since_height
    }

    /// Per asset, in asset order.
    pub fn assets(&self) -> &[AssetMarket] {
        &self.assets
    }

    /// Per ordered pair that traded, in pair order.
    pub fn pairs(&self) -> impl Iterator<Item = ((u16, u16), LastTrade)> + '_ {
        self.pairs.iter().map(|(pair, trade)| (*pair, *trade))
    }

    /// The last trade of one ordered pair.
    pub fn pair(&self, sell: u16, buy: u16) -> Option<LastTrade> {
        self.pairs.get(&(sell, buy)).copied()
    }

    /// Carries the record past one applied block. A header with no trades changes nothing.
    pub fn record(&mut self, header: &BlockHeader) {
        let traded = header
            .trades
            .iter()
            .map(|trade| (trade.sell.0, trade.buy.0));
        self.record_clearing(header.height, &header.valuations, traded);
    }

    /// [`MarketPrices::record`] for one clearing given by its valuations and the ordered pairs
    /// that traded at `height` (what `walras clear` reports for a batch outside any chain).
    pub fn record_clearing(
        &mut self,
        height: u64,
        valuations: &[u128],
        traded: impl Iterator<Item = (u16, u16)>,
    ) {
        if valuations.len() != self.assets.len() {
            return;
        }
        let valuation = |asset: u16| Valuation(valuations[asset as usize]);
        let mut groups = Groups::new(self.assets.len());
        for (sell, buy) in traded {
            let rate = valuation(sell).rate_to(valuation(buy));
            self.pairs.insert((sell, buy), LastTrade { rate, height });
            groups.join(sell as usize, buy as usize);
            for asset in [sell, buy] {
                self.assets[asset as usize].last_traded_height = Some(height);
            }
        }
        for group in groups.traded_groups(&self.assets, height) {
            self.price_group(&group, height, &valuation);
        }
    }

    /// Prices one group of assets that traded together in a block: against asset 0 when it is
    /// in the group, else chained through the last price of the group's lowest asset that has
    /// one; a group with neither stays unpriced.
    fn price_group(&mut self, group: &[usize], height: u64, valuation: &impl Fn(u16) -> Valuation) {
        let anchor = if group.contains(&0) {
            Some((0, Price::ONE))
        } else {
            group.iter().find_map(|&asset| {
                self.assets[asset]
                    .price_in_asset0
                    .map(|price| (asset, price.rate))
            })
        };
        let Some((anchor, anchor_price)) = anchor else {
            return;
        };
        for &asset in group {
            let to_anchor = valuation(asset as u16).rate_to(valuation(anchor as u16));
            self.assets[asset].price_in_asset0 = Some(LastTrade {
                rate: times(to_anchor, anchor_price),
                height,
            });
        }
    }

    /// Appends the record to checkpoint bytes:
    /// `since:u64 (last_traded:u64 price:u128 price_height:u64)*assets
    /// pair_count:u32 (sell:u16 buy:u16 rate:u128 height:u64)*` (pairs ascending; a height of 0
    /// means none).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.since_height);
        for asset in &self.assets {
            out.put_u64(asset.last_traded_height.unwrap_or(0));
            let price = asset.price_in_asset0;
            out.put_u128(price.map_or(0, |trade| trade.rate.0));
            out.put_u64(price.map_or(0, |trade| trade.height));
        }
        out.put_u32(u32::try_from(self.pairs.len()).expect("at most MAX_ASSETS² pairs"));
        for ((sell, buy), trade) in &self.pairs {
            out.put_u16(*sell);
            out.put_u16(*buy);
            out.put_u128(trade.rate.0);
            out.put_u64(trade.height);
        }
    }

    /// Reads [`Self::encode`]'s bytes for a state of `assets` assets at `height`, refusing
    /// anything a real record cannot hold (heights beyond `height`, pairs out of range or
    /// order).
    pub fn decode(
        reader: &mut Reader<'_>,
        assets: usize,
        height: u64,
    ) -> Result<MarketPrices, MarketDecodeError> {
        let since_height = reader.u64()?;
        if since_height > height {
            return Err(MarketDecodeError::Invalid(
                "starts after the state's height",
            ));
        }
        let mut record = MarketPrices::new(assets, since_height);
        for asset in &mut record.assets {
            asset.last_traded_height = read_height(reader, height)?;
            let rate = Price(reader.u128()?);
            asset.price_in_asset0 = match read_height(reader, height)? {
                Some(at) => Some(LastTrade { rate, height: at }),
                // One encoding per record: no price is written as a zero rate.
                None if rate.0 != 0 => {
                    return Err(MarketDecodeError::Invalid("a price without a height"))
                }
                None => None,
            };
        }
        let count = reader.u32()? as usize;
        reader.ensure_items(count, 2 + 2 + 16 + 8)?;
        let mut previous: Option<(u16, u16)> = None;
        for _ in 0..count {
            let pair = (reader.u16()?, reader.u16()?);
            let rate = Price(reader.u128()?);
            let at = read_height(reader, height)?
                .ok_or(MarketDecodeError::Invalid("a pair traded at height 0"))?;
            if pair.0 == pair.1 || pair.0 as usize >= assets || pair.1 as usize >= assets {
                return Err(MarketDecodeError::Invalid("a pair outside the assets"));
            }
            if previous.is_some_and(|before| before >= pair) {
                return Err(MarketDecodeError::Invalid("pairs out of order"));
            }
            previous = Some(pair);
            record.pairs.insert(pair, LastTrade { rate, height: at });
        }
        Ok(record)
    }
}

/// `a · b` of two Q48.80 rates, rounded down, saturating at the largest rate.
fn times(a: Price, b: Price) -> Price {
    let product = (U256::from(a.0) * U256::from(b.0)) >> Price::FRAC_BITS;
    Price(u128::try_from(product).unwrap_or(Price::MAX_RATE.0))
}

/// A height field: 0 for none, else at most the state's height.
fn read_height(reader: &mut Reader<'_>, height: u64) -> Result<Option<u64>, MarketDecodeError> {
    match reader.u64()? {
        0 => Ok(None),
        at if at <= height => Ok(Some(at)),
        _ => Err(MarketDecodeError::Invalid("a height after the state's")),
    }
}

/// Connected groups of assets joined by one block's traded pairs (union–find; at most
/// `MAX_ASSETS` members, so no balancing is needed).
struct Groups {
    parent: Vec<usize>,
}

impl Groups {
    fn new(assets: usize) -> Groups {
        Groups {
            parent: (0..assets).collect(),
        }
    }

    fn root(&self, mut asset: usize) -> usize {
        while self.parent[asset] != asset {
            asset = self.parent[asset];
        }
        asset
    }

    /// The groups of assets that traded at `height`, each in ascending asset order, the groups
    /// ordered by their lowest asset.
    fn traded_groups(&self, assets: &[AssetMarket], height: u64) -> Vec<Vec<usize>> {
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (asset, known) in assets.iter().enumerate() {
            if known.last_traded_height == Some(height) {
                groups.entry(self.root(asset)).or_default().push(asset);
            }
        }
        groups.into_values().collect()
    }

    fn join(&mut self, a: usize, b: usize) {
        let (root_a, root_b) = (self.root(a), self.root(b));
        // The smaller index as root: the result does not depend on the order of joins.
        let (low, high) = (root_a.min(root_b), root_a.max(root_b));
        self.parent[high] = low;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::PairTrade;
    use walras_crypto::Hash;
    use walras_types::{AccountId, AssetId, OfferId, OfferKey};

    fn header(height: u64, valuations: Vec<u128>, pairs: &[(u16, u16)]) -> BlockHeader {
        BlockHeader {
            height,
            previous: Hash::default(),
            transactions_root: Hash::default(),
            state_root: Hash::default(),
            valuations,
            trades: pairs
                .iter()
                .map(|&(sell, buy)| PairTrade {
                    sell: AssetId(sell),
                    buy: AssetId(buy),
                    sold: 10,
                    last_offer: OfferKey {
                        min_price: Price::ONE,
                        account: AccountId(1),
                        id: OfferId(1),
                    },
                })
                .collect(),
        }
    }

    /// Trigger: after a block holding only a payment, `query prices` showed every valuation
    /// as 1.000000 while the books still held resting offers (issue 28, item 2).
    #[test]
    fn a_block_without_trades_leaves_the_last_traded_prices_in_place() {
        let mut market = MarketPrices::new(3, 0);
        market.record(&header(
            1,
            vec![4 << 40, 8 << 40, 1 << 40],
            &[(0, 1), (1, 0)],
        ));
        let before = market.clone();
        market.record(&header(2, vec![1, 1, 1], &[]));
        assert_eq!(market, before);
        let price = market.assets()[1]
            .price_in_asset0
            .expect("asset 1 traded with 0");
        assert_eq!(price.rate, Price(2 << 80));
        assert_eq!(price.height, 1);
        assert_eq!(market.pair(0, 1).unwrap().rate, Price(1 << 79));
    }

    #[test]
    fn an_asset_that_never_traded_has_no_price() {
        let mut market = MarketPrices::new(3, 0);
        market.record(&header(1, vec![4, 8, 1], &[(0, 1)]));
        assert_eq!(market.assets()[2], AssetMarket::default());
        assert!(market.pair(1, 0).is_none());
    }

    #[test]
    fn an_asset_trading_apart_from_asset_0_gets_a_height_but_no_price() {
        let mut market = MarketPrices::new(4, 0);
        market.record(&header(5, vec![4, 8, 1, 3], &[(0, 1), (2, 3)]));
        assert_eq!(market.assets()[2].last_traded_height, Some(5));
        assert_eq!(market.assets()[2].price_in_asset0, None);
        assert!(market.assets()[1].price_in_asset0.is_some());
        // Joined to asset 0 through asset 1 in a later block: priced from that block.
        market.record(&header(6, vec![4, 8, 16, 3], &[(0, 1), (2, 1)]));
        let price = market.assets()[2].price_in_asset0.unwrap();
        assert_eq!((price.rate, price.height), (Price(4 << 80), 6));
    }

    #[test]
    fn a_group_apart_from_asset_0_is_priced_through_its_last_priced_asset() {
        let mut market = MarketPrices::new(4, 0);
        // Block 1: asset 1 is worth 2 of asset 0.
        market.record(&header(1, vec![4, 8, 1, 1], &[(0, 1)]));
        // Block 2: assets 1 and 3 trade without asset 0, on another scale: 3 is worth 3 of 1.
        market.record(&header(2, vec![1, 100, 7, 300], &[(1, 3), (3, 1)]));
        let price = |asset: usize| market.assets()[asset].price_in_asset0.unwrap();
        assert_eq!((price(3).rate, price(3).height), (Price(6 << 80), 2));
        assert_eq!((price(1).rate, price(1).height), (Price(2 << 80), 2));
        assert_eq!(market.assets()[2].price_in_asset0, None);
        assert_eq!(price(0).height, 1);
    }

    proptest::proptest! {
        /// Arbitrary bytes: an error or a record, never a panic, and a record re-encodes to
        /// exactly the bytes it was read from (the property of
        /// `fuzz/fuzz_targets/market_record.rs`).
        #[test]
        fn any_bytes_decode_to_an_error_or_a_canonical_record(
            assets in 1usize..5,
            height in 0u64..10,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let mut reader = Reader::new(&body);
            if let Ok(record) = MarketPrices::decode(&mut reader, assets, height) {
                let mut encoded = Vec::new();
                record.encode(&mut encoded);
                proptest::prop_assert_eq!(&encoded[..], &body[..reader.offset()]);
            }
        }
    }

    #[test]
    fn the_record_survives_its_encoding() {
        let mut market = MarketPrices::new(3, 2);
        market.record(&header(3, vec![4, 8, 1], &[(0, 1), (2, 1)]));
        let mut bytes = Vec::new();
        market.encode(&mut bytes);
        let mut reader = Reader::new(&bytes);
        assert_eq!(MarketPrices::decode(&mut reader, 3, 3).unwrap(), market);
        assert!(reader.is_empty());
        // The same bytes for a state at height 2 name a height after it.
        let mut reader = Reader::new(&bytes);
        assert!(MarketPrices::decode(&mut reader, 3, 2).is_err());
    }
}
