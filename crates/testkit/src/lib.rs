//! Support for tests of the programs around a node: a real `walras node` process (start it on a
//! free port, wait for its address line, kill it gracefully or with SIGKILL, talk to it over
//! HTTP) and, where no process is needed, an in-process node behind `NodeApi` ([`InProcessNode`]).

#![allow(dead_code)] // each test file uses a different part

pub mod in_process;
pub use in_process::InProcessNode;
pub mod openapi;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use walras_crypto::Keypair;
use walras_engine::Block;
use walras_sim::workload::keys::{key_pool_size, key_seed};
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

pub const DEV_ACCOUNTS: u64 = 200;
pub const DEV_SEED: u64 = 1;

/// The `walras` binary the running test was built with: integration tests of `walras-cli` run
/// from `target/<profile>/deps/`, and Cargo builds the binary into `target/<profile>/` before
/// them. `WALRAS_BIN` overrides it.
pub fn walras_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("WALRAS_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests run from target/<profile>/deps");
    let bin = profile_dir.join(format!("walras{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run the tests of walras-cli (cargo test -p walras-cli), which build it",
        bin.display()
    );
    bin
}

/// A temporary directory removed on drop (a `tempfile::TempDir` named after the test).
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("walras-test-{name}-"))
            .tempdir()
            .expect("a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// A running node, killed on drop.
pub struct NodeProcess {
    child: Child,
    pub url: String,
    /// With `--block-source gateway`: the operator's listener (what the public one closes).
    pub operator_url: Option<String>,
}

impl NodeProcess {
    /// Starts `walras node` on `data` with a small dev genesis; waits for the address line.
    pub fn start(data: &Path, extra: &[&str]) -> NodeProcess {
        NodeProcess::start_listening(data, "127.0.0.1:0", extra)
    }

    /// [`NodeProcess::start`] listening on `listen` (a restart on the address a client knows).
    pub fn start_listening(data: &Path, listen: &str, extra: &[&str]) -> NodeProcess {
        let mut command = Command::new(walras_bin());
        command
            .args(["node", "--data"])
            .arg(data)
            .args(["--listen", listen, "--dev", "--dev-accounts"])
            .arg(DEV_ACCOUNTS.to_string())
            .args(["--dev-assets", "4"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if !extra.contains(&"--block-interval-ms") {
            command.args(["--block-interval-ms", "50"]);
        }
        let mut child = command.spawn().expect("walras node starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let url = first
            .strip_prefix("walras node listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        let gateway_mode = extra
            .windows(2)
            .any(|pair| pair == ["--block-source", "gateway"]);
        let operator_url = gateway_mode.then(|| {
            let second = lines.next().and_then(Result::ok).unwrap_or_default();
            second
                .strip_prefix("walras node operator API on ")
                .unwrap_or_else(|| panic!("unexpected second line {second:?}"))
                .to_string()
        });
        // Keep draining stdout so the node never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        NodeProcess {
            child,
            url,
            operator_url,
        }
    }

    pub fn sigkill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits; returns whether it exited successfully.
    pub fn terminate(mut self) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..200 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn dev_key(account: u64) -> Keypair {
    let pool = key_pool_size(DEV_ACCOUNTS as usize) as u64;
    Keypair::from_seed(key_seed(DEV_SEED, account % pool))
}

pub fn sign(transaction: Transaction) -> SignedTransaction {
    let signature = dev_key(transaction.source.0).sign(&transaction.encode());
    SignedTransaction {
        transaction,
        signature: *signature.as_bytes(),
    }
}

pub fn payment(source: u64, sequence: u64, to: u64, asset: u16, amount: u64) -> SignedTransaction {
    sign(Transaction {
        source: AccountId(source),
        sequence,
        operation: Operation::Payment {
            to: AccountId(to),
            asset: AssetId(asset),
            amount,
        },
    })
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// GET returning (status, JSON body).
pub async fn get(client: &reqwest::Client, url: &str) -> (u16, serde_json::Value) {
    let response = client.get(url).send().await.expect("the node answers");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    (status, body)
}

/// POST of bytes with a content type, returning (status, JSON body).
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let response = client
        .post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the node answers");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    (status, body)
}

/// An account's (asset, amount) balances.
pub async fn balances(client: &reqwest::Client, url: &str, account: u64) -> Vec<(u16, u64)> {
    let (status, body) = get(client, &format!("{url}/v1/accounts/{account}")).await;
    assert_eq!(status, 200, "{body}");
    body["balances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["asset"].as_u64().unwrap() as u16,
                b["amount"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// An asset `account` holds at least `amount` of, other than `not` (blocking: for tests
/// outside a runtime).
pub fn held(url: &str, account: u64, amount: u64, not: u16) -> u16 {
    runtime().block_on(async {
        balances(&reqwest::Client::new(), url, account)
            .await
            .into_iter()
            .find(|(asset, held)| *held >= amount && *asset != not)
            .map(|(asset, _)| asset)
            .expect("dev accounts hold assets")
    })
}

/// Polls the transaction's status until it is not pending (10 s at most).
pub async fn wait_committed(client: &reqwest::Client, url: &str, hash: &str) -> serde_json::Value {
    for _ in 0..200 {
        let (status, body) = get(client, &format!("{url}/v1/transactions/{hash}")).await;
        assert_eq!(status, 200, "{body}");
        if body["status"] != "pending" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("transaction {hash} still pending after 10 s");
}

/// The value of an unlabelled sample in a Prometheus text page (`/metrics`); panics, showing
/// the page, when the sample is absent or does not parse as `T`.
pub fn metric<T: std::str::FromStr>(text: &str, name: &str) -> T {
    text.lines()
        .find_map(|line| {
            line.strip_prefix(name)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{name} is not in the metrics:\n{text}"))
}

/// Block `height` as `/v1/blocks/{height}/raw` serves it, decoded.
pub async fn raw_block(client: &reqwest::Client, url: &str, height: u64) -> Block {
    let raw = client
        .get(format!("{url}/v1/blocks/{height}/raw"))
        .send()
        .await
        .expect("the node answers")
        .bytes()
        .await
        .expect("the block's bytes arrive");
    Block::decode(&raw).expect("the raw block decodes")
}

/// No (source, sequence) accepted twice in the whole chain; returns the accepted count.
pub async fn check_no_double_apply(client: &reqwest::Client, url: &str) -> usize {
    let (_, status) = get(client, &format!("{url}/v1/status")).await;
    let height = status["height"].as_u64().unwrap();
    let mut accepted = HashSet::new();
    for h in 1..=height {
        let block = raw_block(client, url, h).await;
        let (_, json) = get(client, &format!("{url}/v1/blocks/{h}")).await;
        let dropped: HashSet<u64> = json["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["index"].as_u64().unwrap())
            .collect();
        for (index, signed) in block.transactions.iter().enumerate() {
            if !dropped.contains(&(index as u64)) {
                let slot = (signed.transaction.source, signed.transaction.sequence);
                assert!(accepted.insert(slot), "{slot:?} applied twice (block {h})");
            }
        }
    }
    accepted.len()
}

/// An open-loop payment load: `per_batch` payments every `every_ms` among accounts
/// `0..accounts`, each paying in the first asset it holds.
#[derive(Clone, Copy)]
pub struct PaymentLoad {
    pub accounts: u64,
    pub per_batch: usize,
    pub every_ms: u64,
}

/// Sends `load` to `url` as batch submissions until dropped; answers are ignored (the node
/// may be down or refusing: the load is open loop).
pub async fn load_payments(
    client: &reqwest::Client,
    url: &str,
    rng: &mut walras_sim::Rng,
    load: PaymentLoad,
) {
    let mut senders = Vec::new();
    for account in 0..load.accounts {
        let (_, body) = get(client, &format!("{url}/v1/accounts/{account}")).await;
        let next = body["next_sequence"].as_u64().unwrap();
        let asset = balances(client, url, account)
            .await
            .first()
            .map(|(asset, _)| *asset)
            .unwrap();
        senders.push((account, next, asset));
    }
    loop {
        let batch: Vec<SignedTransaction> = (0..load.per_batch)
            .map(|_| {
                let sender = &mut senders[rng.below(load.accounts) as usize];
                let to = (sender.0 + 1 + rng.below(load.accounts - 1)) % load.accounts;
                let signed = payment(sender.0, sender.1, to, sender.2, 1 + rng.below(5));
                sender.1 += 1;
                signed
            })
            .collect();
        let _ = client
            .post(format!("{url}/v1/transactions/batch"))
            .header("content-type", "application/octet-stream")
            .body(SignedTransaction::encode_list(&batch))
            .send()
            .await;
        tokio::time::sleep(Duration::from_millis(load.every_ms)).await;
    }
}

/// An in-process node's configuration on `data` with the development genesis `dev`: solo,
/// one thread, no rate limit (tests that open the ABCI application or the node in process).
pub fn dev_node_config(
    data: &Path,
    dev: walras_api::wire::DevGenesisJson,
) -> walras_server::NodeConfig {
    walras_server::NodeConfig {
        data_dir: data.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        genesis: walras_server::GenesisSource::Dev(dev, walras_devnet::dev_genesis_builder),
        block_interval: Duration::from_millis(100),
        max_block_txs: 1000,
        mempool_capacity: 1000,
        threads: 1,
        clearing_timeout: Duration::from_millis(500),
        rate_limit_rps: 0,
        rate_limit_burst: 1,
        consensus: walras_server::Consensus::Solo,
        serve: Default::default(),
        oracle: None,
        warm_start: Default::default(),
        commit_bound: walras_server::overload::COMMIT_BOUND_DEFAULT,
    }
}
