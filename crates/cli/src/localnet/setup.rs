//! Creating a localnet's files: one CometBFT home per validator (keys from `cometbft init`),
//! one shared genesis naming every validator, and each `config.toml` set to its own loopback
//! ports with the others as persistent peers.

use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use walras_server::cometbft::toml;

/// The chain id of every localnet.
pub(super) const CHAIN_ID: &str = "walras-localnet";

/// `DIR/localnet.json`: what `walras localnet` created, read again by later calls.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Layout {
    pub cometbft_bin: PathBuf,
    pub dev_accounts: u64,
    pub dev_assets: usize,
    pub dev_seed: u64,
    pub threads: usize,
    /// Each node's `--commit-bound-ms` (absent from networks created before it: the node's
    /// default then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_bound_ms: Option<u64>,
    pub nodes: Vec<NodeLayout>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct NodeLayout {
    pub index: usize,
    /// The node's own directory: `walras/` (its store), `cometbft/` (CometBFT's home), logs.
    pub dir: PathBuf,
    pub api: String,
    pub rpc: String,
    pub p2p_port: u16,
}

impl NodeLayout {
    pub(super) fn data(&self) -> PathBuf {
        self.dir.join("walras")
    }
    pub(super) fn home(&self) -> PathBuf {
        self.dir.join("cometbft")
    }
    pub(super) fn pid_file(&self) -> PathBuf {
        self.dir.join("node.pid")
    }
    pub(super) fn log(&self) -> PathBuf {
        self.dir.join("node.log")
    }
}

/// What the network is made of.
pub(super) struct Plan<'a> {
    pub dir: &'a Path,
    pub validators: usize,
    pub cometbft_bin: PathBuf,
    pub dev_accounts: u64,
    pub dev_assets: usize,
    pub dev_seed: u64,
    pub threads: usize,
    pub timeout_commit_ms: u64,
    pub commit_bound_ms: u64,
}

/// Creates every validator's files and `localnet.json`.
pub(super) fn create(plan: &Plan<'_>) -> anyhow::Result<Layout> {
    let ports = free_ports(plan.validators * 3)?;
    let nodes: Vec<NodeLayout> = (0..plan.validators)
        .map(|index| NodeLayout {
            index,
            dir: plan.dir.join(format!("node{index}")),
            api: format!("http://127.0.0.1:{}", ports[3 * index]),
            rpc: format!("http://127.0.0.1:{}", ports[3 * index + 1]),
            p2p_port: ports[3 * index + 2],
        })
        .collect();
    for node in &nodes {
        cometbft(&plan.cometbft_bin, &["init", "--home"], &node.home())?;
    }
    let node_ids = nodes
        .iter()
        .map(|node| {
            cometbft(
                &plan.cometbft_bin,
                &["show-node-id", "--home"],
                &node.home(),
            )
        })
        .collect::<anyhow::Result<Vec<String>>>()?;
    let genesis = shared_genesis(&nodes)?;
    for node in &nodes {
        write(&node.home().join("config/genesis.json"), &genesis)?;
        let peers: Vec<String> = nodes
            .iter()
            .zip(&node_ids)
            .filter(|(other, _)| other.index != node.index)
            .map(|(other, id)| format!("{id}@127.0.0.1:{}", other.p2p_port))
            .collect();
        configure(node, &peers.join(","), plan.timeout_commit_ms)?;
    }
    let layout = Layout {
        cometbft_bin: plan.cometbft_bin.clone(),
        dev_accounts: plan.dev_accounts,
        dev_assets: plan.dev_assets,
        dev_seed: plan.dev_seed,
        threads: plan.threads,
        commit_bound_ms: Some(plan.commit_bound_ms),
        nodes,
    };
    let json = serde_json::to_string_pretty(&layout).context("encoding localnet.json")?;
    write(&plan.dir.join("localnet.json"), &json)?;
    Ok(layout)
}

