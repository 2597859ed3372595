//! What a trader sees (issue 28 item 4), through `walras` processes against a `walras node`:
//! `walras watch` prints every block once, in order, with the account's fills, across a node
//! restart under it; `walras offer create --wait` prints what the offer did in its block.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use walras_testkit::*;

fn walras(args: &[&str]) -> String {
    let output = Command::new(walras_bin())
        .args(args)
        .output()
        .expect("walras runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "walras {args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn tip(url: &str) -> u64 {
    let status = walras(&["query", "status", "--json", "--node", url]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    status["height"].as_u64().unwrap()
}

/// `walras pay --wait`: one block with one payment.
fn pay_one(url: &str, from: u64, to: u64, asset: u16) {
    let (to, asset, from) = (to.to_string(), asset.to_string(), from.to_string());
    let args = [
        "pay", "--to", &to, "--asset", &asset, "--amount", "1", "--source", &from, "--dev",
        "--wait", "--node", url,
    ];
    assert!(walras(&args).contains("accepted in block"));
}

fn offer_wait(url: &str, source: u64, sell: u16, buy: u16) -> String {
    let (source, sell, buy) = (source.to_string(), sell.to_string(), buy.to_string());
    walras(&[
        "offer",
        "create",
        "--sell",
        &sell,
        "--buy",
        &buy,
        "--amount",
        "5000",
        "--min-price",
        "0.5",
        "--source",
        &source,
        "--dev",
        "--wait",
        "--node",
        url,
    ])
}

/// Checks: a `walras watch --from 1 --account A` started before any block, with the node
/// killed and restarted on the same address under it (payments before and after, and a
/// crossing pair of offers after), prints a block line for exactly the heights 1..=tip, each
/// once and in order, and account A's fill in the crossing block; `offer create --wait` says
/// that the first offer rested and what the second sold and received.
#[test]
fn walras_watch_resumes_after_a_node_restart_without_gaps_or_duplicates() {
    let dir = TempDir::new("watch-restart");
    let node = NodeProcess::start(dir.path(), &[]);
    let url = node.url.clone();
    let listen = url.trim_start_matches("http://").to_string();
    let (a, b) = (1u64, 2u64);
    let x = held(&url, a, 10_000, u16::MAX);
    let y = held(&url, b, 10_000, x);

    let mut watch = Command::new(walras_bin())
        .args(["watch", "--from", "1", "--account", &a.to_string()])
        .args(["--node", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("walras watch starts");
    let (lines_in, lines) = mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_in.send(line).is_err() {
                break;
            }
        }
    });

    pay_one(&url, a, b, x);
    pay_one(&url, b, a, y);
    node.sigkill();
    let node = NodeProcess::start_listening(dir.path(), &listen, &[]);
    assert_eq!(node.url, url, "restarted on the same address");
    pay_one(&url, a, b, x);
    let rested = offer_wait(&url, a, x, y);
    assert!(rested.contains("did not trade in block"), "{rested}");
    let crossed = offer_wait(&url, b, y, x);
    assert!(
        crossed.contains("offer 2 sold") && crossed.contains(&format!("(asset {y}) for")),
        "{crossed}"
    );
    let last = tip(&url);

    let mut blocks = Vec::new();
    let mut fills = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while blocks.last() != Some(&last) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("watch printed blocks {blocks:?}, not up to {last}"));
        let line: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        let height = line["height"].as_u64().unwrap();
        match line["type"].as_str() {
            Some("block") => blocks.push(height),
            Some("fill") => fills.push(line),
            other => panic!("unexpected line type {other:?}"),
        }
    }
    // The last block's fills follow its line (written and flushed with it).
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(2)) {
        let line: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        assert_eq!(
            line["type"], "fill",
            "nothing but fills after the last block: {line}"
        );
        fills.push(line);
    }
    let _ = watch.kill();
    let said = watch.wait_with_output().expect("watch's stderr").stderr;
    let said = String::from_utf8_lossy(&said);
    assert!(said.contains("reconnecting"), "it lost the node: {said}");
    assert_eq!(blocks, (1..=last).collect::<Vec<u64>>());
    assert_eq!(fills.len(), 1, "{fills:?}");
    let fill = &fills[0];
    assert_eq!(fill["height"], last);
    assert_eq!(fill["account"], a);
    assert_eq!(fill["sell"], x);
    assert!(fill["sold"].as_u64().unwrap() > 0, "{fill}");
    drop(node);
}
