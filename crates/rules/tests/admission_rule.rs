//! One admission rule on every path: the same transactions go through the node's HTTP API (its
//! router, mempool and admission, driven in process: the same routes, codecs and error bodies
//! as over a socket), CometBFT's `CheckTx` of the ABCI application, and the engine's block filter,
//! all over the same development genesis, and each path must give the same verdict with the
//! same code. The transactions each trip a different check of `walras_engine::admission`,
//! including two that trip two checks at once (the cheaper check must decide everywhere).
//! Admission's advisory funds check (`insufficient_balance`) applies on the admission paths;
//! the block filter's verdict on the same overdraft is its own rule's, `account_overdraft`.

use std::time::Duration;
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{CheckTxType, RequestCheckTx};
use walras_api::wire::DevGenesisJson;
use walras_client::{ApiMethod, ApiRequest, NodeApi};
use walras_engine::filter;
use walras_engine::ExchangeState;
use walras_server::abci_app;
use walras_testkit::in_process::process_like_config;
use walras_testkit::*;
use walras_types::{Genesis, SignedTransaction};

const DEV: DevGenesisJson = DevGenesisJson {
    seed: DEV_SEED,
    accounts: DEV_ACCOUNTS,
    assets: 4,
};

/// Accounts of the genesis with some asset, each with one asset it holds.
fn holders(genesis: &Genesis) -> Vec<(u64, u16)> {
    genesis
        .accounts
        .iter()
        .filter_map(|account| {
            let (asset, _) = account.balances.iter().find(|(_, amount)| *amount >= 10)?;
            Some((account.id.0, asset.0))
        })
        .collect()
}

/// (what the transaction tries, the transaction, the code every path must give).
fn cases(genesis: &Genesis) -> Vec<(&'static str, SignedTransaction, &'static str)> {
    let holders = holders(genesis);
    let pay = |index: usize, sequence: u64| {
        let (source, asset) = holders[index];
        payment(source, sequence, holders[0].0, asset, 1)
    };
    let flip = |mut signed: SignedTransaction| {
        signed.signature[0] ^= 1;
        signed
    };
    vec![
        ("valid", pay(1, 1), "accepted"),
        (
            "unknown source",
            payment(1_000_000, 1, 1, 0, 1),
            "unknown_account",
        ),
        ("bad signature", flip(pay(2, 1)), "bad_signature"),
        ("replayed sequence", pay(3, 0), "replayed"),
        ("sequence too far", pay(4, 65), "sequence_out_of_window"),
        (
            "too far and badly signed",
            flip(pay(5, 65)),
            "sequence_out_of_window",
        ),
        ("replayed and badly signed", flip(pay(6, 0)), "replayed"),
        (
            "payment beyond the balance",
            {
                let (source, asset) = holders[9];
                let holder = genesis
                    .accounts
                    .iter()
                    .find(|account| account.id.0 == source);
                let balance = holder
                    .and_then(|account| account.balances.iter().find(|(held, _)| held.0 == asset))
                    .map(|(_, amount)| *amount)
                    .expect("a holder holds its asset");
                payment(source, 1, holders[0].0, asset, balance + 1)
            },
            "insufficient_balance",
        ),
        (
            "beyond the balance and badly signed",
            {
                let (source, asset) = holders[10];
                flip(payment(source, 1, holders[0].0, asset, u64::MAX >> 3))
            },
            "bad_signature",
        ),
        // The development genesis names no payments committee: the bridge's step of the rule
        // refuses both operations, alike on every path.
        (
            "deposit without a committee",
            sign(walras_types::Transaction {
                source: walras_types::AccountId(holders[7].0),
                sequence: 1,
                operation: walras_types::Operation::DepositToPayments {
                    asset: walras_types::AssetId(holders[7].1),
                    amount: 1,
                    owner: *dev_key(holders[7].0).public_key().as_bytes(),
                },
            }),
            "payments_disabled",
        ),
        (
            "withdrawal without a committee",
            sign(walras_types::Transaction {
                source: walras_types::AccountId(holders[8].0),
                sequence: 1,
                operation: walras_types::Operation::WithdrawFromPayments {
                    output: walras_types::PaymentsOutput {
                        id: [1; 32],
                        asset: walras_types::AssetId(0),
                        amount: 5,
                        owner: *dev_key(holders[8].0).public_key().as_bytes(),
                    },
                    certificate: walras_types::PaymentsCertificate {
                        chain_id: 1,
                        epoch: 0,
                        signers: 0b111,
                        aggregate: [0; 96],
                    },
                },
            }),
            "payments_disabled",
        ),
    ]
}

