//! The dashboard in a real browser: headless Chromium (Debian's package) loads `/` from a
//! `walras node` under an open-loop trading load (`walras loadgen`), driven through the
//! DevTools protocol over its websocket.
//!
//! Checks, from the rendered DOM:
//! 1. the page updates live: the height it shows grows while the test watches;
//! 2. the height shown is the node's (`/v1/status`, read just before and after);
//! 3. one clearing valuation per asset, each a positive number;
//! 4. a depth chart drawn from resting offers (an SVG with levels) for the selected pair;
//! 5. no console errors, no uncaught exceptions, no error log entries (CSP violations and
//!    failed requests included), at desktop and at phone width;
//! 6. the oracle panel (the node runs its oracle on a recorded feed) shows a price per asset
//!    and the venues' book health, and the valuations show the oracle's prices;
//! 7. the "why did my offer not trade?" form explains an offer resting on the books (named by
//!    account and id) with the node's own summary;
//! 8. a page opened on an idle node shows the blocks committed before it opened;
//! 9. the assets carry the genesis's names, each valuation chart its value and block axes, the
//!    trade tape lists traded pairs by name, and at 1440 px with the oracle panel on no panel or
//!    table is cut (nothing wider than the box that holds it).
//!
//! Screenshots at desktop and phone width are written to `$WALRAS_SCREENSHOT_DIR`, or
//! `dashboard-screenshots` under Cargo's target tmp directory.
//!
//! The test installs Chromium with `scripts/install-chromium.sh` when it is missing (apt-get);
//! like the CometBFT tests, it fails, rather than skips, when it cannot.

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use walras_testkit::*;

const ASSETS: usize = 4;
/// Long enough that the page (redrawn twice a second) is at most a block or two behind.
const BLOCK_INTERVAL_MS: &str = "400";
/// Offered load, tx/s; `WALRAS_DASHBOARD_LOAD_RATE` overrides it (e.g. 2000, `walras demo`'s
/// default, to check the page stays live at the demo's load).
const LOAD_RATE: &str = "150";
const LOAD_SECONDS: &str = "90";
const DESKTOP: (u32, u32) = (1280, 1400);
/// The width at which the oracle panel used to cut the right column and table columns.
const WIDE: (u32, u32) = (1440, 900);
const PHONE: (u32, u32) = (390, 844);
/// How long the page may take to show what is checked.
const PAGE_DEADLINE: Duration = Duration::from_secs(45);
/// How long one DevTools answer may take.
const CDP_TIMEOUT: Duration = Duration::from_secs(20);

/// Debian's Chromium, installed if missing.
fn chromium_binary() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-chromium.sh");
    let output = Command::new("bash")
        .arg(&script)
        .output()
        .expect("runs scripts/install-chromium.sh");
    assert!(
        output.status.success(),
        "installing Chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

fn screenshot_dir() -> PathBuf {
    let dir = std::env::var_os("WALRAS_SCREENSHOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots"));
    std::fs::create_dir_all(&dir).expect("creates the screenshot directory");
    dir
}

/// A child process killed (and reaped) when dropped, however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Headless Chromium with its DevTools endpoint on a free port; returns it and the browser's
/// websocket URL.
fn start_chromium(binary: &Path, profile: &Path) -> (Killed, String) {
    let mut child = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts chromium");
    let stderr = child.stderr.take().unwrap();
    let (found, url) = mpsc::channel();
    // Chromium prints its endpoint on stderr; keep draining it so it never blocks.
    std::thread::spawn(move || {
        let mut found = Some(found);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                if let Some(found) = found.take() {
                    let _ = found.send(url.trim().to_string());
                }
            }
        }
    });
    let child = Killed(child);
    let url = url
        .recv_timeout(Duration::from_secs(60))
        .expect("chromium prints its DevTools address within 60 s");
    (child, url)
}

/// A DevTools protocol connection to the browser, with one page attached (flat sessions).
struct Cdp {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
    session: Option<String>,
    /// Every event received, in order.
    events: Vec<Value>,
}

impl Cdp {
    async fn connect(url: &str) -> Cdp {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("connects to chromium's DevTools websocket");
        Cdp {
            ws,
            next_id: 0,
            session: None,
            events: Vec::new(),
        }
    }

