//! The serial price-time order book exchange, end to end with signed transactions.
//!
//! Deterministic scenarios check, each on a two-asset exchange of a few accounts:
//! - price-time priority: equal limits fill in arrival order; a better limit fills first even when
//!   it arrived later;
//! - a cancel refunds exactly what is left of a partly filled offer, and only its owner can cancel;
//! - sequential semantics: a payment funds an offer later in the same block (and not earlier);
//! - each rejection names its reason and leaves the state exactly as it was;
//! - a resting offer too small to fill without breaking the taker's limit is passed over.
//!
//! A property test then runs random small geneses and random transaction sequences, valid and
//! invalid mixed (unknown sources and assets, bad signatures, stale and far sequence numbers,
//! overdrafts, cancels of others' or filled offers), built one at a time against the live state.
//! After every transaction it checks conservation (accounted == issued), that a rejection changed
//! nothing, that every fill respects both limits (exactly, in 256-bit schoolbook arithmetic),
//! that a taker's fills go best price first, and that a cancel refunds exactly the remainder; at the
//! end, that `execute_block` on the same list reaches the same state and counts.
//!
//! The timing of one block of 100k transactions over 100k accounts is a benchmark:
//! `cargo bench -p walras-bench --bench orderbook_block`.

use proptest::prelude::*;
use walras_bench::orderbook::{Fill, OrderbookExchange};
use walras_crypto::Keypair;
use walras_engine::DropReason;
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{
    AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction, MAX_AMOUNT,
};

const A: AssetId = AssetId(0);
const B: AssetId = AssetId(1);

