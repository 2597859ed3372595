//! Durability under SIGKILL (invariant 5): a child process, this test binary re-executed in
//! "writer" mode, recovers the store and appends blocks in a loop, printing `committed <height>
//! <state root>` after each `append` returns. The parent kills it with SIGKILL at a random
//! instant, then recovers the store itself and checks that every height the child reported is
//! stored with the state root it reported, that recovery replays the whole log, and that the
//! next writer continues from the recovered height. The random delays come from a seed printed
//! at the start, so a failing run can be repeated with `WALRAS_STORE_CRASH_SEED`.
//!
//! With a checkpoint interval of one block, every commit writes a checkpoint of the whole
//! state in the same transaction, so most kills land while one is being written: recovery must
//! then start from the last whole checkpoint and lose nothing, apply nothing twice.

mod common;

use common::{config, propose_and_append_with_state, TempDir};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use walras_store::{recover_store_with, BlockStore, StoreOptions};

/// Set in the child: the store directory it writes to.
const WRITER_DIR_VAR: &str = "WALRAS_STORE_CRASH_WRITER_DIR";
const SEED_VAR: &str = "WALRAS_STORE_CRASH_SEED";
/// Set in the child: the checkpoint interval in blocks.
const INTERVAL_VAR: &str = "WALRAS_STORE_CRASH_CHECKPOINT_INTERVAL";
/// Set in the child to `1`: checkpoints written by the store's background thread.
const BACKGROUND_VAR: &str = "WALRAS_STORE_CRASH_CHECKPOINT_BACKGROUND";
/// With background checkpoints, blocks a checkpoint may lag behind its due height: those
/// committed while the previous one was still being written (a few at most here).
const BACKGROUND_LAG_BLOCKS_MAX: u64 = 64;
/// Checkpoints rarely enough that the kills land between them, replaying blocks.
const INTERVAL_RARE_BLOCKS: u64 = 1_000;
/// A writer that is never killed stops by itself after this long (a parent that died).
const WRITER_LIFETIME_MAX: Duration = Duration::from_secs(30);
const KILL_DELAY_MS_MAX: u64 = 150;

#[test]
fn committed_blocks_survive_sigkill_5_times() {
    kill_and_recover("crash5", 5, INTERVAL_RARE_BLOCKS);
}

/// Trigger: SIGKILL while a checkpoint of the state is being written (one with every block).
#[test]
fn a_kill_while_a_checkpoint_is_written_loses_no_block_and_applies_none_twice() {
    kill_and_recover("crash-checkpoint5", 5, 1);
}

/// Trigger: SIGKILL while the background writer seals or writes a checkpoint (one falls due
/// with every block; the block is already committed then): recovery starts from the previous
/// whole checkpoint, loses no block and applies none twice.
#[test]
fn a_kill_while_the_background_writer_writes_a_checkpoint_recovers_from_the_previous_one() {
    kill_and_recover_with("crash-background5", 5, 1, true);
}

#[test]
#[ignore = "slow: 20 kills; run with --ignored"]
fn committed_blocks_survive_sigkill_20_times() {
    kill_and_recover("crash20", 20, INTERVAL_RARE_BLOCKS);
}

#[test]
#[ignore = "slow: 20 kills; run with --ignored"]
fn committed_blocks_survive_sigkill_20_times_while_checkpoints_are_written() {
    kill_and_recover("crash-checkpoint20", 20, 1);
}

/// How a writer (and the parent's recoveries) open the store.
#[derive(Clone, Copy)]
struct Mode {
    interval: u64,
    background: bool,
}

fn options(mode: Mode) -> StoreOptions {
    StoreOptions {
        checkpoint_interval_blocks: mode.interval,
        checkpoint_in_background: mode.background,
        // In the background mode a book snapshot file falls due with every block too, so
        // kills also land while one is written.
        book_snapshot_interval_blocks: if mode.background {
            1
        } else {
            walras_store::DEFAULT_BOOK_SNAPSHOT_INTERVAL_BLOCKS
        },
        // The offer index's batches every third block, so kills land before, in and after
        // the transactions that write them.
        offer_index_flush_blocks: 3,
        ..StoreOptions::default()
    }
}

