//! The OpenAPI 3.1 document served at `/v1/openapi.json`, built in code so that a test can
//! check it names every route the router serves (see `server::tests`).

use serde_json::{json, Value};

/// Every route: (method, path, summary, success status, response schema or media type).
pub const ROUTES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "post",
        "/v1/transactions",
        "Submit one transaction (JSON or canonical binary)",
        "202",
        "SubmitResponse",
    ),
    (
        "post",
        "/v1/transactions/batch",
        "Submit a list of transactions (binary: u16 count, then each encoded)",
        "200",
        "BatchSubmitResponse",
    ),
    (
        "get",
        "/v1/transactions/{hash}",
        "Status of a transaction: pending, accepted or dropped",
        "200",
        "TransactionStatus",
    ),
    (
        "get",
        "/v1/accounts/{id}",
        "An account: key, sequence numbers, balances",
        "200",
        "Account",
    ),
    (
        "get",
        "/v1/accounts/{id}/offers",
        "The open offers of an account",
        "200",
        "AccountOffers",
    ),
    (
        "get",
        "/v1/books/{sell}/{buy}",
        "Depth of the book selling `sell` for `buy`, by limit price",
        "200",
        "Book",
    ),
    (
        "get",
        "/v1/blocks/{height}",
        "A committed block's header and results",
        "200",
        "Block",
    ),
    (
        "get",
        "/v1/payments/escrow",
        "The payments bridge: committee chain and epoch, escrow per asset, outputs withdrawn (404 payments_disabled without a committee)",
        "200",
        "Escrow",
    ),
    (
        "get",
        "/v1/payments/deposits",
        "Committed deposits into the payments escrow after `after_height` (the payments lane admits them)",
        "200",
        "Deposits",
    ),
    (
        "get",
        "/v1/blocks/{height}/raw",
        "A committed block in its canonical encoding",
        "200",
        "application/octet-stream",
    ),
    (
        "get",
        "/v1/offers/{id}/explain",
        "Why an offer traded or not: status, the block's clearing rate against its limit, \
         amounts, and the reason (out of the money by x bp, volume ran out ahead of it, at the \
         money, dropped by a filter rule, cancelled, pending). Offer ids are per account (the \
         creating transaction's sequence number): `account` picks one when several accounts \
         used the id (409 ambiguous_offer otherwise); 404 unknown_offer; 503 explain_busy while \
         another explanation runs",
        "200",
        "OfferExplanation",
    ),
    (
        "get",
        "/v1/prices",
        "The latest block's clearing valuations",
        "200",
        "Prices",
    ),
    (
        "get",
        "/v1/oracle/prices",
        "The node's oracle prices per exchange asset, with status, age, dispersion and venues \
         (404 oracle_not_configured without --oracle-feed/--oracle-venue; 503 oracle_no_price \
         until one asset has a healthy price). Advisory: nothing committed depends on it",
        "200",
        "OraclePrices",
    ),
    (
        "get",
        "/v1/status",
        "Height, state root, mempool",
        "200",
        "Status",
    ),
    (
        "get",
        "/v1/gateway",
        "Where blocks come from (`timer` or `gateway`) and, with --block-source gateway, the \
         fair-access gateway's counters as of its last sealed batch (null in timer mode)",
        "200",
        "GatewayStatus",
    ),
    (
        "get",
        "/v1/node",
        "What the node runs (consensus, block source, oracle, payments) and its health: \
         mempool, event streams, mean store commit time, CometBFT height and peers when \
         replicated",
        "200",
        "Node",
    ),
    (
        "get",
        "/",
        "The live dashboard (HTML; its assets under /dashboard/)",
        "200",
        "text/html",
    ),
    (
        "get",
        "/v1/events",
        "Server-sent events: one `block` event per committed block (data: BlockEvent); with an \
         oracle, an `oracle` event at most once a second (data: OraclePrices) and an \
         `oracle_band` warning when a block's clearing leaves the band (data: OracleBand). One \
         client IP may hold --event-streams-per-client streams (429 too_many_streams beyond), \
         all clients together 256 (503 too_many_subscribers)",
        "200",
        "text/event-stream",
    ),
    (
        "get",
        "/v1/openapi.json",
        "This document",
        "200",
        "application/json",
    ),
    ("get", "/metrics", "Prometheus metrics", "200", "text/plain"),
];

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = match name {
                "hash" => json!({"type": "string", "pattern": "^[0-9a-fA-F]{64}$"}),
                "sell" | "buy" => json!({"type": "integer", "minimum": 0, "maximum": 65535}),
                _ => json!({"type": "integer", "minimum": 0}),
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

fn success(status: &str, body: &str) -> Value {
    let content = if body.contains('/') {
        json!({ body: {} })
    } else {
        json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{body}")}}})
    };
    json!({ status: {"description": "success", "content": content} })
}

fn operation(method: &str, path: &str, summary: &str, status: &str, body: &str) -> Value {
    let mut responses = success(status, body);
    let error = json!({"description": "error", "content": {"application/json":
        {"schema": {"$ref": "#/components/schemas/Error"}}}});
    for code in ["400", "404", "413", "429"] {
        responses[code] = error.clone();
    }
    if method == "post" {
        for code in ["409", "415", "422", "503"] {
            responses[code] = error.clone();
        }
    }
    let mut operation =
        json!({"summary": summary, "parameters": path_parameters(path), "responses": responses});
    if path == "/v1/books/{sell}/{buy}" {
        if let Some(list) = operation["parameters"].as_array_mut() {
            list.push(json!({
            "name": "levels", "in": "query", "required": false,
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20}}));
        }
    }
    if path == "/v1/offers/{id}/explain" {
        for code in ["409", "503"] {
            operation["responses"][code] = error.clone();
        }
        if let Some(list) = operation["parameters"].as_array_mut() {
            list.push(json!({
            "name": "account", "in": "query", "required": false,
            "schema": {"type": "integer", "minimum": 0}}));
        }
    }
    if path == "/v1/transactions" {
        operation["requestBody"] = json!({"required": true, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Transaction"}},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}});
    }
    if path == "/v1/transactions/batch" {
        operation["requestBody"] = json!({"required": true, "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}});
    }
    operation
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

fn schemas() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    let text = json!({"type": "string"});
    let hex = json!({"type": "string", "pattern": "^[0-9a-f]*$"});
    let decimal =
        json!({"type": "string", "description": "decimal: units of buy per unit of sell"});
    let list = |item: &str| json!({"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}});
    // Added after the document below: one `json!` any larger passes the macro recursion limit.
    let number = json!({"type": "number"});
    let phases = object(
        &[
            "signatures",
            "filter",
            "plan",
            "clearing",
            "apply",
            "commit",
        ],
        json!({"signatures": number, "filter": number, "plan": number,
            "clearing": number, "apply": number, "commit": number}),
    );
    let node = object(
        &[
            "version",
            "consensus",
            "block_source",
            "oracle",
            "payments",
            "height",
            "mempool_transactions",
            "mempool_capacity",
            "event_streams",
            "event_streams_max",
            "blocks_committed",
            "persist_ms_mean",
        ],
        json!({
            "version": text, "consensus": {"enum": ["solo", "cometbft"]}, "block_source": {"enum": ["timer", "gateway", "cometbft"]},
            "oracle": {"type": "boolean"}, "payments": {"type": "boolean"}, "height": int, "mempool_transactions": int, "mempool_capacity": int,
            "event_streams": int, "event_streams_max": int, "blocks_committed": int, "persist_ms_mean": {"type": ["number", "null"]},
            "cometbft": object(&["rpc", "height", "catching_up", "peers"], json!({"rpc": text, "height": {"type": ["integer", "null"]},
                "catching_up": {"type": ["boolean", "null"]}, "peers": {"type": ["integer", "null"]}, "error": text}))}),
    );
    let mut schemas = json!({
        "Error": object(&["error"], json!({"error": object(&["code", "message"], json!({"code": text, "message": text}))})),
        "Transaction": object(&["source", "sequence", "operation", "signature"], json!({
            "source": int, "sequence": int, "signature": hex,
            "operation": {"oneOf": [
                object(&["type", "new_account", "public_key"], json!({"type": {"const": "create_account"}, "new_account": int, "public_key": hex})),
                object(&["type", "sell", "buy", "amount", "min_price"], json!({"type": {"const": "create_offer"}, "sell": int, "buy": int, "amount": int, "min_price": decimal})),
                object(&["type", "sell", "buy", "min_price", "offer_id"], json!({"type": {"const": "cancel_offer"}, "sell": int, "buy": int, "min_price": decimal, "offer_id": int})),
                object(&["type", "to", "asset", "amount"], json!({"type": {"const": "payment"}, "to": int, "asset": int, "amount": int})),
                object(&["type", "asset", "amount", "owner"], json!({"type": {"const": "deposit_to_payments"}, "asset": int, "amount": int, "owner": hex})),
                object(&["type", "output_id", "asset", "amount", "owner", "chain_id", "epoch", "signers", "aggregate"], json!({"type": {"const": "withdraw_from_payments"}, "output_id": hex, "asset": int, "amount": int, "owner": hex, "chain_id": int, "epoch": int, "signers": hex, "aggregate": hex})),
            ]}})),
        "Escrow": object(&["height", "chain_id", "epoch", "escrow", "withdrawn"], json!({"height": int, "chain_id": int, "epoch": int,
            "escrow": {"type": "array", "items": int}, "withdrawn": int})),
        "Deposits": object(&["scanned_to", "deposits"], json!({"scanned_to": int,
            "deposits": {"type": "array", "items": object(&["height", "transaction", "output_id", "asset", "amount", "owner"],
                json!({"height": int, "transaction": hex, "output_id": hex, "asset": int, "amount": int, "owner": hex}))}})),
        "SubmitResponse": object(&["hash", "status"], json!({"hash": hex, "status": text})),
        "BatchSubmitResponse": object(&["admitted", "rejected", "results"], json!({"admitted": int, "rejected": int,
            "results": {"type": "array", "items": object(&["hash"], json!({"hash": hex,
                "error": object(&["code", "message"], json!({"code": text, "message": text}))}))}})),
        "TransactionStatus": object(&["hash", "status"], json!({"hash": hex,
            "status": {"enum": ["pending", "accepted", "dropped"]}, "height": int, "index": int, "reason": text})),
        "Account": object(&["id", "public_key", "last_sequence", "next_sequence", "balances"], json!({
            "id": int, "public_key": hex, "last_sequence": int, "next_sequence": int,
            "balances": {"type": "array", "items": object(&["asset", "amount"], json!({"asset": int, "amount": int}))}})),
        "Offer": object(&["offer_id", "sell", "buy", "amount", "min_price"], json!({"offer_id": int, "sell": int, "buy": int, "amount": int, "min_price": decimal})),
        "AccountOffers": object(&["account", "offers"], json!({"account": int, "offers": list("Offer")})),
        "Book": object(&["sell", "buy", "offers", "amount", "levels"], json!({"sell": int, "buy": int, "offers": int, "amount": int,
            "levels": {"type": "array", "items": object(&["min_price", "amount", "offers"], json!({"min_price": decimal, "amount": int, "offers": int}))}})),
        "Block": object(&["height", "hash", "previous", "transactions_root", "state_root", "transactions", "accepted", "dropped", "valuations", "trades"], json!({
            "height": int, "hash": hex, "previous": hex, "transactions_root": hex, "state_root": hex, "transactions": int, "accepted": int,
            "dropped": {"type": "array", "items": object(&["index", "hash", "reason"], json!({"index": int, "hash": hex, "reason": text}))},
            "valuations": {"type": "array", "items": int},
            "trades": {"type": "array", "items": object(&["sell", "buy", "sold"], json!({"sell": int, "buy": int, "sold": int,
                "last_offer_account": int, "last_offer_id": int, "last_offer_min_price": decimal}))}})),
        "Prices": object(&["height", "valuations", "prices"], json!({"height": int, "valuations": {"type": "array", "items": int},
            "prices": {"type": "array", "items": {"type": "number"}}})),
        "Status": object(&["version", "height", "block_hash", "state_root", "assets", "accounts", "open_offers", "mempool_transactions", "mempool_capacity"], json!({
            "version": text, "height": int, "block_hash": hex, "state_root": hex, "assets": int, "accounts": int, "open_offers": int,
            "mempool_transactions": int, "mempool_capacity": int,
            "dev_genesis": object(&["seed", "accounts", "assets"], json!({"seed": int, "accounts": int, "assets": int}))})),
        "BlockEvent": object(&["height", "hash", "state_root", "transactions", "accepted", "dropped", "converged", "trades", "prices", "execute_ms", "persist_ms", "committed_unix_ms"], json!({
            "height": int, "hash": hex, "state_root": hex, "transactions": int, "accepted": int, "dropped": int, "converged": {"type": "boolean"},
            "trades": int, "prices": {"type": "array", "items": {"type": "number"}}, "execute_ms": {"type": "number"}, "persist_ms": {"type": "number"},
            "committed_unix_ms": int, "oracle_band": {"$ref": "#/components/schemas/OracleBand"}})),
        "OraclePrices": object(&["published_unix_ms", "numeraire", "source", "prices", "venues"], json!({
            "published_unix_ms": int, "numeraire": text, "source": text,
            "prices": {"type": "array", "items": object(&["asset", "symbol", "units", "price", "status", "age_ms", "dispersion_bps", "venues_used", "venues_excluded", "method"], json!({
                "asset": int, "symbol": text, "units": {"type": "string", "pattern": "^[0-9]+$"}, "price": {"type": ["number", "null"]},
                "status": {"enum": ["ok", "insufficient_venues", "unavailable"]}, "age_ms": {"type": "number"}, "dispersion_bps": {"type": "number"},
                "venues_used": {"type": "array", "items": object(&["venue", "symbol", "price", "weight"], json!({"venue": text, "symbol": text, "price": {"type": "number"}, "weight": {"type": "number"}}))},
                "venues_excluded": {"type": "array", "items": object(&["venue", "symbol", "reason"], json!({"venue": text, "symbol": text, "reason": text}))},
                "method": text}))},
            "venues": {"type": "array", "items": object(&["venue", "synced", "resyncing", "crossed", "stale", "thin"], json!({
                "venue": text, "synced": int, "resyncing": int, "crossed": int, "stale": int, "thin": int}))}})),
        "OracleBand": object(&["height", "reference_asset", "band_bps", "assets"], json!({
            "height": int, "reference_asset": int, "band_bps": {"type": "number"},
            "assets": {"type": "array", "items": object(&["asset", "symbol", "deviation_bps", "beyond_band"], json!({
                "asset": int, "symbol": text, "deviation_bps": {"type": "number"}, "beyond_band": {"type": "boolean"}}))}})),
    });
    schemas["OfferExplanation"] = offer_explanation_schema();
    // Apart: one json! of every schema would exceed the macro recursion limit.
    let nullable = json!({"type": ["integer", "null"], "minimum": 0});
    schemas["GatewayStatus"] = object(
        &[
            "block_source",
            "participants_configured",
            "participants_connected",
            "stragglers",
            "late_trades_total",
            "queue_full_total",
            "last_seal_delay_us",
            "sealed_height",
        ],
        json!({
            "block_source": {"enum": ["timer", "gateway"]},
            "participants_configured": nullable, "participants_connected": nullable,
            "stragglers": nullable, "late_trades_total": nullable, "queue_full_total": nullable,
            "last_seal_delay_us": nullable, "sealed_height": nullable,
        }),
    );
    let block_event = &mut schemas["BlockEvent"]["properties"];
    block_event["dropped_by_reason"] = json!({"type": "object", "additionalProperties": int});
    block_event["phases"] = phases;
    schemas["Node"] = node;
    schemas
}

/// `GET /v1/offers/{id}/explain` (its own `json!`: one more entry in the table above exceeds
/// the macro's recursion limit).
fn offer_explanation_schema() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    let text = json!({"type": "string"});
    let decimal =
        json!({"type": "string", "description": "decimal: units of buy per unit of sell"});
    let nullable = |schema: &Value| json!({"oneOf": [schema, {"type": "null"}]});
    let amount = json!({"type": "string", "pattern": "^[0-9]+$"});
    let bp = json!({"type": "string", "pattern": "^[0-9]+\\.[0-9]{2}$"});
    object(
        &[
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
        ],
        json!({
            "offer_id": int, "summary": text,
            "status": {"enum": ["traded", "partly_traded", "not_traded", "dropped", "cancelled", "pending", "unknown"]},
            "height": nullable(&int), "account": nullable(&int), "sell_asset": nullable(&int), "buy_asset": nullable(&int),
            "limit_price": nullable(&decimal), "clearing_rate": nullable(&decimal),
            "amount": nullable(&amount), "sold": nullable(&amount), "received": nullable(&amount),
            "reason_code": nullable(&text), "out_of_money_bp": nullable(&bp),
            "volume_ahead": nullable(&amount)}),
    )
}

pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for (method, path, summary, status, body) in ROUTES {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[*method] = operation(method, path, summary, status, body);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Walras node API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A batch exchange node: every block's offers clear at one set of asset valuations. \
                Errors are {\"error\": {\"code\", \"message\"}} with a 4xx or 5xx status; requests are rate-limited per client.",
        },
        "paths": paths,
        "components": {"schemas": schemas()},
    })
}
