//! Resting offers for `walras replay --resting-offers N`: a state of millions of open offers
//! built directly, not through blocks (issue 32).
//!
//! Offer `i` belongs to genesis account `i mod accounts`, sells and buys the `i`-th ordered
//! pair (round robin over all pairs, so every book grows alike), has id `2^63 + i` (the
//! workload generator numbers its offers from 1 per account, so ids never collide) and a limit
//! log-uniform in [1e3, 1e6] units of the bought asset per unit sold: the workload's valuations
//! lie in [0.1, 10] (ratios at most 100 and drifting slowly), so these offers never trade and
//! stay on the books, as most of SPEEDEX's "tens of millions of open offers" would. The same
//! `count` always gives the same offers.

use crate::ToolError;
use walras_types::genesis::Genesis;
use walras_types::{AssetId, Offer, OfferId, Price};

/// First id of a resting offer.
const ID_BASE: u64 = 1 << 63;
/// Limit prices: log-uniform in [10^LOW, 10^HIGH].
const LIMIT_LOG10_LOW: f64 = 3.0;
const LIMIT_LOG10_HIGH: f64 = 6.0;

/// `count` resting offers over `genesis`'s accounts and pairs.
pub fn offers(genesis: &Genesis, count: u64) -> Result<Vec<Offer>, ToolError> {
    let assets = u64::from(genesis.assets);
    let accounts = genesis.accounts.len() as u64;
    if assets < 2 || accounts == 0 {
        return Err(ToolError::Input(
            "--resting-offers needs a genesis with 2 assets and 1 account at least".into(),
        ));
    }
    let pairs = assets * (assets - 1);
    let capacity = usize::try_from(count)
        .map_err(|_| ToolError::Input(format!("{count} resting offers do not fit in memory")))?;
    let mut offers = Vec::with_capacity(capacity);
    let mut random = walras_sim::Rng::new(0x5eed_0f0f_fe25);
    for i in 0..count {
        let pair = i % pairs;
        let sell = pair / (assets - 1);
        let other = pair % (assets - 1);
        let buy = if other >= sell { other + 1 } else { other };
        let unit = (random.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let log10 = LIMIT_LOG10_LOW + unit * (LIMIT_LOG10_HIGH - LIMIT_LOG10_LOW);
        offers.push(Offer {
            id: OfferId(ID_BASE + i),
            account: genesis.accounts[(i % accounts) as usize].id,
            sell: AssetId(sell as u16),
            buy: AssetId(buy as u16),
            amount: 1 + random.next_u64() % 1_000,
            min_price: Price::from_f64(10f64.powf(log10)),
        });
    }
    Ok(offers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::genesis::GenesisAccount;
    use walras_types::AccountId;

    fn genesis(assets: u16, accounts: u64) -> Genesis {
        Genesis {
            assets,
            asset_info: Vec::new(),
            accounts: (1..=accounts)
                .map(|id| GenesisAccount {
                    id: AccountId(id),
                    public_key: [1; 32],
                    balances: vec![(AssetId(0), 10)],
                })
                .collect(),
            payments: None,
        }
    }

    /// Every ordered pair gets offers, none sells what it buys, and the limits stay far above
    /// any ratio of the workload's valuations (at most 100), so the offers rest.
    #[test]
    fn resting_offers_cover_every_pair_and_never_reach_the_market() {
        let offers = offers(&genesis(5, 7), 400).expect("offers");
        let mut pairs = std::collections::BTreeSet::new();
        for offer in &offers {
            assert_ne!(offer.sell, offer.buy);
            assert!(offer.min_price >= Price::from_f64(999.0));
            assert!((1..=1_000).contains(&offer.amount));
            assert!(offer.id.0 >= ID_BASE);
            pairs.insert((offer.sell, offer.buy));
        }
        assert_eq!(pairs.len(), 5 * 4);
        assert_eq!(offers, super::offers(&genesis(5, 7), 400).expect("again"));
    }
}
