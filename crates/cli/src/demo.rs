//! `walras demo`: a whole node under load, in one command.
//!
//! Starts `walras node` as a child process on a fresh data directory (with a generated
//! development genesis, listening on a free local port), prints the address of its live
//! dashboard, runs the open-loop load generator against it in this process, and prints what
//! happened — blocks, committed throughput, accepted and dropped transactions, submit-to-commit
//! latency, the clearing prices. Then it keeps the node up, so the dashboard can be looked at,
//! until Ctrl-C (SIGINT); with `--seconds` it stops at once after the load, as before. Either
//! way the node is stopped with SIGTERM, as an operator would, and waited for. The data
//! directory is kept, so the chain it made can be served again. (`walras demo-batch` is the
//! batch clearing alone.)

use super::loadgen::{check_committed, positive_number};
use super::remote::block_on;
use anyhow::{anyhow, Context};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use walras_api::wire::{PricesJson, StatusJson};
use walras_client::NodeApi;
use walras_client::NodeClient;
use walras_loadgen::{mix::Mix, LoadgenConfig, LoadgenReport};

/// How long the node may take to print its address (it builds the genesis first).
const NODE_START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the node may take to stop after SIGTERM before it is killed.
const NODE_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of the node's output kept to explain a failure.
const OUTPUT_TAIL_LINES: usize = 40;
/// What the node prints first; the rest of the line is its URL.
const LISTENING_PREFIX: &str = "walras node listening on ";

#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    /// Data directory for the node [default: a new directory under the system temp dir]; an
    /// existing one must be empty
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Send for this long, then stop the node and exit. Without it the load runs for 15 s
    /// and the node then stays up (its dashboard too) until Ctrl-C
    #[arg(long, value_parser = positive_number)]
    seconds: Option<f64>,
    /// Transactions offered per second
    #[arg(long, default_value_t = 2000.0, value_parser = positive_number)]
    rate: f64,
    /// Development accounts the load comes from
    #[arg(long, default_value_t = 1000)]
    accounts: usize,
    /// Seed of the development genesis and of the load
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// How long the load runs without `--seconds` (the node then stays up until Ctrl-C).
const DEFAULT_LOAD_SECONDS: f64 = 15.0;
/// How often a demo keeping its node up checks that the node is still running.
const NODE_WATCH_INTERVAL: Duration = Duration::from_millis(500);

