//! What the generator knows about accounts between blocks: who is busy, what each account holds
//! (a lower bound), its last sequence number, its open offers; and the genesis built from it.

use super::keys::KeyPool;
use super::WorkloadParams;
use crate::offers::choose_distinct;
use crate::rng::{PowerLaw, Rng};
use walras_types::transaction::SEQUENCE_WINDOW;
use walras_types::{
    AccountId, AssetId, Genesis, GenesisAccount, OfferId, Operation, Price, Transaction,
};

/// Assets each genesis account holds (fewer when there are fewer assets).
pub(super) const HELD_ASSETS_MAX: usize = 4;

/// Activity is Zipf-like: the account of activity rank `r` is drawn with probability about
/// `1 / (r + 1)` (normalised), so the busiest hundred of a million accounts send a third of the
/// transactions, up to the 64-per-block cap.
const ACTIVITY_EXPONENT: f64 = 1.0;

/// Every asset's genesis supply stays below this: 2^60, an eighth of the issuance cap.
const SUPPLY_BUDGET: f64 = (1u64 << 60) as f64;
/// Fraction of the budget actually used, leaving room for float error and rounding up.
const SUPPLY_BUDGET_USE: f64 = 0.999;
/// Units of an asset of valuation 1 per unit of value, unless the budget forces less.
const NOMINAL_VALUE_SCALE: f64 = 1e9;

/// Transaction values (in value units) are log-uniform over [VALUE_LO, VALUE_HI).
pub(super) const VALUE_LO: f64 = 0.1;
pub(super) const VALUE_HI: f64 = 10.0;
/// The mean of that distribution: (hi − lo) / ln(hi / lo).
const MEAN_TRANSACTION_VALUE: f64 = (VALUE_HI - VALUE_LO) / 4.605_170_185_988_092;
/// Genesis wealth per held asset, in mean transaction values: a floor for quiet accounts, plus
/// this multiple of the account's expected debits of that asset over the whole workload.
const BASE_TRANSACTIONS: f64 = 20.0;
const WEALTH_HEADROOM: f64 = 2.0;

/// A bijection between activity ranks and account ids, `id = (multiplier · rank + offset) mod n`,
/// so that busy accounts are spread over the id space.
pub(super) struct AccountRanks {
    accounts: u64,
    multiplier: u64,
    inverse: u64,
    offset: u64,
}

impl AccountRanks {
    /// A random bijection over `0..accounts` (`accounts` ≥ 1).
    pub(super) fn new(accounts: u64, rng: &mut Rng) -> AccountRanks {
        let mut multiplier = 1 + rng.below(accounts.max(2) - 1);
        while gcd(multiplier, accounts) != 1 {
            multiplier = multiplier % (accounts - 1).max(1) + 1;
        }
        AccountRanks {
            accounts,
            multiplier,
            inverse: inverse_mod(multiplier, accounts),
            offset: rng.below(accounts),
        }
    }

    pub(super) fn id_of(&self, rank: usize) -> AccountId {
        let product = u128::from(self.multiplier) * rank as u128 + u128::from(self.offset);
        AccountId((product % u128::from(self.accounts)) as u64)
    }