/// Opens the store and recovers it, checking the recovered state's root against the stored
/// header of its height (so a checkpoint that restored a wrong state cannot pass).
fn recover_checked(dir: &Path, mode: Mode) -> (BlockStore, walras_engine::ExchangeState) {
    let store = BlockStore::open_with(dir, &options(mode)).expect("the store reopens");
    let mut recovery = recover_store_with(&store, &config(), 1, |_, _| {}).expect("recovery");
    assert!(
        recovery.refused_checkpoints.is_empty(),
        "a kill damaged a checkpoint: {:?}",
        recovery.refused_checkpoints
    );
    let lag = if mode.background {
        BACKGROUND_LAG_BLOCKS_MAX
    } else {
        0
    };
    assert!(
        recovery.replayed_blocks < mode.interval + lag,
        "replayed {}",
        recovery.replayed_blocks
    );
    let height = recovery.state.height();
    if height > 0 {
        let entry = store
            .header_entry(height)
            .unwrap()
            .expect("the tip is stored");
        assert_eq!(recovery.state.state_root(1), entry.state_root);
    }
    (store, recovery.state)
}

/// The child's entry point; a no-op in an ordinary test run.
#[test]
fn crash_writer_child() {
    let Some(dir) = std::env::var_os(WRITER_DIR_VAR) else {
        return;
    };
    let dir = Path::new(&dir);
    let interval = std::env::var(INTERVAL_VAR)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(INTERVAL_RARE_BLOCKS);
    let background = std::env::var(BACKGROUND_VAR).is_ok_and(|value| value == "1");
    let (store, mut state) = recover_checked(
        dir,
        Mode {
            interval,
            background,
        },
    );
    // A new line first: the harness has written "test crash_writer_child ... " without one.
    println!("\nready {}", state.height());
    let started = Instant::now();
    while started.elapsed() < WRITER_LIFETIME_MAX {
        let block = propose_and_append_with_state(&store, &mut state);
        println!(
            "committed {} {}",
            block.header.height, block.header.state_root
        );
    }
}

fn kill_and_recover(name: &str, kills: usize, interval: u64) {
    kill_and_recover_with(name, kills, interval, false);
}

/// The parent: `background` makes both the writers and its own recoveries use background
/// checkpoints.
fn kill_and_recover_with(name: &str, kills: usize, interval: u64, background: bool) {
    let mode = Mode {
        interval,
        background,
    };
    let dir = TempDir::new(name);
    drop(common::fresh_store(dir.path()));
    let mut random = Random::from_env();
    let mut committed: Vec<(u64, String)> = Vec::new();
    for _ in 0..kills {
        let delay = Duration::from_millis(random.below(KILL_DELAY_MS_MAX + 1));
        committed.extend(run_writer_then_kill(dir.path(), delay, mode));
        check_recovery(dir.path(), &committed, mode);
    }
    let (store, mut state) = recover_checked(dir.path(), mode);
    let height = state.height();
    let next = propose_and_append_with_state(&store, &mut state);
    assert_eq!(next.header.height, height + 1);
    eprintln!(
        "{kills} kills, {} blocks reported committed",
        committed.len()
    );
}

/// Starts a writer, kills it `delay` after it is ready, and returns what it reported committed.
fn run_writer_then_kill(dir: &Path, delay: Duration, mode: Mode) -> Vec<(u64, String)> {
    let mut child = KillOnDrop(spawn_writer(dir, mode));
    let stdout = child.0.stdout.take().expect("stdout is piped");
    let (ready_sender, ready) = std::sync::mpsc::channel();
    let reader: JoinHandle<Vec<(u64, String)>> = std::thread::spawn(move || {
        let mut committed = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("ready ") {
                let _ = ready_sender.send(());
            }
            committed.extend(parse_committed(&line));
        }
        committed
    });
    ready
        .recv_timeout(Duration::from_secs(20))
        .expect("the writer recovers and reports ready");
    std::thread::sleep(delay);
    child.0.kill().expect("SIGKILL the writer");
    child.0.wait().expect("reap the writer");
    reader.join().expect("the reader thread ends at EOF")
}