fn keypair(account: u64) -> Keypair {
    let mut seed = [3u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

fn sign(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    sign_with(&keypair(source), source, sequence, operation)
}

fn sign_with(key: &Keypair, source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    let transaction = Transaction {
        source: AccountId(source),
        sequence,
        operation,
    };
    let signature = *key.sign(&transaction.encode()).as_bytes();
    SignedTransaction {
        transaction,
        signature,
    }
}

fn account(id: u64, balances: &[(AssetId, u64)]) -> GenesisAccount {
    GenesisAccount {
        id: AccountId(id),
        public_key: *keypair(id).public_key().as_bytes(),
        balances: balances.iter().copied().filter(|(_, a)| *a > 0).collect(),
    }
}

/// Two assets; accounts 0..=3 hold 1,000,000 of each, account 4 holds nothing.
fn small_exchange() -> OrderbookExchange {
    let mut accounts: Vec<GenesisAccount> = (0..4)
        .map(|id| account(id, &[(A, 1_000_000), (B, 1_000_000)]))
        .collect();
    accounts.push(account(4, &[]));
    let genesis = Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: 2,
        accounts,
    };
    OrderbookExchange::from_genesis(&genesis).expect("valid genesis")
}

fn offer(sell: AssetId, buy: AssetId, amount: u64, min_price: Price) -> Operation {
    Operation::CreateOffer {
        sell,
        buy,
        amount,
        min_price,
    }
}

fn cancel(sell: AssetId, buy: AssetId, min_price: Price, id: u64) -> Operation {
    Operation::CancelOffer {
        sell,
        buy,
        min_price,
        offer_id: OfferId(id),
    }
}

fn half() -> Price {
    Price(Price::ONE.0 / 2)
}

/// Runs one transaction with signature checks and returns its fills.
fn run(
    exchange: &mut OrderbookExchange,
    signed: SignedTransaction,
) -> Result<Vec<Fill>, DropReason> {
    let mut fills = Vec::new();
    exchange
        .execute_transaction(&signed, true, &mut fills)
        .map(|()| fills)
}

fn balance(exchange: &OrderbookExchange, id: u64, asset: AssetId) -> u64 {
    exchange
        .account(AccountId(id))
        .map_or(0, |account| account.balance(asset))
}

fn conserved(exchange: &OrderbookExchange) -> bool {
    let issued: Vec<u128> = exchange.issued().iter().map(|i| *i as u128).collect();
    exchange.accounted() == issued
}

#[test]
fn equal_limits_fill_in_arrival_order() {
    let mut exchange = small_exchange();
    run(&mut exchange, sign(1, 1, offer(A, B, 100, Price::ONE))).unwrap();
    run(&mut exchange, sign(2, 1, offer(A, B, 100, Price::ONE))).unwrap();
    let fills = run(&mut exchange, sign(3, 1, offer(B, A, 150, Price::ONE))).unwrap();
    let makers: Vec<(AccountId, u64, u64)> = fills
        .iter()
        .map(|f| (f.maker, f.taker_sold, f.maker_sold))
        .collect();
    assert_eq!(
        makers,
        vec![(AccountId(1), 100, 100), (AccountId(2), 50, 50)]
    );
    assert_eq!(exchange.resting_amount(AccountId(1), OfferId(1)), None);
    assert_eq!(exchange.resting_amount(AccountId(2), OfferId(1)), Some(50));
    assert_eq!(exchange.resting_amount(AccountId(3), OfferId(1)), None);
    assert!(conserved(&exchange));
}

#[test]
fn a_better_limit_fills_first_even_when_it_arrived_later() {
    let mut exchange = small_exchange();
    run(&mut exchange, sign(1, 1, offer(A, B, 100, Price::ONE))).unwrap();
    run(&mut exchange, sign(2, 1, offer(A, B, 100, half()))).unwrap();
    // The taker pays 50 B: at account 2's price (0.5 B per A) that buys all 100 of its A.
    let fills = run(&mut exchange, sign(3, 1, offer(B, A, 50, Price::ONE))).unwrap();
    assert_eq!(fills.len(), 1);
    assert_eq!(
        (fills[0].maker, fills[0].taker_sold, fills[0].maker_sold),
        (AccountId(2), 50, 100)
    );
    assert_eq!(balance(&exchange, 3, A), 1_000_100);
    // The next taker meets account 1, now the best.
    let fills = run(&mut exchange, sign(3, 2, offer(B, A, 50, Price::ONE))).unwrap();
    assert_eq!(
        (fills[0].maker, fills[0].taker_sold, fills[0].maker_sold),
        (AccountId(1), 50, 50)
    );
    assert!(conserved(&exchange));
}

#[test]
fn a_taker_that_does_not_cross_rests_at_its_own_limit() {
    let mut exchange = small_exchange();
    run(&mut exchange, sign(1, 1, offer(A, B, 100, Price::ONE))).unwrap();
    // Wants 2 A per B; account 1 gives only 1 A per B.
    let two = Price(Price::ONE.0 * 2);
    let fills = run(&mut exchange, sign(2, 1, offer(B, A, 70, two))).unwrap();
    assert!(fills.is_empty());
    assert_eq!(exchange.resting_amount(AccountId(2), OfferId(1)), Some(70));
    assert_eq!(exchange.open_offer_count(), 2);
    assert!(conserved(&exchange));
}

#[test]
fn cancel_refunds_exactly_the_remainder() {
    let mut exchange = small_exchange();
    run(&mut exchange, sign(1, 1, offer(A, B, 1_000, Price::ONE))).unwrap();
    run(&mut exchange, sign(2, 1, offer(B, A, 300, Price::ONE))).unwrap();
    assert_eq!(exchange.resting_amount(AccountId(1), OfferId(1)), Some(700));
    assert_eq!(balance(&exchange, 1, A), 999_000);
    // Only the owner, naming the right pair and limit, can cancel.
    let before = exchange.clone();
    let by_other = run(&mut exchange, sign(2, 2, cancel(A, B, Price::ONE, 1)));
    let wrong_limit = run(&mut exchange, sign(1, 2, cancel(A, B, half(), 1)));
    let wrong_pair = run(&mut exchange, sign(1, 2, cancel(B, A, Price::ONE, 1)));
    assert_eq!(by_other, Err(DropReason::UnknownOffer));
    assert_eq!(wrong_limit, Err(DropReason::UnknownOffer));
    assert_eq!(wrong_pair, Err(DropReason::UnknownOffer));
    assert_eq!(exchange, before);
    run(&mut exchange, sign(1, 2, cancel(A, B, Price::ONE, 1))).unwrap();
    assert_eq!(balance(&exchange, 1, A), 999_700);
    assert_eq!(balance(&exchange, 1, B), 1_000_300);
    assert_eq!(exchange.open_offer_count(), 0);
    let again = run(&mut exchange, sign(1, 3, cancel(A, B, Price::ONE, 1)));
    assert_eq!(again, Err(DropReason::UnknownOffer));
    assert!(conserved(&exchange));
}

#[test]
fn a_payment_funds_a_later_offer_in_the_same_block() {
    let pay = sign(
        0,
        1,
        Operation::Payment {
            to: AccountId(4),
            asset: A,
            amount: 500,
        },
    );
    let sell = sign(4, 1, offer(A, B, 500, Price::ONE));
    let mut exchange = small_exchange();
    let stats = exchange.execute_block(&[pay, sell], true);
    assert_eq!((stats.accepted, stats.rejected), (2, 0));
    assert_eq!(exchange.resting_amount(AccountId(4), OfferId(1)), Some(500));
    // The other way round the offer runs first, against an empty balance.
    let mut exchange = small_exchange();
    let stats = exchange.execute_block(&[sell, pay], true);
    assert_eq!((stats.accepted, stats.rejected), (1, 1));
    assert_eq!(exchange.open_offer_count(), 0);
    assert_eq!(balance(&exchange, 4, A), 500);
}

#[test]
fn an_account_created_in_a_block_can_transact_later_in_it() {
    let create = sign(
        0,
        1,
        Operation::CreateAccount {
            new_account: AccountId(9),
            public_key: *keypair(9).public_key().as_bytes(),
        },
    );
    let fund = sign(
        0,
        2,
        Operation::Payment {
            to: AccountId(9),
            asset: B,
            amount: 40,
        },
    );
    let spend = sign(
        9,
        1,
        Operation::Payment {
            to: AccountId(0),
            asset: B,
            amount: 40,
        },
    );
    let mut exchange = small_exchange();
    let stats = exchange.execute_block(&[create, fund, spend], true);
    assert_eq!((stats.accepted, stats.rejected), (3, 0));
    assert_eq!(balance(&exchange, 0, B), 1_000_000);
}

#[test]
fn rejections_name_their_reason_and_change_nothing() {
    let mut exchange = small_exchange();
    run(&mut exchange, sign(1, 5, offer(A, B, 10, Price::ONE))).unwrap();
    let mut forged = sign(2, 1, offer(A, B, 10, Price::ONE));
    forged.signature[0] ^= 1;
    let cases = [
        (
            sign(1, 6, offer(A, A, 10, Price::ONE)),
            DropReason::Malformed,
        ),
        (sign(1, 6, offer(A, B, 10, Price(0))), DropReason::Malformed),
        (
            sign(7, 1, offer(A, B, 10, Price::ONE)),
            DropReason::UnknownSource,
        ),
        (forged, DropReason::BadSignature),
        (
            sign(1, 5, offer(A, B, 10, Price::ONE)),
            DropReason::Replayed,
        ),
        (
            sign(1, 70, offer(A, B, 10, Price::ONE)),
            DropReason::SequenceOutOfWindow,
        ),
        (
            sign(1, 6, offer(A, AssetId(2), 10, Price::ONE)),
            DropReason::UnknownAsset,
        ),
        (
            sign(1, 6, cancel(AssetId(5), B, Price::ONE, 5)),
            DropReason::UnknownAsset,
        ),
        (
            sign(1, 6, cancel(A, B, Price::ONE, 4)),
            DropReason::UnknownOffer,
        ),
        (
            sign(1, 6, offer(A, B, 999_991, Price::ONE)),
            DropReason::AccountOverdraft,
        ),
        (
            sign(
                4,
                1,
                Operation::Payment {
                    to: AccountId(0),
                    asset: A,
                    amount: 1,
                },
            ),
            DropReason::AccountOverdraft,
        ),
        (
            sign(
                1,
                6,
                Operation::Payment {
                    to: AccountId(8),
                    asset: A,
                    amount: 1,
                },
            ),
            DropReason::UnknownReceiver,
        ),
        (
            sign(
                1,
                6,
                Operation::CreateAccount {
                    new_account: AccountId(2),
                    public_key: [0; 32],
                },
            ),
            DropReason::AccountExists,
        ),
    ];
    let before = exchange.clone();
    for (signed, reason) in cases {
        assert_eq!(run(&mut exchange, signed), Err(reason), "{signed:?}");
        assert_eq!(exchange, before, "{reason:?} changed the state");
    }
    // 64 ahead is still inside the window.
    assert!(run(&mut exchange, sign(1, 69, offer(A, B, 10, Price::ONE))).is_ok());
}

#[test]
fn a_maker_too_small_to_fill_within_the_taker_limit_is_passed_over() {
    let mut exchange = small_exchange();
    let one_and_half = Price(3u128 << (Price::FRAC_BITS - 1)); // A per B
    run(&mut exchange, sign(1, 1, offer(B, A, 1, one_and_half))).unwrap();
    run(&mut exchange, sign(2, 1, offer(B, A, 100, one_and_half))).unwrap();
    // Selling A for at least 0.6 B per A: one unit of B from account 1 would cost 2 A (0.5 B/A).
    let limit = Price::from_f64(0.6);
    let fills = run(&mut exchange, sign(3, 1, offer(A, B, 10, limit))).unwrap();
    assert_eq!(fills.len(), 1);
    assert_eq!(
        (fills[0].maker, fills[0].taker_sold, fills[0].maker_sold),
        (AccountId(2), 9, 6)
    );
    assert_eq!(exchange.resting_amount(AccountId(1), OfferId(1)), Some(1));
    // The taker's last unit of A cannot buy a whole B at 1.5 A per B: it rests.
    assert_eq!(exchange.resting_amount(AccountId(3), OfferId(1)), Some(1));
    assert!(conserved(&exchange));
}

// ---- property test ----

/// `a · b` as 256 bits (high, low), by 64-bit limbs.
fn wide_mul(a: u128, b: u128) -> (u128, u128) {
    let mask = u64::MAX as u128;
    let (a0, a1, b0, b1) = (a & mask, a >> 64, b & mask, b >> 64);
    let (low, middle_a, middle_b, high) = (a0 * b0, a1 * b0, a0 * b1, a1 * b1);
    let carry = ((low >> 64) + (middle_a & mask) + (middle_b & mask)) >> 64;
    let low_total = low
        .wrapping_add((middle_a & mask) << 64)
        .wrapping_add((middle_b & mask) << 64);
    (
        high + (middle_a >> 64) + (middle_b >> 64) + carry,
        low_total,
    )
}

/// `price · amount ≤ other`, exactly (price in Q48.80: compares with `other · 2^80`).
fn at_most(price: Price, amount: u64, other: u64) -> bool {
    let shift = Price::FRAC_BITS;
    wide_mul(price.0, amount as u128)
        <= ((other as u128) >> (128 - shift), (other as u128) << shift)
}

/// A genesis of `balances.len()` accounts with ids 0, 3, 6, ... (gaps give unknown ids).
fn genesis_of(assets: u16, balances: &[Vec<u64>]) -> Genesis {
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets,
        accounts: balances
            .iter()
            .enumerate()
            .map(|(index, amounts)| {
                let held: Vec<(AssetId, u64)> = amounts
                    .iter()
                    .take(assets as usize)
                    .enumerate()
                    .map(|(asset, amount)| (AssetId(asset as u16), *amount))
                    .collect();
                account(index as u64 * 3, &held)
            })
            .collect(),
    }
}

