//! Block workloads keep every promise of `walras_sim::workload`: the same bytes for any thread
//! count; every transaction decodes; every signature verifies against the source's genesis key
//! except injected bad signatures; and, replaying the blocks with an independent model of the
//! exchange's filter (SPEEDEX §8, App. I), non-fault transactions obey the sequence rules, never
//! overdraft the balance the generator can know, never cancel twice or create an account twice,
//! while each recorded fault is exactly the conflict it names. Sizes are small so this runs in
//! seconds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use walras_crypto::{verify, PublicKey, Signature};
use walras_sim::workload::MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE;
use walras_sim::{
    generate_workload, FaultKind, InjectedFault, Workload, WorkloadError, WorkloadGenerator,
    WorkloadParams,
};
use walras_types::transaction::SEQUENCE_WINDOW;
use walras_types::{
    AccountId, AssetId, Genesis, OfferId, Operation, Price, SignedTransaction, Transaction,
};

fn params(accounts: usize, blocks: usize, txs_per_block: usize, seed: u64) -> WorkloadParams {
    WorkloadParams {
        accounts,
        assets: 6,
        blocks,
        txs_per_block,
        seed,
        payments_only: false,
        faults: true,
        market_spread_ppm: None,
    }
}

/// The workload most tests replay: enough blocks for cancels, enough slots for every fault kind.
fn standard() -> Workload {
    generate_workload(&params(400, 4, 1_500, 7), 2)
}

fn encoded_blocks(workload: &Workload) -> Vec<Vec<u8>> {
    workload
        .blocks
        .iter()
        .map(|block| SignedTransaction::encode_list(block))
        .collect()
}

#[test]
fn same_parameters_give_the_same_bytes_for_any_thread_count() {
    let params = params(300, 3, 700, 11);
    let one = generate_workload(&params, 1);
    for threads in [0, 2, 3, 8] {
        let other = generate_workload(&params, threads);
        assert_eq!(other, one, "threads = {threads}");
        assert_eq!(encoded_blocks(&other), encoded_blocks(&one));
        assert_eq!(other.genesis.encode(), one.genesis.encode());
    }
    let reseeded = generate_workload(&WorkloadParams { seed: 12, ..params }, 1);
    assert_ne!(encoded_blocks(&reseeded), encoded_blocks(&one));
}

#[test]
fn the_streaming_generator_makes_the_same_blocks() {
    let params = params(200, 2, 300, 5);
    let whole = generate_workload(&params, 2);
    let mut generator = WorkloadGenerator::new(&params, 1).expect("valid parameters");
    assert_eq!(generator.genesis(), &whole.genesis);
    let mut faults = Vec::new();
    for (number, expected) in whole.blocks.iter().enumerate() {
        let block = generator.next_block(3).expect("another block");
        assert_eq!(block.number, number);
        assert_eq!(&block.transactions, expected);
        faults.extend(block.faults);
    }
    assert!(generator.next_block(1).is_none());
    assert_eq!(faults, whole.faults);
    assert_eq!(generator.stats(), &whole.stats);
}

#[test]
fn genesis_and_every_block_decode() {
    let workload = standard();
    assert_eq!(workload.genesis.validate(), Ok(()));
    assert_eq!(
        Genesis::decode(&workload.genesis.encode()),
        Ok(workload.genesis.clone())
    );
    for (block, bytes) in workload.blocks.iter().zip(encoded_blocks(&workload)) {
        assert_eq!(block.len(), 1_500);
        assert_eq!(SignedTransaction::decode_list(&bytes).as_ref(), Ok(block));
    }
    for supply in workload.genesis.supply() {
        assert!(supply <= 1 << 60, "supply {supply}");
    }
}

fn genesis_key(genesis: &Genesis, account: AccountId) -> PublicKey {
    let entry = &genesis.accounts[account.0 as usize];
    assert_eq!(entry.id, account, "genesis ids are 0..accounts");
    PublicKey::from_bytes(&entry.public_key).expect("genesis keys are valid points")
}

fn signature_verifies(genesis: &Genesis, signed: &SignedTransaction) -> bool {
    let key = genesis_key(genesis, signed.transaction.source);
    let signature = Signature::from_bytes(&signed.signature).expect("64 bytes");
    verify(&key, &signed.transaction.encode(), &signature).is_ok()
}