fn spawn_writer(dir: &Path, mode: Mode) -> Child {
    Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([
            "crash_writer_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_DIR_VAR, dir)
        .env(INTERVAL_VAR, mode.interval.to_string())
        .env(BACKGROUND_VAR, if mode.background { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the writer")
}

/// `committed <height> <root>`; anything else (the test harness's own lines) is ignored.
fn parse_committed(line: &str) -> Option<(u64, String)> {
    let mut words = line.strip_prefix("committed ")?.split(' ');
    let height = words.next()?.parse().ok()?;
    let root = words.next()?.to_string();
    Some((height, root))
}

fn check_recovery(dir: &Path, committed: &[(u64, String)], mode: Mode) {
    let (store, mut state) = recover_checked(dir, mode);
    let stored_height = store.last_height().unwrap();
    assert_eq!(state.height(), stored_height);
    for (height, root) in committed {
        let entry = store.header_entry(*height).unwrap();
        let entry = entry.unwrap_or_else(|| panic!("reported block {height} is lost"));
        assert_eq!(&entry.state_root.to_string(), root, "block {height}");
    }
    if let Some((height, root)) = committed.last() {
        assert!(stored_height >= *height);
        if stored_height == *height {
            assert_eq!(&state.state_root(1).to_string(), root);
        }
    }
    // After any kill the offer index names exactly the stored blocks: those up to its last
    // batch from its table, the rest derived again from the blocks when the store opened
    // (offer id h is used by block h alone in this workload).
    for height in 1..=stored_height + 1 {
        let expected = if height <= stored_height {
            common::offer_creators_of(height)
        } else {
            Vec::new()
        };
        let indexed = store
            .offer_creators(walras_types::OfferId(height), u64::MAX, usize::MAX)
            .unwrap();
        assert_eq!(indexed, expected, "block {height}'s offers in the index");
    }
    if mode.background {
        check_book_snapshots(dir, &store, stored_height);
    }
    drop(store);
    BlockStore::open(dir).expect("the store reopens cleanly");
}

/// Every book snapshot file a killed writer left is whole and holds the books after its
/// height, as a replay of the stored blocks from genesis gives them (a file cut by a kill
/// would have to be a `.tmp`, never read).
fn check_book_snapshots(dir: &Path, store: &BlockStore, stored_height: u64) {
    let mut heights: Vec<u64> = std::fs::read_dir(dir.join("books"))
        .map(|entries| {
            entries
                .filter_map(|entry| {
                    let name = entry.ok()?.file_name().into_string().ok()?;
                    name.strip_suffix(".books")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    heights.sort_unstable();
    assert!(heights.last().is_none_or(|last| *last <= stored_height));
    let mut replayed = walras_engine::ExchangeState::from_genesis(&common::genesis(), 1).unwrap();
    for height in heights {
        while replayed.height() < height {
            let block = store.block(replayed.height() + 1).unwrap().expect("stored");
            replayed
                .apply(&block, &config())
                .expect("a stored block applies");
        }
        for sell in 0..common::ASSETS {
            for buy in (0..common::ASSETS).filter(|buy| *buy != sell) {
                let pair = walras_types::PairId {
                    sell: walras_types::AssetId(sell),
                    buy: walras_types::AssetId(buy),
                };
                let (at, book) = store.pair_book_before(height + 1, pair).unwrap();
                assert_eq!(at, height, "the snapshot file at {height} is read");
                assert_eq!(
                    book,
                    replayed.book(pair).iter().collect(),
                    "pair {pair:?} at {height}"
                );
            }
        }
    }
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The kill delays' generator (`rand_xoshiro`'s SplitMix64), seeded from the environment or
/// the clock and printed, so a failing run can be repeated.
struct Random(SplitMix64);

impl Random {
    fn from_env() -> Random {
        let seed = std::env::var(SEED_VAR)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(1, |since| since.as_nanos() as u64) | 1
            });
        eprintln!("{SEED_VAR}={seed}");
        Random(SplitMix64::seed_from_u64(seed))
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0.next_u64() % bound
    }
}