    /// Sends a command (to the attached page, once there is one) and returns its result;
    /// events that arrive meanwhile are kept.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .expect("sends to chromium");
        let deadline = Instant::now() + CDP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let received = tokio::time::timeout(left, self.ws.next())
                .await
                .unwrap_or_else(|_| {
                    panic!("chromium did not answer {method} within {CDP_TIMEOUT:?}")
                })
                .expect("chromium's websocket stays open")
                .expect("reads from chromium");
            let Message::Text(text) = received else {
                continue;
            };
            let value: Value = serde_json::from_str(&text).expect("DevTools sends JSON");
            if value["id"].as_u64() == Some(id) {
                assert!(
                    value.get("error").is_none(),
                    "{method} failed: {}",
                    value["error"]
                );
                return value["result"].clone();
            }
            if value.get("method").is_some() {
                self.events.push(value);
            }
        }
    }

    /// A JavaScript expression's value in the page.
    async fn evaluate(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true }),
            )
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "evaluating {expression:?} threw: {}",
            result["exceptionDetails"]
        );
        result["result"]["value"].clone()
    }

    async fn set_viewport(&mut self, (width, height): (u32, u32), mobile: bool) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
        )
        .await;
    }

    /// The whole page (not just the viewport) as a PNG.
    async fn screenshot(&mut self, path: &Path) {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await;
        let size = &metrics["cssContentSize"];
        let clip = json!({
            "x": 0, "y": 0,
            "width": size["width"].as_f64().unwrap_or(1280.0),
            "height": size["height"].as_f64().unwrap_or(1400.0).min(6000.0),
            "scale": 1,
        });
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "clip": clip, "captureBeyondViewport": true }),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("a screenshot has data"))
            .expect("the screenshot is base64");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
        std::fs::write(path, png).expect("writes the screenshot");
    }

    /// Console errors, uncaught exceptions and error log entries received so far.
    fn errors(&self) -> Vec<String> {
        errors_in(&self.events)
    }
}

/// The console errors, uncaught exceptions and error log entries among DevTools events.
/// Times the explain check asks the page and the API again when a block came between them.
const EXPLAIN_ATTEMPTS: usize = 5;

/// Submits the page's explain form for `offer_id` of `account` and returns the page's answer
/// once it came (the answer shown before is cleared first, so an old one is not read).
async fn explain_in_page(cdp: &mut Cdp, account: u64, offer_id: u64) -> String {
    cdp.evaluate(&format!(
        "document.getElementById('explain-result').textContent = ''; \
         document.getElementById('explain-id').value = '{offer_id}'; \
         document.getElementById('explain-account').value = '{account}'; \
         document.getElementById('explain-form').requestSubmit(); true"
    ))
    .await;
    let deadline = Instant::now() + PAGE_DEADLINE;
    loop {
        let text = cdp
            .evaluate("document.getElementById('explain-result').textContent")
            .await;
        let text = text.as_str().unwrap_or("").to_string();
        if !text.is_empty() && !text.starts_with("asking") {
            return text;
        }
        assert!(Instant::now() < deadline, "the explain form never answered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn errors_in(events: &[Value]) -> Vec<String> {
    {
        events
            .iter()
            .filter_map(|event| {
                let params = &event["params"];
                match event["method"].as_str()? {
                    "Runtime.exceptionThrown" => Some(format!(
                        "exception: {}",
                        params["exceptionDetails"]["exception"]["description"]
                            .as_str()
                            .unwrap_or_else(|| params["exceptionDetails"]["text"]
                                .as_str()
                                .unwrap_or("?"))
                    )),
                    "Runtime.consoleAPICalled"
                        if matches!(params["type"].as_str(), Some("error" | "assert")) =>
                    {
                        Some(format!("console.{}: {}", params["type"], params["args"]))
                    }
                    "Log.entryAdded" if params["entry"]["level"] == "error" => Some(format!(
                        "log ({}): {} {}",
                        params["entry"]["source"], params["entry"]["text"], params["entry"]["url"]
                    )),
                    _ => None,
                }
            })
            .collect()
    }
}

/// What the page shows, read from its DOM.
const READ_PAGE: &str = r#"(() => {
  if (document.readyState === 'loading' || !document.body) return { loading: true };
  const text = (id) => { const node = document.getElementById(id); return node ? node.textContent.trim() : null; };
  const values = Array.from(document.querySelectorAll('#valuations .valuation')).map((card) => ({
    asset: Number(card.dataset.asset),
    value: card.querySelector('.value').textContent.trim(),
    points: (card.querySelector('polyline') || { getAttribute: () => '' }).getAttribute('points').split(' ').filter(Boolean).length,
  }));
  const depth = document.querySelector('#depth svg.depth-chart');
  return {
    height: text('height'),
    blocksHeight: text('blocks-height'),
    valuations: values,
    depthLevels: depth ? Number(depth.dataset.levels) : null,
    depthPaths: depth ? depth.querySelectorAll('path').length : 0,
    depthRate: depth && depth.querySelector('line.depth-rate') ? Number(depth.querySelector('line.depth-rate').dataset.rate) : null,
    oracleRows: document.querySelectorAll('#oracle tbody tr').length,
    oracleTexts: Array.from(document.querySelectorAll('#valuations .oracle')).map((node) => node.textContent.trim()),
    connection: text('conn'),
    assetNames: Array.from(document.querySelectorAll('#valuations .valuation .asset')).map((node) => node.textContent.trim()),
    yAxes: document.querySelectorAll('#valuations .yaxis span').length,
    xAxes: Array.from(document.querySelectorAll('#valuations .xaxis span')).map((node) => node.textContent.trim()),
    tape: Array.from(document.querySelectorAll('#tape tbody tr')).map((row) => row.children[2].textContent.trim()),
    cut: Array.from(document.querySelectorAll('main .panel, main .scroll, main .multiple'))
      .filter((node) => node.scrollWidth > node.clientWidth + 1)
      .map((node) => `${node.id || node.className}: ${node.scrollWidth} > ${node.clientWidth}`),
    width: document.documentElement ? document.documentElement.scrollWidth : null,
    viewport: window.innerWidth,
  };
})()"#;

