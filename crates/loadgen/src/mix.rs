//! What the load generator's transactions do: the accounts it drives (what they hold, as far as
//! it knows, and which of their offers probably still rest in a book) and the choice of each
//! operation. Pure: a random generator in, an operation out.
//!
//! The aim is a realistic load that the node mostly *accepts*: offers near the current clearing
//! prices, small amounts of assets the account holds, cancels of offers that probably have not
//! traded yet, payments between the accounts in use.

use super::window::SequenceWindow;
use walras_sim::Rng;
use walras_types::{AccountId, AssetId, OfferId, Operation, Price};

/// Balances below this are not spent (a fraction of them would round to nothing).
pub const SPENDABLE_MIN: u64 = 1_000;
/// An offer sells a uniform fraction in this range of the balance estimate.
const OFFER_FRACTION: (f64, f64) = (0.001, 0.01);
/// A payment moves a uniform fraction in this range of the balance estimate.
const PAYMENT_FRACTION: (f64, f64) = (0.0001, 0.001);
/// Relative standard deviation of a limit price around the current price ratio.
const LIMIT_PRICE_SPREAD: f64 = 0.01;
/// Share of the trading mix that cancels (when there is a resting offer) and that pays.
const CANCEL_SHARE: f64 = 0.1;
const PAYMENT_SHARE: f64 = 0.1;
/// The resting mix's limits lie this many decades (log-uniform) above the price ratio.
const RESTING_DECADES: (f64, f64) = (3.0, 6.0);
/// Resting offers examined per cancel before giving up (each one found probably filled is
/// forgotten).
const CANCEL_TRIES: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    /// Mostly offers near the current prices, some cancels, some payments.
    Trading,
    /// Only payments between the accounts in use.
    Payments,
    /// Only offers far above the price ratio (1,000 to 1,000,000 times it), which rest: builds
    /// a state of millions of open offers through the node, to measure its block cost and
    /// restart there (issue 32). Not a market's shape: real books straddle the price.
    Resting,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Trading => "trading",
            Mix::Payments => "payments",
            Mix::Resting => "resting",
        }
    }
}

/// One of our offers that a block accepted without it trading (its limit was above the
/// block's clearing rate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestingOffer {
    pub sell: u16,
    pub buy: u16,
    pub min_price: Price,
    pub id: u64,
}

/// An account the load generator drives.
#[derive(Clone, Debug)]
pub struct LoadAccount {
    pub id: u64,
    pub window: SequenceWindow,
    /// (asset, estimate): the node's balance at the start less every debit sent since. Credits
    /// are ignored, so the estimate only errs low and an account never overdraws.
    pub balances: Vec<(u16, u64)>,
    pub resting: Vec<RestingOffer>,
    /// Some of its transactions are in a request the node has not answered yet. It sends
    /// nothing more until then: the node admits requests concurrently, so a later request
    /// could be admitted first, and if a block were cut between the two, the lower sequence
    /// number would arrive after the higher one had committed and be refused. Within one
    /// request the node admits in order, so an account may have several transactions there.
    pub in_request: bool,
}

impl LoadAccount {
    pub fn new(id: u64, window: SequenceWindow, balances: Vec<(u16, u64)>) -> LoadAccount {
        LoadAccount {
            id,
            window,
            balances,
            resting: Vec::new(),
            in_request: false,
        }
    }

    /// Whether it has something to spend and room in its window.
    pub fn can_spend(&self) -> bool {
        self.window.has_room() && self.balances.iter().any(|&(_, b)| b >= SPENDABLE_MIN)
    }
}

/// The current price of each asset in units of asset 0 (all 1.0 before the first block).
#[derive(Clone, Debug)]
pub struct Market {
    pub prices: Vec<f64>,
}

impl Market {
    pub fn flat(assets: u16) -> Market {
        Market {
            prices: vec![1.0; usize::from(assets)],
        }
    }

