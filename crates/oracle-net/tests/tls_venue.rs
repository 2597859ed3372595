//! Connectors over TLS: a venue reached at `wss://` and `https://` (the only way real venues
//! serve), here the loopback mock venue behind a TLS-terminating proxy whose certificate a
//! test CA signed for `localhost`.
//!
//! - With the test CA trusted (`--oracle-ca`), books sync over `wss://`, Binance's REST
//!   snapshots arrive over `https://`, and every asset gets a price.
//! - With Mozilla's roots only, the same venue is refused at the handshake: no record, no
//!   price; connection failures are counted, never served as data.
//! - A `wss://` endpoint without any TLS configuration is refused before anything starts.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use walras_oracle::OracleConfig;
use walras_oracle::{
    default_assets, generate_feed, symbol_for, venue_protocol, venue_quote, FeedConfig,
};
use walras_oracle_net::MockVenue;
use walras_oracle_net::{run_live, LiveOptions, LiveSummary};
use walras_oracle_net::{ConnectorConfig, Endpoint, EndpointError};
use walras_oracle_net::{TlsClient, TlsError};

/// A test CA and a server certificate for `localhost` signed by it.
struct TestPki {
    ca_pem: String,
    server: rustls::ServerConfig,
}

fn test_pki() -> TestPki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(server_key.serialize_der()).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![server_cert.der().clone()], key)
    .unwrap();
    TestPki {
        ca_pem: ca.pem(),
        server,
    }
}