async fn node_height(client: &reqwest::Client, url: &str) -> u64 {
    let (status, body) = get(client, &format!("{url}/v1/status")).await;
    assert_eq!(status, 200, "{body}");
    body["height"].as_u64().unwrap()
}

/// Reads the page until `done` holds (or the deadline passes: then panics with the last view).
async fn wait_for(cdp: &mut Cdp, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PAGE_DEADLINE;
    loop {
        let page = cdp.evaluate(READ_PAGE).await;
        if done(&page) {
            return page;
        }
        assert!(
            Instant::now() < deadline,
            "the page did not show {what} within {PAGE_DEADLINE:?}; it shows {page:#}; errors: {:?}",
            cdp.errors()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn shown_height(page: &Value) -> Option<u64> {
    page["height"].as_str()?.parse().ok()
}

fn valuations_complete(page: &Value) -> bool {
    let cards = page["valuations"].as_array().map_or(&[][..], Vec::as_slice);
    cards.len() == ASSETS
        && cards.iter().enumerate().all(|(i, card)| {
            card["asset"].as_u64() == Some(i as u64)
                && card["value"]
                    .as_str()
                    .and_then(|text| text.parse::<f64>().ok())
                    .is_some_and(|value| value > 0.0 && value.is_finite())
        })
}

#[test]
fn the_dashboard_shows_a_node_under_load_live_in_chromium() {
    let started = Instant::now();
    let chromium = chromium_binary();
    let data = TempDir::new("dashboard-node");
    // An oracle on a recorded feed, so the oracle panel and the deviations have data.
    let feed = data.path().join("feed.jsonl");
    let generated = Command::new(walras_bin())
        .args([
            "gen",
            "feed",
            "--assets",
            &ASSETS.to_string(),
            "--seconds",
            "5",
            "--out",
        ])
        .arg(&feed)
        .output()
        .expect("runs walras gen feed");
    assert!(generated.status.success(), "{generated:?}");
    let node = NodeProcess::start(
        &data.path().join("node"),
        &[
            "--block-interval-ms",
            BLOCK_INTERVAL_MS,
            "--oracle-feed",
            feed.to_str().unwrap(),
        ],
    );
    let load = Killed(
        Command::new(walras_bin())
            .args(["loadgen", "--node", &node.url, "--rate"])
            .arg(std::env::var("WALRAS_DASHBOARD_LOAD_RATE").unwrap_or_else(|_| LOAD_RATE.into()))
            .args(["--seconds", LOAD_SECONDS, "--accounts"])
            .arg(DEV_ACCOUNTS.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts walras loadgen"),
    );
    let profile = TempDir::new("dashboard-chromium");
    let (browser, devtools) = start_chromium(&chromium, profile.path());
    let shots = screenshot_dir();
    let runtime = runtime();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        // Some blocks and resting offers first, so the page has something to draw.
        let deadline = Instant::now() + PAGE_DEADLINE;
        loop {
            let (_, status) = get(&client, &format!("{}/v1/status", node.url)).await;
            if status["height"].as_u64() >= Some(3) && status["open_offers"].as_u64() > Some(0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the node under load made no offers: {status}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let mut cdp = Cdp::connect(&devtools).await;
        let target = cdp
            .call("Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let attached = cdp
            .call(
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await;
        cdp.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            cdp.call(domain, json!({})).await;
        }
        cdp.set_viewport(DESKTOP, false).await;
        cdp.call("Page.navigate", json!({ "url": format!("{}/", node.url) }))
            .await;

        // 3, 4: a valuation per asset and a depth chart with levels.
        let first = wait_for(
            &mut cdp,
            "a valuation per asset and a depth chart",
            |page| {
                valuations_complete(page)
                    && page["depthLevels"].as_u64() > Some(0)
                    && page["depthPaths"].as_u64() == Some(2)
                    && shown_height(page).is_some()
            },
        )
        .await;
        // The oracle panel: a price row per asset and the venues' book health.
        let oracle = wait_for(&mut cdp, "the oracle's prices", |page| {
            page["oracleRows"].as_u64() >= Some(ASSETS as u64 + 1)
        })
        .await;
        assert!(
            oracle["oracleTexts"].as_array().is_some_and(|texts| texts
                .iter()
                .any(|text| text.as_str().is_some_and(|t| t.contains("oracle")))),
            "no valuation shows its oracle price: {oracle:#}"
        );
        // 1: live: the height shown grows, and the valuation lines gain points.
        let first_height = shown_height(&first).unwrap();
        let later = wait_for(&mut cdp, "a newer block", |page| {
            shown_height(page).is_some_and(|height| height >= first_height + 3)
                && valuations_complete(page)
        })
        .await;
        let points = |page: &Value| page["valuations"][1]["points"].as_u64().unwrap_or(0);
        assert!(
            points(&later) > points(&first) || points(&later) >= 100,
            "the valuation chart did not grow: {first:#} then {later:#}"
        );
        assert_eq!(
            later["connection"], "live",
            "the page reads the event stream"
        );
        // 2: the height shown is the node's: between its status just before and just after,
        // less the blocks committed since the page last redrew (it redraws twice a second).
        let before = node_height(&client, &node.url).await;
        let page = cdp.evaluate(READ_PAGE).await;
        let after = node_height(&client, &node.url).await;
        let shown = shown_height(&page).unwrap();
        assert!(
            shown + 2 >= before && shown <= after,
            "the page shows height {shown}; the node was at {before} then {after}"
        );
        assert_eq!(
            page["blocksHeight"].as_str(),
            Some(shown.to_string().as_str())
        );
        assert!(
            page["width"].as_u64() <= page["viewport"].as_u64(),
            "the desktop page scrolls sideways: {page:#}"
        );
        cdp.screenshot(&shots.join("dashboard-desktop.png")).await;

        // 9: names, axes, the trade tape, and nothing cut at 1440 px. Trigger (issue 28, item
        // 5): the charts had no axes, assets were numbers, there was no trade tape, and at
        // 1440 px with the oracle panel on the right column and table columns were cut.
        let named = wait_for(&mut cdp, "named assets, axes and the trade tape", |page| {
            valuations_complete(page)
                && page["tape"].as_array().is_some_and(|rows| !rows.is_empty())
        })
        .await;
        assert_eq!(
            named["assetNames"],
            json!(["USD", "BTC", "ETH", "SOL"]),
            "the development genesis's names: {named:#}"
        );
        assert_eq!(
            named["yAxes"].as_u64(),
            Some(2 * ASSETS as u64),
            "{named:#}"
        );
        assert!(
            named["xAxes"]
                .as_array()
                .is_some_and(|labels| labels.len() == 2 * ASSETS
                    && labels
                        .iter()
                        .all(|l| l.as_str().is_some_and(|l| l.starts_with('#')))),
            "{named:#}"
        );
        assert!(
            named["tape"].as_array().unwrap().iter().all(|pair| {
                let pair = pair.as_str().unwrap_or("");
                ["USD", "BTC", "ETH", "SOL"]
                    .iter()
                    .any(|symbol| pair.starts_with(symbol))
                    && pair.contains(" → ")
            }),
            "{named:#}"
        );
        cdp.set_viewport(WIDE, false).await;
        let wide = wait_for(&mut cdp, "the 1440 px layout", |page| {
            page["viewport"].as_u64() == Some(u64::from(WIDE.0)) && valuations_complete(page)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let wide = {
            let now = cdp.evaluate(READ_PAGE).await;
            assert!(
                now["oracleRows"].as_u64() > Some(0),
                "the oracle panel is on: {now:#}"
            );
            assert_eq!(
                now["cut"],
                json!([]),
                "cut at 1440 px: {now:#} (before: {wide:#})"
            );
            assert!(now["width"].as_u64() <= now["viewport"].as_u64(), "{now:#}");
            now
        };
        cdp.screenshot(&shots.join("dashboard-1440.png")).await;
        cdp.set_viewport(DESKTOP, false).await;
        eprintln!("dashboard at 1440 px: tape {}", wide["tape"]);

        // Phone width: the same content in one column, no sideways scrolling.
        cdp.set_viewport(PHONE, true).await;
        let phone = wait_for(&mut cdp, "the phone layout", |page| {
            page["viewport"].as_u64() == Some(u64::from(PHONE.0)) && valuations_complete(page)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let phone = {
            let now = cdp.evaluate(READ_PAGE).await;
            assert!(
                now["width"].as_u64() <= now["viewport"].as_u64(),
                "the phone page scrolls sideways: {now:#} (before: {phone:#})"
            );
            now
        };
        assert!(phone["depthLevels"].as_u64() > Some(0), "{phone:#}");
        cdp.screenshot(&shots.join("dashboard-phone.png")).await;

        // 5: nothing went wrong in the page.
        let errors = cdp.errors();
        assert!(errors.is_empty(), "the page logged errors: {errors:#?}");

        // 7: the explain form explains a real offer: one resting on the books, named by its
        // account and id (ids are per account), and shows the node's own summary.
        cdp.set_viewport(DESKTOP, false).await;
        let logged = cdp.events.len();
        let mut resting = None;
        for account in 1..=200u64 {
            let (status, body) = get(
                &client,
                &format!("{}/v1/accounts/{account}/offers", node.url),
            )
            .await;
            if status != 200 {
                continue;
            }
            if let Some(offer) = body["offers"].as_array().and_then(|offers| offers.first()) {
                resting = Some((account, offer["offer_id"].as_u64().expect("an offer id")));
                break;
            }
        }
        let (account, offer_id) = resting.expect("the load left offers resting on the books");
        // The page's answer must be the node's own summary. Under load the offer can be in a
        // block's clearing between the page's request and ours, and then the two summaries
        // (and even the statuses) differ: ask both again, a few times. Trigger: CI, where
        // the page explained the offer at block 21 (not traded) and the API at block 22
        // (sold in part), and the test failed.
        let mut attempts = Vec::new();
        let mut explained = None;
        for _ in 0..EXPLAIN_ATTEMPTS {
            let answer = explain_in_page(&mut cdp, account, offer_id).await;
            let (explain_status, explain_body) = get(
                &client,
                &format!(
                    "{}/v1/offers/{offer_id}/explain?account={account}",
                    node.url
                ),
            )
            .await;
            assert_eq!(explain_status, 200, "{explain_body:#}");
            let summary = explain_body["summary"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(!summary.is_empty(), "{explain_body:#}");
            if answer.contains(&summary) {
                explained = Some(answer);
                break;
            }
            attempts.push((answer, summary));
        }
        let answer = explained.unwrap_or_else(|| {
            panic!("the page's answer never held the node's summary: {attempts:#?}")
        });
        let unexpected = errors_in(&cdp.events[logged..]);
        assert!(
            unexpected.is_empty(),
            "explaining logged errors: {unexpected:#?}"
        );

        // 8: a page opened on an idle node shows the blocks committed before it opened. Trigger
        // (issue 28, item 5): after `walras demo`'s load the page said "waiting for the first
        // block…" with 57 blocks committed, as it drew only blocks from its event stream.
        drop(load);
        let mut idle = node_height(&client, &node.url).await;
        loop {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let now = node_height(&client, &node.url).await;
            if now == idle {
                break;
            }
            idle = now;
        }
        cdp.call("Page.navigate", json!({ "url": format!("{}/", node.url) }))
            .await;
        let reopened = wait_for(&mut cdp, "the blocks before the page opened", |page| {
            shown_height(page) == Some(idle) && points(page) >= 2
        })
        .await;
        assert_eq!(
            node_height(&client, &node.url).await,
            idle,
            "no block came while the page loaded: what it shows is history"
        );
        eprintln!(
            "dashboard reopened on an idle node at height {idle}: {} points of asset 1",
            points(&reopened)
        );
        eprintln!(
            "dashboard: height {shown} shown live (node {before}..={after}); explain: {answer}; \
             screenshots in {}; {:.1} s",
            shots.display(),
            started.elapsed().as_secs_f64()
        );
    });
    drop(browser);
    assert!(node.terminate(), "the node stops cleanly after the test");
}
