//! The HTTP router: every route with its body limit and timeout, and the layers every answer
//! passes (response counting, the per-client rate limit, the gateway link's authentication,
//! `nosniff`).

use crate::failure::Failure;
use crate::limits::{ClientSlots, RateLimiter};
use crate::node::Shared;
use crate::{dashboard, explain, gateway_link, gateway_seal, openapi, routes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;

/// Requests (other than event streams) that take longer are answered 408.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The node's API: what `walras node` serves and the in-process node drives.
pub fn router(
    shared: Arc<Shared>,
    limiter: Option<Arc<RateLimiter>>,
    streams: Arc<ClientSlots>,
) -> Router {
    let api = Router::new()
        .route(
            "/v1/transactions",
            post(routes::submit).layer(DefaultBodyLimit::max(routes::SUBMIT_BODY_MAX_BYTES)),
        )
        .route(
            "/v1/transactions/batch",
            post(routes::submit_batch).layer(DefaultBodyLimit::max(routes::BATCH_BODY_MAX_BYTES)),
        )
        .route("/v1/transactions/{hash}", get(routes::transaction_status))
        .route("/v1/accounts/{id}", get(routes::account))
        .route("/v1/accounts/{id}/offers", get(routes::account_offers))
        .route("/v1/books/{sell}/{buy}", get(routes::book))
        .route("/v1/blocks/{height}", get(routes::block))
        .route("/v1/blocks/{height}/raw", get(routes::block_raw))
        .route("/v1/blocks/{height}/fills", get(routes::block_fills))
        .route("/v1/payments/deposits", get(routes::payments_deposits))
        .route("/v1/payments/escrow", get(routes::payments_escrow))
        .route("/v1/offers/{id}/explain", get(explain::offer_explain))
        .route("/v1/prices", get(routes::prices))
        .route("/v1/status", get(routes::status))
        .route("/v1/assets", get(routes::assets))
        .route("/v1/gateway", get(gateway_seal::status))
        .route("/v1/node", get(routes::node))
        .route("/", get(dashboard::index))
        .route("/dashboard/{file}", get(dashboard::asset))
        .route("/v1/oracle/prices", get(routes::oracle_prices))
        .route("/v1/openapi.json", get(openapi::openapi_document))
        .route("/metrics", get(routes::metrics))
        .route(
            "/v1/gateway/seal",
            post(gateway_seal::seal)
                .layer(DefaultBodyLimit::max(gateway_link::SEAL_BODY_MAX_BYTES)),
        )
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    // Event streams are long-lived: no timeout.
    let streams = Router::new()
        .route("/v1/events", get(routes::events))
        .layer(axum::Extension(streams));
    api.merge(streams)
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            count_responses,
        ))
        .layer(middleware::from_fn_with_state(limiter, rate_limit))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            gateway_seal::authenticate_link,
        ))
        // Every answer, errors and refusals included, is what its content type says: a
        // browser must never sniff an error body that echoes client input into a script.
        .layer(SetResponseHeaderLayer::overriding(
            axum::http::header::X_CONTENT_TYPE_OPTIONS,
            axum::http::HeaderValue::from_static("nosniff"),
        ))
        .with_state(shared)
}

async fn count_responses(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_string();
    let response = next.run(request).await;
    shared
        .metrics
        .count_response(&route, response.status().as_u16());
    response
}

async fn rate_limit(
    State(limiter): State<Option<Arc<RateLimiter>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(limiter) = limiter else {
        return next.run(request).await;
    };
    // The gateway's authenticated link is not a client (issue 26): never rate limited.
    if request
        .extensions()
        .get::<gateway_seal::LinkAuthenticated>()
        .is_some()
    {
        return next.run(request).await;
    }
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    if let Some(client) = client {
        if let Err(wait) = limiter.check(client) {
            return Failure::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests from {client}; slow down"),
            )
            .retry_after(wait.as_secs_f64())
            .into_response();
        }
    }
    next.run(request).await
}