#[test]
fn signatures_verify_except_injected_bad_ones() {
    let workload = standard();
    let bad: BTreeSet<(usize, usize)> = faults_of(&workload, FaultKind::BadSignature);
    assert!(!bad.is_empty());
    for (block_number, block) in workload.blocks.iter().enumerate() {
        for (index, signed) in block.iter().enumerate() {
            let expected = !bad.contains(&(block_number, index));
            assert_eq!(
                signature_verifies(&workload.genesis, signed),
                expected,
                "block {block_number} tx {index}"
            );
        }
    }
}

fn faults_of(workload: &Workload, kind: FaultKind) -> BTreeSet<(usize, usize)> {
    workload
        .faults
        .iter()
        .filter(|fault| fault.kind == kind)
        .map(|fault| (fault.block, fault.index))
        .collect()
}

/// Debits of `(asset, amount)` a transaction makes when it is accepted.
fn debit_of(operation: &Operation) -> Option<(AssetId, u64)> {
    match *operation {
        Operation::CreateOffer { sell, amount, .. } => Some((sell, amount)),
        Operation::Payment { asset, amount, .. } => Some((asset, amount)),
        _ => None,
    }
}

/// An independent replay of the blocks: what the exchange's filter would drop, and a lower
/// bound on balances (genesis, minus accepted debits, plus accepted payments; trades ignored).
struct Replay<'w> {
    workload: &'w Workload,
    genesis_accounts: u64,
    supply: Vec<u64>,
    balance_floor: HashMap<(AccountId, AssetId), u64>,
    last_sequence: HashMap<AccountId, u64>,
    existing: BTreeSet<AccountId>,
    open_offers: BTreeMap<(AccountId, OfferId), (AssetId, AssetId, Price)>,
    /// Balances that trades or cancels may have raised above the floor: the account offered to
    /// buy the asset, or cancelled an offer selling it.
    inexact: BTreeSet<(AccountId, AssetId)>,
    accounts_created: u64,
    /// Overdraft faults whose transaction alone was affordable (only the sum overdraws).
    sum_overdrafts: u64,
}

/// One block's facts, before anything is applied.
struct BlockFacts {
    faults: BTreeMap<usize, FaultKind>,
    /// Accounts whose transactions the filter drops (overdraft, reused sequence, double cancel).
    dropped_accounts: BTreeSet<AccountId>,
    /// Transactions dropped on their own (bad signature, duplicated creation).
    dropped: BTreeSet<usize>,
}

