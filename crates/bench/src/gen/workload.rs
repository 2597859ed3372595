//! `walras gen workload`: a genesis and blocks of signed transactions, written to a directory.
//!
//! Layout of `--out DIR`:
//!
//! - `genesis.bin`: [`Genesis::encode`](walras_types::Genesis::encode).
//! - `blocks/000001.bin`, `blocks/000002.bin`, ...: one block each, in the format of
//!   [`SignedTransaction::encode_list`]; block numbers start at 1.
//! - `faults.csv`: `block,index,kind`, one row per injected fault: `block` is the number in the
//!   block's file name, `index` the 0-based position of the transaction in that block.
//! - `workload.json`: the parameters and the counts of operations and faults.
//! - `manifest.json`: the genesis and each block file with its size and BLAKE2b-256 hash, and
//!   the state root after each block, which `walras replay` checks (see
//!   [`crate::cli::replay::manifest`]). Computing the roots executes every block once with the
//!   batch engine, as replay does.
//!
//! Blocks are written as they are generated, so memory holds one block at a time.

use super::super::replay::manifest::{BlockEntry, FileEntry, Manifest, MANIFEST_FORMAT};
use super::super::{args, ToolError};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;
use walras_engine::{EngineConfig, ExchangeState};
use walras_sim::workload::key_pool_size;
use walras_sim::{InjectedFault, WorkloadGenerator, WorkloadParams, WorkloadStats};
use walras_types::genesis::AssetInfo;
use walras_types::SignedTransaction;

#[derive(clap::Args, Debug)]
pub struct GenWorkloadArgs {
    /// Genesis accounts N (2..=20000000)
    #[arg(long)]
    accounts: usize,
    /// Number of assets (2..=1024)
    #[arg(long, value_parser = args::asset_count)]
    assets: usize,
    /// Number of blocks B (1..=100000)
    #[arg(long)]
    blocks: usize,
    /// Transactions per block M (1..=2000000, at most 32 per account)
    #[arg(long)]
    txs_per_block: usize,
    /// Random seed: the same seed gives the same bytes, whatever the thread count
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory; created if missing
    #[arg(long)]
    out: PathBuf,
    /// Only payments (the payments benchmark)
    #[arg(long)]
    payments_only: bool,
    /// Limits symmetric around the valuation ratio with this noise width, as `0.1%` or in ppm
    /// (the `market` model: two-sided books); by default limits sit a little below the ratio
    #[arg(long, value_parser = super::super::market_args::spread_ppm)]
    spread: Option<u32>,
    /// Inject no invalid transactions (by default about 1% are: see faults.csv)
    #[arg(long)]
    no_faults: bool,
    /// Signing threads (default: all cores)
    #[arg(long, value_parser = args::thread_count)]
    threads: Option<usize>,
    /// Write into a non-empty directory, replacing its genesis, blocks, faults, summary and manifest
    #[arg(long)]
    force: bool,
    /// Name the genesis's assets, one SYMBOL:DECIMALS per asset in asset order (`USD:2,BTC:8`;
    /// asset 0 is the unit prices are quoted in). Display only: amounts stay base units
    #[arg(long, value_delimiter = ',', value_parser = asset_name)]
    asset_names: Vec<AssetInfo>,
}

/// `--asset-names` by the genesis's rules, before anything is generated or written.
fn check_asset_names(args: &GenWorkloadArgs) -> Result<(), ToolError> {
    walras_types::Genesis {
        assets: args.assets as u16,
        asset_info: args.asset_names.clone(),
        accounts: Vec::new(),
        payments: None,
    }
    .validate()
    .map_err(|error| ToolError::Input(format!("--asset-names: {error}")))
}

/// One `SYMBOL:DECIMALS` of `--asset-names` (the genesis checks the symbol's rules).
fn asset_name(text: &str) -> Result<AssetInfo, String> {
    let (symbol, decimals) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected SYMBOL:DECIMALS, e.g. BTC:8"))?;
    let decimals = decimals
        .parse::<u8>()
        .map_err(|_| format!("{text:?}: decimals must be a number 0..=18"))?;
    Ok(AssetInfo {
        symbol: symbol.to_string(),
        decimals,
    })
}

/// The directory for block files inside `--out`.
const BLOCKS_DIR: &str = "blocks";

