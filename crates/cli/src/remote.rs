//! What the commands that talk to a node share: the `--node` option, the async runtime, and
//! the development genesis read from the node's status.

use anyhow::{anyhow, Context};
use std::future::Future;
#[cfg(feature = "dev-tools")]
use walras_api::wire::DevGenesisJson;
use walras_client::{NodeApi, NodeClient};

/// The default node address: what `walras node --listen` is usually given.
pub(crate) const DEFAULT_NODE: &str = "http://127.0.0.1:8080";

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct NodeArgs {
    /// Base URL of the node's HTTP API
    #[arg(long, default_value = DEFAULT_NODE)]
    pub node: String,
}

impl NodeArgs {
    pub(crate) fn client(&self) -> anyhow::Result<NodeClient> {
        Ok(NodeClient::new(&self.node)?)
    }
}

/// Runs `future` to completion on a fresh multi-threaded runtime.
pub(crate) fn block_on<F: Future>(future: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}

/// The node's development genesis parameters, or an error saying there are none.
#[cfg(feature = "dev-tools")]
pub(crate) async fn dev_genesis<C: NodeApi>(client: &C) -> anyhow::Result<DevGenesisJson> {
    let status = client.status().await?;
    status.dev_genesis.ok_or_else(|| {
        anyhow!(
            "the node at {} runs no development genesis (its /v1/status has no dev_genesis), \
             so development keys do not apply: use --key FILE",
            client.base_url()
        )
    })
}

/// The secret seed of development account `account` on the node's development genesis.
#[cfg(feature = "dev-tools")]
pub(crate) async fn dev_secret_seed<C: NodeApi>(
    client: &C,
    account: u64,
) -> anyhow::Result<[u8; 32]> {
    let dev = dev_genesis(client).await?;
    if account >= dev.accounts {
        return Err(anyhow!(
            "account {account} is not in the development genesis (accounts 0..{})",
            dev.accounts
        ));
    }
    Ok(walras_devnet::dev_secret_seed(
        &dev,
        walras_types::AccountId(account),
    ))
}

/// A production build has no development keys.
#[cfg(not(feature = "dev-tools"))]
pub(crate) async fn dev_secret_seed<C: NodeApi>(
    _client: &C,
    _account: u64,
) -> anyhow::Result<[u8; 32]> {
    Err(anyhow!(
        "development keys need the development tools, which this build of walras leaves out: \
         use --key FILE"
    ))
}
