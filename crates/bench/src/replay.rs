//! `walras replay DIR`: executes a generated workload's blocks and reports throughput.
//!
//! Reads `DIR/manifest.json`, then the genesis and the block files it lists (see `walras gen
//! workload`), each checked against the manifest's size and BLAKE2b-256 hash, and refuses block
//! files it does not list; decodes everything first (not timed), then proposes and applies each
//! block with the batch engine, printing per block the time, tx/s and state root on stderr and,
//! at the end, one JSON object on stdout. Each state root is compared with the manifest's
//! (batch engine with signature verification: the configuration the manifest was made with);
//! a mismatch is an error.

pub mod manifest;
pub mod resting;

use super::{args, ToolError};
use crate::orderbook::OrderbookExchange;
use manifest::Manifest;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;
use walras_engine::{EngineConfig, ExchangeState};
use walras_types::genesis::Genesis;
use walras_types::SignedTransaction;

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Workload directory written by `walras gen workload`
    dir: PathBuf,
    /// Worker threads for every parallel phase
    #[arg(long, default_value = "1", value_parser = args::thread_count)]
    threads: usize,
    /// Skip signature verification (to measure the rest)
    #[arg(long)]
    no_verify_signatures: bool,
    /// Shuffle each block's transactions with this seed first: a block is a set, so the state
    /// roots must not change
    #[arg(long)]
    shuffle: Option<u64>,
    /// batch: the SPEEDEX engine; orderbook: the serial price-time-priority baseline (§7.1),
    /// executing each block's transactions one by one in file order
    #[arg(long, value_enum, default_value = "batch")]
    engine: EngineKind,
    /// Print the summary as JSON (it always goes to stdout; per-block lines go to stderr)
    #[arg(long)]
    json: bool,
    /// Start from the genesis with this many resting offers already open (batch engine): a
    /// large state without executing millions of transactions. The offers are far above any
    /// valuation ratio of the workload (limits 1e3 to 1e6), so they rest; the state roots then
    /// differ from the manifest's by design and are not compared
    #[arg(long, default_value = "0")]
    resting_offers: u64,
    /// After the last block, time a checkpoint of the final state: the copy a node makes on its
    /// block path, the checksum and the load a restart does (decode, tries, state root)
    #[arg(long)]
    time_checkpoint: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum EngineKind {
    Batch,
    Orderbook,
}

#[derive(Serialize)]
struct BlockReport {
    height: u64,
    transactions: usize,
    accepted: usize,
    dropped: usize,
    millis: f64,
    tx_per_s: f64,
    converged: bool,
    /// Tâtonnement iterations of the instance whose prices cleared the block (batch engine;
    /// none when nothing could trade): the clearing phase's time follows them, not the threads.
    clearing_iterations: Option<u64>,
    state_root: String,
    phases_millis: [f64; 6],
    /// CPU time of the whole process (all threads) over the block, in milliseconds: on a
    /// shared machine a steadier measure of the block's work than wall time.
    cpu_millis: f64,
    /// Open offers and accounts after the block.
    open_offers: usize,
    accounts: usize,
    /// Dropped transactions per reason (batch engine).
    dropped_by_reason: std::collections::BTreeMap<&'static str, usize>,
}

#[derive(Serialize)]
struct ReplayReport {
    engine: &'static str,
    threads: usize,
    verify_signatures: bool,
    accounts: usize,
    blocks: usize,
    transactions: usize,
    accepted: usize,
    millis: f64,
    tx_per_s: f64,
    /// Median over the blocks after the first (which warms up the books).
    steady_tx_per_s_median: f64,
    /// Offers open before block 1 (`--resting-offers`).
    resting_offers: u64,
    state_root: String,
    per_block: Vec<BlockReport>,
}

pub fn run(args: ReplayArgs) -> Result<(), ToolError> {
    let manifest = Manifest::read(&args.dir)?;
    let genesis = read_genesis(&args.dir, &manifest)?;
    let mut blocks = read_blocks(&args.dir, &manifest)?;
    if let Some(seed) = args.shuffle {
        for (number, block) in blocks.iter_mut().enumerate() {
            shuffle(
                block,
                seed ^ (number as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
        }
    }
    let per_block = match args.engine {
        EngineKind::Batch => {
            let per_block = replay_batch(&args, &genesis, blocks)?;
            check_roots(&args, &manifest, &per_block)?;
            per_block
        }
        EngineKind::Orderbook if args.resting_offers > 0 => {
            return Err(ToolError::Input(
                "--resting-offers needs the batch engine".into(),
            ))
        }
        EngineKind::Orderbook => {
            eprintln!("state roots not compared: the order-book baseline computes none");
            replay_orderbook(&args, &genesis, &blocks)?
        }
    };
    let summary = summarize(&args, genesis.accounts.len(), per_block);
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "{} blocks, {} transactions ({} accepted) in {:.1} ms: {:.0} tx/s overall, {:.0} tx/s \
             median of steady blocks; state root {}",
            summary.blocks,
            summary.transactions,
            summary.accepted,
            summary.millis,
            summary.tx_per_s,
            summary.steady_tx_per_s_median,
            summary.state_root
        );
    }
    Ok(())
}

