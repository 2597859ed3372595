//! The command-line client against a real node: `walras keygen`, the transaction commands
//! (`pay`, `offer create|cancel`), `walras query`, `walras loadgen` and `walras demo`, each run
//! as a user runs them — the `walras` binary as a child process, talking HTTP to a `walras
//! node` child started on a temporary directory (killed when the test ends, however it ends).
//! Checked: what the commands print, and that a refused transaction gives a non-zero exit with
//! the node's status, code and message. What the commands' logic changes on a node (balances,
//! offers, the load generator's counts) is checked against a node in process, without these
//! processes: `in_process` in `src/tx.rs` and `crates/loadgen/tests/in_process.rs`.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use walras_testkit::TempDir;

/// Accounts and assets of the development genesis the tests' nodes run.
const DEV_ACCOUNTS: u64 = 200;
const DEV_ASSETS: u64 = 4;

/// A `walras node` child process, killed when dropped — however the test ends.
struct NodeGuard {
    child: Child,
    url: String,
}

impl NodeGuard {
    /// A node on a fresh development genesis (200 accounts, 4 assets), blocks every 50 ms.
    fn start(data: &Path) -> NodeGuard {
        let accounts = DEV_ACCOUNTS.to_string();
        let assets = DEV_ASSETS.to_string();
        NodeGuard::start_with(
            data,
            &[
                "--dev",
                "--dev-accounts",
                &accounts,
                "--dev-assets",
                &assets,
            ],
        )
    }

