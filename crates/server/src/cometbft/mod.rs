//! Replicated mode: CometBFT 0.38 orders the blocks and this node is its ABCI++ application
//! ([`app`]). One `walras node --consensus cometbft` process is one validator: it recovers its
//! state from its store, serves ABCI on a Unix socket in CometBFT's home that only its user can
//! open ([`abci_socket`]), starts CometBFT as a child process
//! pointed at it ([`child`]), forwards the transactions its HTTP API admits to CometBFT's
//! mempool ([`forward`]), and serves the same HTTP API as a solo node; blocks are reported
//! when Commit has stored them.

mod abci_socket;
pub mod app;
mod child;
mod forward;
pub use walras_api::proposal;
pub mod toml;

use super::node::Shared;
use super::NodeError;
pub use app::{AppConfig, WalrasApp};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The pinned CometBFT release (the one `scripts/install-cometbft.sh` installs).
pub const COMETBFT_VERSION: &str = "0.38.26";

/// Where CometBFT is.
#[derive(Clone, Debug)]
pub struct CometbftConfig {
    /// The `cometbft` executable.
    pub binary: PathBuf,
    /// CometBFT's home: `config/` (config.toml, genesis.json, keys) and `data/`.
    pub home: PathBuf,
}

/// A running CometBFT child and what watches it.
pub struct Running {
    child: Arc<Mutex<Child>>,
    exited_unexpectedly: Arc<Mutex<Option<String>>>,
}

impl Running {
    /// Stops CometBFT; an error if it had exited on its own before.
    pub fn stop(self) -> Result<(), NodeError> {
        child::stop(&mut self.child.lock().unwrap_or_else(|p| p.into_inner()));
        match self
            .exited_unexpectedly
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(status) => Err(NodeError::Cometbft(status)),
            None => Ok(()),
        }
    }
}

/// Starts the ABCI server, CometBFT and the forwarder. Call from the main thread: the child's
/// parent-death signal follows the thread that started it.
pub fn start(
    shared: &Arc<Shared>,
    config: &CometbftConfig,
    app_config: AppConfig,
    runtime: &tokio::runtime::Runtime,
) -> Result<Running, NodeError> {
    let config_text = read_config(&config.home)?;
    let rpc_url = rpc_url(&config_text)?;
    let batch_max = toml::get(&config_text, "rpc", "max_request_batch_size")
        .and_then(|value| value.parse::<usize>().ok())
        .map_or(10, |size| if size == 0 { 1000 } else { size.min(1000) });
    let app = WalrasApp::new(shared.clone(), app_config);
    let socket = abci_socket::AbciSocket::bind(&config.home)?;
    let abci_address = socket.proxy_app();
    socket.serve(app)?;
    let child = child::spawn(&config.binary, &config.home, &abci_address).map_err(|error| {
        NodeError::Cometbft(format!(
            "starting CometBFT ({}): {error}; install it with scripts/install-cometbft.sh \
             or name it with --cometbft-bin",
            config.binary.display()
        ))
    })?;
    tracing::info!(
        "CometBFT started (pid {}, home {}, RPC {rpc_url}, log {}), ABCI at {abci_address}",
        child.id(),
        config.home.display(),
        config.home.join("cometbft.log").display()
    );
    let running = Running {
        child: Arc::new(Mutex::new(child)),
        exited_unexpectedly: Arc::new(Mutex::new(None)),
    };
    // `start` runs once per process, so the cell is empty here.
    let _ = shared.cometbft_rpc.set(rpc_url.clone());
    watch(shared.clone(), &running);
    runtime.spawn(forward::run(
        shared.clone(),
        forward::ForwardConfig { rpc_url, batch_max },
    ));
    Ok(running)
}

/// Stops the node if CometBFT exits while the node runs.
fn watch(shared: Arc<Shared>, running: &Running) {
    let child = running.child.clone();
    let exited = running.exited_unexpectedly.clone();
    let spawned = std::thread::Builder::new()
        .name("cometbft-watch".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            if shared.is_shutting_down() {
                return;
            }
            let status = child.lock().unwrap_or_else(|p| p.into_inner()).try_wait();
            if let Ok(Some(status)) = status {
                let message =
                    format!("CometBFT exited on its own ({status}); see cometbft.log in its home");
                tracing::info!("{message}; stopping");
                *exited.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
                shared.shut_down();
                return;
            }
        });
    if let Err(error) = spawned {
        tracing::warn!("cannot watch CometBFT ({error})");
    }
}

fn read_config(home: &Path) -> Result<String, NodeError> {
    let path = home.join("config").join("config.toml");
    std::fs::read_to_string(&path).map_err(|error| {
        NodeError::Cometbft(format!(
            "reading {}: {error}; create a network with `walras localnet` or `cometbft init --home {}`",
            path.display(),
            home.display()
        ))
    })
}

/// CometBFT's RPC as an HTTP URL, from `[rpc] laddr`.
fn rpc_url(config_text: &str) -> Result<String, NodeError> {
    let laddr = toml::get(config_text, "rpc", "laddr")
        .ok_or_else(|| NodeError::Cometbft("config.toml has no [rpc] laddr".into()))?;
    let address = laddr.strip_prefix("tcp://").ok_or_else(|| {
        NodeError::Cometbft(format!(
            "config.toml [rpc] laddr {laddr:?} is not tcp://HOST:PORT"
        ))
    })?;
    let address = address.replace("0.0.0.0", "127.0.0.1");
    Ok(format!("http://{address}"))
}

/// The executable named, or else the one [`find_binary`] finds; an error saying how to get one.
pub fn binary_or_find(named: Option<PathBuf>) -> Result<PathBuf, NodeError> {
    named.or_else(find_binary).ok_or_else(|| {
        NodeError::Cometbft(
            "no cometbft executable found (PATH, ~/go/bin, $WALRAS_COMETBFT): run \
             scripts/install-cometbft.sh or pass --cometbft-bin"
                .into(),
        )
    })
}

/// The `cometbft` executable to use when none is named: `$WALRAS_COMETBFT`, then `cometbft`
/// on the PATH, then `$GOBIN`/`$GOPATH/bin`/`~/go/bin` (where `go install` puts it).
pub fn find_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WALRAS_COMETBFT") {
        return Some(PathBuf::from(path));
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("cometbft"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(gobin) = std::env::var_os("GOBIN") {
        candidates.push(PathBuf::from(gobin).join("cometbft"));
    }
    if let Some(gopath) = std::env::var_os("GOPATH") {
        candidates.push(PathBuf::from(gopath).join("bin").join("cometbft"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join("go").join("bin").join("cometbft"));
    }
    candidates.into_iter().find(|path| path.is_file())
}