fn replay_orderbook(
    args: &ReplayArgs,
    genesis: &Genesis,
    blocks: &[Vec<SignedTransaction>],
) -> Result<Vec<BlockReport>, ToolError> {
    let mut exchange = OrderbookExchange::from_genesis(genesis)?;
    let mut per_block = Vec::with_capacity(blocks.len());
    for (number, transactions) in blocks.iter().enumerate() {
        let started = Instant::now();
        let stats = exchange.execute_block(transactions, !args.no_verify_signatures);
        let seconds = started.elapsed().as_secs_f64();
        let report = BlockReport {
            height: number as u64 + 1,
            transactions: transactions.len(),
            accepted: stats.accepted,
            dropped: stats.rejected,
            millis: seconds * 1e3,
            tx_per_s: transactions.len() as f64 / seconds,
            converged: true,
            clearing_iterations: None,
            state_root: String::new(),
            phases_millis: [0.0; 6],
            cpu_millis: 0.0,
            open_offers: 0,
            accounts: 0,
            dropped_by_reason: Default::default(),
        };
        eprintln!(
            "block {:>4}: {:>7} txs ({:>7} accepted, {:>6} trades) in {:>8.1} ms = {:>9.0} tx/s",
            report.height,
            report.transactions,
            report.accepted,
            stats.trades,
            report.millis,
            report.tx_per_s
        );
        per_block.push(report);
    }
    Ok(per_block)
}

fn replay_batch(
    args: &ReplayArgs,
    genesis: &Genesis,
    blocks: Vec<Vec<SignedTransaction>>,
) -> Result<Vec<BlockReport>, ToolError> {
    let config = EngineConfig {
        threads: args.threads,
        verify_signatures: !args.no_verify_signatures,
        ..EngineConfig::default()
    };
    let mut state = starting_state(args, genesis)?;
    let mut per_block = Vec::with_capacity(blocks.len());
    for (number, transactions) in blocks.into_iter().enumerate() {
        let count = transactions.len();
        let cpu_started = cpu_time_ms();
        let started = Instant::now();
        let (block, outcome) =
            state
                .propose(transactions, &config)
                .map_err(|source| ToolError::Block {
                    block: format!("block {}", number + 1),
                    source,
                })?;
        let seconds = started.elapsed().as_secs_f64();
        let cpu_millis = cpu_time_ms() - cpu_started;
        let timings = outcome.timings;
        let report = BlockReport {
            height: block.header.height,
            transactions: count,
            accepted: outcome.accepted,
            dropped: outcome.dropped.len(),
            millis: seconds * 1e3,
            tx_per_s: count as f64 / seconds,
            converged: outcome.converged,
            clearing_iterations: outcome.clearing.as_ref().map(|report| report.iterations),
            state_root: block.header.state_root.to_string(),
            cpu_millis,
            open_offers: state.open_offer_count(),
            accounts: state.account_count(),
            dropped_by_reason: outcome.dropped.iter().fold(
                Default::default(),
                |mut counts, (_, reason)| {
                    *counts.entry(reason.name()).or_insert(0) += 1;
                    counts
                },
            ),
            phases_millis: [
                timings.signatures,
                timings.filter,
                timings.plan,
                timings.clearing,
                timings.apply,
                timings.commit,
            ],
        };
        eprintln!(
            "block {:>4}: {:>7} txs ({:>7} accepted) in {:>8.1} ms = {:>9.0} tx/s  root {}  \
             cpu {:.0} ms = {:.2} us/tx  offers {} accounts {}  \
             [sig {:.0} filter {:.0} plan {:.0} clear {:.0} apply {:.0} commit {:.0} ms]  \
             clearing iterations {}",
            report.height,
            report.transactions,
            report.accepted,
            report.millis,
            report.tx_per_s,
            &report.state_root[..16],
            report.cpu_millis,
            report.cpu_millis * 1e3 / report.transactions.max(1) as f64,
            report.open_offers,
            report.accounts,
            timings.signatures,
            timings.filter,
            timings.plan,
            timings.clearing,
            timings.apply,
            timings.commit,
            report
                .clearing_iterations
                .map_or_else(|| "-".to_string(), |iterations| iterations.to_string())
        );
        per_block.push(report);
    }
    if args.time_checkpoint {
        time_checkpoint(&mut state, args.threads)?;
    }
    Ok(per_block)
}