/// Limits that cross often and exactly: eighths around 1, 1 ± tiny raw offsets, and a spread.
fn limit_from(choice: u64) -> Price {
    match choice % 3 {
        0 => Price(((4 + (choice >> 2) % 13) as u128) << (Price::FRAC_BITS - 3)),
        1 => Price(Price::ONE.0 + ((choice >> 2) % (1 << 20)) as u128 - (1 << 19)),
        _ => Price::from_f64(0.8 + ((choice >> 2) % 400) as f64 / 1000.0),
    }
}

/// Builds transactions one at a time against the live exchange, so sequence numbers and
/// cancels mostly make sense, and runs each, checking the invariants after it.
struct Driver {
    assets: u16,
    known: Vec<u64>,
    next_new_account: u64,
    offers: Vec<(u64, AssetId, AssetId, Price, u64)>,
    verify: bool,
    log: Vec<SignedTransaction>,
}

impl Driver {
    fn next_sequence(exchange: &OrderbookExchange, id: u64, gap: u64) -> u64 {
        exchange
            .account(AccountId(id))
            .map_or(1, |account| account.last_sequence + 1 + gap % 3)
    }

    /// One transaction from a choice tuple, and the reason it must fail with, when certain.
    fn transaction(
        &mut self,
        exchange: &OrderbookExchange,
        (kind, a, b, c): (u8, u64, u64, u64),
    ) -> (SignedTransaction, Option<DropReason>) {
        let source = self.known[(a % self.known.len() as u64) as usize];
        let sequence = Self::next_sequence(exchange, source, a >> 32);
        let asset = |x: u64| AssetId((x % self.assets as u64) as u16);
        match kind % 12 {
            0..=4 => {
                let sell = asset(b);
                let buy = AssetId(
                    ((sell.0 as u64 + 1 + (b >> 8) % (self.assets as u64 - 1)) % self.assets as u64)
                        as u16,
                );
                let amount = if c % 5 == 0 {
                    1 + (c >> 3) % (MAX_AMOUNT / 8)
                } else {
                    1 + (c >> 3) % 600
                };
                let limit = limit_from(c >> 16);
                self.offers.push((source, sell, buy, limit, sequence));
                (
                    sign(source, sequence, offer(sell, buy, amount, limit)),
                    None,
                )
            }
            5 | 6 if !self.offers.is_empty() => {
                let (owner, sell, buy, limit, id) =
                    self.offers[(b % self.offers.len() as u64) as usize];
                let signer = if c % 4 == 0 { source } else { owner };
                let sequence = Self::next_sequence(exchange, signer, a >> 32);
                (sign(signer, sequence, cancel(sell, buy, limit, id)), None)
            }
            7 => {
                let to = if c % 5 == 0 {
                    1 + 3 * (b % 5)
                } else {
                    self.known[(b % self.known.len() as u64) as usize]
                };
                let amount = 1 + (c >> 3) % 800;
                (
                    sign(
                        source,
                        sequence,
                        Operation::Payment {
                            to: AccountId(to),
                            asset: asset(c >> 8),
                            amount,
                        },
                    ),
                    None,
                )
            }
            8 => {
                let new_account = if c % 3 == 0 {
                    source
                } else {
                    self.next_new_account
                };
                if new_account == self.next_new_account {
                    self.next_new_account += 1;
                    self.known.push(new_account);
                }
                let public_key = *keypair(new_account).public_key().as_bytes();
                (
                    sign(
                        source,
                        sequence,
                        Operation::CreateAccount {
                            new_account: AccountId(new_account),
                            public_key,
                        },
                    ),
                    None,
                )
            }
            9 => {
                let mut signed = sign(
                    source,
                    sequence,
                    offer(asset(b), asset(b + 1), 5, Price::ONE),
                );
                signed.signature[(c % 64) as usize] ^= 1 << (b % 8);
                (signed, self.verify.then_some(DropReason::BadSignature))
            }
            10 => {
                let last = exchange
                    .account(AccountId(source))
                    .map_or(0, |acc| acc.last_sequence);
                let (sequence, reason) = match c % 3 {
                    0 => (last, DropReason::Replayed),
                    1 => (last + 65 + b % 100, DropReason::SequenceOutOfWindow),
                    _ => (sequence, DropReason::UnknownAsset),
                };
                let buy = if reason == DropReason::UnknownAsset {
                    AssetId(self.assets + (b % 3) as u16)
                } else {
                    asset(b + 1)
                };
                (
                    sign(source, sequence, offer(asset(b), buy, 5, Price::ONE)),
                    Some(reason),
                )
            }
            _ => {
                let stranger = 1 + 3 * (b % 50); // ids ≡ 1 (mod 3) never exist
                (
                    sign(stranger, 1, offer(asset(b), asset(b + 1), 5, Price::ONE)),
                    Some(DropReason::UnknownSource),
                )
            }
        }
    }

