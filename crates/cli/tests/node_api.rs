//! The node's HTTP API against a real `walras node` process on a fresh data directory:
//! a payment goes from submission to a committed block and moves balances exactly; every kind
//! of bad submission and bad query gets its 4xx and error code; 10,000 random malformed
//! requests get 4xx answers, never a 5xx or a dead node, and leave the state consistent
//! (a valid payment still commits, and a restart recovers the same state root).

use walras_sim::Rng;
use walras_testkit::*;
use walras_types::SignedTransaction;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn payment_json(signed: &SignedTransaction) -> serde_json::Value {
    let walras_types::Operation::Payment { to, asset, amount } = signed.transaction.operation
    else {
        panic!("a payment");
    };
    serde_json::json!({
        "source": signed.transaction.source.0,
        "sequence": signed.transaction.sequence,
        "operation": {"type": "payment", "to": to.0, "asset": asset.0, "amount": amount},
        "signature": hex(&signed.signature),
    })
}

/// An asset account `source` holds at least `amount` of.
async fn held_asset(client: &reqwest::Client, url: &str, source: u64, amount: u64) -> u16 {
    balances(client, url, source)
        .await
        .into_iter()
        .find(|(_, held)| *held >= amount)
        .map(|(asset, _)| asset)
        .expect("dev accounts hold assets")
}

#[test]
fn a_payment_is_admitted_committed_and_moves_balances_exactly() {
    let dir = TempDir::new("payment");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let asset = held_asset(&client, &url, 1, 1_000).await;
        let before = (
            balances(&client, &url, 1).await,
            balances(&client, &url, 2).await,
        );
        let signed = payment(1, 1, 2, asset, 100);
        let body = serde_json::to_vec(&payment_json(&signed)).unwrap();
        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions"),
            "application/json",
            body.clone(),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        let hash = answer["hash"].as_str().unwrap().to_string();
        let committed = wait_committed(&client, &url, &hash).await;
        assert_eq!(committed["status"], "accepted", "{committed}");
        let height = committed["height"].as_u64().unwrap();

        let amount_of = |list: &Vec<(u16, u64)>| {
            list.iter()
                .find(|(a, _)| *a == asset)
                .map_or(0, |(_, v)| *v)
        };
        let after = (
            balances(&client, &url, 1).await,
            balances(&client, &url, 2).await,
        );
        assert_eq!(amount_of(&after.0), amount_of(&before.0) - 100);
        assert_eq!(amount_of(&after.1), amount_of(&before.1) + 100);

        let (_, status_json) = get(&client, &format!("{url}/v1/status")).await;
        let (code, block) = get(&client, &format!("{url}/v1/blocks/{height}")).await;
        assert_eq!(code, 200);
        assert_eq!(status_json["height"].as_u64(), Some(height));
        assert_eq!(block["state_root"], status_json["state_root"]);
        // The proposer's clearing quality is kept beside the block (issue 10).
        assert!(block["clearing"]["iterations"].is_u64(), "{block}");
        assert!(block["clearing"]["millis"].is_f64(), "{block}");
        let decoded = raw_block(&client, &url, height).await;
        assert!(decoded.transactions.contains(&signed));
        assert_eq!(
            decoded.header.state_root.to_string(),
            block["state_root"].as_str().unwrap()
        );

        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions"),
            "application/json",
            body,
        )
        .await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (409, Some("replayed")),
            "{answer}"
        );
        let binary = payment(1, 2, 2, asset, 1).encode();
        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions"),
            "application/octet-stream",
            binary,
        )
        .await;
        assert_eq!(status, 202, "{answer}");
    });
    assert!(node.terminate(), "SIGTERM stops the node cleanly");
}

