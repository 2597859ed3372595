//! The payments bridge over processes (issue 14): one exchange node whose genesis names the
//! payments committee, `walras payments localnet` with 4 validators × 2 shards polling it
//! (`--exchange`), wallets and `walras payments deposit`.
//!
//! deposit → pay → pay → withdraw conserves every asset on both sides; a coin still spendable
//! in the lane (not at the account's withdrawal address), a short certificate, a wrong epoch and
//! a wrong chain are each refused by the node with their typed code and change nothing, and a
//! second withdrawal of an output is refused; spending a deposit that no committed block made is
//! refused by the validators (`UnknownInput`).
//!
//! The withdrawal goes through `walras payments withdraw` (BLS votes from the validators,
//! aggregated by the client); the refused variants are built here from real validator votes
//! (a subset for the short certificate, the claimed chain or epoch altered for the others).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use walras_client::NodeApi;

use walras_client::{keyfile, NodeClient};
use walras_crypto::{Keypair, PublicKey};
use walras_engine::deposit_output;
use walras_payments::bls::aggregate_certificate;
use walras_payments::{withdrawal_owner, Certificate, ChainId};
use walras_payments_net::CommitteeClient;
use walras_payments_net::Wallet;
use walras_payments_net::{CommitteeConfig, CommitteeFile};
use walras_payments_net::{Request, Response};
use walras_testkit::{walras_bin, TempDir};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{
    AccountId, AssetId, Operation, PaymentsCertificate, PaymentsOutput, PaymentsValidator,
    SignedTransaction, Transaction,
};

const CHAIN: u64 = 7;
const BALANCE: u64 = 1_000_000;
const PAY_ASSET: u16 = 1;

struct Localnet<'a> {
    dir: &'a Path,
}

impl Drop for Localnet<'_> {
    fn drop(&mut self) {
        let _ = Command::new(walras_bin())
            .args(["payments", "localnet", "down", "--dir"])
            .arg(self.dir)
            .output();
    }
}

fn walras(args: &[&str]) -> std::process::Output {
    Command::new(walras_bin())
        .args(args)
        .output()
        .expect("walras runs")
}