fn http_verdicts(cases: &[(&str, SignedTransaction, &str)]) -> Vec<String> {
    let dir = TempDir::new("admission-http");
    let mut config = process_like_config(dir.path());
    // No block while the verdicts are taken: each case is judged against the genesis alone.
    config.block_interval = Duration::from_secs(600);
    let node = InProcessNode::start_with(&config, Some(dir)).expect("the in-process node starts");
    runtime().block_on(async {
        let mut verdicts = Vec::new();
        for (_, signed, _) in cases {
            let request = ApiRequest {
                method: ApiMethod::Post,
                path: "/v1/transactions".into(),
                content_type: Some("application/octet-stream"),
                body: signed.encode().into(),
                what: "the transaction".into(),
            };
            let answer = node.exchange(request).await.expect("the node answers");
            let body: serde_json::Value =
                serde_json::from_slice(&answer.body).unwrap_or(serde_json::Value::Null);
            verdicts.push(if answer.status == 202 {
                "accepted".to_string()
            } else {
                body["error"]["code"].as_str().unwrap_or("?").to_string()
            });
        }
        verdicts
    })
}

fn check_tx_verdicts(cases: &[(&str, SignedTransaction, &str)]) -> Vec<String> {
    let dir = TempDir::new("admission-abci");
    let config = dev_node_config(dir.path(), DEV);
    let app = abci_app(&config).expect("the ABCI application opens");
    cases
        .iter()
        .map(|(_, signed, _)| {
            let response = app.check_tx(RequestCheckTx {
                tx: signed.encode().into(),
                r#type: CheckTxType::New as i32,
            });
            if response.code == 0 {
                "accepted".to_string()
            } else {
                let code = response.log.split(':').next().unwrap_or("?");
                code.to_string()
            }
        })
        .collect()
}

fn engine_verdicts(genesis: &Genesis, cases: &[(&str, SignedTransaction, &str)]) -> Vec<String> {
    let state = ExchangeState::from_genesis(genesis, 1).expect("the genesis loads");
    let transactions: Vec<SignedTransaction> = cases.iter().map(|(_, signed, _)| *signed).collect();
    let signature_ok = state.verify_signatures(&transactions, 1);
    let filtered = filter(&state, &transactions, &signature_ok, 1);
    (0..transactions.len() as u32)
        .map(|index| {
            filtered
                .dropped
                .iter()
                .find(|(dropped, _)| *dropped == index)
                .map_or("accepted".to_string(), |(_, reason)| {
                    reason.name().to_string()
                })
        })
        .collect()
}

#[test]
fn the_http_api_check_tx_and_the_block_filter_give_the_same_verdicts_and_codes() {
    let genesis = walras_devnet::dev_genesis(&DEV, 1).expect("the development genesis builds");
    let cases = cases(&genesis);
    let http = http_verdicts(&cases);
    let check_tx = check_tx_verdicts(&cases);
    let engine = engine_verdicts(&genesis, &cases);
    for (index, (what, _, expected)) in cases.iter().enumerate() {
        assert_eq!(http[index], *expected, "HTTP API, {what}");
        assert_eq!(check_tx[index], *expected, "CheckTx, {what}");
        let in_a_block = match *expected {
            "insufficient_balance" => "account_overdraft",
            other => other,
        };
        assert_eq!(engine[index], in_a_block, "block filter, {what}");
    }
}