pub(super) fn run(args: GenWorkloadArgs) -> Result<(), ToolError> {
    let params = WorkloadParams {
        accounts: args.accounts,
        assets: args.assets,
        blocks: args.blocks,
        txs_per_block: args.txs_per_block,
        seed: args.seed,
        payments_only: args.payments_only,
        faults: !args.no_faults,
        market_spread_ppm: args.spread,
    };
    params.validate()?;
    check_asset_names(&args)?;
    let threads = args.threads.unwrap_or_else(default_threads);
    prepare_directory(&args.out, args.force)?;
    let started = Instant::now();
    let mut generator = WorkloadGenerator::new(&params, threads)?;
    let mut genesis = generator.genesis().clone();
    genesis.asset_info = args.asset_names.clone();
    let genesis_bytes = genesis.encode();
    write_file(&args.out.join("genesis.bin"), &genesis_bytes)?;
    // The state the manifest's roots come from: replay's default engine configuration.
    let engine = EngineConfig {
        threads,
        verify_signatures: true,
        ..EngineConfig::default()
    };
    let mut state = ExchangeState::from_genesis(generator.genesis(), threads)?;
    let mut manifest = Manifest {
        format: MANIFEST_FORMAT,
        genesis: FileEntry::describe("genesis.bin".into(), &genesis_bytes),
        block_count: 0,
        blocks: Vec::with_capacity(params.blocks),
    };
    eprintln!(
        "genesis: {} accounts, {} assets ({:.1} s)",
        params.accounts,
        params.assets,
        started.elapsed().as_secs_f64()
    );
    let mut faults = Vec::new();
    while let Some(block) = generator.next_block(threads) {
        let number = block.number + 1;
        let file = format!("{BLOCKS_DIR}/{}", block_file_name(number));
        let bytes = SignedTransaction::encode_list(&block.transactions);
        write_file(&args.out.join(&file), &bytes)?;
        let transactions = block.transactions.len();
        let (proposed, _) = state
            .propose(block.transactions, &engine)
            .map_err(|source| ToolError::Block {
                block: format!("executing block {number}"),
                source,
            })?;
        manifest.blocks.push(BlockEntry {
            file: FileEntry::describe(file, &bytes),
            transactions,
            state_root: proposed.header.state_root.to_string(),
        });
        faults.extend(block.faults);
        eprintln!(
            "block {number}/{} signed ({:.1} s)",
            params.blocks,
            started.elapsed().as_secs_f64()
        );
    }
    write_file(&args.out.join("faults.csv"), faults_csv(&faults).as_bytes())?;
    let summary = summary_json(&params, generator.stats());
    let summary = serde_json::to_string_pretty(&summary)?;
    write_file(&args.out.join("workload.json"), summary.as_bytes())?;
    manifest.block_count = manifest.blocks.len();
    manifest.write(&args.out)?;
    eprintln!(
        "wrote {} in {:.1} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |count| count.get())
}

/// Creates `directory` (and its `blocks/`) if missing. A non-empty one is refused unless
/// `force`, in which case its old `blocks/` is removed so no stale block files remain.
fn prepare_directory(directory: &Path, force: bool) -> Result<(), ToolError> {
    let shown = directory.display();
    if directory.exists() {
        if !directory.is_dir() {
            return Err(ToolError::Refused(format!(
                "{shown} exists and is not a directory"
            )));
        }
        let mut entries =
            fs::read_dir(directory).map_err(ToolError::io(format!("cannot read {shown}")))?;
        if entries.next().is_some() {
            if !force {
                return Err(ToolError::Refused(format!(
                    "{shown} is not empty; choose another --out or add --force to replace \
                     the workload in it"
                )));
            }
            remove_old_blocks(&directory.join(BLOCKS_DIR))?;
        }
    }
    let blocks = directory.join(BLOCKS_DIR);
    fs::create_dir_all(&blocks)
        .map_err(ToolError::io(format!("cannot create {}", blocks.display())))
}

fn remove_old_blocks(blocks: &Path) -> Result<(), ToolError> {
    if !blocks.exists() {
        return Ok(());
    }
    fs::remove_dir_all(blocks).map_err(ToolError::io(format!("cannot remove {}", blocks.display())))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    fs::write(path, bytes).map_err(ToolError::io(format!("cannot write {}", path.display())))
}

/// `000001.bin` for block 1: six digits cover the most blocks a workload may have.
fn block_file_name(number: usize) -> String {
    format!("{number:06}.bin")
}

/// `block,index,kind` rows; `block` is 1-based like the file names.
fn faults_csv(faults: &[InjectedFault]) -> String {
    let mut csv = String::from("block,index,kind\n");
    for fault in faults {
        csv.push_str(&format!(
            "{},{},{}\n",
            fault.block + 1,
            fault.index,
            fault.kind
        ));
    }
    csv
}

/// The parameters and counts; nothing that depends on the thread count, so that the whole
/// directory is the same bytes for any `--threads`.
fn summary_json(params: &WorkloadParams, stats: &WorkloadStats) -> Value {
    let operations = stats.operations;
    let faults = stats.faults;
    json!({
        "params": {
            "accounts": params.accounts,
            "assets": params.assets,
            "blocks": params.blocks,
            "txs_per_block": params.txs_per_block,
            "seed": params.seed,
            "payments_only": params.payments_only,
            "faults": params.faults,
            "market_spread_ppm": params.market_spread_ppm,
        },
        "key_pool": key_pool_size(params.accounts),
        "stats": {
            "transactions": stats.transactions,
            "operations": {
                "create_offer": operations.create_offer,
                "cancel_offer": operations.cancel_offer,
                "payment": operations.payment,
                "create_account": operations.create_account,
            },
            "faults": {
                "overdraft": faults.overdraft,
                "reused_sequence": faults.reused_sequence,
                "bad_signature": faults.bad_signature,
                "double_cancel": faults.double_cancel,
                "duplicate_account_creation": faults.duplicate_account_creation,
            },
            "accounts_created": stats.accounts_created,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_sim::FaultKind;

    #[test]
    fn fault_rows_number_blocks_like_the_files() {
        let faults = [InjectedFault {
            block: 0,
            index: 7,
            kind: FaultKind::DoubleCancel,
        }];
        assert_eq!(faults_csv(&faults), "block,index,kind\n1,7,double_cancel\n");
        assert_eq!(block_file_name(1), "000001.bin");
        assert_eq!(block_file_name(100_000), "100000.bin");
    }
}