    /// Runs one transaction and checks every per-transaction invariant. Returns whether it
    /// was accepted and how many fills it made.
    fn step(
        &mut self,
        exchange: &mut OrderbookExchange,
        choice: (u8, u64, u64, u64),
    ) -> Result<(bool, usize), TestCaseError> {
        let (signed, expected) = self.transaction(exchange, choice);
        self.log.push(signed);
        let before = exchange.clone();
        let mut fills = Vec::new();
        let outcome = exchange.execute_transaction(&signed, self.verify, &mut fills);
        if let Some(reason) = expected {
            prop_assert_eq!(outcome, Err(reason));
        }
        prop_assert!(conserved(exchange), "conservation after {:?}", signed);
        if outcome.is_err() {
            prop_assert!(fills.is_empty());
            prop_assert!(
                *exchange == before,
                "rejected {:?} changed the state",
                signed
            );
            return Ok((false, 0));
        }
        check_fills(&fills)?;
        check_effect(&before, exchange, &signed, &fills)?;
        Ok((true, fills.len()))
    }
}

/// Both limits hold exactly, and a taker meets makers best limit first.
fn check_fills(fills: &[Fill]) -> Result<(), TestCaseError> {
    for fill in fills {
        prop_assert!(fill.taker_sold > 0 && fill.maker_sold > 0);
        prop_assert!(
            at_most(fill.maker_limit, fill.maker_sold, fill.taker_sold),
            "maker limit: {:?}",
            fill
        );
        prop_assert!(
            at_most(fill.taker_limit, fill.taker_sold, fill.maker_sold),
            "taker limit: {:?}",
            fill
        );
    }
    for pair in fills.windows(2) {
        prop_assert!(
            pair[0].maker_limit <= pair[1].maker_limit,
            "price priority: {:?}",
            pair
        );
    }
    Ok(())
}

