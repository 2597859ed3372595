//! Wallet files over in-process validators: a payment left pending by missing validators and
//! resent by a later command reaches its payee; a wallet in use is locked; conservation across
//! all wallet files holds under random failures and retries; a vote count never exceeds the
//! committee.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use walras_crypto::{Keypair, PublicKey};
use walras_payments::{genesis_output_id, ChainId, Committee, Epoch, Output, OutputId, Scheme};
use walras_payments_net::CommitteeClient;
use walras_payments_net::{ConnectionPolicy, LoadProbe, Validator, ValidatorSetup};
use walras_payments_net::{Wallet, WalletError};
use walras_types::AssetId;

const CHAIN: ChainId = ChainId(9);
/// Nothing listens on port 1 of loopback: a connection is refused at once, as to a validator
/// that is down.
const DOWN: &str = "127.0.0.1:1";

struct Net {
    committee: Committee,
    addresses: Vec<String>,
    wallets: Vec<PathBuf>,
    keys: Vec<PublicKey>,
    total: u128,
}

/// Four validators (one shard) and `wallets` wallet files holding `coins` each.
async fn start(dir: &Path, wallets: usize, coins: &[u128]) -> Net {
    start_with_policy(dir, wallets, coins, ConnectionPolicy::default())
        .await
        .0
}

/// [`start`] with every validator serving under `policy`; also their load probes.
async fn start_with_policy(
    dir: &Path,
    wallets: usize,
    coins: &[u128],
    policy: ConnectionPolicy,
) -> (Net, Vec<LoadProbe>) {
    let keys: Vec<Keypair> = (0..4u8).map(|i| Keypair::from_seed([i + 1; 32])).collect();
    let payers: Vec<Keypair> = (0..wallets)
        .map(|i| Keypair::from_seed([100 + i as u8; 32]))
        .collect();
    let committee = Committee {
        chain_id: CHAIN,
        epoch: Epoch(0),
        validators: keys.iter().map(Keypair::public_key).collect(),
        shards: 1,
        bls: Vec::new(),
    };
    let mut genesis: Vec<(OutputId, Output)> = Vec::new();
    for payer in &payers {
        for amount in coins {
            genesis.push((
                genesis_output_id(CHAIN, genesis.len() as u32),
                Output {
                    asset: AssetId(0),
                    amount: *amount,
                    owner: payer.public_key(),
                },
            ));
        }
    }
    let mut addresses = Vec::new();
    let mut probes = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        let validator = Validator::start(
            ValidatorSetup {
                committee: committee.clone(),
                scheme: Scheme::Merkle {
                    batch_leaves_max: 128,
                },
                index: index as u16,
                keypair: key.clone(),
                genesis: genesis.clone(),
                data: dir.join(format!("v{index}")),
                fault: None,
            },
            "127.0.0.1:0",
        )
        .await
        .expect("validator starts")
        .with_policy(policy);
        addresses.push(validator.address.to_string());
        probes.push(validator.load_probe());
        tokio::spawn(validator.serve());
    }
    let mut paths = Vec::new();
    for (index, payer) in payers.iter().enumerate() {
        let path = dir.join(format!("wallet{index}.json"));
        let roots = &genesis[index * coins.len()..(index + 1) * coins.len()];
        let seed: [u8; 32] = [100 + index as u8; 32];
        Wallet::create(&path, &seed, roots).expect("wallet");
        assert_eq!(Wallet::read_key(&path).expect("key"), payer.public_key());
        paths.push(path);
    }
    let net = Net {
        committee,
        addresses,
        wallets: paths,
        keys: payers.iter().map(Keypair::public_key).collect(),
        total: coins.iter().sum::<u128>() * wallets as u128,
    };
    (net, probes)
}

impl Net {
    /// A client that reaches every validator but those in `down`.
    fn client(&self, down: &[usize]) -> Arc<CommitteeClient> {
        let addresses = self
            .addresses
            .iter()
            .enumerate()
            .map(|(index, address)| {
                if down.contains(&index) {
                    DOWN.to_string()
                } else {
                    address.clone()
                }
            })
            .collect();
        CommitteeClient::new(self.committee.clone(), addresses)
    }

    fn wallet_of(&self, key: &PublicKey) -> Option<PathBuf> {
        self.keys
            .iter()
            .position(|known| known == key)
            .map(|index| self.wallets[index].clone())
    }

    /// What `walras payments pay` does: load (locked), pay, deliver whatever certified.
    async fn pay(
        &self,
        payer: usize,
        payee: usize,
        amount: u128,
        down: &[usize],
    ) -> Result<(), WalletError> {
        let mut wallet = Wallet::load(&self.wallets[payer], &self.committee)?;
        let result = wallet
            .pay(&self.client(down), self.keys[payee], AssetId(0), amount)
            .await;
        let (_, deliveries) =
            wallet.deliver_undelivered(&self.committee, |key| self.wallet_of(key))?;
        assert!(deliveries.kept.is_empty(), "every payee has a wallet here");
        result.map(|_| ())
    }