    pub(super) fn rank_of(&self, id: AccountId) -> usize {
        let n = u128::from(self.accounts);
        let shifted = (u128::from(id.0) + n - u128::from(self.offset)) % n;
        ((shifted * u128::from(self.inverse)) % n) as usize
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The inverse of `a` modulo `n` (`a` coprime to `n`), by the extended Euclidean algorithm.
fn inverse_mod(a: u64, n: u64) -> u64 {
    if n == 1 {
        return 0;
    }
    let (mut r0, mut r1) = (i128::from(n), i128::from(a));
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (t0, t1) = (t1, t0 - q * t1);
    }
    t0.rem_euclid(i128::from(n)) as u64
}

/// The assets a genesis account holds and a lower bound on its balance of each.
#[derive(Clone, Copy, Debug)]
pub(super) struct Holdings {
    /// Sorted; only the first `Ledger::held` entries mean anything.
    pub assets: [AssetId; HELD_ASSETS_MAX],
    pub known: [u64; HELD_ASSETS_MAX],
    /// Whether `known` is the exact balance: true until the account offers to buy the asset
    /// (trades may pay it in) or cancels an offer selling it (the remainder comes back). Its own
    /// offers selling the asset lock their amount at creation, so fills do not change it.
    pub exact: [bool; HELD_ASSETS_MAX],
}

/// An offer the generator created, not yet cancelled by it (it may have been filled).
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenOffer {
    pub owner: AccountId,
    pub sell: AssetId,
    pub buy: AssetId,
    pub min_price: Price,
    pub id: OfferId,
}

/// The generator's knowledge of the exchange state between blocks.
pub(super) struct Ledger {
    /// Genesis accounts: ids `0..accounts`.
    pub accounts: u64,
    pub ranks: AccountRanks,
    pub activity: PowerLaw,
    /// Assets per account: `min(HELD_ASSETS_MAX, assets)`.
    pub held: usize,
    /// Per genesis account.
    pub holdings: Vec<Holdings>,
    /// Per genesis account: the last sequence number the exchange will have recorded.
    pub last_sequence: Vec<u64>,
    /// Accounts created by the workload that are expected to exist.
    pub created: Vec<AccountId>,
    /// The next id to hand to an account creation (never reused, even if the creation fails).
    pub next_new_account: u64,
    pub open_offers: Vec<OpenOffer>,
    /// Genesis supply of each asset.
    pub supply: Vec<u64>,
    /// Units of an asset of valuation 1 per unit of value.
    pub value_scale: f64,
}

impl Ledger {
    /// Builds the genesis and the ledger that tracks it. `valuations` are those at genesis.
    pub(super) fn genesis(
        params: &WorkloadParams,
        valuations: &[f64],
        keys: &KeyPool,
        rng: &mut Rng,
    ) -> (Ledger, Genesis) {
        let accounts = params.accounts as u64;
        let ranks = AccountRanks::new(accounts, rng);
        let activity = PowerLaw::new(params.accounts, ACTIVITY_EXPONENT);
        let held = HELD_ASSETS_MAX.min(params.assets);
        let wealth = |id: AccountId| wealth_per_asset(params, &activity, ranks.rank_of(id), held);
        let mut holdings = choose_holdings(params, held, rng);
        let value_scale = value_scale(&holdings, held, valuations, accounts, wealth);
        let mut supply = vec![0u64; params.assets];
        for (id, holding) in holdings.iter_mut().enumerate() {
            let wealth = wealth(AccountId(id as u64));
            for slot in 0..held {
                let asset = usize::from(holding.assets[slot].0);
                // Saturating cast; the scale keeps it far below u64::MAX.
                let amount = ((wealth * value_scale / valuations[asset]) as u64).max(1);
                holding.known[slot] = amount;
                supply[asset] += amount;
            }
        }
        let genesis = genesis_of(params, &holdings, held, keys);
        let ledger = Ledger {
            accounts,
            ranks,
            activity,
            held,
            holdings,
            last_sequence: vec![0; params.accounts],
            created: Vec::new(),
            next_new_account: accounts,
            open_offers: Vec::new(),
            supply,
            value_scale,
        };
        (ledger, genesis)
    }

    /// The slot of `asset` among the account's holdings.
    pub(super) fn slot_of(&self, account: AccountId, asset: AssetId) -> Option<usize> {
        let holding = self.holdings.get(account.0 as usize)?;
        holding.assets[..self.held].iter().position(|&a| a == asset)
    }

    /// Applies a planned block's surviving transactions (`BlockPlan::surviving`), in order.
    pub(super) fn commit<'t>(&mut self, surviving: impl IntoIterator<Item = &'t Transaction>) {
        for transaction in surviving {
            self.apply(transaction);
        }
    }

    fn apply(&mut self, transaction: &Transaction) {
        let source = transaction.source;
        let last = &mut self.last_sequence[source.0 as usize];
        *last = (*last).max(transaction.sequence);
        match transaction.operation {
            Operation::CreateOffer {
                sell,
                buy,
                amount,
                min_price,
            } => {
                self.debit(source, sell, amount);
                self.lose_exactness(source, buy);
                self.open_offers.push(OpenOffer {
                    owner: source,
                    sell,
                    buy,
                    min_price,
                    id: OfferId(transaction.sequence),
                });
            }
            Operation::Payment { to, asset, amount } => {
                self.debit(source, asset, amount);
                self.credit(to, asset, amount);
            }
            Operation::CreateAccount { new_account, .. } => self.created.push(new_account),
            Operation::CancelOffer { sell, .. } => self.lose_exactness(source, sell),
            // The workload makes no bridge transactions; if a block carries some, the debit is
            // exact and the withdrawal's credit is known too.
            Operation::DepositToPayments { asset, amount, .. } => self.debit(source, asset, amount),
            Operation::WithdrawFromPayments { output, .. } => {
                self.credit(source, output.asset, output.amount)
            }
        }
    }

    fn lose_exactness(&mut self, account: AccountId, asset: AssetId) {
        if let Some(slot) = self.slot_of(account, asset) {
            self.holdings[account.0 as usize].exact[slot] = false;
        }
    }