/// An offer's amount is its fills plus what rests; a cancel refunds exactly what rested.
fn check_effect(
    before: &OrderbookExchange,
    after: &OrderbookExchange,
    signed: &SignedTransaction,
    fills: &[Fill],
) -> Result<(), TestCaseError> {
    let source = signed.transaction.source;
    let id = OfferId(signed.transaction.sequence);
    match signed.transaction.operation {
        Operation::CreateOffer { amount, .. } => {
            let sold: u64 = fills.iter().map(|f| f.taker_sold).sum();
            let resting = after.resting_amount(source, id).unwrap_or(0);
            prop_assert_eq!(sold + resting, amount);
        }
        Operation::CancelOffer { sell, offer_id, .. } => {
            let remainder = before.resting_amount(source, offer_id);
            prop_assert!(remainder.is_some());
            prop_assert_eq!(after.resting_amount(source, offer_id), None);
            let gained = after.account(source).unwrap().balance(sell)
                - before.account(source).unwrap().balance(sell);
            prop_assert_eq!(Some(gained), remainder);
        }
        _ => prop_assert!(fills.is_empty()),
    }
    Ok(())
}

/// Mostly small balances, so overdrafts and dust happen; some near the issuance cap (five
/// accounts of at most an eighth each stay under it), so huge amounts trade too.
fn balance_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..3_000, 1 => 0..MAX_AMOUNT / 8]
}