    fn balance(&self, index: usize) -> u128 {
        let wallet = Wallet::load(&self.wallets[index], &self.committee).expect("wallet");
        wallet
            .client()
            .coins()
            .iter()
            .map(|coin| coin.output.amount)
            .sum()
    }

    /// Every coin of every wallet file, pending ones included, and every certificate a payer
    /// still keeps for its payee: nothing is created or lost.
    fn total(&self) -> u128 {
        (0..self.wallets.len())
            .map(|index| {
                let wallet = Wallet::load(&self.wallets[index], &self.committee).expect("wallet");
                let undelivered: u128 = wallet
                    .file()
                    .undelivered
                    .iter()
                    .map(|entry| entry.amount.parse::<u128>().expect("amount"))
                    .sum();
                self.balance_of(&wallet) + undelivered
            })
            .sum()
    }

    fn balance_of(&self, wallet: &Wallet) -> u128 {
        wallet
            .client()
            .coins()
            .iter()
            .map(|coin| coin.output.amount)
            .sum()
    }
}

/// Trigger (issue 26 item 1): two of four validators are down, a payment of 5 is left pending;
/// with all back, the next payment (1) resends it first. The resent payment's certificate must
/// reach the payee: payer −6, payee +6 (before the fix the payee got 1 and the 5 was lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_payment_is_delivered_to_its_payee() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start(dir.path(), 2, &[10, 10]).await;
    let failed = net.pay(0, 1, 5, &[0, 1]).await;
    assert!(
        matches!(
            failed,
            Err(WalletError::NoQuorum {
                valid: 2,
                quorum: 3,
                ..
            })
        ),
        "{failed:?}"
    );
    assert_eq!(net.total(), net.total);
    net.pay(0, 1, 1, &[]).await.expect("certifies");
    assert_eq!(net.balance(0), 14);
    assert_eq!(net.balance(1), 26);
    let payer = Wallet::load(&net.wallets[0], &net.committee).expect("wallet");
    assert!(payer.file().pending.is_empty());
    assert!(payer.file().undelivered.is_empty());
    let sent: Vec<&str> = payer
        .file()
        .history
        .iter()
        .filter(|entry| entry.direction == "sent")
        .map(|entry| entry.amount.as_str())
        .collect();
    assert_eq!(sent, ["5", "1"]);
}

/// Trigger (issue 26 item 2): a command holds a wallet while another starts on it. The second
/// waits for the lock and, when it is not released in time, says the wallet is busy (before
/// the fix both read the same file and the later write lost the other's update).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_command_on_a_wallet_in_use_waits_then_says_it_is_busy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start(dir.path(), 1, &[10]).await;
    let held = Wallet::load(&net.wallets[0], &net.committee).expect("wallet");
    let waited = std::time::Instant::now();
    match Wallet::load_waiting(
        &net.wallets[0],
        &net.committee,
        std::time::Duration::from_millis(200),
    ) {
        Err(WalletError::Busy { .. }) => {}
        other => panic!("expected busy, got {:?}", other.err()),
    }
    assert!(waited.elapsed() >= std::time::Duration::from_millis(200));
    drop(held);
    Wallet::load_waiting(
        &net.wallets[0],
        &net.committee,
        std::time::Duration::from_millis(200),
    )
    .expect("free again");
}

/// Trigger (issue 26 item 2): payments from two payers into one payee at once, and two at once
/// from one payer, three rounds. Every coin arrives once and no coin is picked twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_payments_into_one_payee_and_from_one_payer_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = Arc::new(start(dir.path(), 3, &[10, 10, 10, 10, 10, 10]).await);
    for round in 0..3u128 {
        let mut tasks = Vec::new();
        for (payer, amount) in [(0, 1 + round), (1, 2 + round), (0, 3 + round)] {
            let net = net.clone();
            tasks.push(tokio::spawn(
                async move { net.pay(payer, 2, amount, &[]).await },
            ));
        }
        for task in tasks {
            task.await.expect("task").expect("certifies");
        }
    }
    assert_eq!(net.balance(2), 60 + (1 + 2 + 3) * 3 + 3 * 3);
    assert_eq!(net.total(), net.total);
}

/// Trigger (found by the soak): wallet 0 pays wallet 1 while wallet 1 pays wallet 0. Each
/// command holds its payer's lock and must deliver into the other's wallet; holding the payer's
/// lock while waiting for the payee's made both wait 30 s and give up. Delivery takes one lock
/// at a time, so five such rounds finish at once and deliver everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_wallets_paying_each_other_at_once_do_not_wait_for_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = Arc::new(start(dir.path(), 2, &[10, 10, 10, 10, 10]).await);
    let started = std::time::Instant::now();
    for round in 0..5u128 {
        let one = {
            let net = net.clone();
            tokio::spawn(async move { net.pay(0, 1, 1 + round, &[]).await })
        };
        let two = {
            let net = net.clone();
            tokio::spawn(async move { net.pay(1, 0, 2 + round, &[]).await })
        };
        one.await.expect("task").expect("0 pays 1");
        two.await.expect("task").expect("1 pays 0");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        net.balance(0),
        50 - (1 + 2 + 3 + 4 + 5) + (2 + 3 + 4 + 5 + 6)
    );
    assert_eq!(net.total(), net.total);
}