    /// Takes a block's prices if they are usable (one positive finite number per asset).
    /// Takes each asset's price where one is given (a block prices only the assets it
    /// traded); the others keep theirs.
    pub fn update(&mut self, prices: &[Option<f64>]) {
        if prices.len() != self.prices.len() {
            return;
        }
        for (kept, given) in self.prices.iter_mut().zip(prices) {
            if let Some(price) = given.filter(|price| price.is_finite() && *price > 0.0) {
                *kept = price;
            }
        }
    }

    /// As [`Market::update`], from the API's decimal strings (`None` where an asset was not
    /// priced); a string that does not parse counts as not priced.
    pub fn update_from_decimals<'a>(&mut self, texts: impl IntoIterator<Item = Option<&'a str>>) {
        let prices: Vec<Option<f64>> = texts
            .into_iter()
            .map(|text| text.and_then(|text| text.parse().ok()))
            .collect();
        self.update(&prices);
    }

    /// Units of `buy` per unit of `sell` at the current prices.
    pub fn ratio(&self, sell: u16, buy: u16) -> f64 {
        self.prices[usize::from(sell)] / self.prices[usize::from(buy)]
    }

    pub fn assets(&self) -> u16 {
        self.prices.len() as u16
    }
}

/// Chooses the operation of `account`'s next transaction and debits its balance estimate;
/// `None` if it can afford nothing. `payees` are the ids payments may go to.
pub fn plan_operation(
    rng: &mut Rng,
    mix: Mix,
    account: &mut LoadAccount,
    payees: &[u64],
    market: &Market,
) -> Option<Operation> {
    if mix == Mix::Resting {
        return plan_resting_offer(rng, account, market);
    }
    let draw = rng.uniform_f64();
    let wants_payment = mix == Mix::Payments || draw < PAYMENT_SHARE;
    if wants_payment {
        if let Some(payment) = plan_payment(rng, account, payees) {
            return Some(payment);
        }
    }
    if mix == Mix::Payments {
        return None;
    }
    if draw < PAYMENT_SHARE + CANCEL_SHARE {
        if let Some(cancel) = plan_cancel(rng, account, market) {
            return Some(cancel);
        }
    }
    plan_offer(rng, account, market)
}

fn plan_offer(rng: &mut Rng, account: &mut LoadAccount, market: &Market) -> Option<Operation> {
    let (sell, buy, amount) = offer_pair_and_amount(rng, account, market)?;
    let limit = market.ratio(sell, buy) * (1.0 + LIMIT_PRICE_SPREAD * rng.normal());
    Some(Operation::CreateOffer {
        sell: AssetId(sell),
        buy: AssetId(buy),
        amount,
        min_price: limit_price(limit),
    })
}

/// An offer's sell asset and amount (a fraction of a held balance, debited from the estimate)
/// and another asset to buy; `None` with fewer than two assets or nothing to spend.
fn offer_pair_and_amount(
    rng: &mut Rng,
    account: &mut LoadAccount,
    market: &Market,
) -> Option<(u16, u16, u64)> {
    let assets = market.assets();
    if assets < 2 {
        return None;
    }
    let (sell, amount) = spend(rng, account, OFFER_FRACTION)?;
    let mut buy = rng.below(u64::from(assets) - 1) as u16;
    if buy >= sell {
        buy += 1;
    }
    Some((sell, buy, amount))
}

/// An offer whose limit is 10^3 to 10^6 times the current ratio (log-uniform): it rests
/// unless prices move by that much.
fn plan_resting_offer(
    rng: &mut Rng,
    account: &mut LoadAccount,
    market: &Market,
) -> Option<Operation> {
    let (sell, buy, amount) = offer_pair_and_amount(rng, account, market)?;
    let above =
        10f64.powf(RESTING_DECADES.0 + (RESTING_DECADES.1 - RESTING_DECADES.0) * rng.uniform_f64());
    Some(Operation::CreateOffer {
        sell: AssetId(sell),
        buy: AssetId(buy),
        amount,
        min_price: limit_price(market.ratio(sell, buy) * above),
    })
}

/// The nearest limit price the node accepts (1e-12..=1e12) to a float, which may be anything.
pub fn limit_price(value: f64) -> Price {
    Price::nearest_limit(value)
}