    fn debit(&mut self, account: AccountId, asset: AssetId, amount: u64) {
        if let Some(slot) = self.slot_of(account, asset) {
            let known = &mut self.holdings[account.0 as usize].known[slot];
            debug_assert!(
                *known >= amount,
                "a surviving debit exceeds the known balance"
            );
            *known = known.saturating_sub(amount);
        }
    }

    /// Credits a payment to a genesis account holding the asset; others are not tracked (they
    /// never send, or cannot spend that asset in this model).
    fn credit(&mut self, account: AccountId, asset: AssetId, amount: u64) {
        if let Some(slot) = self.slot_of(account, asset) {
            let known = &mut self.holdings[account.0 as usize].known[slot];
            *known = known.saturating_add(amount);
        }
    }
}

/// Each account's held assets: `held` distinct uniformly random assets, sorted.
fn choose_holdings(params: &WorkloadParams, held: usize, rng: &mut Rng) -> Vec<Holdings> {
    let mut permutation: Vec<usize> = (0..params.assets).collect();
    (0..params.accounts)
        .map(|_| {
            choose_distinct(rng, &mut permutation, held);
            let mut assets = [AssetId(0); HELD_ASSETS_MAX];
            for (slot, &asset) in permutation[..held].iter().enumerate() {
                assets[slot] = AssetId(asset as u16);
            }
            assets[..held].sort();
            Holdings {
                assets,
                known: [0; HELD_ASSETS_MAX],
                exact: [true; HELD_ASSETS_MAX],
            }
        })
        .collect()
}

/// Genesis wealth of each held asset, in value units: enough for [`BASE_TRANSACTIONS`] plus
/// [`WEALTH_HEADROOM`] times the account's expected debits of the asset over the workload.
fn wealth_per_asset(params: &WorkloadParams, activity: &PowerLaw, rank: usize, held: usize) -> f64 {
    let per_block =
        (params.txs_per_block as f64 * activity.probability(rank)).min(SEQUENCE_WINDOW as f64);
    let expected_transactions = params.blocks as f64 * per_block;
    MEAN_TRANSACTION_VALUE
        * (BASE_TRANSACTIONS + WEALTH_HEADROOM * expected_transactions / held as f64)
}

/// The value scale: [`NOMINAL_VALUE_SCALE`], lowered if some asset's supply would exceed the
/// budget. One scale for every asset keeps the relative values of balances and offers.
fn value_scale(
    holdings: &[Holdings],
    held: usize,
    valuations: &[f64],
    accounts: u64,
    wealth: impl Fn(AccountId) -> f64,
) -> f64 {
    let mut units_per_asset = vec![0.0f64; valuations.len()];
    for id in 0..accounts {
        let wealth = wealth(AccountId(id));
        for asset in &holdings[id as usize].assets[..held] {
            let asset = usize::from(asset.0);
            units_per_asset[asset] += wealth / valuations[asset];
        }
    }
    let heaviest = units_per_asset.iter().copied().fold(0.0, f64::max);
    let budget = SUPPLY_BUDGET * SUPPLY_BUDGET_USE;
    if heaviest * NOMINAL_VALUE_SCALE > budget {
        budget / heaviest
    } else {
        NOMINAL_VALUE_SCALE
    }
}

fn genesis_of(
    params: &WorkloadParams,
    holdings: &[Holdings],
    held: usize,
    keys: &KeyPool,
) -> Genesis {
    let accounts = holdings
        .iter()
        .enumerate()
        .map(|(id, holding)| {
            let id = AccountId(id as u64);
            GenesisAccount {
                id,
                public_key: *keys.for_account(id).public_key().as_bytes(),
                balances: (0..held)
                    .map(|slot| (holding.assets[slot], holding.known[slot]))
                    .collect(),
            }
        })
        .collect();
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: params.assets as u16,
        accounts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_a_bijection() {
        for accounts in [1u64, 2, 3, 10, 97, 1000, 1024] {
            for seed in 0..5 {
                let ranks = AccountRanks::new(accounts, &mut Rng::new(seed));
                let mut seen = vec![false; accounts as usize];
                for rank in 0..accounts as usize {
                    let id = ranks.id_of(rank);
                    assert!(!seen[id.0 as usize], "{accounts}: id {} twice", id.0);
                    seen[id.0 as usize] = true;
                    assert_eq!(ranks.rank_of(id), rank);
                }
            }
        }
    }

    #[test]
    fn inverse_mod_inverts() {
        for (a, n) in [(3u64, 7u64), (10, 21), (1, 2), (999_983, 10_000_000)] {
            assert_eq!(
                u128::from(a) * u128::from(inverse_mod(a, n)) % u128::from(n),
                1
            );
        }
    }
}
