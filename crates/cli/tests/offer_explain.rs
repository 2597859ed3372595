//! `GET /v1/offers/{id}/explain` and `walras offer explain` against a real node: one block
//! with two crossing offers, an offer far out of the money, and an offer dropped with its
//! account's two cancels of one offer (an overdraft no longer reaches a block through the
//! node's admission: it is refused `insufficient_balance`); a later block cancelling an offer. Each is explained over
//! HTTP and by the CLI, and again after the node restarts (the explanation is recomputed from
//! the committed block log, not kept in memory). Bad ids get 400/404/409, never a 5xx.

use std::process::Command;
use walras_sim::Rng;
use walras_testkit::*;
use walras_types::{AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction};

const CONTRACT_FIELDS: [&str; 15] = [
    "offer_id",
    "status",
    "height",
    "account",
    "sell_asset",
    "buy_asset",
    "limit_price",
    "clearing_rate",
    "amount",
    "sold",
    "received",
    "reason_code",
    "out_of_money_bp",
    "volume_ahead",
    "summary",
];

fn signed(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    sign(Transaction {
        source: AccountId(source),
        sequence,
        operation,
    })
}

fn offer(sell: u16, buy: u16, amount: u64, min_price: &str) -> Operation {
    Operation::CreateOffer {
        sell: AssetId(sell),
        buy: AssetId(buy),
        amount,
        min_price: Price::parse_limit(min_price).unwrap(),
    }
}

fn hash_of(signed: &SignedTransaction) -> String {
    walras_engine::transaction_hash(signed).to_string()
}

async fn explain(client: &reqwest::Client, url: &str, path: &str) -> (u16, serde_json::Value) {
    get(client, &format!("{url}/v1/offers/{path}")).await
}

fn cli_explain(url: &str, args: &[&str]) -> std::process::Output {
    Command::new(walras_bin())
        .args(["offer", "explain"])
        .args(args)
        .args(["--node", url])
        .output()
        .expect("walras runs")
}

/// An asset `account` holds at least `amount` of, other than `not`.
async fn held(client: &reqwest::Client, url: &str, account: u64, amount: u64, not: u16) -> u16 {
    balances(client, url, account)
        .await
        .into_iter()
        .find(|(asset, held)| *held >= amount && *asset != not)
        .map(|(asset, _)| asset)
        .expect("dev accounts hold assets")
}