/// Cancels a resting offer whose limit is still above the current rate (so it probably has
/// not traded since); offers that look filled are forgotten.
fn plan_cancel(rng: &mut Rng, account: &mut LoadAccount, market: &Market) -> Option<Operation> {
    for _ in 0..CANCEL_TRIES {
        if account.resting.is_empty() {
            return None;
        }
        let offer = account
            .resting
            .swap_remove(rng.index(account.resting.len()));
        if offer.min_price.to_f64() > market.ratio(offer.sell, offer.buy) {
            return Some(Operation::CancelOffer {
                sell: AssetId(offer.sell),
                buy: AssetId(offer.buy),
                min_price: offer.min_price,
                offer_id: OfferId(offer.id),
            });
        }
    }
    None
}

fn plan_payment(rng: &mut Rng, account: &mut LoadAccount, payees: &[u64]) -> Option<Operation> {
    let others = payees.iter().filter(|&&id| id != account.id).count();
    if others == 0 {
        return None;
    }
    let to = loop {
        let candidate = payees[rng.index(payees.len())];
        if candidate != account.id {
            break candidate;
        }
    };
    let (asset, amount) = spend(rng, account, PAYMENT_FRACTION)?;
    Some(Operation::Payment {
        to: AccountId(to),
        asset: AssetId(asset),
        amount,
    })
}