fn ok(output: std::process::Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_node(data: &Path, genesis: &Path) -> (Node, String) {
    let mut child = Command::new(walras_bin())
        .args(["node", "--data"])
        .arg(data)
        .arg("--genesis")
        .arg(genesis)
        .args(["--listen", "127.0.0.1:0", "--block-interval-ms", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("walras node starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let url = first
        .strip_prefix("walras node listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    std::thread::spawn(move || for _ in lines {});
    (Node(child), url)
}

fn seed_of(wallet: &Wallet) -> [u8; 32] {
    hex::decode(&wallet.file().secret_seed)
        .expect("hex")
        .try_into()
        .expect("32 bytes")
}

/// A withdrawal certificate on the output `certificate` certifies, aggregated from the BLS
/// votes of `signers` (asked of the running validators), claiming (`chain`, `epoch`).
async fn certify(
    client: &CommitteeClient,
    certificate: &Certificate,
    signers: &[u16],
    chain: u64,
    epoch: u64,
) -> PaymentsCertificate {
    let certificate = certificate.clone();
    let mut votes = Vec::new();
    for validator in signers {
        let request = Request::WithdrawalVote {
            certificate: certificate.clone(),
        };
        match client.call(*validator, &request).await {
            Ok(Response::BlsVote { signature, .. }) => votes.push((*validator, signature)),
            other => panic!("validator {validator}: {other:?}"),
        }
    }
    let aggregate = aggregate_certificate(
        certificate.chain_id,
        certificate.epoch,
        certificate.id,
        certificate.output,
        &votes,
    )
    .expect("aggregate");
    PaymentsCertificate {
        chain_id: chain,
        epoch,
        signers: signers.iter().fold(0, |bits, v| bits | 1u128 << v),
        aggregate: aggregate.aggregate,
    }
}

fn payments_output(certificate: &Certificate) -> PaymentsOutput {
    PaymentsOutput {
        id: certificate.id.0 .0,
        asset: certificate.output.asset,
        amount: u64::try_from(certificate.output.amount).expect("small"),
        owner: *certificate.output.owner.as_bytes(),
    }
}

fn sign(keypair: &Keypair, source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    let transaction = Transaction {
        source: AccountId(source),
        sequence,
        operation,
    };
    SignedTransaction {
        signature: *keypair.sign(&transaction.encode()).as_bytes(),
        transaction,
    }
}

/// Per asset: the exchange's balances of `accounts` plus the escrow.
async fn exchange_totals(node: &NodeClient, accounts: &[u64]) -> (Vec<u128>, Vec<u64>) {
    let mut totals = vec![0u128; 2];
    for id in accounts {
        for balance in node.account(*id).await.expect("account").balances {
            totals[usize::from(balance.asset)] += u128::from(balance.amount);
        }
    }
    let escrow = node.payments_escrow().await.expect("escrow").escrow;
    for (asset, amount) in escrow.iter().enumerate() {
        totals[asset] += u128::from(*amount);
    }
    (totals, escrow)
}

/// Waits until the transaction is in a committed block; returns its status.
async fn committed(node: &NodeClient, signed: &SignedTransaction) -> String {
    let hash = walras_engine::transaction_hash(signed).to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(status) = node.transaction(&hash).await {
            if status.status != "pending" {
                return status.status;
            }
        }
        assert!(Instant::now() < deadline, "{hash} is not committed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn deposit_pay_pay_withdraw_conserves_and_every_bad_withdrawal_is_refused() {
    let dir = TempDir::new("payments-bridge");
    let pay = dir.path().join("pay");
    let pay_arg = pay.to_str().expect("utf-8 path");
    ok(
        walras(&[
            "payments",
            "localnet",
            "--validators",
            "4",
            "--shards",
            "2",
            "--wallets",
            "3",
            "--coins",
            "1",
            "--chain-id",
            "7",
            "--dir",
            pay_arg,
        ]),
        "localnet",
    );
    let localnet = Localnet { dir: &pay };
    let committee: CommitteeConfig =
        CommitteeFile::load(&pay.join("committee.json")).expect("committee.json");
    let committee_path = pay.join("committee.json");
    let wallet_path = |index: usize| pay.join("wallets").join(format!("wallet{index}.json"));
    // Keys only: a loaded wallet holds its lock, and the `walras payments` commands below need
    // these wallets.
    let wallet_keys: Vec<PublicKey> = (0..3)
        .map(|index| Wallet::read_key(&wallet_path(index)).expect("wallet"))
        .collect();

    // The exchange: account 1 is a plain trader, accounts 2 and 3 hold the wallets' keys.
    let trader = Keypair::from_seed([0x31; 32]);
    let trader_key = dir.path().join("trader.key");
    keyfile::write(&trader_key, &[0x31; 32]).expect("key file");
    let keys = [trader.public_key(), wallet_keys[0], wallet_keys[1]];
    let epoch = committee.committee.epoch.0;
    // The exchange genesis without a committee; `walras payments exchange-genesis` adds the
    // payments section from committee.json (keys and proofs of possession, checked).
    let genesis = Genesis {
        asset_info: Vec::new(),
        assets: 2,
        accounts: keys
            .iter()
            .enumerate()
            .map(|(index, key)| GenesisAccount {
                id: AccountId(index as u64 + 1),
                public_key: *key.as_bytes(),
                balances: vec![(AssetId(0), BALANCE), (AssetId(1), BALANCE)],
            })
            .collect(),
        payments: None,
    };
    let base_path = dir.path().join("genesis-base.bin");
    std::fs::write(&base_path, genesis.encode()).expect("genesis written");
    let genesis_path = dir.path().join("genesis.bin");
    let committee_arg = committee_path.to_str().expect("utf-8 path");
    let base_arg = base_path.to_str().expect("utf-8 path");
    let genesis_arg = genesis_path.to_str().expect("utf-8 path");
    let exchange_genesis = |committee: &str, out: &str| {
        walras(&[
            "payments",
            "exchange-genesis",
            "--committee",
            committee,
            "--genesis",
            base_arg,
            "--out",
            out,
        ])
    };
    let hash = ok(
        exchange_genesis(committee_arg, genesis_arg),
        "exchange-genesis",
    );
    let written = Genesis::decode(&std::fs::read(&genesis_path).expect("genesis read"))
        .expect("the written genesis decodes");
    assert_eq!(
        hash.trim(),
        walras_server::genesis_hash(&written).to_string()
    );
    assert_eq!(written.accounts, genesis.accounts);
    let section = written.payments.clone().expect("payments section written");
    assert_eq!(
        (section.chain_id, section.epoch, section.shards),
        (CHAIN, epoch, committee.committee.shards)
    );
    let bls = committee.bls.as_ref().expect("localnet writes BLS keys");
    assert_eq!(
        section.validators.len(),
        committee.committee.validators.len()
    );
    for ((validator, key), (bls_key, bls_proof)) in section
        .validators
        .iter()
        .zip(&committee.committee.validators)
        .zip(bls)
    {
        assert_eq!(
            *validator,
            PaymentsValidator {
                key: *key.as_bytes(),
                bls_key: *bls_key,
                bls_proof: *bls_proof,
            }
        );
    }
    // The output file is never overwritten (a node may already hold it), and a committee file
    // with a member's proof taken from another member is refused before anything is written.
    let again = exchange_genesis(committee_arg, genesis_arg);
    assert!(
        !again.status.success(),
        "an existing genesis was overwritten"
    );
    let mut bad: CommitteeFile =
        serde_json::from_str(&std::fs::read_to_string(&committee_path).expect("committee read"))
            .expect("committee json");
    bad.validators[1].bls_proof = bad.validators[0].bls_proof.clone();
    let bad_path = dir.path().join("bad-committee.json");
    std::fs::write(&bad_path, serde_json::to_string(&bad).expect("json")).expect("written");
    let bad_out = dir.path().join("bad-genesis.bin");
    let refused = exchange_genesis(
        bad_path.to_str().expect("utf-8 path"),
        bad_out.to_str().expect("utf-8 path"),
    );
    assert!(!refused.status.success(), "a rogue proof was accepted");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("validator 1"),
        "the refusal names the validator: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!bad_out.exists(), "a refused committee wrote a genesis");
    let (_node, url) = start_node(&dir.path().join("node"), &genesis_path);
    // The validators again, now polling the exchange for committed deposits.
    ok(
        walras(&["payments", "localnet", "down", "--dir", pay_arg]),
        "down",
    );
    ok(
        walras(&[
            "payments",
            "localnet",
            "--validators",
            "4",
            "--dir",
            pay_arg,
            "--exchange",
            &url,
        ]),
        "localnet with --exchange",
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let node = NodeClient::new(&url).expect("client");
    let accounts = [1, 2, 3];
    let issued = vec![3 * u128::from(BALANCE); 2];

    // A deposit no committed block made (signed, never submitted): its output is unknown to
    // every validator. Wallet 2 keeps it and tries to spend it.
    let phantom = sign(
        &trader,
        1,
        60,
        Operation::DepositToPayments {
            asset: AssetId(PAY_ASSET),
            amount: 50,
            owner: *wallet_keys[2].as_bytes(),
        },
    );
    let mut wallet2 = Wallet::load(&wallet_path(2), &committee.committee).expect("wallet");
    wallet2
        .add_deposit(deposit_output(&phantom), AssetId(PAY_ASSET), 50)
        .expect("kept");
    drop(wallet2);
    let refused = walras(&[
        "payments",
        "pay",
        "--wallet",
        wallet_path(2).to_str().unwrap(),
        "--committee",
        committee_path.to_str().unwrap(),
        "--to",
        wallet_path(0).to_str().unwrap(),
        "--asset",
        "1",
        "--amount",
        "50",
    ]);
    assert!(
        !refused.status.success(),
        "an uncommitted deposit was spent"
    );
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("neither a certificate nor a committed root entry"),
        "{message}"
    );

    // deposit: 500 of asset 1 from the trader into wallet 0.
    let deposit = ok(
        walras(&[
            "payments",
            "deposit",
            "--wallet",
            wallet_path(0).to_str().unwrap(),
            "--committee",
            committee_path.to_str().unwrap(),
            "--asset",
            "1",
            "--amount",
            "500",
            "--source",
            "1",
            "--key",
            trader_key.to_str().unwrap(),
            "--node",
            &url,
        ]),
        "deposit",
    );
    assert!(deposit.contains("deposit output"), "{deposit}");
    let (totals, escrow) = runtime.block_on(exchange_totals(&node, &accounts));
    assert_eq!(escrow, vec![0, 500]);
    assert_eq!(totals, issued);

    // pay, pay: wallet 0 pays 300 to wallet 1, wallet 1 pays 100 back, once the validators'
    // pollers have admitted the deposit's block.
    let pay_from = |from: usize, to: usize, amount: &str| {
        walras(&[
            "payments",
            "pay",
            "--wallet",
            wallet_path(from).to_str().unwrap(),
            "--committee",
            committee_path.to_str().unwrap(),
            "--to",
            wallet_path(to).to_str().unwrap(),
            "--asset",
            "1",
            "--amount",
            amount,
        ])
    };
    // No retry (a wallet resends a refused payment's identical bytes first): the pollers run
    // every 200 ms, so 3 s is ample.
    std::thread::sleep(Duration::from_secs(3));
    ok(pay_from(0, 1, "300"), "pay 300 of the deposit");
    ok(pay_from(1, 0, "100"), "pay 100 back");

    // Released before `walras payments withdraw` takes the wallet.
    let coin = Wallet::load(&wallet_path(0), &committee.committee)
        .expect("wallet")
        .client()
        .coins()
        .into_iter()
        .find(|coin| coin.certificate.is_some() && coin.output.amount == 100)
        .expect("wallet 0 holds the certified 100");
    let lane_total: u128 = (0..2)
        .map(|index| {
            Wallet::load(&wallet_path(index), &committee.committee)
                .expect("wallet")
                .client()
                .coins()
                .iter()
                .filter(|coin| {
                    coin.output.asset == AssetId(PAY_ASSET) && coin.certificate.is_some()
                })
                .map(|coin| coin.output.amount)
                .sum::<u128>()
        })
        .sum();
    assert_eq!(
        lane_total, 500,
        "the payments lane holds exactly the deposit"
    );

    // withdraw: account 2 (wallet 0's key) redeems 100 with the validators' BLS votes: the CLI
    // first pays the coin's value to account 2's withdrawal address, then redeems that output.
    let withdrawn = ok(
        walras(&[
            "payments",
            "withdraw",
            "--wallet",
            wallet_path(0).to_str().unwrap(),
            "--committee",
            committee_path.to_str().unwrap(),
            "--coin",
            &hex::encode(coin.id.0.as_bytes()),
            "--source",
            "2",
            "--node",
            &url,
        ]),
        "withdraw",
    );
    assert!(
        withdrawn.contains("withdrawn: 100 of asset 1"),
        "{withdrawn}"
    );
    let mut wallet0 = Wallet::load(&wallet_path(0), &committee.committee).expect("wallet");
    let held = |wallet: &Wallet| -> u128 {
        wallet
            .client()
            .coins()
            .iter()
            .filter(|coin| coin.output.asset == AssetId(PAY_ASSET))
            .map(|coin| coin.output.amount)
            .sum()
    };
    assert_eq!(held(&wallet0), 200, "the withdrawn 100 left the wallet");
    let owner = Keypair::from_seed(seed_of(&wallet0));
    let withdraw = |certificate: &Certificate, sequence: u64, claimed| {
        sign(
            &owner,
            2,
            sequence,
            Operation::WithdrawFromPayments {
                output: payments_output(certificate),
                certificate: claimed,
            },
        )
    };
    let client = std::sync::Arc::new(CommitteeClient::new(
        committee.committee.clone(),
        committee.addresses.clone(),
    ));
    runtime.block_on(async {
        let (totals, escrow) = exchange_totals(&node, &accounts).await;
        assert_eq!(escrow, vec![0, 400]);
        assert_eq!(totals, issued);
        let balance = node.account(2).await.expect("account").balances;
        assert!(balance
            .iter()
            .any(|b| b.asset == PAY_ASSET && b.amount == BALANCE + 100));

        // Wallet 0's remaining 200 goes to account 2's withdrawal address: an output nobody can
        // spend in the lane, the only kind the exchange redeems.
        let address = withdrawal_owner(ChainId(CHAIN), 2);
        let (_, certificates) = wallet0
            .pay(&client, address, AssetId(PAY_ASSET), 200)
            .await
            .expect("paid to the withdrawal address");
        let leaving = certificates
            .into_iter()
            .find(|certificate| certificate.output.owner == address)
            .expect("the withdrawal address's certificate");
        // A coin its holder can still spend in the lane (wallet 0's own key owns it): redeeming
        // it would let it be spent on both sides. Before withdrawal addresses, it was accepted.
        let lane_coin = coin.certificate.clone().expect("certified");

        // Each refused at the node with its code (the admission rule, before the mempool);
        // nothing changes.
        let cases = [
            (
                &lane_coin,
                certify(&client, &lane_coin, &[0, 1, 2], CHAIN, epoch).await,
                "withdrawal_not_owner",
            ),
            (
                &leaving,
                certify(&client, &leaving, &[0, 1], CHAIN, epoch).await,
                "short_certificate",
            ),
            (
                &leaving,
                certify(&client, &leaving, &[1, 2, 3], CHAIN, epoch + 1).await,
                "withdrawal_wrong_epoch",
            ),
            (
                &leaving,
                certify(&client, &leaving, &[0, 2, 3], CHAIN + 1, epoch).await,
                "withdrawal_wrong_chain",
            ),
        ];
        let sequence = node.account(2).await.expect("account").next_sequence;
        for (certificate, claimed, code) in cases {
            let error = node
                .submit(&withdraw(certificate, sequence, claimed))
                .await
                .expect_err(code);
            assert_eq!(error.code(), Some(code), "{error}");
        }
        let (totals, escrow) = exchange_totals(&node, &accounts).await;
        assert_eq!(escrow, vec![0, 400]);
        assert_eq!(totals, issued);
        assert_eq!(node.payments_escrow().await.expect("escrow").withdrawn, 1);
        // The output at the withdrawal address redeems with a full certificate, once.
        let good = withdraw(
            &leaving,
            sequence,
            certify(&client, &leaving, &[0, 1, 3], CHAIN, epoch).await,
        );
        node.submit(&good).await.expect("admitted");
        assert_eq!(committed(&node, &good).await, "accepted");
        let (totals, escrow) = exchange_totals(&node, &accounts).await;
        assert_eq!(escrow, vec![0, 200]);
        assert_eq!(totals, issued);
        let again = withdraw(
            &leaving,
            sequence + 1,
            certify(&client, &leaving, &[0, 1, 2], CHAIN, epoch).await,
        );
        let error = node.submit(&again).await.expect_err("already withdrawn");
        assert_eq!(error.code(), Some("already_withdrawn"), "{error}");
        assert_eq!(node.payments_escrow().await.expect("escrow").withdrawn, 2);
    });
    drop(localnet);
}
