//! The store's genesis: creating a store from the genesis named on the command line (a file or
//! the development genesis), or opening an existing one and refusing to start when the named
//! genesis is not the stored one.

use crate::config::GenesisSource;
use crate::NodeConfig;
use crate::NodeError;
use walras_api::wire::DevGenesisJson;
use walras_crypto::Hash;
use walras_store::{BlockStore, StoreOptions};
use walras_types::{Genesis, GenesisSummary};

/// The key under which the store keeps a development genesis's parameters.
const DEV_GENESIS_META_KEY: &str = "dev_genesis";

pub(crate) fn warn_if_dev(genesis: &GenesisSource) {
    if let GenesisSource::Dev(dev, _) = genesis {
        tracing::warn!(
            "WARNING: --dev: development genesis ({} accounts, {} assets, seed {}); \
             its account keys can be derived by anyone: never hold real value on this chain",
            dev.accounts,
            dev.assets,
            dev.seed
        );
    }
}

/// Opens the store in the data directory, or creates it there from the named genesis if the
/// directory has no `data.mdb`. Returns the store and its development genesis parameters, if
/// it was created from one.
pub(crate) fn open_or_create(
    config: &NodeConfig,
) -> Result<(BlockStore, Option<DevGenesisJson>), NodeError> {
    let dir = &config.data_dir;
    // Checkpoints are written off the block path: the producer drafts them (the accounts and
    // books shared, the changed pieces' ids copied) and goes on.
    let options = StoreOptions {
        checkpoint_in_background: true,
        ..StoreOptions::default()
    };
    let exists = dir.join("data.mdb").exists();
    if !exists && !matches!(config.genesis, GenesisSource::Stored) {
        let (genesis, dev) = named_genesis(&config.genesis, config.threads)?;
        let store = create_store(dir, &genesis, dev.as_ref(), &options)?;
        return Ok((store, dev));
    }
    let store = BlockStore::open_with(dir, &options).map_err(NodeError::storage(format!(
        "opening the store in {}",
        dir.display()
    )))?;
    let stored_dev = stored_dev_genesis(&store)?;
    check_named_genesis(&store, &config.genesis, stored_dev.as_ref())?;
    Ok((store, stored_dev))
}

/// The genesis that `source` names, and its development parameters if it is one.
fn named_genesis(
    source: &GenesisSource,
    threads: usize,
) -> Result<(Genesis, Option<DevGenesisJson>), NodeError> {
    match source {
        GenesisSource::Stored => Err(NodeError::Config(
            "no genesis named: pass --genesis FILE or --dev".into(),
        )),
        GenesisSource::File(path) => Ok((read_genesis_file(path)?, None)),
        GenesisSource::Dev(dev, build) => {
            let genesis = build(dev, threads).map_err(NodeError::DevGenesis)?;
            Ok((genesis, Some(*dev)))
        }
    }
}

/// Creates the store in `dir` with `genesis` (and the development parameters, in the same
/// transaction). Used by `walras init` and by a node started on a directory without a store.
pub fn create_store(
    dir: &std::path::Path,
    genesis: &Genesis,
    dev: Option<&DevGenesisJson>,
    options: &StoreOptions,
) -> Result<BlockStore, NodeError> {
    let dev_json =
        dev.map(serde_json::to_vec)
            .transpose()
            .map_err(|source| NodeError::DevGenesisMeta {
                doing: "encoding dev genesis",
                source,
            })?;
    let app_meta: Vec<(&str, &[u8])> = dev_json
        .as_deref()
        .map(|json| (DEV_GENESIS_META_KEY, json))
        .into_iter()
        .collect();
    let store = BlockStore::create_with(dir, genesis, &app_meta, options).map_err(
        NodeError::storage(format!("creating a store in {}", dir.display())),
    )?;
    tracing::info!(
        "created a new store in {} with genesis {} ({} accounts, {} assets)",
        dir.display(),
        genesis_hash(genesis),
        genesis.accounts.len(),
        genesis.assets
    );
    Ok(store)
}

/// The hash operators compare genesis files by: of the genesis's canonical encoding.
pub fn genesis_hash(genesis: &Genesis) -> walras_crypto::Hash {
    walras_crypto::hash(&genesis.encode())
}

fn stored_dev_genesis(store: &BlockStore) -> Result<Option<DevGenesisJson>, NodeError> {
    let stored = store
        .app_meta(DEV_GENESIS_META_KEY)
        .map_err(NodeError::storage("reading the dev genesis parameters"))?;
    stored
        .map(|bytes| serde_json::from_slice(&bytes))
        .transpose()
        .map_err(|source| NodeError::DevGenesisMeta {
            doing: "decoding the dev genesis parameters",
            source,
        })
}

/// Refuses to start when the genesis named on the command line is not the stored one. The
/// stored genesis is read and hashed only where the answer needs it: a node restarted with
/// the `--dev` parameters it was created with compares those parameters alone (reading and
/// hashing a 10M-account genesis took 8.3 s of such a restart).
fn check_named_genesis(
    store: &BlockStore,
    source: &GenesisSource,
    stored_dev: Option<&DevGenesisJson>,
) -> Result<(), NodeError> {
    let stored_hash = || -> Result<Hash, NodeError> {
        let stored = store
            .genesis()
            .map_err(NodeError::storage("reading the genesis"))?;
        Ok(genesis_hash(&stored))
    };
    let dir = store.dir().to_path_buf();
    match source {
        GenesisSource::Stored => Ok(()),
        GenesisSource::File(path) => {
            let named_hash = genesis_hash(&read_genesis_file(path)?);
            let stored_hash = stored_hash()?;
            if named_hash == stored_hash {
                return Ok(());
            }
            Err(NodeError::GenesisFileMismatch {
                file: path.clone(),
                named_hash: named_hash.to_string(),
                dir,
                stored_hash: stored_hash.to_string(),
            })
        }
        GenesisSource::Dev(dev, _) if stored_dev == Some(dev) => Ok(()),
        GenesisSource::Dev(dev, _) => {
            let held = match stored_dev {
                Some(held) => format!(
                    "the development genesis of {} accounts, {} assets, seed {}",
                    held.accounts, held.assets, held.seed
                ),
                None => "a genesis from a file".into(),
            };
            Err(NodeError::DevGenesisMismatch {
                named: format!(
                    "{} accounts, {} assets, seed {}",
                    dev.accounts, dev.assets, dev.seed
                ),
                dir,
                held,
                stored_hash: stored_hash()?.to_string(),
            })
        }
    }
}

fn read_genesis_file(path: &std::path::Path) -> Result<Genesis, NodeError> {
    let bytes = std::fs::read(path).map_err(|source| NodeError::GenesisRead {
        path: path.to_path_buf(),
        source,
    })?;
    Genesis::decode(&bytes).map_err(|source| NodeError::GenesisDecode {
        path: path.to_path_buf(),
        source,
    })
}

/// `GET /v1/assets`'s answer, from the genesis (`A0`, `A1`, ... when it names no asset).
pub(crate) fn asset_names(genesis: &GenesisSummary) -> walras_api::wire::AssetsJson {
    walras_api::wire::AssetsJson {
        named: !genesis.asset_info.is_empty(),
        quote_asset: 0,
        assets: (0..genesis.assets)
            .map(|asset| walras_api::wire::AssetJson {
                asset,
                symbol: genesis.symbol(asset),
                decimals: genesis
                    .asset_info
                    .get(usize::from(asset))
                    .map_or(0, |info| info.decimals),
            })
            .collect(),
    }
}