async fn expect_error(answer: (u16, serde_json::Value), status: u16, code: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{}", answer.1);
    assert!(answer.1["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}

#[test]
fn bad_submissions_and_queries_get_4xx_with_codes() {
    let dir = TempDir::new("refusals");
    // No block is cut during this test: pending transactions stay pending.
    let node = NodeProcess::start(
        dir.path(),
        &["--block-interval-ms", "600000", "--mempool-capacity", "3"],
    );
    let url = node.url.clone();
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let submit = format!("{url}/v1/transactions");
        let octet = "application/octet-stream";
        let mut bad = payment(1, 1, 2, 0, 1);
        bad.signature[0] ^= 1;
        expect_error(
            post(&client, &submit, octet, bad.encode()).await,
            400,
            "bad_signature",
        )
        .await;
        expect_error(
            post(
                &client,
                &submit,
                octet,
                payment(1_000_000, 1, 2, 0, 1).encode(),
            )
            .await,
            422,
            "unknown_account",
        )
        .await;
        expect_error(
            post(&client, &submit, octet, payment(1, 65, 2, 0, 1).encode()).await,
            422,
            "sequence_out_of_window",
        )
        .await;
        assert_eq!(
            post(&client, &submit, octet, payment(1, 5, 2, 0, 1).encode())
                .await
                .0,
            202
        );
        expect_error(
            post(&client, &submit, octet, payment(1, 5, 3, 0, 1).encode()).await,
            409,
            "duplicate",
        )
        .await;
        let mut truncated = payment(1, 6, 2, 0, 1).encode();
        truncated.pop();
        expect_error(
            post(&client, &submit, octet, truncated).await,
            400,
            "malformed",
        )
        .await;
        expect_error(
            post(
                &client,
                &submit,
                "application/json",
                b"{\"source\": -1}".to_vec(),
            )
            .await,
            400,
            "malformed",
        )
        .await;
        expect_error(
            post(&client, &submit, "text/plain", b"hello".to_vec()).await,
            415,
            "unsupported_media_type",
        )
        .await;
        expect_error(
            post(&client, &submit, octet, vec![0; 20_000]).await,
            413,
            "too_large",
        )
        .await;
        let too_many: Vec<SignedTransaction> = (0..10_001)
            .map(|i| payment(2, 1 + i % 60, 3, 0, 1))
            .collect();
        expect_error(
            post(
                &client,
                &format!("{url}/v1/transactions/batch"),
                octet,
                SignedTransaction::encode_list(&too_many),
            )
            .await,
            413,
            "too_large",
        )
        .await;
        expect_error(
            post(
                &client,
                &format!("{url}/v1/transactions/batch"),
                octet,
                vec![0, 3, 1],
            )
            .await,
            400,
            "malformed",
        )
        .await;
        // Capacity 3: one pending plus two more fill it.
        for sequence in [6, 7] {
            assert_eq!(
                post(
                    &client,
                    &submit,
                    octet,
                    payment(1, sequence, 2, 0, 1).encode()
                )
                .await
                .0,
                202
            );
        }
        let full = client
            .post(&submit)
            .header("content-type", octet)
            .body(payment(1, 8, 2, 0, 1).encode())
            .send()
            .await
            .unwrap();
        assert_eq!(full.status().as_u16(), 503);
        assert!(full.headers().contains_key("retry-after"));

        expect_error(
            get(&client, &format!("{url}/v1/accounts/1000000")).await,
            404,
            "unknown_account",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/accounts/-3")).await,
            400,
            "malformed",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/transactions/xyz")).await,
            400,
            "malformed",
        )
        .await;
        expect_error(
            get(
                &client,
                &format!("{url}/v1/transactions/{}", "ab".repeat(32)),
            )
            .await,
            404,
            "unknown_transaction",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/books/0/9")).await,
            404,
            "unknown_asset",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/books/1/1")).await,
            400,
            "malformed",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/books/0/1?levels=0")).await,
            400,
            "malformed",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/blocks/7")).await,
            404,
            "unknown_block",
        )
        .await;
        expect_error(
            get(&client, &format!("{url}/v1/nothing")).await,
            404,
            "no_such_endpoint",
        )
        .await;
        let deleted = client
            .delete(format!("{url}/v1/status"))
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status().as_u16(), 405);
        let (status, pending) = get(&client, &format!("{url}/v1/accounts/1")).await;
        assert_eq!(status, 200);
        assert_eq!(
            pending["next_sequence"], 1,
            "1 is still free: 5, 6 and 7 are pending"
        );
    });
}