/// Accepts TLS on a loopback port and forwards the plaintext to `target`; counts completed
/// handshakes.
async fn tls_proxy(
    server: Arc<rustls::ServerConfig>,
    target: SocketAddr,
    handshakes: Arc<AtomicU64>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(server);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, handshakes) = (acceptor.clone(), handshakes.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                handshakes.fetch_add(1, Ordering::Relaxed);
                let Ok(mut plain) = TcpStream::connect(target).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

fn host_port(url: &str) -> SocketAddr {
    let rest = url.split("://").nth(1).unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

/// Runs the connectors against binance (WebSocket + REST) and kraken behind the TLS proxy for
/// a few seconds; returns the summary, the last publication's priced assets and the proxy's
/// handshake count.
///
/// It stops once one publication priced every asset, or after `deadline`. (Stopping after a
/// fixed time instead made the test flaky on a loaded machine: the feed had ended and its books
/// had gone stale by the last publication.)
async fn run_behind_tls(
    tls: TlsClient,
    pki: &TestPki,
    deadline: Duration,
) -> (LiveSummary, Vec<String>, u64) {
    let venues = vec!["binance".to_string(), "kraken".to_string()];
    let assets = default_assets(2);
    let records = generate_feed(&FeedConfig {
        venues: venues.clone(),
        assets: assets.clone(),
        seconds: 30,
        seed: 5,
        faults: 0.0,
        ..FeedConfig::default()
    });
    let binance_symbols: std::collections::BTreeSet<String> = records
        .iter()
        .filter_map(|r| r.path.as_deref())
        .filter_map(|p| p.split("symbol=").nth(1))
        .map(|s| s.split('&').next().unwrap_or(s).to_string())
        .collect();
    let mock = MockVenue::start(records, 1.0).await.unwrap();
    let server = Arc::new(pki.server.clone());
    let handshakes = Arc::new(AtomicU64::new(0));
    let mut endpoints = Vec::new();
    for venue in &venues {
        let protocol = venue_protocol(venue).unwrap();
        let symbols = if venue == "binance" {
            binance_symbols.iter().cloned().collect()
        } else {
            assets
                .iter()
                .map(|a| symbol_for(protocol, a, venue_quote(protocol)))
                .collect()
        };
        let plain = mock.endpoint(venue, symbols);
        let ws_target = host_port(&plain.ws_url);
        let ws_proxy = tls_proxy(server.clone(), ws_target, handshakes.clone()).await;
        let ws_url = plain.ws_url.replacen(
            &format!("ws://{ws_target}"),
            &format!("wss://localhost:{}", ws_proxy.port()),
            1,
        );
        let rest_base = match &plain.rest_base {
            None => None,
            Some(rest) => {
                let target = host_port(rest);
                let proxy = tls_proxy(server.clone(), target, handshakes.clone()).await;
                Some(rest.replacen(
                    &format!("http://{target}"),
                    &format!("https://localhost:{}", proxy.port()),
                    1,
                ))
            }
        };
        endpoints.push(Endpoint {
            ws_url,
            rest_base,
            ..plain
        });
    }
    let options = LiveOptions {
        endpoints,
        connector: ConnectorConfig {
            heartbeat_every: Duration::from_millis(500),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_millis(200),
            tls: Some(tls),
            ..ConnectorConfig::default()
        },
        oracle: OracleConfig::default(),
        publish_every: Duration::from_millis(100),
        resync_after: Duration::from_millis(300),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let all_priced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let all_priced = all_priced.clone();
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + deadline;
            while tokio::time::Instant::now() < until && !all_priced.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = stop_tx.send(true);
        });
    }
    let mut priced: Vec<String> = Vec::new();
    let summary = run_live(
        options,
        |publication, _| {
            let now: Vec<String> = assets
                .iter()
                .filter(|asset| {
                    publication
                        .prices
                        .iter()
                        .any(|p| &p.asset == *asset && p.price.is_some())
                })
                .cloned()
                .collect();
            if now.len() >= priced.len() {
                priced = now;
            }
            if priced.len() == assets.len() {
                all_priced.store(true, Ordering::Relaxed);
            }
        },
        stop_rx,
    )
    .await
    .unwrap();
    drop(mock);
    (summary, priced, handshakes.load(Ordering::Relaxed))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_venue_behind_tls_is_read_over_wss_and_https_when_its_ca_is_trusted() {
    let pki = test_pki();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let tls = TlsClient::with_extra_cas(&[ca_file]).unwrap();
    assert_eq!(tls.extra_cas, 1);
    let (summary, priced, handshakes) =
        runtime().block_on(run_behind_tls(tls, &pki, Duration::from_secs(30)));
    assert!(summary.records > 0, "{summary:?}");
    assert_eq!(summary.parse_errors, 0, "{summary:?}");
    assert_eq!(summary.unhealthy_used, 0, "{summary:?}");
    let (connects, _, snapshots) = summary.venues["binance"];
    assert!(connects >= 1, "{summary:?}");
    assert!(
        snapshots >= 1,
        "Binance's snapshots came over https: {summary:?}"
    );
    assert!(summary.venues["kraken"].0 >= 1, "{summary:?}");
    // One WebSocket per venue at least, and Binance's REST requests.
    assert!(handshakes >= 3, "TLS handshakes completed: {handshakes}");
    assert_eq!(
        priced.len(),
        2,
        "every asset priced from TLS-read books: {priced:?}"
    );
}

#[test]
fn a_venue_whose_certificate_no_trusted_ca_signed_is_refused_at_the_handshake() {
    let pki = test_pki();
    let tls = TlsClient::public_roots().unwrap();
    assert_eq!(tls.extra_cas, 0);
    let (summary, priced, handshakes) =
        runtime().block_on(run_behind_tls(tls, &pki, Duration::from_secs(3)));
    assert_eq!(
        summary.records, 0,
        "nothing read from an untrusted venue: {summary:?}"
    );
    assert_eq!(handshakes, 0, "no handshake completed");
    assert_eq!(
        summary.venues["binance"].0, 0,
        "no connection made: {summary:?}"
    );
    assert!(priced.is_empty(), "{priced:?}");
}

#[test]
fn a_wss_endpoint_without_tls_roots_is_refused_before_anything_starts() {
    let endpoint = Endpoint {
        venue: "kraken".into(),
        ws_url: "wss://ws.kraken.com/v2".into(),
        rest_base: None,
        symbols: vec!["BTC/USD".into()],
    };
    assert!(matches!(
        endpoint.check_with(None),
        Err(EndpointError::NoTls { .. })
    ));
    let tls = TlsClient::public_roots().unwrap();
    assert!(endpoint.check_with(Some(&tls)).is_ok());
    let bad = Endpoint {
        rest_base: Some("ftp://example.com".into()),
        ..endpoint
    };
    assert!(matches!(
        bad.check_with(Some(&tls)),
        Err(EndpointError::NotHttp { .. })
    ));
}

#[test]
fn a_ca_file_without_certificates_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let missing = PathBuf::from("/nonexistent/ca.pem");
    assert!(matches!(
        TlsClient::with_extra_cas(&[empty]),
        Err(TlsError::CaFileEmpty { .. })
    ));
    let error = TlsClient::with_extra_cas(&[missing]).unwrap_err();
    assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
}