#[test]
fn offers_are_explained_over_http_and_the_cli_and_after_a_restart() {
    let dir = TempDir::new("explain");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    let (answers, cancel_hash, double_cancel) = runtime().block_on(async {
        let client = reqwest::Client::new();
        let a = held(&client, &url, 1, 10_000, u16::MAX).await;
        let b = held(&client, &url, 2, 10_000, a).await;
        let a3 = balances(&client, &url, 3).await;
        assert!(a3
            .iter()
            .any(|(asset, amount)| *asset == a && *amount >= 1_000));
        let a5 = balances(&client, &url, 5).await;
        assert!(a5
            .iter()
            .any(|(asset, amount)| *asset == a && *amount >= 1_000));
        // Account 4 rests an offer far out of the money, to cancel twice in the next block.
        let c = held(&client, &url, 4, 2_000, u16::MAX);
        let c = c.await;
        let d = (c + 1) % 4;
        let resting_4 = signed(4, 1, offer(c, d, 1_000, "2000"));
        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions"),
            "application/octet-stream",
            resting_4.encode(),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        wait_committed(&client, &url, &hash_of(&resting_4)).await;
        let cancel_4 = |sequence| {
            signed(
                4,
                sequence,
                Operation::CancelOffer {
                    sell: AssetId(c),
                    buy: AssetId(d),
                    min_price: Price::parse_limit("2000").unwrap(),
                    offer_id: OfferId(1),
                },
            )
        };
        let block = vec![
            // Two offers that cross: each sells for at least half the other's asset.
            signed(1, 1, offer(a, b, 5_000, "0.5")),
            signed(2, 1, offer(b, a, 5_000, "0.5")),
            // Far out of the money, then cancelled in a later block.
            signed(3, 1, offer(a, b, 1_000, "1000")),
            // An offer whose account cancels one offer twice in the same block: all dropped.
            signed(4, 8, offer(c, d, 1_000, "0.5")),
            cancel_4(9),
            cancel_4(10),
            // A payment, then an offer out of the money that rests: offer id 2 is unique.
            signed(
                5,
                1,
                Operation::Payment {
                    to: AccountId(1),
                    asset: AssetId(a),
                    amount: 1,
                },
            ),
            signed(5, 2, offer(a, b, 1_000, "500")),
        ];
        let body = SignedTransaction::encode_list(&block);
        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions/batch"),
            "application/octet-stream",
            body,
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["admitted"], 8, "{answer}");
        for signed in &block {
            wait_committed(&client, &url, &hash_of(signed)).await;
        }
        let cancel = signed(
            3,
            2,
            Operation::CancelOffer {
                sell: AssetId(a),
                buy: AssetId(b),
                min_price: Price::parse_limit("1000").unwrap(),
                offer_id: OfferId(1),
            },
        );
        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions"),
            "application/octet-stream",
            cancel.encode(),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        let cancelled = wait_committed(&client, &url, &hash_of(&cancel)).await;
        assert_eq!(cancelled["status"], "accepted", "{cancelled}");
        let cancel_height = cancelled["height"].as_u64().unwrap();

        let mut answers = Vec::new();
        for path in [
            "1/explain?account=1",
            "1/explain?account=2",
            "1/explain?account=3",
            "8/explain?account=4",
            "2/explain",
        ] {
            let (status, body) = explain(&client, &url, path).await;
            assert_eq!(status, 200, "{path}: {body}");
            let keys: Vec<&str> = body
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut expected = CONTRACT_FIELDS.to_vec();
            expected.sort_unstable();
            let mut keys_sorted = keys.clone();
            keys_sorted.sort_unstable();
            assert_eq!(keys_sorted, expected, "exactly the contract's fields");
            answers.push(body);
        }
        for answer in &answers {
            let summary = answer["summary"].as_str().unwrap();
            println!("{summary}");
            // Trigger (issue 28, item 8): summaries printed rates with 25 digits.
            for number in summary
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .filter(|token| token.contains('.') && token.len() > 1)
            {
                let significant = number
                    .trim_start_matches(['0', '.'])
                    .chars()
                    .filter(char::is_ascii_digit)
                    .count();
                assert!(significant <= 12, "{number} in {summary}");
            }
        }
        let [traded, counter, cancelled_offer, dropped, resting] = &answers[..] else {
            unreachable!()
        };
        // The crossing offers traded in their block, at a rate no worse than their limits.
        for (offer, account) in [(traded, 1), (counter, 2)] {
            assert!(
                ["traded", "partly_traded"].contains(&offer["status"].as_str().unwrap()),
                "{offer}"
            );
            assert_eq!(offer["account"], account);
            assert_eq!(offer["limit_price"], "0.5");
            let sold: u64 = offer["sold"].as_str().unwrap().parse().unwrap();
            assert!(sold > 0, "{offer}");
            assert!(
                offer["summary"].as_str().unwrap().contains("sold"),
                "{offer}"
            );
        }
        assert_eq!(traded["sell_asset"], a);
        assert_eq!(traded["buy_asset"], b);
        // Cancelled: the block and the cancelling transaction.
        assert_eq!(cancelled_offer["status"], "cancelled", "{cancelled_offer}");
        assert_eq!(cancelled_offer["height"], cancel_height);
        assert_eq!(cancelled_offer["reason_code"], "cancelled");
        let summary = cancelled_offer["summary"].as_str().unwrap();
        assert!(summary.contains(&hash_of(&cancel)), "{summary}");
        // Dropped: the rule and the conflicting transaction.
        assert_eq!(dropped["status"], "dropped", "{dropped}");
        assert_eq!(dropped["reason_code"], "account_double_cancel");
        assert!(dropped["sold"].is_null() && dropped["clearing_rate"].is_null());
        let summary = dropped["summary"].as_str().unwrap();
        assert!(summary.contains(&hash_of(&block[4])), "{summary}");
        // Resting out of the money: the distance in basis points, exact to two decimals.
        assert_eq!(resting["status"], "not_traded", "{resting}");
        assert_eq!(resting["account"], 5);
        assert_eq!(resting["reason_code"], "out_of_the_money");
        assert_eq!(resting["sold"], "0");
        assert!(resting["volume_ahead"].is_null());
        let rate: f64 = resting["clearing_rate"].as_str().unwrap().parse().unwrap();
        let bp: f64 = resting["out_of_money_bp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let expected = (500.0 - rate) / rate * 10_000.0;
        assert!(
            (bp - expected).abs() <= 0.01 + expected * 1e-9,
            "{bp} vs {expected}"
        );
        let (_, status) = get(&client, &format!("{url}/v1/status")).await;
        assert_eq!(
            resting["height"], status["height"],
            "open: explained at the tip"
        );

        // Bad ids: 400, unknown ones 404, an id of several accounts 409.
        for (path, code, error) in [
            ("abc/explain", 400, "malformed"),
            ("-1/explain", 400, "malformed"),
            ("18446744073709551616/explain", 400, "malformed"),
            ("1/explain?account=x", 400, "malformed"),
            ("77/explain?account=1", 404, "unknown_offer"),
            ("2/explain?account=4", 404, "unknown_offer"),
            ("999999/explain", 404, "unknown_offer"),
            ("1/explain", 409, "ambiguous_offer"),
        ] {
            let (status, body) = explain(&client, &url, path).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (code, Some(error)),
                "{path}: {body}"
            );
        }
        // Garbage: never a 5xx.
        let mut rng = Rng::new(16);
        for _ in 0..300 {
            let length = 1 + rng.below(24) as usize;
            let id: String = (0..length)
                .map(|_| {
                    let set = b"0123456789abcxyz-+.~_";
                    set[rng.below(set.len() as u64) as usize] as char
                })
                .collect();
            let path = format!("{url}/v1/offers/{id}/explain?account={}", rng.below(9));
            let response = client.get(&path).send().await.expect("the node answers");
            let status = response.status().as_u16();
            assert!(status < 500 || status == 503, "{path}: {status}");
        }
        (answers, hash_of(&cancel), hash_of(&block[4]))
    });

    // The CLI prints the summary, and with --json the node's answer.
    let text = cli_explain(&url, &["1", "--account", "3"]);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let stdout = String::from_utf8(text.stdout).unwrap();
    assert!(
        stdout.contains("cancelled") && stdout.contains(&cancel_hash),
        "{stdout}"
    );
    let json = cli_explain(&url, &["8", "--account", "4", "--json"]);
    assert!(json.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(printed, answers[3]);
    assert!(printed["summary"]
        .as_str()
        .unwrap()
        .contains(&double_cancel));
    let ambiguous = cli_explain(&url, &["1"]);
    assert!(!ambiguous.status.success());
    // Trigger (issue 28, item 8): the CLI told its user the HTTP parameter (`?account=`).
    let said = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(said.contains("--account"), "{said}");
    assert!(!said.contains("?account="), "{said}");

    // After a restart: the same answers, from the block log.
    assert!(node.terminate(), "SIGTERM stops the node cleanly");
    let restarted = NodeProcess::start(dir.path(), &[]);
    runtime().block_on(async {
        let client = reqwest::Client::new();
        for (path, before) in [
            "1/explain?account=1",
            "1/explain?account=2",
            "1/explain?account=3",
            "8/explain?account=4",
            "2/explain",
        ]
        .into_iter()
        .zip(&answers)
        {
            let (status, after) = explain(&client, &restarted.url, path).await;
            assert_eq!(status, 200, "{path}: {after}");
            assert_eq!(&after, before, "{path} after the restart");
        }
    });
    let json = cli_explain(&restarted.url, &["2", "--json"]);
    assert!(json.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(printed, answers[4]);
    assert!(restarted.terminate());
}