/// Trigger (issue 33): every member's address is one validator's (a committee file listing one
/// port four times). Its votes count once: the error says 1 valid vote of 3 and names the
/// duplicate answer (before the fix: "4 valid votes of 3").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vote_count_never_exceeds_the_committee_when_one_validator_answers_on_every_address() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start(dir.path(), 2, &[10]).await;
    let client = CommitteeClient::new(net.committee.clone(), vec![net.addresses[0].clone(); 4]);
    let mut wallet = Wallet::load(&net.wallets[0], &net.committee).expect("wallet");
    match wallet.pay(&client, net.keys[1], AssetId(0), 5).await {
        Err(WalletError::NoQuorum {
            valid,
            quorum,
            problems,
            ..
        }) => {
            assert_eq!((valid, quorum), (1, 3));
            assert!(
                problems.contains("answered with validator 0's votes"),
                "{problems}"
            );
        }
        other => panic!("expected no quorum, got {:?}", other.map(|(id, _)| id)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Random payments among three wallets, each with a random set of validators down (two or
    /// more down leave it pending; a later payment of that wallet resends it), then one round
    /// with all up. After every step the coins of all wallet files plus the certificates kept
    /// for delivery add up to genesis; at the end nothing is pending or undelivered, the
    /// wallets alone hold genesis, and no input was spent by two payments.
    #[test]
    fn conservation_across_wallets_holds_under_random_failures_and_retries(
        steps in proptest::collection::vec((0usize..3, 1usize..3, 1u128..25, 0u8..16), 1..12)
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let net = start(dir.path(), 3, &[10, 10, 10]).await;
            for (payer, offset, amount, mask) in steps {
                let down: Vec<usize> = (0..4).filter(|bit| mask & (1 << bit) != 0).collect();
                let payee = (payer + offset) % 3;
                match net.pay(payer, payee, amount, &down).await {
                    Ok(()) | Err(WalletError::NoQuorum { .. }) | Err(WalletError::Client(_)) => {}
                    Err(other) => panic!("unexpected: {other}"),
                }
                assert_eq!(net.total(), net.total);
            }
            let client = net.client(&[]);
            for index in 0..3 {
                let mut wallet = Wallet::load(&net.wallets[index], &net.committee).expect("wallet");
                wallet.recover(&client).await.expect("every pending one certifies");
                let _ = wallet
                    .deliver_undelivered(&net.committee, |key| net.wallet_of(key))
                    .expect("delivered");
            }
            let mut spent = std::collections::BTreeMap::new();
            let mut sum = 0;
            for index in 0..3 {
                let wallet = Wallet::load(&net.wallets[index], &net.committee).expect("wallet");
                assert!(wallet.file().pending.is_empty());
                assert!(wallet.file().undelivered.is_empty());
                assert!(wallet.client().stuck_inputs().is_empty());
                sum += wallet.client().balance(AssetId(0));
                for entry in wallet.file().history.iter().filter(|e| e.direction == "sent") {
                    for input in &entry.inputs {
                        if let Some(other) = spent.insert(input.clone(), entry.payment.clone()) {
                            assert_eq!(other, entry.payment, "input {input} spent twice");
                        }
                    }
                }
            }
            assert_eq!(sum, net.total);
        });
    }
}

/// Issue 31, trigger: sixteen wallets pay a seventeenth at once, into validators whose shard
/// queue holds one payment, so most requests are refused for overload (typed, with a retry
/// hint). Each wallet resends its unchanged request after the hint (spread so they do not come
/// back together): every payment certifies, nothing stays pending, and the coins of all wallet
/// files add up to genesis.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn payments_refused_for_overload_are_resent_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = ConnectionPolicy {
        queued_max: 1,
        queue_wait_max: std::time::Duration::from_millis(20),
        ..ConnectionPolicy::default()
    };
    let (net, probes) = start_with_policy(dir.path(), 17, &[10], policy).await;
    let net = Arc::new(net);
    let mut tasks = Vec::new();
    for payer in 0..16 {
        let net = net.clone();
        tasks.push(tokio::spawn(
            async move { net.pay(payer, 16, 3, &[]).await },
        ));
    }
    for task in tasks {
        task.await
            .expect("task")
            .expect("certifies after resending");
    }
    let refused: u64 = probes
        .iter()
        .map(|probe| probe.loads()[0].refused_at_admission)
        .sum();
    assert!(refused > 0, "sixteen payments at once into queues of one");
    assert_eq!(net.balance(16), 10 + 16 * 3);
    for index in 0..16 {
        assert_eq!(net.balance(index), 7);
        let wallet = Wallet::load(&net.wallets[index], &net.committee).expect("wallet");
        assert!(wallet.file().pending.is_empty());
    }
    assert_eq!(net.total(), net.total);
}
