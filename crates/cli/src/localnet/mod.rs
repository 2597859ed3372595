//! `walras localnet`: an N-validator CometBFT network on loopback addresses, one `walras node
//! --consensus cometbft` process per validator, each with its own HTTP API.
//!
//! - `walras localnet --validators N --dir DIR` creates the network in DIR if it has none
//!   (`localnet.json`, `nodeI/{walras,cometbft}`), starts every validator not running (so it
//!   also restarts validators that were stopped or killed), waits until all serve, and prints
//!   their APIs. The nodes keep running in the background (`nodeI/node.log`).
//! - `walras localnet down --dir DIR` stops them (SIGTERM, then SIGKILL after a grace period).

mod setup;

use crate::supervise::Supervised;
use anyhow::{anyhow, Context};
use setup::{Layout, NodeLayout};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use walras_client::NodeApi;
use walras_client::NodeClient;
use walras_devnet::DEV_ACCOUNTS_MAX;
use walras_server::cometbft::{binary_or_find, COMETBFT_VERSION};

/// How long `down` waits for a node to stop before killing it.
/// How long a restart waits for a validator's ports to be released.
const PORTS_WAIT: Duration = Duration::from_secs(20);

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct LocalnetArgs {
    #[command(subcommand)]
    action: Option<LocalnetAction>,
    #[command(flatten)]
    up: UpArgs,
}

#[derive(clap::Subcommand, Debug)]
enum LocalnetAction {
    /// Stop every validator of the network in DIR.
    Down(DownArgs),
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    /// Validators (a new network; an existing one keeps its own count).
    #[arg(long, required = true, value_parser = clap::value_parser!(u16).range(1..=32))]
    validators: Option<u16>,
    /// The network's directory.
    #[arg(long, required = true)]
    dir: Option<PathBuf>,
    /// The cometbft executable. Default: $WALRAS_COMETBFT, the PATH, then ~/go/bin.
    #[arg(long)]
    cometbft_bin: Option<PathBuf>,
    /// Accounts of the shared development genesis.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(2..=DEV_ACCOUNTS_MAX))]
    dev_accounts: u64,
    #[arg(long, default_value = "10", value_parser = super::args::asset_count)]
    dev_assets: usize,
    #[arg(long, default_value_t = 1)]
    dev_seed: u64,
    /// Execution threads per node (all validators share this machine).
    #[arg(long, default_value = "1", value_parser = super::args::thread_count)]
    threads: usize,
    /// CometBFT's pause after each commit, in milliseconds (its block cadence). 200 rather
    /// than 500: on loopback late votes arrive within it, and a height's fixed wait is most of
    /// an idle network's latency (BENCHMARKS.md, "timeout_commit").
    #[arg(long, default_value_t = 200)]
    timeout_commit_ms: u64,
    /// Each node's --commit-bound-ms: an admitted transaction commits within it or is dropped.
    /// Longer than a solo node's 2,000 by default: on one machine, four validators take about
    /// a second to commit even an idle network's transactions (BENCHMARKS.md).
    #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    commit_bound_ms: u64,
    /// How long to wait for every node to serve, in seconds.
    #[arg(long, default_value_t = 120)]
    wait_s: u64,
}

#[derive(clap::Args, Debug)]
struct DownArgs {
    /// The network's directory.
    #[arg(long)]
    dir: PathBuf,
}

pub(crate) fn run(args: LocalnetArgs) -> anyhow::Result<()> {
    match args.action {
        Some(LocalnetAction::Down(down)) => stop_all(&down.dir),
        None => up(args.up),
    }
}

fn up(args: UpArgs) -> anyhow::Result<()> {
    let (Some(validators), Some(dir)) = (args.validators, args.dir.clone()) else {
        return Err(anyhow!("--validators and --dir are required"));
    };
    let layout = match setup::read(&dir)? {
        Some(layout) => {
            if layout.nodes.len() != validators as usize {
                eprintln!(
                    "walras localnet: {} already holds a network of {} validators; using it",
                    dir.display(),
                    layout.nodes.len()
                );
            }
            layout
        }
        None => create(&args, validators as usize, &dir)?,
    };
    if let Some((first, second)) = setup::shared_port(&layout) {
        return Err(anyhow!(
            "{}: node{first} and node{second} are given the same port; create the network again \
             in a new directory",
            dir.join("localnet.json").display()
        ));
    }
    let executable = std::env::current_exe().context("locating the walras executable")?;
    let started = (|| {
        for node in &layout.nodes {
            match running_pid(node) {
                Some(pid) => eprintln!(
                    "walras localnet: node{} already runs (pid {pid})",
                    node.index
                ),
                None => start(&executable, &layout, node)?,
            }
        }
        wait_until_serving(&layout, Duration::from_secs(args.wait_s))
    })();
    if let Err(error) = started {
        // Never half a network: the nodes that did start are stopped too.
        let stopped = stop_all(&dir);
        return Err(anyhow!(
            "the localnet in {} did not come up whole: {error:#}; {}",
            dir.display(),
            match stopped {
                Ok(()) => "every node of it was stopped".to_string(),
                Err(stop) => format!("stopping its nodes failed too: {stop:#}"),
            }
        ));
    }
    print_summary(&dir, &layout);
    Ok(())
}

