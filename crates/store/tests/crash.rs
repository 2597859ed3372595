//! Durability under SIGKILL (invariant 5): a child process, this test binary re-executed in
//! "writer" mode, recovers the store and appends blocks in a loop, printing `committed <height>
//! <state root>` after each `append` returns. The parent kills it with SIGKILL at a random
//! instant, then recovers the store itself and checks that every height the child reported is
//! stored with the state root it reported, that recovery replays the whole log, and that the
//! next writer continues from the recovered height. The random delays come from a seed printed
//! at the start, so a failing run can be repeated with `WALRAS_STORE_CRASH_SEED`.

mod common;

use common::{config, propose_and_append, TempDir};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use walras_store::{recover, BlockStore};

/// Set in the child: the store directory it writes to.
const WRITER_DIR_VAR: &str = "WALRAS_STORE_CRASH_WRITER_DIR";
const SEED_VAR: &str = "WALRAS_STORE_CRASH_SEED";
/// A writer that is never killed stops by itself after this long (a parent that died).
const WRITER_LIFETIME_MAX: Duration = Duration::from_secs(30);
const KILL_DELAY_MS_MAX: u64 = 150;

#[test]
fn committed_blocks_survive_sigkill_5_times() {
    kill_and_recover("crash5", 5);
}

#[test]
#[ignore = "slow: 20 kills; run with --ignored"]
fn committed_blocks_survive_sigkill_20_times() {
    kill_and_recover("crash20", 20);
}

/// The child's entry point; a no-op in an ordinary test run.
#[test]
fn crash_writer_child() {
    let Some(dir) = std::env::var_os(WRITER_DIR_VAR) else {
        return;
    };
    let dir = Path::new(&dir);
    // Idempotent: lets the writer also start on a new directory.
    common::fresh_store(dir);
    let (store, mut state) = recover(dir, &config(), 1).expect("writer recovers");
    // A new line first: the harness has written "test crash_writer_child ... " without one.
    println!("\nready {}", state.height());
    let started = Instant::now();
    while started.elapsed() < WRITER_LIFETIME_MAX {
        let block = propose_and_append(&store, &mut state);
        println!(
            "committed {} {}",
            block.header.height, block.header.state_root
        );
    }
}

fn kill_and_recover(name: &str, kills: usize) {
    let dir = TempDir::new(name);
    common::fresh_store(dir.path());
    let mut random = Random::from_env();
    let mut committed: Vec<(u64, String)> = Vec::new();
    for _ in 0..kills {
        let delay = Duration::from_millis(random.below(KILL_DELAY_MS_MAX + 1));
        committed.extend(run_writer_then_kill(dir.path(), delay));
        check_recovery(dir.path(), &committed);
    }
    let (store, mut state) = recover(dir.path(), &config(), 1).unwrap();
    let height = state.height();
    let next = propose_and_append(&store, &mut state);
    assert_eq!(next.header.height, height + 1);
    eprintln!(
        "{kills} kills, {} blocks reported committed",
        committed.len()
    );
}

/// Starts a writer, kills it `delay` after it is ready, and returns what it reported committed.
fn run_writer_then_kill(dir: &Path, delay: Duration) -> Vec<(u64, String)> {
    let mut child = KillOnDrop(spawn_writer(dir));
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

fn spawn_writer(dir: &Path) -> Child {
    Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([
            "crash_writer_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_DIR_VAR, dir)
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

fn check_recovery(dir: &Path, committed: &[(u64, String)]) {
    let (store, mut state) = recover(dir, &config(), 1).expect("recovery after SIGKILL");
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
    drop(store);
    BlockStore::open(dir).expect("the store reopens cleanly");
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// xorshift64: delays only, so no dependency for it.
struct Random(u64);

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
        Random(seed)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}