#[test]
fn per_client_rate_limit_answers_429_with_retry_after() {
    let dir = TempDir::new("rate");
    let node = NodeProcess::start(
        dir.path(),
        &["--rate-limit-rps", "1", "--rate-limit-burst", "3"],
    );
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let mut statuses = Vec::new();
        for _ in 0..5 {
            let response = client
                .get(format!("{}/v1/status", node.url))
                .send()
                .await
                .unwrap();
            statuses.push((
                response.status().as_u16(),
                response.headers().contains_key("retry-after"),
            ));
        }
        assert_eq!(&statuses[..3], &[(200, false); 3]);
        assert_eq!(statuses[4], (429, true));
    });
}

/// A random request that is wrong in some way: bad bytes, bad path segments, bad queries.
fn malformed_request(rng: &mut Rng) -> (reqwest::Method, String, Option<(&'static str, Vec<u8>)>) {
    let junk = |rng: &mut Rng, max: u64| -> Vec<u8> {
        (0..rng.below(max)).map(|_| rng.below(256) as u8).collect()
    };
    let segment = |rng: &mut Rng| -> String {
        let options = [
            "-1",
            "18446744073709551616",
            "abc",
            "%ff",
            "0x10",
            "",
            "1.5",
            "%20",
            "99999999999",
        ];
        options[rng.below(options.len() as u64) as usize].to_string()
    };
    match rng.below(10) {
        0 => (
            reqwest::Method::POST,
            "/v1/transactions".into(),
            Some(("application/octet-stream", junk(rng, 300))),
        ),
        1 => (
            reqwest::Method::POST,
            "/v1/transactions".into(),
            Some(("application/json", junk(rng, 300))),
        ),
        2 => {
            let mut json = br#"{"source":1,"sequence":1,"operation":{"type":"create_offer","sell":0,"buy":0,"amount":0,"min_price":"-1"},"signature":"zz"}"#.to_vec();
            let at = rng.below(json.len() as u64) as usize;
            json[at] = rng.below(256) as u8;
            (
                reqwest::Method::POST,
                "/v1/transactions".into(),
                Some(("application/json", json)),
            )
        }
        3 => (
            reqwest::Method::POST,
            "/v1/transactions/batch".into(),
            Some(("application/octet-stream", junk(rng, 2_000))),
        ),
        4 => (
            reqwest::Method::GET,
            format!("/v1/accounts/{}", segment(rng)),
            None,
        ),
        5 => (
            reqwest::Method::GET,
            format!("/v1/transactions/{}", segment(rng)),
            None,
        ),
        6 => (
            reqwest::Method::GET,
            format!(
                "/v1/books/{}/{}?levels={}",
                segment(rng),
                rng.below(9),
                segment(rng)
            ),
            None,
        ),
        7 => (
            reqwest::Method::GET,
            format!("/v1/blocks/{}/raw", segment(rng)),
            None,
        ),
        8 => (
            reqwest::Method::PUT,
            "/v1/prices".into(),
            Some(("application/json", junk(rng, 50))),
        ),
        _ => (
            reqwest::Method::GET,
            format!("/v1/{}/{}", segment(rng), segment(rng)),
            None,
        ),
    }
}

#[test]
fn ten_thousand_malformed_requests_get_4xx_and_leave_the_node_consistent() {
    let dir = TempDir::new("malformed");
    let node = NodeProcess::start(dir.path(), &["--rate-limit-rps", "0"]);
    let url = node.url.clone();
    let root_after = runtime().block_on(async {
        let client = reqwest::Client::new();
        let mut rng = Rng::new(20261122);
        let mut by_status = std::collections::BTreeMap::new();
        for _ in 0..10_000 {
            let (method, path, body) = malformed_request(&mut rng);
            let mut request = client.request(method, format!("{url}{path}"));
            if let Some((content_type, bytes)) = body {
                request = request.header("content-type", content_type).body(bytes);
            }
            let response = request.send().await.expect("the node keeps answering");
            let status = response.status().as_u16();
            assert!((400..500).contains(&status), "{path}: status {status}");
            *by_status.entry(status).or_insert(0u32) += 1;
        }
        assert!(by_status.len() >= 3, "a mix of errors: {by_status:?}");
        let asset = held_asset(&client, &url, 3, 10).await;
        let (status, answer) = post(
            &client,
            &format!("{url}/v1/transactions"),
            "application/octet-stream",
            payment(3, 1, 4, asset, 10).encode(),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        let committed = wait_committed(&client, &url, answer["hash"].as_str().unwrap()).await;
        assert_eq!(committed["status"], "accepted");
        let (_, status_json) = get(&client, &format!("{url}/v1/status")).await;
        assert_eq!(
            status_json["height"].as_u64(),
            committed["height"].as_u64(),
            "nothing but the payment committed"
        );
        status_json["state_root"].as_str().unwrap().to_string()
    });
    assert!(node.terminate());
    let restarted = NodeProcess::start(dir.path(), &[]);
    let root_restarted = runtime().block_on(async {
        let (_, status_json) = get(
            &reqwest::Client::new(),
            &format!("{}/v1/status", restarted.url),
        )
        .await;
        status_json["state_root"].as_str().unwrap().to_string()
    });
    assert_eq!(
        root_restarted, root_after,
        "recovery gives the same state root"
    );
}

#[test]
fn every_route_in_the_openapi_document_is_served() {
    let dir = TempDir::new("openapi");
    let node = NodeProcess::start(dir.path(), &[]);
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let (status, document) = get(&client, &format!("{}/v1/openapi.json", node.url)).await;
        assert_eq!(status, 200);
        let paths = document["paths"].as_object().expect("paths");
        assert!(paths.len() >= 12, "{} paths", paths.len());
        for (path, operations) in paths {
            let concrete = path
                .replace("{hash}", &"00".repeat(32))
                .replace("{id}", "1")
                .replace("{sell}", "0")
                .replace("{buy}", "1")
                .replace("{height}", "1");
            for method in operations.as_object().unwrap().keys() {
                let method: reqwest::Method = method.to_uppercase().parse().unwrap();
                let response = client
                    .request(method.clone(), format!("{}{concrete}", node.url))
                    .header("content-type", "application/octet-stream")
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                let body: serde_json::Value = if path == "/v1/events" {
                    serde_json::Value::Null
                } else {
                    response.json().await.unwrap_or(serde_json::Value::Null)
                };
                assert_ne!(status, 405, "{method} {path}");
                assert_ne!(body["error"]["code"], "no_such_endpoint", "{method} {path}");
            }
        }
        // A node cutting on its own timer has no gateway: every counter is null.
        let (status, gateway) = get(&client, &format!("{}/v1/gateway", node.url)).await;
        assert_eq!(status, 200);
        assert_eq!(
            gateway,
            serde_json::json!({
                "block_source": "timer",
                "participants_configured": null,
                "participants_connected": null,
                "stragglers": null,
                "late_trades_total": null,
                "queue_full_total": null,
                "last_seal_delay_us": null,
                "sealed_height": null,
            })
        );
    });
}