/// Times a checkpoint of `state` and a restart's load of it (see `--time-checkpoint`).
fn time_checkpoint(state: &mut ExchangeState, threads: usize) -> Result<(), ToolError> {
    let started = Instant::now();
    let mut bytes = state.encode_checkpoint_unsealed();
    let copy_ms = started.elapsed().as_secs_f64() * 1e3;
    // What a node's block path does instead (a whole draft: no checkpoint file to copy
    // accounts from), and what its writer thread then does.
    let started = Instant::now();
    let draft = state.draft_checkpoint(None);
    let draft_ms = started.elapsed().as_secs_f64() * 1e3;
    let shared = draft.books_shared();
    let started = Instant::now();
    let (assembled, _) = draft.assemble(None).map_err(|error| {
        ToolError::Verification(format!("the draft does not assemble: {error}"))
    })?;
    let assemble_ms = started.elapsed().as_secs_f64() * 1e3;
    if assembled != bytes {
        return Err(ToolError::Verification(
            "the assembled draft differs from the whole checkpoint".into(),
        ));
    }
    drop((draft, assembled));
    let started = Instant::now();
    walras_engine::seal_checkpoint(&mut bytes);
    let seal_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let (mut loaded, parts) = ExchangeState::decode_checkpoint_timed(&bytes, threads)
        .map_err(|error| ToolError::Verification(format!("checkpoint does not load: {error}")))?;
    let rooting = Instant::now();
    let root = loaded.state_root(threads);
    let root_ms = rooting.elapsed().as_secs_f64() * 1e3;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    if root != state.state_root(threads) {
        return Err(ToolError::Verification(
            "the loaded checkpoint has another state root".into(),
        ));
    }
    eprintln!(
        "checkpoint of {} accounts and {} open offers: {} bytes; whole copy (what a block path held before drafts) {:.0} ms, \
         checksum {:.0} ms, load with tries and state root {:.0} ms (threads {threads})",
        state.account_count(),
        state.open_offer_count(),
        bytes.len(),
        copy_ms,
        seal_ms,
        load_ms
    );
    eprintln!(
        "load by part, ms: checksum {:.0}, decode accounts {:.0}, decode offers and their tries {:.0}, \
         account trie {:.0}, state root (hashing) {:.0}",
        parts.checksum_ms,
        parts.decode_accounts_ms,
        parts.decode_offers_ms,
        parts.account_trie_ms,
        root_ms
    );
    eprintln!(
        "a node's draft of it: {draft_ms:.0} ms on the block path (every account, as with no \
         earlier checkpoint file; open offers {}), assembled in {assemble_ms:.0} ms off it",
        if shared {
            "shared, encoded when assembled"
        } else {
            "copied"
        }
    );
    Ok(())
}

/// The genesis state, with `--resting-offers` open on its books.
fn starting_state(args: &ReplayArgs, genesis: &Genesis) -> Result<ExchangeState, ToolError> {
    if args.resting_offers == 0 {
        return Ok(ExchangeState::from_genesis(genesis, args.threads)?);
    }
    let started = Instant::now();
    let offers = resting::offers(genesis, args.resting_offers)?;
    let state = ExchangeState::from_genesis_with_resting_offers(genesis, offers, args.threads)?;
    eprintln!(
        "{} resting offers open before block 1 (built in {:.1} s)",
        state.open_offer_count(),
        started.elapsed().as_secs_f64()
    );
    Ok(state)
}

/// CPU time of this process so far (user and system, all threads), in milliseconds.
fn cpu_time_ms() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |usage| {
        let ms = |time: nix::sys::time::TimeVal| {
            time.tv_sec() as f64 * 1e3 + time.tv_usec() as f64 / 1e3
        };
        ms(usage.user_time()) + ms(usage.system_time())
    })
}