fn choices() -> impl Strategy<Value = Vec<(u8, u64, u64, u64)>> {
    proptest::collection::vec(
        (any::<u8>(), any::<u64>(), any::<u64>(), any::<u64>()),
        1..60,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_conserve_assets_and_respect_limits(
        assets in 2u16..=3,
        balances in proptest::collection::vec(proptest::collection::vec(balance_strategy(), 3), 2..6),
        blocks in proptest::collection::vec(choices(), 1..3),
        verify in any::<bool>(),
    ) {
        let genesis = genesis_of(assets, &balances);
        let mut exchange = OrderbookExchange::from_genesis(&genesis).unwrap();
        let mut replay = exchange.clone();
        let mut driver = Driver {
            assets,
            known: genesis.accounts.iter().map(|a| a.id.0).collect(),
            next_new_account: 1_000,
            offers: Vec::new(),
            verify,
            log: Vec::new(),
        };
        for block in blocks {
            driver.log.clear();
            let (mut accepted, mut trades) = (0, 0);
            for choice in block {
                let (ok, fills) = driver.step(&mut exchange, choice)?;
                accepted += ok as usize;
                trades += fills;
            }
            let stats = replay.execute_block(&driver.log, verify);
            prop_assert!(replay == exchange, "execute_block diverged from one-by-one execution");
            prop_assert_eq!(
                (stats.accepted, stats.rejected, stats.trades),
                (accepted, driver.log.len() - accepted, trades)
            );
        }
    }
}
