//! The OpenAPI document served by a real node against that node's answers: for each request
//! below (status, account, offers, book, block, prices, node, a submission admitted and its
//! status, a submission refused, unknown things), the answer's status is one the document
//! declares for the route, and its JSON body fits the schema declared for that status
//! (required fields present, types, enums, patterns; see `walras_testkit::openapi`).

use walras_testkit::openapi::{check, response_schema};
use walras_testkit::*;
use walras_types::SignedTransaction;

/// Sends `method url` and checks the answer against the document's `method path`.
async fn answer_fits(
    client: &reqwest::Client,
    document: &serde_json::Value,
    url: &str,
    (method, path, concrete): (&str, &str, &str),
    body: Option<(&str, Vec<u8>)>,
) -> (u16, serde_json::Value) {
    let mut request = client.request(
        method.to_uppercase().parse().unwrap(),
        format!("{url}{concrete}"),
    );
    if let Some((content_type, body)) = body {
        request = request.header("content-type", content_type).body(body);
    }
    let response = request.send().await.expect("the node answers");
    let status = response.status().as_u16();
    let json: serde_json::Value = response.json().await.expect("a JSON answer");
    let schema = response_schema(document, method, path, status).unwrap_or_else(|| {
        panic!("{method} {path} answered {status}, which the document does not declare: {json}")
    });
    let mut errors = Vec::new();
    check(document, schema, &json, "$", &mut errors);
    assert!(
        errors.is_empty(),
        "{method} {concrete} ({status}) does not fit its schema: {errors:#?}\n{json}"
    );
    (status, json)
}

#[test]
fn real_answers_fit_the_schemas_the_document_declares() {
    let dir = TempDir::new("openapi-answers");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let (status, document) = get(&client, &format!("{url}/v1/openapi.json")).await;
        assert_eq!(status, 200);
        assert_eq!(document["openapi"], "3.1.0");

        let (status, _) = answer_fits(
            &client,
            &document,
            &url,
            ("get", "/v1/status", "/v1/status"),
            None,
        )
        .await;
        assert_eq!(status, 200);
        let (status, account) = answer_fits(
            &client,
            &document,
            &url,
            ("get", "/v1/accounts/{id}", "/v1/accounts/1"),
            None,
        )
        .await;
        assert_eq!(status, 200);
        let asset = account["balances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|balance| balance["amount"].as_u64().unwrap() >= 100)
            .map(|balance| balance["asset"].as_u64().unwrap() as u16)
            .expect("dev accounts hold assets");

        // A submission admitted, its status once committed, and its block.
        let signed = payment(1, 1, 2, asset, 100);
        let json = serde_json::to_vec(&walras_api::transaction_to_json(&signed)).unwrap();
        let (status, submitted) = answer_fits(
            &client,
            &document,
            &url,
            ("post", "/v1/transactions", "/v1/transactions"),
            Some(("application/json", json.clone())),
        )
        .await;
        assert_eq!(status, 202, "{submitted}");
        let hash = submitted["hash"].as_str().unwrap().to_string();
        let committed = wait_committed(&client, &url, &hash).await;
        assert_eq!(committed["status"], "accepted", "{committed}");
        let (_, committed) = answer_fits(
            &client,
            &document,
            &url,
            (
                "get",
                "/v1/transactions/{hash}",
                &format!("/v1/transactions/{hash}"),
            ),
            None,
        )
        .await;
        let height = committed["height"].as_u64().expect("a committed height");
        let (status, block) = answer_fits(
            &client,
            &document,
            &url,
            (
                "get",
                "/v1/blocks/{height}",
                &format!("/v1/blocks/{height}"),
            ),
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert!(
            !block["valuations"].as_array().unwrap().is_empty(),
            "{block}"
        );

        // Refusals: the same transaction again (replayed or duplicate), a bad signature,
        // a body that is not a transaction, unknown things.
        let (status, _) = answer_fits(
            &client,
            &document,
            &url,
            ("post", "/v1/transactions", "/v1/transactions"),
            Some(("application/json", json)),
        )
        .await;
        assert_eq!(status, 409);
        let mut forged = payment(1, 2, 2, asset, 100);
        forged.signature[0] ^= 1;
        let (status, refused) = answer_fits(
            &client,
            &document,
            &url,
            ("post", "/v1/transactions", "/v1/transactions"),
            Some(("application/octet-stream", forged.encode())),
        )
        .await;
        assert!((400..500).contains(&status), "{refused}");
        let (status, _) = answer_fits(
            &client,
            &document,
            &url,
            ("post", "/v1/transactions", "/v1/transactions"),
            Some(("application/json", b"{}".to_vec())),
        )
        .await;
        assert_eq!(status, 400);
        let (status, _) = answer_fits(
            &client,
            &document,
            &url,
            ("post", "/v1/transactions/batch", "/v1/transactions/batch"),
            Some((
                "application/octet-stream",
                SignedTransaction::encode_list(&[payment(1, 2, 2, asset, 1), forged]),
            )),
        )
        .await;
        assert_eq!(status, 200);
        for (path, concrete, expected) in [
            ("/v1/accounts/{id}", "/v1/accounts/99999999", 404),
            ("/v1/accounts/{id}", "/v1/accounts/x", 400),
            (
                "/v1/transactions/{hash}",
                &format!("/v1/transactions/{}", "00".repeat(32)),
                404,
            ),
            ("/v1/blocks/{height}", "/v1/blocks/99999999", 404),
            ("/v1/accounts/{id}/offers", "/v1/accounts/1/offers", 200),
            ("/v1/books/{sell}/{buy}", "/v1/books/0/1?levels=5", 200),
            ("/v1/books/{sell}/{buy}", "/v1/books/0/0", 400),
            ("/v1/prices", "/v1/prices", 200),
            ("/v1/node", "/v1/node", 200),
            ("/v1/gateway", "/v1/gateway", 200),
            (
                "/v1/offers/{id}/explain",
                "/v1/offers/1/explain?account=1",
                404,
            ),
            ("/v1/oracle/prices", "/v1/oracle/prices", 404),
            (
                "/v1/payments/deposits",
                "/v1/payments/deposits?after_height=0",
                200,
            ),
        ] {
            let (status, json) =
                answer_fits(&client, &document, &url, ("get", path, concrete), None).await;
            assert_eq!(status, expected, "{concrete}: {json}");
        }
    });
}