    /// A node with `extra` arguments; waits for its address line.
    fn start_with(data: &Path, extra: &[&str]) -> NodeGuard {
        let child = Command::new(env!("CARGO_BIN_EXE_walras"))
            .args(["node", "--data"])
            .arg(data)
            .args(["--listen", "127.0.0.1:0", "--block-interval-ms", "50"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("walras node starts");
        // Guarded before anything can fail, so a failed start still kills the child.
        let mut guard = NodeGuard {
            child,
            url: String::new(),
        };
        let stdout = guard.child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        guard.url = first
            .strip_prefix("walras node listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        // Keep draining stdout so the node never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        guard
    }
}

impl Drop for NodeGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn walras(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_walras"))
        .args(args)
        .output()
        .expect("walras runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs walras and insists on success, showing its output if not.
fn walras_ok(args: &[&str]) -> String {
    let output = walras(args);
    assert!(
        output.status.success(),
        "walras {args:?} failed:\nstdout: {}\nstderr: {}",
        stdout(&output),
        stderr(&output)
    );
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    stdout(&output)
}

/// Runs walras and insists on failure with `expected` in stderr.
fn walras_fails_with(args: &[&str], expected: &str) {
    let output = walras(args);
    let text = stderr(&output);
    assert!(!output.status.success(), "walras {args:?} succeeded");
    assert!(
        text.contains(expected),
        "walras {args:?}: stderr {text:?} lacks {expected:?}"
    );
    assert!(
        !text.contains("panicked"),
        "walras {args:?} panicked: {text}"
    );
}

fn query_json(url: &str, what: &[&str]) -> Value {
    let mut args = vec!["query", "--json", "--node", url];
    args.extend_from_slice(what);
    serde_json::from_str(&walras_ok(&args)).expect("query --json prints JSON")
}

/// Some asset `account` holds at least `amount` of.
fn held_asset(url: &str, account: u64, amount: u64) -> u64 {
    let account = query_json(url, &["account", &account.to_string()]);
    account["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|balance| balance["amount"].as_u64().unwrap() >= amount)
        .map(|balance| balance["asset"].as_u64().unwrap())
        .expect("the account holds something")
}

fn path_text(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// Checks: `keygen` prints a fresh key, and writes a key file with mode 0600 that it refuses
/// to overwrite. (Payments signed with development keys and key files, and the offer
/// life cycle, run against a node in process: `in_process` in `src/tx.rs`.)
#[test]
fn keygen_writes_private_key_files_and_refuses_to_overwrite() {
    let data = TempDir::new("client-keygen");
    let printed: Value = serde_json::from_str(&walras_ok(&["keygen"])).unwrap();
    assert_eq!(printed["secret_seed"].as_str().unwrap().len(), 64);
    assert_eq!(printed["public_key"].as_str().unwrap().len(), 64);
    let fresh = data.path().join("fresh.json");
    walras_ok(&["keygen", "--out", path_text(&fresh)]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "key files are private");
    }
    walras_fails_with(
        &["keygen", "--out", path_text(&fresh)],
        "refusing to overwrite",
    );
    // Trigger (issue 28, item 8): with --out the public key came only inside a sentence.
    let scripted = data.path().join("scripted.json");
    let written: Value = serde_json::from_str(&walras_ok(&[
        "keygen",
        "--out",
        path_text(&scripted),
        "--json",
    ]))
    .unwrap();
    assert_eq!(written["path"], path_text(&scripted));
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&scripted).unwrap()).unwrap();
    assert_eq!(written["public_key"], stored["public_key"]);
    assert!(
        written.get("secret_seed").is_none(),
        "the secret stays in the file"
    );
}

/// Checks: a transaction whose sequence number a committed one already used is refused with a
/// non-zero exit naming the status, code and the node's message; so is one too far ahead, a
/// payment the account cannot afford is reported as dropped with its reason, and an
/// unreachable node is named in the error.
#[test]
fn refused_transactions_exit_non_zero_with_the_nodes_reason() {
    let data = TempDir::new("client-refused");
    let node = NodeGuard::start(data.path());
    let url = node.url.as_str();
    let asset = held_asset(url, 6, 1_000).to_string();
    let pay = |extra: &[&str]| {
        let mut args = vec![
            "pay", "--to", "7", "--asset", &asset, "--amount", "10", "--source", "6", "--dev",
            "--node", url,
        ];
        args.extend_from_slice(extra);
        args.iter()
            .map(|arg| arg.to_string())
            .collect::<Vec<String>>()
    };
    let first = walras_ok(&as_str(&pay(&["--sequence", "1", "--wait"])));
    assert!(first.contains("accepted"), "{first}");
    walras_fails_with(
        &as_str(&pay(&["--sequence", "1"])),
        "node refused the transaction (409 replayed): ",
    );
    walras_fails_with(
        &as_str(&pay(&["--sequence", "1000"])),
        "node refused the transaction (422 sequence_out_of_window)",
    );
    walras_fails_with(
        &[
            "pay",
            "--to",
            "7",
            "--asset",
            &asset,
            "--amount",
            "4611686018427387000",
            "--source",
            "6",
            "--dev",
            "--wait",
            "--node",
            url,
        ],
        "422 insufficient_balance",
    );
    walras_fails_with(
        &["query", "status", "--node", "http://127.0.0.1:9"],
        "cannot reach the node at http://127.0.0.1:9",
    );
    walras_fails_with(
        &[
            "query",
            "account",
            &(DEV_ACCOUNTS + 5).to_string(),
            "--node",
            url,
        ],
        "404 unknown_account",
    );
}

/// Trigger (issue 28, item 8): `offer cancel` needed the offer's sell asset, buy asset and limit
/// price again, though its id and account name it. Now the id suffices (the rest is read from
/// the account's open offers), and cancelling an offer that is gone says so.
#[test]
fn an_offer_is_cancelled_by_its_id_and_account_alone() {
    let data = TempDir::new("client-cancel");
    let node = NodeGuard::start(data.path());
    let url = node.url.as_str();
    let sell = held_asset(url, 8, 1_000);
    let buy = ((sell + 1) % 4).to_string();
    let sell = sell.to_string();
    let before = query_json(url, &["account", "8"]);
    let created = walras_ok(&[
        "offer",
        "create",
        "--sell",
        &sell,
        "--buy",
        &buy,
        "--amount",
        "500",
        "--min-price",
        "1000.5",
        "--source",
        "8",
        "--dev",
        "--wait",
        "--node",
        url,
    ]);
    let id = created
        .split("offer id ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no offer id in {created:?}"))
        .to_string();
    assert!(
        created.contains("walras offer cancel --offer-id"),
        "{created}"
    );
    let offers = query_json(url, &["offers", "8"]);
    assert_eq!(offers["offers"].as_array().unwrap().len(), 1, "{offers}");
    let cancelled = walras_ok(&[
        "offer",
        "cancel",
        "--offer-id",
        &id,
        "--source",
        "8",
        "--dev",
        "--wait",
        "--node",
        url,
    ]);
    assert!(cancelled.contains("accepted"), "{cancelled}");
    let offers = query_json(url, &["offers", "8"]);
    assert!(offers["offers"].as_array().unwrap().is_empty(), "{offers}");
    assert_eq!(
        query_json(url, &["account", "8"])["balances"],
        before["balances"],
        "the offer's amount came back"
    );
    walras_fails_with(
        &[
            "offer",
            "cancel",
            "--offer-id",
            &id,
            "--source",
            "8",
            "--dev",
            "--node",
            url,
        ],
        &format!("account 8 has no open offer with id {id}"),
    );
    // Half the offer's identity is refused by the argument parser, not guessed.
    walras_fails_with(
        &[
            "offer",
            "cancel",
            "--offer-id",
            &id,
            "--sell",
            &sell,
            "--source",
            "8",
            "--dev",
            "--node",
            url,
        ],
        "--buy",
    );
}

fn as_str(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Checks: a node on a genesis file (no development genesis) makes `loadgen` and `--dev`
/// fail with a message saying so, instead of signing with keys that cannot be right.
#[test]
fn development_keys_need_a_development_genesis() {
    let data = TempDir::new("client-nodev");
    let workload = data.path().join("workload");
    walras_ok(&[
        "gen",
        "workload",
        "--accounts",
        "20",
        "--assets",
        "3",
        "--blocks",
        "1",
        "--txs-per-block",
        "5",
        "--seed",
        "1",
        "--out",
        path_text(&workload),
    ]);
    let genesis = workload.join("genesis.bin");
    let store = data.path().join("store");
    let node = NodeGuard::start_with(&store, &["--genesis", path_text(&genesis)]);
    walras_fails_with(
        &[
            "loadgen",
            "--node",
            &node.url,
            "--rate",
            "10",
            "--seconds",
            "1",
        ],
        "runs no development genesis",
    );
    walras_fails_with(
        &[
            "pay", "--to", "1", "--asset", "0", "--amount", "1", "--source", "2", "--dev",
            "--node", &node.url,
        ],
        "runs no development genesis",
    );
}

/// Checks: `walras demo --seconds 3` starts its own node, commits transactions, prints the
/// summary (blocks, throughput, latency, prices, how to serve the data again) and exits 0
/// after stopping the node; it refuses a data directory that is not empty.
#[test]
fn demo_runs_a_node_under_load_and_stops_it() {
    let data = TempDir::new("client-demo");
    let chain = data.path().join("chain");
    let output = walras_ok(&[
        "demo",
        "--seconds",
        "3",
        "--rate",
        "200",
        "--accounts",
        "100",
        "--data",
        path_text(&chain),
    ]);
    for expected in [
        "Results",
        "throughput",
        "latency",
        "prices",
        "Serve it again",
    ] {
        assert!(
            output.contains(expected),
            "{expected:?} missing from:\n{output}"
        );
    }
    let committed: u64 = output
        .lines()
        .find_map(|line| line.trim().strip_prefix("throughput"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .expect("the throughput line starts with the count committed");
    assert!(committed > 0, "{output}");
    walras_fails_with(
        &["demo", "--seconds", "1", "--data", path_text(&chain)],
        "is not empty",
    );
}

/// A `walras demo` child, interrupted (SIGINT, then killed) when dropped, so its node stops too.
struct DemoGuard(Child);

impl DemoGuard {
    fn interrupt(&self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
    }
}

impl Drop for DemoGuard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.interrupt();
            for _ in 0..200 {
                if matches!(self.0.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Checks: `walras demo` without `--seconds` prints its dashboard's address, runs the load,
/// prints the results and keeps the node up — it still answers, and serves the dashboard —
/// until Ctrl-C (SIGINT), which stops the node cleanly (exit 0) so the address stops answering.
#[test]
fn demo_keeps_the_node_up_until_interrupted() {
    use std::time::{Duration, Instant};
    let data = TempDir::new("client-demo-keep");
    let chain = data.path().join("chain");
    let mut demo = DemoGuard(
        Command::new(env!("CARGO_BIN_EXE_walras"))
            .args(["demo", "--rate", "100", "--accounts", "50", "--data"])
            .arg(&chain)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("walras demo starts"),
    );
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let out = demo.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut printed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let dashboard = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "the demo never said it keeps running:\n{}",
                printed.join("\n")
            )
        });
        printed.push(line.clone());
        if line.contains("press Ctrl-C") {
            let url = line
                .split_whitespace()
                .find(|word| word.starts_with("http://"))
                .expect("the keep-running line names the dashboard")
                .to_string();
            break url;
        }
    };
    let text = printed.join("\n");
    for expected in [
        "dashboard       http://",
        "Results",
        "throughput",
        "latency",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    // Up after the load: the dashboard and the API answer.
    std::thread::sleep(Duration::from_millis(1500));
    let runtime = walras_testkit::runtime();
    let client = reqwest::Client::new();
    let (page_status, page) = runtime.block_on(async {
        let response = client
            .get(&dashboard)
            .send()
            .await
            .expect("the dashboard answers");
        (
            response.status().as_u16(),
            response.text().await.unwrap_or_default(),
        )
    });
    assert_eq!(page_status, 200);
    assert!(page.contains("<title>Walras node</title>"), "{page}");
    let base = dashboard.trim_end_matches('/').to_string();
    let (code, status) =
        runtime.block_on(walras_testkit::get(&client, &format!("{base}/v1/status")));
    assert_eq!(code, 200, "the node still answers after the load: {status}");
    assert!(status["height"].as_u64() > Some(0), "{status}");
    assert!(
        matches!(demo.0.try_wait(), Ok(None)),
        "the demo exited by itself"
    );
    // Ctrl-C: the demo stops the node and exits 0.
    demo.interrupt();
    let deadline = Instant::now() + Duration::from_secs(40);
    let exit = loop {
        if let Ok(Some(exit)) = demo.0.try_wait() {
            break exit;
        }
        assert!(Instant::now() < deadline, "the demo did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "the demo exited with {exit}");
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(
        rest.iter()
            .any(|line| line.contains("Stopped: the node exited cleanly")),
        "{rest:?}"
    );
    assert!(
        runtime
            .block_on(client.get(format!("{base}/v1/status")).send())
            .is_err(),
        "the node still answers after the demo stopped"
    );
}