/// The first two nodes of `layout` that share a port (API, RPC or P2P), if any.
pub(super) fn shared_port(layout: &Layout) -> Option<(usize, usize)> {
    let mut seen = std::collections::HashMap::new();
    for node in &layout.nodes {
        let port = |url: &str| {
            url.rsplit(':')
                .next()
                .and_then(|port| port.parse::<u16>().ok())
        };
        for port in [port(&node.api), port(&node.rpc), Some(node.p2p_port)]
            .into_iter()
            .flatten()
        {
            if let Some(first) = seen.insert(port, node.index) {
                return Some((first, node.index));
            }
        }
    }
    None
}

/// Reads `DIR/localnet.json`; `None` if there is none.
pub(super) fn read(dir: &Path) -> anyhow::Result<Option<Layout>> {
    let path = dir.join("localnet.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(anyhow!("reading {}: {error}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| anyhow!("{} is not a localnet layout: {error}", path.display()))
}

/// Runs `cometbft ARGS HOME`; its trimmed stdout.
fn cometbft(binary: &Path, args: &[&str], home: &Path) -> anyhow::Result<String> {
    let output = Command::new(binary)
        .args(args)
        .arg(home)
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !output.status.success() {
        return Err(anyhow!(
            "{} {} {} failed: {}",
            binary.display(),
            args.join(" "),
            home.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Node 0's generated genesis with every node's validator key, equal power.
fn shared_genesis(nodes: &[NodeLayout]) -> anyhow::Result<String> {
    let mut genesis = read_json(&nodes[0].home().join("config/genesis.json"))?;
    let validators = nodes
        .iter()
        .map(|node| {
            let key = read_json(&node.home().join("config/priv_validator_key.json"))?;
            Ok(serde_json::json!({
                "address": key["address"],
                "pub_key": key["pub_key"],
                "power": "10",
                "name": format!("node{}", node.index),
            }))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    genesis["validators"] = serde_json::Value::Array(validators);
    genesis["chain_id"] = serde_json::Value::String(CHAIN_ID.into());
    serde_json::to_string_pretty(&genesis).context("encoding genesis.json")
}

/// Each validator's CometBFT connection rate limit, both ways (`p2p.send_rate`,
/// `p2p.recv_rate`): 500 MB/s, a hundred times CometBFT's default, which is for the internet.
/// Every validator of a localnet is on loopback.
const P2P_RATE_BYTES_PER_S: u64 = 500_000_000;

/// Most transactions each CometBFT mempool holds.
pub(super) const MEMPOOL_SIZE: usize = 10_000;

/// Sets a node's addresses, peers and limits in its `config.toml`.
fn configure(node: &NodeLayout, peers: &str, timeout_commit_ms: u64) -> anyhow::Result<()> {
    let path = node.home().join("config/config.toml");
    let mut text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let rpc = node.rpc.trim_start_matches("http://");
    let settings = [
        ("", "moniker", format!("\"node{}\"", node.index)),
        ("rpc", "laddr", format!("\"tcp://{rpc}\"")),
        // The node forwards admitted transactions in JSON-RPC batches.
        ("rpc", "max_request_batch_size", "1000".into()),
        ("rpc", "max_body_bytes", "16000000".into()),
        (
            "p2p",
            "laddr",
            format!("\"tcp://127.0.0.1:{}\"", node.p2p_port),
        ),
        ("p2p", "persistent_peers", format!("\"{peers}\"")),
        // Every validator is on 127.0.0.1.
        ("p2p", "addr_book_strict", "false".into()),
        ("p2p", "allow_duplicate_ip", "true".into()),
        // Loopback, not the internet CometBFT's defaults are for. The 5 MB/s per connection
        // would cap the network: every transaction crosses each connection twice (mempool
        // gossip, then the block's parts), about 2 x 105 bytes, so 5 MB/s is at most ~24,000
        // tx/s with nothing left for votes (issue 27 asks 40,000 of four validators).
        ("p2p", "send_rate", P2P_RATE_BYTES_PER_S.to_string()),
        ("p2p", "recv_rate", P2P_RATE_BYTES_PER_S.to_string()),
        // 1 KB packets: a 64 KB block part or a 256-transaction bundle in 64 packets, each
        // with its framing and rate accounting; 10 KB cuts that tenfold and still lets a vote
        // through between two packets of another channel.
        ("p2p", "max_packet_msg_payload_size", "10240".into()),
        // A connection flushes what it buffered at most this often: each consensus step
        // (proposal, prevote, precommit) waited up to the default 100 ms for it. Measured on
        // the 2-core VM at 2,500 tx/s offered (with the next setting): p50 561-835 ms against
        // 892-1,070 (BENCHMARKS.md, "CometBFT's connection settings on loopback").
        ("p2p", "flush_throttle_timeout", "\"10ms\"".into()),
        // Bounded so that it drains within the nodes' commit bound: four validators on one
        // 2-core machine commit about 3,000 tx/s (BENCHMARKS.md), so 10,000 is about 3 s of
        // commits (it was 200,000: over a minute, and under overload a backlog that never
        // committed). The application's CheckTx holds the pending set tighter, to what the
        // measured commit rate drains within the bound; this is the backstop.
        ("mempool", "size", MEMPOOL_SIZE.to_string()),
        // After each block every pending transaction is checked again, against the new state
        // and the bound (stale sequence numbers and what can no longer commit in time leave).
        ("mempool", "recheck", "true".into()),
        ("mempool", "cache_size", "400000".into()),
        (
            "consensus",
            "timeout_commit",
            format!("\"{timeout_commit_ms}ms\""),
        ),
        // How long a peer's gossip routine sleeps when it has nothing to send: a proposal's
        // parts and votes otherwise wait up to the default 100 ms to start moving.
        ("consensus", "peer_gossip_sleep_duration", "\"10ms\"".into()),
        // Walras's app hash changes every block (the state root commits to the height), so
        // CometBFT makes a block every round anyway; say so.
        ("consensus", "create_empty_blocks", "true".into()),
        ("instrumentation", "prometheus", "false".into()),
        // Walras keeps its own transaction index (GET /v1/transactions/{hash}).
        ("tx_index", "indexer", "\"null\"".into()),
    ];
    for (section, key, value) in &settings {
        text =
            toml::set(&text, section, key, value).with_context(|| format!("{}", path.display()))?;
    }
    write(&path, &text)
}

fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `count` distinct free loopback ports (held open together while choosing, so no two are
/// the same; another program could still take one before the network binds it: CometBFT binds
/// its own ports, so no listener can be handed over, and `up` then reports the node that did
/// not come up and stops the rest).
pub(super) fn free_ports(count: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .context("finding free loopback ports")?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<Result<Vec<_>, _>>()
        .context("finding free loopback ports")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(ports: &[[u16; 3]]) -> Layout {
        Layout {
            cometbft_bin: PathBuf::from("cometbft"),
            dev_accounts: 0,
            dev_assets: 0,
            dev_seed: 0,
            threads: 1,
            commit_bound_ms: None,
            nodes: ports
                .iter()
                .enumerate()
                .map(|(index, [api, rpc, p2p])| NodeLayout {
                    index,
                    dir: PathBuf::from(format!("node{index}")),
                    api: format!("http://127.0.0.1:{api}"),
                    rpc: format!("http://127.0.0.1:{rpc}"),
                    p2p_port: *p2p,
                })
                .collect(),
        }
    }

    /// 50 networks of 4 nodes in a row: every port of one network is its own (the listeners
    /// are held together while choosing), and `shared_port` finds none.
    #[test]
    fn fifty_networks_in_a_row_never_give_two_nodes_one_port() {
        for _ in 0..50 {
            let ports = free_ports(12).expect("free ports");
            let nodes: Vec<[u16; 3]> = ports.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
            assert_eq!(shared_port(&layout(&nodes)), None, "{ports:?}");
        }
    }

    /// The check `up` runs before starting anything: a layout listing one port twice names the
    /// two nodes.
    #[test]
    fn a_layout_listing_one_port_twice_names_both_nodes() {
        let nodes = [[1000, 1001, 1002], [2000, 2001, 2002], [3000, 1001, 3002]];
        assert_eq!(shared_port(&layout(&nodes)), Some((0, 2)));
        assert_eq!(shared_port(&layout(&nodes[..2])), None);
    }
}