impl<'w> Replay<'w> {
    fn new(workload: &'w Workload) -> Replay<'w> {
        let genesis = &workload.genesis;
        let mut balance_floor = HashMap::new();
        for account in &genesis.accounts {
            for &(asset, amount) in &account.balances {
                balance_floor.insert((account.id, asset), amount);
            }
        }
        Replay {
            workload,
            genesis_accounts: genesis.accounts.len() as u64,
            supply: genesis.supply(),
            balance_floor,
            last_sequence: HashMap::new(),
            existing: genesis.accounts.iter().map(|account| account.id).collect(),
            open_offers: BTreeMap::new(),
            inexact: BTreeSet::new(),
            accounts_created: 0,
            sum_overdrafts: 0,
        }
    }

    /// Replays every block; returns the accounts created and the sum-only overdrafts.
    fn run(mut self) -> (u64, u64) {
        for (number, block) in self.workload.blocks.iter().enumerate() {
            let facts = self.facts(number, block);
            self.check_faults(number, block, &facts);
            self.check_regular(number, block, &facts);
            self.apply(block, &facts);
        }
        (self.accounts_created, self.sum_overdrafts)
    }

    fn facts(&self, number: usize, block: &[SignedTransaction]) -> BlockFacts {
        let faults: BTreeMap<usize, FaultKind> = self
            .workload
            .faults
            .iter()
            .filter(|fault| fault.block == number)
            .map(|fault| (fault.index, fault.kind))
            .collect();
        let mut dropped_accounts = BTreeSet::new();
        let mut dropped = BTreeSet::new();
        for (&index, &kind) in &faults {
            let source = block[index].transaction.source;
            match kind {
                FaultKind::Overdraft | FaultKind::ReusedSequence | FaultKind::DoubleCancel => {
                    dropped_accounts.insert(source);
                }
                FaultKind::BadSignature => {
                    dropped.insert(index);
                }
                FaultKind::DuplicateAccountCreation => {
                    let id = created_id(&block[index].transaction.operation);
                    for (other, signed) in block.iter().enumerate() {
                        if let Operation::CreateAccount { new_account, .. } =
                            signed.transaction.operation
                        {
                            if Some(new_account) == id {
                                dropped.insert(other);
                            }
                        }
                    }
                }
            }
        }
        BlockFacts {
            faults,
            dropped_accounts,
            dropped,
        }
    }

    /// Each fault record names a transaction that completes exactly that conflict.
    fn check_faults(&mut self, number: usize, block: &[SignedTransaction], facts: &BlockFacts) {
        for (&index, &kind) in &facts.faults {
            let fault = &block[index].transaction;
            let earlier = &block[..index];
            let same_source =
                |signed: &&SignedTransaction| signed.transaction.source == fault.source;
            let context = format!("block {number} tx {index} {kind}");
            match kind {
                FaultKind::Overdraft => {
                    let (asset, amount) = debit_of(&fault.operation).expect(&context);
                    let debits: u64 = block[..=index]
                        .iter()
                        .enumerate()
                        .filter(|(i, signed)| {
                            signed.transaction.source == fault.source && !facts.dropped.contains(i)
                        })
                        .filter_map(|(_, signed)| debit_of(&signed.transaction.operation))
                        .filter(|&(a, _)| a == asset)
                        .map(|(_, amount)| amount)
                        .sum();
                    let exact = !self.inexact.contains(&(fault.source, asset));
                    let floor = self.balance_floor.get(&(fault.source, asset)).copied();
                    let floor = floor.unwrap_or(0);
                    assert!(
                        debits > self.supply[usize::from(asset.0)] || (exact && debits > floor),
                        "{context}: debits {debits} may not overdraw"
                    );
                    if exact && amount <= floor {
                        self.sum_overdrafts += 1;
                    }
                }
                FaultKind::ReusedSequence => {
                    let partner = earlier.iter().enumerate().find(|(_, signed)| {
                        same_source(signed) && signed.transaction.sequence == fault.sequence
                    });
                    let (partner, _) = partner.expect(&context);
                    assert!(
                        signature_verifies(&self.workload.genesis, &block[partner])
                            && signature_verifies(&self.workload.genesis, &block[index]),
                        "{context}: both must be validly signed"
                    );
                }
                FaultKind::BadSignature => {
                    assert!(!signature_verifies(&self.workload.genesis, &block[index]));
                }
                FaultKind::DoubleCancel => {
                    assert!(matches!(fault.operation, Operation::CancelOffer { .. }));
                    assert!(
                        earlier.iter().any(|signed| same_source(&signed)
                            && signed.transaction.operation == fault.operation),
                        "{context}"
                    );
                }
                FaultKind::DuplicateAccountCreation => {
                    let id = created_id(&fault.operation).expect(&context);
                    assert!(
                        earlier
                            .iter()
                            .any(|signed| created_id(&signed.transaction.operation) == Some(id)),
                        "{context}"
                    );
                    assert!(!self.existing.contains(&id), "{context}: id already exists");
                }
            }
        }
    }

    /// Everything that is not a fault obeys the rules, so only faults cause drops.
    fn check_regular(&self, number: usize, block: &[SignedTransaction], facts: &BlockFacts) {
        let mut per_account: BTreeMap<AccountId, Vec<usize>> = BTreeMap::new();
        for (index, signed) in block.iter().enumerate() {
            per_account
                .entry(signed.transaction.source)
                .or_default()
                .push(index);
        }
        let mut created = BTreeSet::new();
        for (&account, indices) in &per_account {
            let context = format!("block {number} account {}", account.0);
            assert!(
                account.0 < self.genesis_accounts,
                "{context}: sources are genesis accounts"
            );
            assert!(
                indices.len() <= SEQUENCE_WINDOW as usize,
                "{context}: over 64 txs"
            );
            let last = self.last_sequence.get(&account).copied().unwrap_or(0);
            let mut previous = last;
            let mut debits: BTreeMap<AssetId, u64> = BTreeMap::new();
            let mut cancels = BTreeSet::new();
            for &index in indices {
                let transaction = &block[index].transaction;
                let is_fault = facts.faults.contains_key(&index);
                assert!(
                    transaction.sequence > last && transaction.sequence <= last + SEQUENCE_WINDOW,
                    "{context}: sequence {} outside ({last}, {}]",
                    transaction.sequence,
                    last + SEQUENCE_WINDOW
                );
                if facts.faults.get(&index) != Some(&FaultKind::ReusedSequence) {
                    assert!(transaction.sequence > previous, "{context}: not increasing");
                    previous = transaction.sequence;
                }
                if is_fault || facts.dropped_accounts.contains(&account) {
                    continue;
                }
                if let Some((asset, amount)) = debit_of(&transaction.operation) {
                    *debits.entry(asset).or_default() += amount;
                }
                self.check_operation(&context, transaction, &mut cancels, &mut created);
            }
            if !facts.dropped_accounts.contains(&account) {
                for (asset, total) in debits {
                    let floor = self
                        .balance_floor
                        .get(&(account, asset))
                        .copied()
                        .unwrap_or(0);
                    assert!(
                        total <= floor,
                        "{context}: debits {total} of asset {} > {floor}",
                        asset.0
                    );
                }
            }
        }
    }

    fn check_operation(
        &self,
        context: &str,
        transaction: &Transaction,
        cancels: &mut BTreeSet<OfferId>,
        created: &mut BTreeSet<AccountId>,
    ) {
        match transaction.operation {
            Operation::CancelOffer {
                sell,
                buy,
                min_price,
                offer_id,
            } => {
                assert!(
                    cancels.insert(offer_id),
                    "{context}: cancels an offer twice"
                );
                assert_eq!(
                    self.open_offers.get(&(transaction.source, offer_id)),
                    Some(&(sell, buy, min_price)),
                    "{context}: cancels an offer it did not create in an earlier block"
                );
            }
            Operation::Payment { to, .. } => {
                assert!(
                    self.existing.contains(&to),
                    "{context}: pays a missing account"
                );
                assert_ne!(to, transaction.source, "{context}: pays itself");
            }
            Operation::CreateAccount { new_account, .. } => {
                assert!(
                    !self.existing.contains(&new_account),
                    "{context}: recreates"
                );
                assert!(new_account.0 >= self.genesis_accounts);
                assert!(created.insert(new_account), "{context}: created twice");
            }
            Operation::CreateOffer { .. } => {}
            Operation::DepositToPayments { .. } | Operation::WithdrawFromPayments { .. } => {
                panic!("{context}: the generator made a payments-bridge transaction")
            }
        }
    }

    fn apply(&mut self, block: &[SignedTransaction], facts: &BlockFacts) {
        for (index, signed) in block.iter().enumerate() {
            let transaction = &signed.transaction;
            if facts.dropped.contains(&index)
                || facts.dropped_accounts.contains(&transaction.source)
            {
                continue;
            }
            let last = self.last_sequence.entry(transaction.source).or_default();
            *last = (*last).max(transaction.sequence);
            if let Some((asset, amount)) = debit_of(&transaction.operation) {
                let floor = self
                    .balance_floor
                    .entry((transaction.source, asset))
                    .or_default();
                *floor = floor.checked_sub(amount).expect("checked in check_regular");
            }
            match transaction.operation {
                Operation::CreateOffer {
                    sell,
                    buy,
                    min_price,
                    ..
                } => {
                    let key = (transaction.source, OfferId(transaction.sequence));
                    self.open_offers.insert(key, (sell, buy, min_price));
                    self.inexact.insert((transaction.source, buy));
                }
                Operation::CancelOffer { offer_id, sell, .. } => {
                    self.open_offers.remove(&(transaction.source, offer_id));
                    self.inexact.insert((transaction.source, sell));
                }
                Operation::Payment { to, asset, amount } => {
                    *self.balance_floor.entry((to, asset)).or_default() += amount;
                }
                Operation::CreateAccount { new_account, .. } => {
                    self.existing.insert(new_account);
                    self.accounts_created += 1;
                }
                Operation::DepositToPayments { .. } | Operation::WithdrawFromPayments { .. } => {
                    panic!("the generator made a payments-bridge transaction")
                }
            }
        }
    }
}

fn created_id(operation: &Operation) -> Option<AccountId> {
    match *operation {
        Operation::CreateAccount { new_account, .. } => Some(new_account),
        _ => None,
    }
}

#[test]
fn replay_finds_only_the_recorded_faults() {
    let workload = standard();
    let (accounts_created, sum_overdrafts) = Replay::new(&workload).run();
    assert_eq!(accounts_created, workload.stats.accounts_created);
    assert!(
        sum_overdrafts > 0,
        "every overdraft is a single oversized debit"
    );
    for kind in FaultKind::ALL {
        assert!(
            workload.stats.faults.of(kind) > 0,
            "no {kind} in the standard workload"
        );
    }
}

#[test]
fn replay_holds_across_seeds_and_shapes() {
    for (accounts, assets, blocks, txs, seed) in
        [(2, 2, 3, 64, 1), (50, 2, 5, 400, 2), (1_000, 40, 2, 900, 3)]
    {
        let params = WorkloadParams {
            accounts,
            assets,
            blocks,
            txs_per_block: txs,
            seed,
            payments_only: false,
            faults: true,
            market_spread_ppm: None,
        };
        let workload = generate_workload(&params, 2);
        let (created, _) = Replay::new(&workload).run();
        assert_eq!(created, workload.stats.accounts_created, "{params:?}");
    }
}

#[test]
fn payments_only_has_only_payments() {
    let params = WorkloadParams {
        payments_only: true,
        faults: true,
        ..params(300, 3, 1_000, 9)
    };
    let workload = generate_workload(&params, 2);
    for block in &workload.blocks {
        for signed in block {
            assert!(
                matches!(signed.transaction.operation, Operation::Payment { .. }),
                "{signed:?}"
            );
        }
    }
    assert!(workload
        .faults
        .iter()
        .all(|fault| FaultKind::PAYMENTS.contains(&fault.kind)));
    assert!(!workload.faults.is_empty());
    assert_eq!(workload.stats.operations.payment, 3_000);
    Replay::new(&workload).run();
}

#[test]
fn stats_add_up() {
    let workload = standard();
    let stats = &workload.stats;
    assert_eq!(stats.transactions, 4 * 1_500);
    assert_eq!(stats.operations.total(), stats.transactions);
    let mut recount = [0u64; 4];
    for signed in workload.blocks.iter().flatten() {
        recount[match signed.transaction.operation {
            Operation::CreateOffer { .. } => 0,
            Operation::CancelOffer { .. } => 1,
            Operation::Payment { .. } => 2,
            Operation::CreateAccount { .. } => 3,
            Operation::DepositToPayments { .. } | Operation::WithdrawFromPayments { .. } => {
                panic!("the generator made a payments-bridge transaction")
            }
        }] += 1;
    }
    let ops = stats.operations;
    assert_eq!(
        recount,
        [
            ops.create_offer,
            ops.cancel_offer,
            ops.payment,
            ops.create_account
        ]
    );
    assert_eq!(stats.faults.total(), workload.faults.len() as u64);
    for kind in FaultKind::ALL {
        let listed = workload.faults.iter().filter(|f| f.kind == kind).count() as u64;
        assert_eq!(stats.faults.of(kind), listed, "{kind}");
    }
    let mut sorted: Vec<InjectedFault> = workload.faults.clone();
    sorted.sort_by_key(|fault| (fault.block, fault.index));
    assert_eq!(sorted, workload.faults, "faults are listed in block order");
}

#[test]
fn the_mix_follows_the_model() {
    let workload = generate_workload(&params(3_000, 3, 6_000, 21), 2);
    // The first block has nothing to cancel; look at the later ones.
    let later: Vec<&SignedTransaction> = workload.blocks[1..].iter().flatten().collect();
    let share = |predicate: fn(&Operation) -> bool| {
        later
            .iter()
            .filter(|signed| predicate(&signed.transaction.operation))
            .count() as f64
            / later.len() as f64
    };
    let offers = share(|op| matches!(op, Operation::CreateOffer { .. }));
    let cancels = share(|op| matches!(op, Operation::CancelOffer { .. }));
    let payments = share(|op| matches!(op, Operation::Payment { .. }));
    let creations = share(|op| matches!(op, Operation::CreateAccount { .. }));
    assert!((0.65..0.80).contains(&offers), "offers {offers}");
    // Cancels only target offers the model expects to be still resting (out of the money at the
    // block's valuations), so fewer are possible than the 15–20% asked for when few offers rest.
    assert!((0.10..0.21).contains(&cancels), "cancels {cancels}");
    assert!((0.05..0.10).contains(&payments), "payments {payments}");
    assert!((0.001..0.02).contains(&creations), "creations {creations}");
    let fault_share = workload.faults.len() as f64 / workload.stats.transactions as f64;
    assert!((0.005..0.02).contains(&fault_share), "faults {fault_share}");
}

#[test]
fn a_few_accounts_are_very_active() {
    let workload = generate_workload(&params(5_000, 2, 8_000, 4), 2);
    let mut sent: HashMap<AccountId, usize> = HashMap::new();
    for signed in workload.blocks.iter().flatten() {
        *sent.entry(signed.transaction.source).or_default() += 1;
    }
    let mut counts: Vec<usize> = sent.into_values().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let top_fifty: usize = counts.iter().take(50).sum();
    // 1% of the accounts send a large share; the busiest reach the 64-per-block cap.
    assert!(
        top_fifty * 100 > 16_000 * 15,
        "top 50 accounts sent {top_fifty}"
    );
    assert!(counts[0] > 64, "busiest account sent {}", counts[0]);
    assert!(
        counts.len() > 1_000,
        "only {} accounts sent anything",
        counts.len()
    );
}

#[test]
fn invalid_parameters_are_named() {
    let good = params(100, 3, 100, 1);
    let cases = [
        (
            WorkloadParams {
                accounts: 1,
                ..good
            },
            WorkloadError::Accounts(1),
        ),
        (
            WorkloadParams { assets: 1, ..good },
            WorkloadError::Assets(1),
        ),
        (
            WorkloadParams {
                assets: 1025,
                ..good
            },
            WorkloadError::Assets(1025),
        ),
        (
            WorkloadParams { blocks: 0, ..good },
            WorkloadError::Blocks(0),
        ),
        (
            WorkloadParams {
                txs_per_block: 0,
                ..good
            },
            WorkloadError::TxsPerBlock(0),
        ),
        (
            WorkloadParams {
                txs_per_block: 100 * MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE + 1,
                ..good
            },
            WorkloadError::TooFewAccounts {
                accounts: 100,
                txs_per_block: 3_201,
            },
        ),
    ];
    for (params, expected) in cases {
        assert_eq!(params.validate(), Err(expected.clone()));
        assert!(WorkloadGenerator::new(&params, 1).is_err());
        assert!(!expected.to_string().is_empty());
    }
    assert_eq!(good.validate(), Ok(()));
    let message = WorkloadError::TooFewAccounts {
        accounts: 100,
        txs_per_block: 3_201,
    }
    .to_string();
    assert!(message.contains("at least 101 accounts"), "{message}");
}

/// Share of the workload's new offers whose limit is above the model's valuation ratio
/// (out of the money when the block was made).
fn out_of_the_money_share(workload: &Workload) -> f64 {
    let (mut above, mut offers) = (0u64, 0u64);
    for (block, valuations) in workload.blocks.iter().zip(&workload.valuations) {
        for signed in block {
            if let Operation::CreateOffer {
                sell,
                buy,
                min_price,
                ..
            } = signed.transaction.operation
            {
                let ratio = valuations[usize::from(sell.0)] / valuations[usize::from(buy.0)];
                offers += 1;
                above += u64::from(min_price.to_f64() > ratio);
            }
        }
    }
    above as f64 / offers.max(1) as f64
}

#[test]
fn the_market_model_makes_two_sided_books_and_keeps_every_workload_rule() {
    let base = params(2_000, 4, 2_000, 21);
    let market = WorkloadParams {
        market_spread_ppm: Some(1_000),
        ..base
    };
    let default_share = out_of_the_money_share(&generate_workload(&base, 2));
    let workload = generate_workload(&market, 2);
    let market_share = out_of_the_money_share(&workload);
    assert!(
        (0.45..=0.55).contains(&market_share),
        "market limits are symmetric around the ratio: {market_share}"
    );
    assert!(
        default_share < 0.4,
        "the default model leans in the money: {default_share}"
    );
    let (created, _) = Replay::new(&workload).run();
    assert_eq!(created, workload.stats.accounts_created);
    assert_eq!(
        generate_workload(&market, 1).blocks,
        workload.blocks,
        "deterministic for any thread count"
    );
}

#[test]
fn a_market_spread_out_of_range_is_named() {
    let bad = WorkloadParams {
        market_spread_ppm: Some(5),
        ..params(100, 3, 100, 1)
    };
    assert_eq!(bad.validate(), Err(WorkloadError::MarketSpread(5)));
}