/// Picks a held asset with a spendable balance and an amount (a fraction in `range` of it),
/// and debits the estimate.
fn spend(rng: &mut Rng, account: &mut LoadAccount, range: (f64, f64)) -> Option<(u16, u64)> {
    let spendable = account
        .balances
        .iter()
        .filter(|&&(_, balance)| balance >= SPENDABLE_MIN)
        .count();
    if spendable == 0 {
        return None;
    }
    let pick = rng.index(spendable);
    let (asset, balance) = account
        .balances
        .iter_mut()
        .filter(|(_, balance)| *balance >= SPENDABLE_MIN)
        .nth(pick)?;
    let fraction = range.0 + (range.1 - range.0) * rng.uniform_f64();
    let amount = ((*balance as f64 * fraction) as u64).clamp(1, *balance);
    *balance -= amount;
    Some((*asset, amount))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(id: u64, balances: Vec<(u16, u64)>) -> LoadAccount {
        LoadAccount::new(id, SequenceWindow::new(0, 1), balances)
    }

    /// Trigger: after a block holding only payments the node reported every price as 1.0
    /// and the load generator priced its next offers at 1.0 for every pair (issue 28 item 2).
    #[test]
    fn prices_a_block_did_not_give_keep_their_last_value() {
        let mut market = Market::flat(3);
        market.update(&[Some(1.0), Some(2.0), Some(0.5)]);
        market.update(&[None, None, Some(0.25)]);
        assert_eq!(market.ratio(1, 0), 2.0);
        assert_eq!(market.ratio(2, 0), 0.25);
    }

    #[test]
    fn trading_offers_spend_held_assets_near_the_price_ratio() {
        let mut rng = Rng::new(1);
        let mut market = Market::flat(4);
        market.update(&[Some(1.0), Some(2.0), Some(0.5), Some(4.0)]);
        let mut trader = account(3, vec![(1, 1_000_000), (2, 500)]);
        let mut offers = 0;
        for _ in 0..1000 {
            let Some(operation) =
                plan_operation(&mut rng, Mix::Trading, &mut trader, &[3, 4, 5], &market)
            else {
                break;
            };
            if let Operation::CreateOffer {
                sell,
                buy,
                amount,
                min_price,
            } = operation
            {
                offers += 1;
                assert_eq!(sell.0, 1, "only asset 1 is spendable");
                assert_ne!(buy, sell);
                assert!(amount >= 1);
                let ratio = market.ratio(sell.0, buy.0);
                let deviation = (min_price.to_f64() / ratio - 1.0).abs();
                assert!(deviation < 0.06, "limit {min_price:?} far from {ratio}");
            }
        }
        assert!(offers > 500, "mostly offers: {offers}");
        // Debits were taken from the estimate; the small balance was never touched.
        assert!(trader.balances[0].1 < 1_000_000);
        assert_eq!(trader.balances[1].1, 500);
    }

    #[test]
    fn payments_mix_pays_other_accounts_and_stops_when_broke() {
        let mut rng = Rng::new(2);
        let market = Market::flat(3);
        let mut payer = account(7, vec![(0, 2_000)]);
        let mut paid = 0u64;
        while let Some(operation) =
            plan_operation(&mut rng, Mix::Payments, &mut payer, &[7, 8], &market)
        {
            match operation {
                Operation::Payment { to, asset, amount } => {
                    assert_eq!((to.0, asset.0), (8, 0));
                    paid += amount;
                }
                other => panic!("payments mix made {other:?}"),
            }
        }
        assert_eq!(paid + payer.balances[0].1, 2_000);
        assert!(payer.balances[0].1 < SPENDABLE_MIN);
        // Alone, an account has nobody to pay.
        let mut alone = account(1, vec![(0, 1_000_000)]);
        assert!(plan_operation(&mut rng, Mix::Payments, &mut alone, &[1], &market).is_none());
    }

    #[test]
    fn cancels_only_offers_that_probably_rest() {
        let mut rng = Rng::new(3);
        let market = Market::flat(2);
        let mut trader = account(1, vec![(0, 1_000_000)]);
        let resting = RestingOffer {
            sell: 0,
            buy: 1,
            min_price: limit_price(1.5),
            id: 9,
        };
        let filled = RestingOffer {
            min_price: limit_price(0.5),
            id: 10,
            ..resting
        };
        trader.resting = vec![filled, resting];
        let mut cancels = Vec::new();
        for _ in 0..200 {
            if let Some(Operation::CancelOffer { offer_id, .. }) =
                plan_operation(&mut rng, Mix::Trading, &mut trader, &[1], &market)
            {
                cancels.push(offer_id.0);
            }
        }
        assert_eq!(cancels, vec![9], "one cancel, of the offer above the rate");
        assert!(trader.resting.is_empty());
    }

    /// The resting mix makes only offers, each 10^3 to 10^6 times above its pair's ratio (so
    /// it rests), spending held assets, until the account can afford nothing.
    #[test]
    fn resting_offers_lie_far_above_the_price_and_spend_held_assets() {
        let mut rng = Rng::new(4);
        let mut market = Market::flat(4);
        market.update(&[Some(1.0), Some(2.0), Some(0.5), Some(4.0)]);
        let mut trader = account(3, vec![(1, 1_000_000), (3, 2_000_000), (2, 500)]);
        let mut locked = 0u64;
        let mut offers = 0;
        while let Some(operation) =
            plan_operation(&mut rng, Mix::Resting, &mut trader, &[3, 4], &market)
        {
            let Operation::CreateOffer {
                sell,
                buy,
                amount,
                min_price,
            } = operation
            else {
                panic!("resting mix made {operation:?}");
            };
            assert!(sell.0 == 1 || sell.0 == 3, "only held assets: {}", sell.0);
            assert_ne!(buy, sell);
            let above = min_price.to_f64() / market.ratio(sell.0, buy.0);
            assert!(
                (999.0..=1.000_001e6).contains(&above),
                "limit {above} x the ratio"
            );
            locked += amount;
            offers += 1;
        }
        assert!(offers > 100, "{offers} offers");
        let left: u64 = trader.balances.iter().map(|(_, balance)| balance).sum();
        assert_eq!(locked + left, 3_000_500, "every unit locked or left");
        assert_eq!(
            trader.balances[2].1, 500,
            "the small balance was never spent"
        );
    }

    #[test]
    fn limit_prices_stay_in_the_accepted_range() {
        for value in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-20, 1e20, 1.0] {
            let price = limit_price(value);
            assert!(price >= Price::MIN_LIMIT && price <= Price::MAX_LIMIT);
            assert!(Price::parse_limit(&price.to_exact_decimal()).is_ok());
        }
    }
}