pub(crate) fn run(args: DemoArgs) -> anyhow::Result<()> {
    let data = prepare_data_dir(args.data.as_deref())?;
    let keep_up = args.seconds.is_none();
    let seconds = args.seconds.unwrap_or(DEFAULT_LOAD_SECONDS);
    println!("Walras demo: a solo node under an open-loop load of signed transactions");
    println!("  data directory  {}", data.display());
    let mut node = NodeProcess::start(&data, args.seed)?;
    println!("  node            {} (pid {})", node.url, node.child.id());
    println!("  dashboard       {}/ (open it in a browser)", node.url);
    println!(
        "  load            {} tx/s for {seconds} s from {} development accounts: offers near \
         the current prices, some cancels and payments",
        args.rate, args.accounts
    );
    // Ctrl-C during the load stops the node too (rather than leaving it running).
    let driven = block_on(async {
        tokio::select! {
            driven = drive(&node.url, &args, seconds) => Some(driven),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    let driven = match driven {
        Ok(Some(driven)) => driven,
        Ok(None) => {
            node.stop()?;
            println!(
                "\nInterrupted: the node is stopped; its data is in {}",
                data.display()
            );
            return Ok(());
        }
        Err(error) => Err(error),
    };
    let stopped = if keep_up { Ok(()) } else { node.stop() };
    let (report, prices, status) = match (driven, stopped) {
        (Ok(results), Ok(())) => results,
        (Err(error), Ok(())) => return Err(error),
        (Ok(_), Err(error)) => return Err(error),
        (Err(driving), Err(stopping)) => return Err(anyhow!("{driving}\n  and then: {stopping}")),
    };
    print_results(&report, &prices, &status, &node.url, &data, keep_up);
    if keep_up {
        println!();
        println!(
            "The node keeps running: dashboard {}/ — press Ctrl-C to stop it.",
            node.url
        );
        node.run_until_interrupted()?;
        println!("Stopped: the node exited cleanly.");
    }
    check_committed(&report)
}

/// The load, then the prices and status it led to.
async fn drive(
    url: &str,
    args: &DemoArgs,
    seconds: f64,
) -> anyhow::Result<(LoadgenReport, PricesJson, StatusJson)> {
    let config = LoadgenConfig {
        accounts: args.accounts,
        mix: Mix::Trading,
        seed: args.seed,
        progress: true,
        ..LoadgenConfig::new(url, args.rate, Duration::from_secs_f64(seconds))
    };
    let report = walras_loadgen::run(&config).await?;
    let client = NodeClient::new(url)?;
    let prices = client.prices().await?;
    let status = client.status().await?;
    Ok((report, prices, status))
}

/// The directory to use: `data` if it is new or empty, else a new one under the temp dir.
fn prepare_data_dir(data: Option<&Path>) -> anyhow::Result<PathBuf> {
    let io = |path: &Path, error: std::io::Error| anyhow!("{}: {error}", path.display());
    let Some(path) = data else {
        let stamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis());
        let path =
            std::env::temp_dir().join(format!("walras-demo-{}-{stamp_ms}", std::process::id()));
        std::fs::create_dir(&path).map_err(|error| io(&path, error))?;
        return Ok(path);
    };
    if path.exists() {
        let mut entries = std::fs::read_dir(path).map_err(|error| io(path, error))?;
        if entries.next().is_some() {
            return Err(anyhow!(
                "{} is not empty: the demo starts a fresh chain, so give a new or empty \
                 directory (to serve an existing one, run `walras node --data {}`)",
                path.display(),
                path.display()
            ));
        }
        return Ok(path.to_path_buf());
    }
    std::fs::create_dir_all(path).map_err(|error| io(path, error))?;
    Ok(path.to_path_buf())
}

/// `walras node` as a child process: its URL, and the tail of its output for error messages.
/// Dropping it kills the process (so an early return never leaves a node running).
struct NodeProcess {
    child: Child,
    url: String,
    output: Arc<Mutex<VecDeque<String>>>,
    stopped: bool,
}

impl NodeProcess {
    fn start(data: &Path, seed: u64) -> anyhow::Result<NodeProcess> {
        let exe = std::env::current_exe().context("cannot find the walras executable")?;
        let mut child = Command::new(exe)
            .arg("node")
            .arg("--data")
            .arg(data)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--dev",
                "--dev-seed",
                &seed.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start `walras node`")?;
        let output = Arc::new(Mutex::new(VecDeque::new()));
        let (first_line, first_line_rx) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            drain_lines(stdout, output.clone(), Some(first_line));
        }
        if let Some(stderr) = child.stderr.take() {
            drain_lines(stderr, output.clone(), None);
        }
        let mut node = NodeProcess {
            child,
            url: String::new(),
            output,
            stopped: false,
        };
        node.url = node.await_url(&first_line_rx)?;
        Ok(node)
    }

    /// Reads the node's first stdout line: `walras node listening on http://ADDR`.
    fn await_url(&mut self, first_line: &mpsc::Receiver<String>) -> anyhow::Result<String> {
        match first_line.recv_timeout(NODE_START_TIMEOUT) {
            Ok(line) => match line.strip_prefix(LISTENING_PREFIX) {
                Some(url) => Ok(url.trim().to_string()),
                None => Err(self.failure(&format!(
                    "the node's first line was {line:?}, not \"{LISTENING_PREFIX}http://ADDR\""
                ))),
            },
            Err(mpsc::RecvTimeoutError::Timeout) => Err(self.failure(&format!(
                "the node printed no address within {} s",
                NODE_START_TIMEOUT.as_secs()
            ))),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().ok();
                self.stopped = true;
                Err(self.failure(&format!(
                    "the node exited before listening ({})",
                    describe(status)
                )))
            }
        }
    }

    /// Waits for Ctrl-C (SIGINT to this process), then stops the node; an error if the node
    /// exits by itself first.
    fn run_until_interrupted(&mut self) -> anyhow::Result<()> {
        let exited = block_on(async {
            let interrupted = tokio::signal::ctrl_c();
            tokio::pin!(interrupted);
            loop {
                tokio::select! {
                    _ = &mut interrupted => return Ok(None),
                    _ = tokio::time::sleep(NODE_WATCH_INTERVAL) => match self.child.try_wait() {
                        Ok(Some(status)) => return Ok(Some(status)),
                        Ok(None) => {}
                        Err(error) => return Err(error),
                    },
                }
            }
        })?;
        match exited {
            Ok(None) => self.stop(),
            Ok(Some(status)) => {
                self.stopped = true;
                Err(self.failure(&format!(
                    "the node exited by itself ({}) while the demo kept it up",
                    describe(Some(status))
                )))
            }
            Err(error) => Err(self.failure(&format!("cannot wait for the node: {error}"))),
        }
    }

    /// SIGTERM, then wait; killed if it does not stop in time. A non-zero exit is an error.
    fn stop(&mut self) -> anyhow::Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        if let Err(error) = terminate(&mut self.child) {
            return Err(self.failure(&format!("cannot signal the node: {error}")));
        }
        let deadline = Instant::now() + NODE_STOP_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(self.failure(&format!(
                        "the node exited with {} when stopped",
                        describe(Some(status))
                    )))
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(self.failure(&format!(
                        "the node did not stop within {} s of SIGTERM and was killed",
                        NODE_STOP_TIMEOUT.as_secs()
                    )));
                }
                Err(error) => {
                    return Err(self.failure(&format!("cannot wait for the node: {error}")))
                }
            }
        }
    }

    /// An error naming `what` went wrong, with the node's last lines of output.
    fn failure(&self, what: &str) -> anyhow::Error {
        // Give the drain threads a moment to catch the node's last words.
        std::thread::sleep(Duration::from_millis(100));
        let tail = self
            .output
            .lock()
            .map(|lines| lines.iter().cloned().collect::<Vec<_>>().join("\n    "))
            .unwrap_or_default();
        if tail.is_empty() {
            anyhow!("{what}")
        } else {
            anyhow!("{what}; the node's last output:\n    {tail}")
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads `source` line by line on a thread until it closes (so the node never blocks on a
/// full pipe); the first line goes to `first_line`, the others to the kept tail.
fn drain_lines(
    source: impl Read + Send + 'static,
    tail: Arc<Mutex<VecDeque<String>>>,
    mut first_line: Option<mpsc::Sender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(source).lines() {
            let Ok(line) = line else { return };
            if let Some(sender) = first_line.take() {
                let _ = sender.send(line);
                continue;
            }
            if let Ok(mut lines) = tail.lock() {
                if lines.len() == OUTPUT_TAIL_LINES {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        }
    });
}

/// Asks the child to stop the way an operator would (SIGTERM), so it shuts down cleanly.
#[cfg(unix)]
fn terminate(child: &mut Child) -> std::io::Result<()> {
    let pid =
        i32::try_from(child.id()).map_err(|_| std::io::Error::other("process id out of range"))?;
    // The child has not been waited for, so its pid cannot have been reused.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    Ok(())
}

#[cfg(not(unix))]
fn terminate(child: &mut Child) -> std::io::Result<()> {
    child.kill()
}

fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => status.to_string(),
        None => "exit status unknown".to_string(),
    }
}

fn print_results(
    report: &LoadgenReport,
    prices: &PricesJson,
    status: &StatusJson,
    url: &str,
    data: &Path,
    running: bool,
) {
    println!();
    println!("Results");
    let heights = match report.counts.first_height {
        Some(first) => format!(" (heights {first}..={})", report.counts.last_height),
        None => String::new(),
    };
    println!(
        "  blocks          {} committed during the run{heights}; chain height {}",
        report.counts.blocks, status.height
    );
    println!(
        "  throughput      {} of our transactions in blocks: {:.1} tx/s (offered {:.1} tx/s)",
        report.counts.committed, report.committed_tx_per_s, report.offered_tx_per_s
    );
    println!(
        "  outcome         accepted {}, dropped {}{}; never committed {}",
        report.counts.accepted,
        report.counts.dropped,
        walras_loadgen::by_key(&report.counts.dropped_by_reason),
        report.never_committed
    );
    println!(
        "  admission       sent {}, admitted {}, rejected {}{}; not sent {} (in-flight cap), \
         {} (sequence windows full), {} (accounts awaiting answers)",
        report.counts.sent,
        report.counts.admitted,
        report.counts.rejected,
        walras_loadgen::by_key(&report.counts.rejected_by_code),
        report.counts.not_sent,
        report.counts.skipped_window,
        report.counts.skipped_busy
    );
    let latency = &report.latency;
    println!(
        "  latency         submit to commit: p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms",
        latency.p50_ms, latency.p99_ms, latency.p999_ms, latency.max_ms
    );
    if report.counts.cleared_blocks > 0 {
        println!(
            "  clearing        {} of {} blocks converged ({:.1}%); mean unrealized/realized utility {:.4}%; {} traded nothing though they could",
            report.counts.converged_blocks,
            report.counts.cleared_blocks,
            100.0 * report.counts.converged_blocks as f64 / report.counts.cleared_blocks as f64,
            100.0 * report.unrealized_utility_ratio_mean,
            report.counts.nothing_traded_blocks
        );
    }
    print_prices(prices);
    println!(
        "  state           {} accounts, {} open offers, state root {}",
        status.accounts, status.open_offers, status.state_root
    );
    for note in &report.notes {
        println!("  note            {note}");
    }
    if running {
        println!("  API             {url} (running until Ctrl-C; dashboard {url}/)");
    } else {
        println!("  API             {url} (the node is stopped now)");
    }
    println!("  data            {}", data.display());
    println!();
    println!(
        "Serve it again:   walras node --data {} --listen 127.0.0.1:8080",
        data.display()
    );
    println!("then, e.g.:       walras query status; walras query prices; walras query block 1");
}

fn print_prices(prices: &PricesJson) {
    if prices.height == 0 || prices.reference.assets.is_empty() {
        println!("  prices          none: no block was committed");
        return;
    }
    let shown: Vec<String> = prices
        .reference
        .assets
        .iter()
        .take(10)
        .map(|asset| asset.price.clone().unwrap_or_else(|| "-".to_string()))
        .collect();
    let more = prices.reference.assets.len().saturating_sub(10);
    let more = if more > 0 {
        format!(" ... and {more} more")
    } else {
        String::new()
    };
    println!(
        "  prices          last traded as of height {}, asset i in units of asset 0 (- : never traded with it): {}{more}",
        prices.height,
        shown.join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_directories_must_be_new_or_empty() {
        let base = std::env::temp_dir().join(format!("walras-demo-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let fresh = base.join("fresh");
        assert_eq!(prepare_data_dir(Some(&fresh)).unwrap(), fresh);
        assert_eq!(
            prepare_data_dir(Some(&fresh)).unwrap(),
            fresh,
            "empty is fine"
        );
        std::fs::write(fresh.join("something"), b"x").unwrap();
        let error = prepare_data_dir(Some(&fresh)).unwrap_err();
        assert!(error.to_string().contains("is not empty"), "{error}");
        let default = prepare_data_dir(None).unwrap();
        assert!(default.is_dir());
        std::fs::remove_dir_all(&default).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
