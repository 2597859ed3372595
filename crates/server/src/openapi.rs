//! The OpenAPI 3.1 document served at `/v1/openapi.json`, derived by utoipa: the bodies'
//! schemas from `ToSchema` on the wire types (`walras_api::wire`), each route from the
//! `#[utoipa::path]` on its handler, next to the code that answers it.
//!
//! Written by hand, because a handler's annotation cannot see it: [`CommonErrors`], the answers
//! the router's layers give before a handler runs (the per-client rate limit, the request
//! timeout). Not in the document: the dashboard's static assets (`/dashboard/{file}`, a fixed set
//! of CSS/JS files the page at `/` loads, not an API); the test below holds the router to that.

use utoipa::openapi::{ContentBuilder, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};
use walras_api::wire::{ApiError, BlockEventJson, OracleBandJson, OraclePricesJson};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Walras node API",
        description = "A batch exchange node: every block's offers clear at one set of asset \
            valuations. Errors are {\"error\": {\"code\", \"message\"}} with a 4xx or 5xx status; \
            requests are rate-limited per client. Hashes, keys and signatures are hex; amounts \
            are JSON integers (valuations are u128 and may exceed 2^64); limit prices are exact \
            decimal strings."
    ),
    paths(
        crate::routes::submit,
        crate::routes::submit_batch,
        crate::routes::transaction_status,
        crate::routes::account,
        crate::routes::account_offers,
        crate::routes::book,
        crate::routes::block,
        crate::routes::block_raw,
        crate::routes::block_fills,
        crate::routes::payments_escrow,
        crate::routes::payments_deposits,
        crate::explain::offer_explain,
        crate::routes::prices,
        crate::routes::oracle_prices,
        crate::routes::status,
        crate::routes::assets,
        crate::gateway_seal::status,
        crate::gateway_seal::seal,
        crate::routes::node,
        crate::dashboard::index,
        crate::routes::events,
        openapi_document,
        crate::routes::metrics,
    ),
    // The data of the server-sent events: no route answers them as JSON, so name them here.
    components(schemas(BlockEventJson, OraclePricesJson, OracleBandJson)),
    modifiers(&CommonErrors)
)]
struct ApiDoc;

/// The document (built on each request: it is small, and this keeps no global).
pub(crate) fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    summary = "This document",
    responses(
        (status = 200, description = "OpenAPI 3.1", content(("application/json")))
    )
)]
pub(crate) async fn openapi_document() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(document())
}

/// Adds to every operation the answers of the router's layers, which run before any handler:
/// `429 rate_limited` (the per-client limit of the public listener) and, except on the
/// long-lived `/v1/events`, `408` when a request takes longer than the request timeout.
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let error = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                            <ApiError as utoipa::ToSchema>::name(),
                        ))))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            for operation in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                let responses = &mut operation.responses.responses;
                responses.entry("429".into()).or_insert_with(|| {
                    error("rate_limited: this client sent too many requests; see Retry-After")
                        .into()
                });
                if path != "/v1/events" {
                    responses.entry("408".into()).or_insert_with(|| {
                        error("the request took longer than its timeout").into()
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every (method, path) the router in `router.rs` serves, read from its source: axum offers no
    /// list of a router's routes. The scan is held to the router by the process test
    /// `every_route_in_the_openapi_document_is_served` (each documented route answers) and by
    /// the routes it must find below.
    fn served_routes() -> BTreeSet<(String, String)> {
        let source = include_str!("router.rs");
        let router = &source[source
            .find("pub fn router(")
            .expect("router() in router.rs")..];
        let mut routes = BTreeSet::new();
        let mut rest = router;
        while let Some(at) = rest.find(".route(") {
            rest = &rest[at + ".route(".len()..];
            let path = rest
                .trim_start()
                .strip_prefix('"')
                .and_then(|text| text.split('"').next())
                .expect("a route's path is a string literal");
            let after = &rest[rest.find(',').expect("route(path, method)") + 1..];
            let method = after
                .trim_start()
                .split('(')
                .next()
                .expect("a method router")
                .to_string();
            routes.insert((method, path.to_string()));
        }
        routes
    }

    fn documented_routes() -> BTreeSet<(String, String)> {
        let document = serde_json::to_value(document()).expect("the document serializes");
        let paths = document["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, operations)| {
                operations
                    .as_object()
                    .expect("operations")
                    .keys()
                    .map(move |method| (method.clone(), path.clone()))
            })
            .collect()
    }

    #[test]
    fn every_route_the_router_serves_is_in_the_document_and_no_other() {
        let served = served_routes();
        for expected in [
            ("post", "/v1/transactions"),
            ("get", "/v1/events"),
            ("post", "/v1/gateway/seal"),
        ] {
            let expected = (expected.0.to_string(), expected.1.to_string());
            assert!(served.contains(&expected), "the scan misses {expected:?}");
        }
        let dashboard_assets = ("get".to_string(), "/dashboard/{file}".to_string());
        assert!(served.contains(&dashboard_assets));
        let served: BTreeSet<_> = served
            .into_iter()
            .filter(|route| *route != dashboard_assets)
            .collect();
        let documented = documented_routes();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        assert!(
            undocumented.is_empty(),
            "served, not documented: {undocumented:?}"
        );
        let unserved: Vec<_> = documented.difference(&served).collect();
        assert!(unserved.is_empty(), "documented, not served: {unserved:?}");
    }

    #[test]
    fn every_reference_in_the_document_resolves() {
        let document = serde_json::to_value(document()).expect("the document serializes");
        let mut references = Vec::new();
        collect_references(&document, &mut references);
        assert!(references.len() > 20, "{} references", references.len());
        for reference in references {
            let name = reference
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{reference} is not a schema reference"));
            assert!(
                document["components"]["schemas"].get(name).is_some(),
                "{reference} does not resolve"
            );
        }
    }

    fn collect_references(value: &serde_json::Value, into: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(reference)) = map.get("$ref") {
                    into.push(reference.clone());
                }
                map.values()
                    .for_each(|value| collect_references(value, into));
            }
            serde_json::Value::Array(list) => list
                .iter()
                .for_each(|value| collect_references(value, into)),
            _ => {}
        }
    }
}
