//! The live dashboard at `/`: one static page (HTML, CSS, JavaScript) embedded in the binary,
//! no build step. It reads the public API like any client: the `/v1/events` stream (one per
//! page) and gentle polling (at most a few requests a second) of `/v1/node`, `/v1/status`,
//! the pair books and, when `/v1/node` says they are configured, the oracle, payments and
//! gateway endpoints; so it works within the node's rate and event-stream limits.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("dashboard/index.html");
const DASHBOARD_CSS: &str = include_str!("dashboard/dashboard.css");
const DASHBOARD_JS: &str = include_str!("dashboard/dashboard.js");

/// The assets under `/dashboard/`: name, media type, content.
const ASSETS: [(&str, &str, &str); 2] = [
    ("dashboard.css", "text/css; charset=utf-8", DASHBOARD_CSS),
    (
        "dashboard.js",
        "text/javascript; charset=utf-8",
        DASHBOARD_JS,
    ),
];

/// Served with every asset: the page loads nothing from elsewhere and runs no inline script.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:";

#[utoipa::path(
    get,
    path = "/",
    summary = "The live dashboard (HTML; its assets under /dashboard/)",
    responses(
        (status = 200, description = "the page", content(("text/html")))
    )
)]
pub(crate) async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX_HTML)
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, media_type, content)) => page(media_type, content),
        None => super::routes::not_found().await.into_response(),
    }
}

fn page(media_type: &'static str, content: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, media_type),
            // Small, and a new binary may bring a new page: always revalidate.
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        ],
        content,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page names exactly the assets that are served, so none 404s in a browser.
    #[test]
    fn the_page_links_only_served_assets() {
        for (name, _, content) in ASSETS {
            assert!(
                INDEX_HTML.contains(&format!("/dashboard/{name}")),
                "index.html does not load {name}"
            );
            assert!(!content.is_empty());
        }
        let linked = INDEX_HTML.matches("/dashboard/").count();
        assert_eq!(
            linked,
            ASSETS.len(),
            "index.html links an asset that is not served"
        );
    }
}