fn create(args: &UpArgs, validators: usize, dir: &Path) -> anyhow::Result<Layout> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_some()
    {
        return Err(anyhow!(
            "{} is not empty and holds no localnet.json: choose a new directory",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cometbft_bin = binary_or_find(args.cometbft_bin.clone())?;
    let cometbft_bin = std::fs::canonicalize(&cometbft_bin)
        .with_context(|| format!("cometbft at {}", cometbft_bin.display()))?;
    warn_on_other_version(&cometbft_bin);
    eprintln!(
        "walras localnet: creating {validators} validators in {}",
        dir.display()
    );
    let created = setup::create(&setup::Plan {
        dir,
        validators,
        cometbft_bin,
        dev_accounts: args.dev_accounts,
        dev_assets: args.dev_assets,
        dev_seed: args.dev_seed,
        threads: args.threads.max(1),
        timeout_commit_ms: args.timeout_commit_ms.max(1),
        commit_bound_ms: args.commit_bound_ms,
    });
    if created.is_err() {
        // The directory was empty or missing: leave it so, and the command can be run again.
        let _ = std::fs::remove_dir_all(dir);
    }
    created
}

/// Says so when the executable is not the CometBFT release Walras is tested with.
fn warn_on_other_version(binary: &Path) {
    let reported = Command::new(binary)
        .arg("version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .unwrap_or_default();
    if reported != COMETBFT_VERSION {
        eprintln!(
            "walras localnet: {} reports version {reported:?}; Walras is tested with CometBFT \
             {COMETBFT_VERSION} (scripts/install-cometbft.sh installs it)",
            binary.display()
        );
    }
}

/// Starts one validator in the background, in its own session.
fn start(executable: &Path, layout: &Layout, node: &NodeLayout) -> anyhow::Result<()> {
    wait_ports_free(node)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(node.log())
        .with_context(|| format!("opening {}", node.log().display()))?;
    let listen = node.api.trim_start_matches("http://");
    let mut command = Command::new(executable);
    command
        .arg("node")
        .arg("--consensus")
        .arg("cometbft")
        .arg("--data")
        .arg(node.data())
        .arg("--cometbft-home")
        .arg(node.home())
        .arg("--cometbft-bin")
        .arg(&layout.cometbft_bin)
        .arg("--listen")
        .arg(listen)
        // The localnet is a development network: its genesis keys are public.
        .arg("--dev")
        .arg("--dev-accounts")
        .arg(layout.dev_accounts.to_string())
        .arg("--dev-assets")
        .arg(layout.dev_assets.to_string())
        .arg("--dev-seed")
        .arg(layout.dev_seed.to_string())
        .arg("--threads")
        .arg(layout.threads.to_string())
        // All validators share one machine and one client address.
        .arg("--rate-limit-rps")
        .arg("0");
    if let Some(bound_ms) = layout.commit_bound_ms {
        command.arg("--commit-bound-ms").arg(bound_ms.to_string());
    }
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("log file")?)
        .stderr(log);
    let pid = supervised(node).spawn(&mut command)?;
    eprintln!(
        "walras localnet: started node{} (pid {}, API {}, log {})",
        node.index,
        pid,
        node.api,
        node.log().display()
    );
    Ok(())
}

/// Waits until the validator's CometBFT ports can be bound: a CometBFT killed with its node
/// (the parent-death signal) may take a moment to release them.
fn wait_ports_free(node: &NodeLayout) -> anyhow::Result<()> {
    let addresses = [
        format!("127.0.0.1:{}", node.p2p_port),
        node.rpc.trim_start_matches("http://").to_string(),
        node.api.trim_start_matches("http://").to_string(),
    ];
    let deadline = Instant::now() + PORTS_WAIT;
    for address in &addresses {
        while std::net::TcpListener::bind(address).is_err() {
            if Instant::now() > deadline {
                return Err(anyhow!(
                    "node{}: {address} stays in use; is another program on it?",
                    node.index
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// The validator as a supervised process: its pid file, and its data directory in its
/// command line.
fn supervised(node: &NodeLayout) -> Supervised {
    Supervised {
        name: format!("walras localnet: node{}", node.index),
        pid_file: node.pid_file(),
        marker: node.data(),
    }
}

/// The pid of the node's process if it is alive and is a walras node.
fn running_pid(node: &NodeLayout) -> Option<i32> {
    supervised(node).running_pid()
}

fn wait_until_serving(layout: &Layout, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    super::remote::block_on(async {
        for node in &layout.nodes {
            let client = NodeClient::new(&node.api)?;
            loop {
                if running_pid(node).is_none() {
                    return Err(anyhow!(
                        "node{} exited; the end of {}:\n{}",
                        node.index,
                        node.log().display(),
                        log_tail(&node.log(), 12)
                    ));
                }
                match client.status().await {
                    Ok(status) if status.height > 0 => break,
                    _ if Instant::now() > deadline => {
                        return Err(anyhow!(
                            "node{} did not serve a committed block within {} s: see {}",
                            node.index,
                            limit.as_secs(),
                            node.log().display()
                        ))
                    }
                    _ => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
        Ok(())
    })?
}

/// The last `lines` lines of a log file.
fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

fn print_summary(dir: &Path, layout: &Layout) {
    println!(
        "walras localnet: {} validators running (CometBFT {})",
        layout.nodes.len(),
        layout.cometbft_bin.display()
    );
    for node in &layout.nodes {
        println!(
            "  node{}  API {}  CometBFT RPC {}  log {}",
            node.index,
            node.api,
            node.rpc,
            node.log().display()
        );
    }
    println!(
        "try: walras query status --node {}\nstop: walras localnet down --dir {}",
        layout.nodes[0].api,
        dir.display()
    );
}

fn stop_all(dir: &Path) -> anyhow::Result<()> {
    let layout =
        setup::read(dir)?.ok_or_else(|| anyhow!("{} holds no localnet.json", dir.display()))?;
    let processes: Vec<Supervised> = layout.nodes.iter().map(supervised).collect();
    let stopped = crate::supervise::stop_all(&processes);
    println!(
        "walras localnet: stopped {} of {} validators in {}",
        stopped,
        layout.nodes.len(),
        dir.display()
    );
    Ok(())
}