/// Two accounts and assets for a trade with asset 0: one holding asset 0, one holding another.
async fn asset0_traders(client: &reqwest::Client, url: &str) -> (u64, u64, u16) {
    let mut seller0 = None;
    let mut other = None;
    for account in 1..=DEV_ACCOUNTS {
        for (asset, held) in balances(client, url, account).await {
            if held < 10_000 {
                continue;
            }
            if asset == 0 && seller0.is_none() {
                seller0 = Some(account);
            } else if asset != 0 && other.is_none() && Some(account) != seller0 {
                other = Some((account, asset));
            }
        }
        if let (Some(seller0), Some((account, asset))) = (seller0, other) {
            if seller0 != account {
                return (seller0, account, asset);
            }
        }
    }
    panic!("the dev genesis has holders of asset 0 and of another asset");
}

async fn submit(client: &reqwest::Client, url: &str, signed: &SignedTransaction) -> u64 {
    let (status, answer) = post(
        client,
        &format!("{url}/v1/transactions"),
        "application/octet-stream",
        signed.encode(),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let hash = answer["hash"].as_str().unwrap().to_string();
    let committed = wait_committed(client, url, &hash).await;
    assert_eq!(committed["status"], "accepted", "{committed}");
    committed["height"].as_u64().unwrap()
}

/// Two offers at limit 0.5 that cross, one selling asset 0 (`amounts.0`), one buying it
/// (`amounts.1`), submitted as one batch; waits for both to commit. Returns (the block's
/// height, the seller of asset 0, the other account, the other asset).
async fn cross_with_asset0(
    client: &reqwest::Client,
    url: &str,
    amounts: (u64, u64),
) -> (u64, u64, u64, u16) {
    use walras_types::{AccountId, AssetId, Operation, Price, Transaction};
    let (a, b, asset) = asset0_traders(client, url).await;
    let offer = |source: u64, sell: u16, buy: u16, amount: u64| {
        sign(Transaction {
            source: AccountId(source),
            sequence: 1,
            operation: Operation::CreateOffer {
                sell: AssetId(sell),
                buy: AssetId(buy),
                amount,
                min_price: Price::parse_limit("0.5").unwrap(),
            },
        })
    };
    let crossing = [offer(a, 0, asset, amounts.0), offer(b, asset, 0, amounts.1)];
    let (status, answer) = post(
        client,
        &format!("{url}/v1/transactions/batch"),
        "application/octet-stream",
        SignedTransaction::encode_list(&crossing),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let mut height = 0;
    for signed in &crossing {
        let hash = walras_engine::transaction_hash(signed).to_string();
        height = wait_committed(client, url, &hash).await["height"]
            .as_u64()
            .unwrap();
    }
    (height, a, b, asset)
}

/// Trigger: after a block holding only a payment, every valuation became 1.000000 in `query
/// prices`, `/v1/events` and the block's prices while the books still held resting offers
/// (issue 28, item 2). The last traded prices now carry forward, a block that traded nothing
/// prices nothing, and both survive a restart.
#[test]
fn a_block_of_payments_only_leaves_the_last_traded_prices_in_place() {
    let dir = TempDir::new("prices-carry");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    let (traded_at, before) = runtime().block_on(async {
        let client = reqwest::Client::new();
        let (traded_at, a, b, asset) = cross_with_asset0(&client, &url, (5_000, 5_000)).await;
        let (_, traded) = get(&client, &format!("{url}/v1/prices")).await;
        let reference = &traded["reference"];
        let priced = &reference["assets"][asset as usize];
        assert_eq!(priced["last_traded_height"], traded_at, "{traded}");
        assert_eq!(priced["price_height"], traded_at, "{traded}");
        let price: f64 = priced["price"].as_str().unwrap().parse().unwrap();
        // Both limits at 0.5: the rate lies within [0.5, 2].
        assert!((0.5..=2.0).contains(&price), "{traded}");
        assert!(reference["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|pair| pair["sell"] == 0 && pair["buy"] == asset && pair["height"] == traded_at));
        // A later block of one payment.
        let later = submit(&client, &url, &payment(a, 2, b, 0, 7)).await;
        assert!(later > traded_at);
        let (_, after) = get(&client, &format!("{url}/v1/prices")).await;
        assert!(after["height"].as_u64().unwrap() >= later, "{after}");
        assert_eq!(after["reference"], traded["reference"], "carried forward");
        assert!(
            after["traded"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t == false),
            "{after}"
        );
        assert!(
            after["prices"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p.is_null()),
            "a block that traded nothing prices nothing: {after}"
        );
        let (_, block) = get(&client, &format!("{url}/v1/blocks/{later}")).await;
        assert!(
            block["prices"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p.is_null()),
            "{block}"
        );
        // A block's prices are decimal strings (issue 28, point 3): the same text as the
        // reference price the block set.
        let (_, block) = get(&client, &format!("{url}/v1/blocks/{traded_at}")).await;
        assert_eq!(block["prices"][asset as usize], priced["price"], "{block}");
        assert_eq!(block["prices"][0], "1", "{block}");
        (traded_at, after["reference"].clone())
    });
    assert!(node.terminate(), "the node stops on SIGTERM");
    let node = NodeProcess::start(dir.path(), &[]);
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let (_, restarted) = get(&client, &format!("{}/v1/prices", node.url)).await;
        assert_eq!(restarted["reference"], before, "after a restart");
        assert!(traded_at > 0);
    });
}

/// Trigger (issue 28, item 3): assets were numbers only; nothing said which is which or how
/// many base units make a token. The development genesis names its assets (asset 0 is the
/// quote, `USD`), `GET /v1/assets` serves the table, and `walras query prices` and `query
/// assets` print the symbols; a prices answer after a trade quotes them.
#[test]
fn the_genesis_names_its_assets_and_the_cli_shows_them() {
    let dir = TempDir::new("asset-names");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    let asset = runtime().block_on(async {
        let client = reqwest::Client::new();
        let (status, names) = get(&client, &format!("{url}/v1/assets")).await;
        assert_eq!(status, 200, "{names}");
        assert_eq!(names["named"], true, "{names}");
        assert_eq!(names["quote_asset"], 0, "{names}");
        let symbols: Vec<&str> = names["assets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["symbol"].as_str().unwrap())
            .collect();
        assert_eq!(symbols, ["USD", "BTC", "ETH", "SOL"], "{names}");
        assert!(names["assets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["decimals"] == 2));
        let (_, _, _, asset) = cross_with_asset0(&client, &url, (5_000, 5_000)).await;
        asset
    });
    let query = |what: &str| {
        let output = std::process::Command::new(walras_bin())
            .args(["query", what, "--node", &url])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(output.status.success(), "{text}");
        text
    };
    let prices = query("prices");
    assert!(prices.contains("USD base units per base unit"), "{prices}");
    let symbol = ["USD", "BTC", "ETH", "SOL"][asset as usize];
    let line = prices
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(symbol))
        .unwrap_or_else(|| panic!("no line for {symbol}: {prices}"));
    assert!(!line.contains("never"), "{symbol} traded: {prices}");
    let assets = query("assets");
    assert!(assets.contains("BTC") && assets.contains("SOL"), "{assets}");
}

/// Trigger (issue 28, item 4): a block listed per-pair totals and the last offer only; a
/// trader could not see what each offer sold and received without `explain`. The block's fills
/// are served per offer (all, or one account's), sum to the pair totals of the header, and meet
/// each offer's limit on the integer amounts; `walras query fills` prints them.
#[test]
fn a_block_s_fills_show_what_each_offer_gave_and_got() {
    let dir = TempDir::new("fills");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    let (height, a) = runtime().block_on(async {
        let client = reqwest::Client::new();
        let (height, a, _, _) = cross_with_asset0(&client, &url, (4_000, 5_000)).await;
        let (status, fills) = get(&client, &format!("{url}/v1/blocks/{height}/fills")).await;
        assert_eq!(status, 200, "{fills}");
        let fills = fills["fills"].as_array().unwrap().clone();
        assert_eq!(fills.len(), 2, "both offers traded: {fills:?}");
        let (_, block) = get(&client, &format!("{url}/v1/blocks/{height}")).await;
        for trade in block["trades"].as_array().unwrap() {
            let sold: u64 = fills
                .iter()
                .filter(|fill| fill["sell"] == trade["sell"] && fill["buy"] == trade["buy"])
                .map(|fill| fill["sold"].as_u64().unwrap())
                .sum();
            assert_eq!(
                sold,
                trade["sold"].as_u64().unwrap(),
                "{trade} vs {fills:?}"
            );
        }
        for fill in &fills {
            let (sold, bought) = (
                fill["sold"].as_u64().unwrap(),
                fill["bought"].as_u64().unwrap(),
            );
            assert!(
                sold > 0 && 2 * bought >= sold,
                "at or above its 0.5 limit: {fill}"
            );
            assert!(fill["returned"].is_u64(), "the rest rule's field: {fill}");
        }
        let (_, mine) = get(
            &client,
            &format!("{url}/v1/blocks/{height}/fills?account={a}"),
        )
        .await;
        let mine = mine["fills"].as_array().unwrap();
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0]["account"], a);
        assert_eq!(mine[0]["offer_id"], 1);
        let (status, bad) = get(
            &client,
            &format!("{url}/v1/blocks/{height}/fills?account=x"),
        )
        .await;
        assert_eq!(
            (status, bad["error"]["code"].as_str()),
            (400, Some("malformed")),
            "{bad}"
        );
        let (status, missing) = get(&client, &format!("{url}/v1/blocks/999999/fills")).await;
        assert_eq!(
            (status, missing["error"]["code"].as_str()),
            (404, Some("unknown_block"))
        );
        (height, a)
    });
    let output = std::process::Command::new(walras_bin())
        .args([
            "query",
            "fills",
            &height.to_string(),
            "--account",
            &a.to_string(),
        ])
        .args(["--node", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains(&format!("block {height}: 1 fills")), "{text}");
}