fn summarize(args: &ReplayArgs, accounts: usize, per_block: Vec<BlockReport>) -> ReplayReport {
    let transactions: usize = per_block.iter().map(|block| block.transactions).sum();
    let accepted: usize = per_block.iter().map(|block| block.accepted).sum();
    let millis: f64 = per_block.iter().map(|block| block.millis).sum();
    let mut steady: Vec<f64> = per_block
        .iter()
        .skip(1)
        .map(|block| block.tx_per_s)
        .collect();
    if steady.is_empty() {
        steady = per_block.iter().map(|block| block.tx_per_s).collect();
    }
    steady.sort_by(f64::total_cmp);
    ReplayReport {
        engine: match args.engine {
            EngineKind::Batch => "batch",
            EngineKind::Orderbook => "orderbook",
        },
        threads: args.threads,
        verify_signatures: !args.no_verify_signatures,
        accounts,
        blocks: per_block.len(),
        transactions,
        accepted,
        millis,
        tx_per_s: transactions as f64 / (millis / 1e3).max(1e-9),
        steady_tx_per_s_median: steady.get(steady.len() / 2).copied().unwrap_or(0.0),
        resting_offers: args.resting_offers,
        state_root: per_block
            .last()
            .map_or_else(String::new, |block| block.state_root.clone()),
        per_block,
    }
}

/// Fisher–Yates with `walras_sim`'s generator (xoshiro256**): reproducible for a seed.
fn shuffle<T>(items: &mut [T], seed: u64) {
    walras_sim::Rng::new(seed).shuffle(items);
}

/// Compares the state roots with the manifest's, where they are comparable: the manifest's were
/// computed with signature verification, which decides which bad-signature faults drop.
fn check_roots(
    args: &ReplayArgs,
    manifest: &Manifest,
    per_block: &[BlockReport],
) -> Result<(), ToolError> {
    if args.resting_offers > 0 {
        eprintln!(
            "state roots not compared with the manifest: the resting offers are part of the \
             state, so the roots differ by design"
        );
        return Ok(());
    }
    if args.no_verify_signatures {
        eprintln!(
            "state roots not compared with the manifest: --no-verify-signatures accepts the \
             bad signatures the workload injects, so the roots differ by design"
        );
        return Ok(());
    }
    for (report, expected) in per_block.iter().zip(&manifest.blocks) {
        if report.state_root != expected.state_root {
            return Err(ToolError::Verification(format!(
                "block {}: state root {} differs from the manifest's {}: this engine does not \
                 reproduce the workload's chain",
                report.height, report.state_root, expected.state_root
            )));
        }
    }
    eprintln!("all {} state roots match the manifest", per_block.len());
    Ok(())
}

fn read_genesis(dir: &Path, manifest: &Manifest) -> Result<Genesis, ToolError> {
    let bytes = manifest.genesis.read_checked(dir)?;
    Genesis::decode(&bytes).map_err(|error| {
        ToolError::Input(format!(
            "{}: {error}",
            dir.join(&manifest.genesis.file).display()
        ))
    })
}

/// The blocks the manifest lists, each checked; refuses block files it does not list.
fn read_blocks(dir: &Path, manifest: &Manifest) -> Result<Vec<Vec<SignedTransaction>>, ToolError> {
    manifest.check_no_extra_blocks(dir, &dir.join("blocks"))?;
    manifest
        .blocks
        .iter()
        .map(|block| {
            let bytes = block.file.read_checked(dir)?;
            let path = dir.join(&block.file.file);
            let transactions = SignedTransaction::decode_list(&bytes)
                .map_err(|error| ToolError::Input(format!("{}: {error}", path.display())))?;
            if transactions.len() != block.transactions {
                return Err(ToolError::Input(format!(
                    "{}: {} transactions but {} says {}",
                    path.display(),
                    transactions.len(),
                    manifest::MANIFEST_FILE,
                    block.transactions
                )));
            }
            Ok(transactions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::shuffle;

    #[test]
    fn a_shuffle_is_a_permutation_fixed_by_its_seed() {
        let original: Vec<u32> = (0..1_000).collect();
        let (mut one, mut again, mut other) =
            (original.clone(), original.clone(), original.clone());
        shuffle(&mut one, 7);
        shuffle(&mut again, 7);
        shuffle(&mut other, 8);
        assert_eq!(one, again, "the same seed, the same order");
        assert_ne!(one, other, "another seed, another order");
        assert_ne!(one, original, "it moves something");
        one.sort_unstable();
        assert_eq!(one, original, "nothing lost or repeated");
    }
}
