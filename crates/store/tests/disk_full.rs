//! A full disk is reported as a full disk, and everything committed before it is kept.
//!
//! The store lives on a 2 MiB tmpfs, mounted in a private mount namespace (`unshare -Urm`, so
//! no root is needed where user namespaces are allowed). A child process, this test binary
//! re-executed inside the namespace, appends blocks (a checkpoint with each, so the disk fills
//! fast) until a write fails, then reopens the store, recovers it and reports what it saw; the
//! tmpfs disappears with the namespace, so every check that needs the files runs in the child.

mod common;

use common::{config, fresh_store_with, TempDir};
use std::path::Path;
use std::process::Command;
use walras_store::{recover_store_with, BlockStore, StoreError, StoreOptions};

const CHILD_DIR_VAR: &str = "WALRAS_STORE_DISK_FULL_DIR";
const TMPFS_SIZE: &str = "2m";
/// Far more blocks than fit in the tmpfs: the loop ends on the write error.
const BLOCKS_MAX: u64 = 100_000;

fn options() -> StoreOptions {
    StoreOptions {
        checkpoint_interval_blocks: 1,
        ..StoreOptions::default()
    }
}

/// Trigger: the disk holding the store fills up during a commit. It used to be reported as
/// "Input/output error (os error 5)" (LMDB's code for a short write).
#[test]
#[ignore = "needs user namespaces (unshare -Urm) to mount a small tmpfs; run with --ignored"]
fn a_full_disk_is_reported_as_full_and_committed_blocks_are_kept() {
    let mount = TempDir::new("disk-full");
    std::fs::create_dir_all(mount.path()).unwrap();
    let script = format!(
        "mount -t tmpfs -o size={TMPFS_SIZE} tmpfs \"$1\" && exec \"$2\" disk_full_child --exact --nocapture --test-threads=1"
    );
    let output = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &script, "sh"])
        .arg(mount.path())
        .arg(std::env::current_exe().unwrap())
        .env(CHILD_DIR_VAR, mount.path().join("store"))
        .output()
        .expect("unshare runs (util-linux)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let line = |prefix: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{stdout}\n{stderr}"))
            .to_string()
    };
    let error = line("error: ");
    assert!(error.contains("is full"), "{error}");
    assert!(!error.contains("Input/output error"), "{error}");
    let committed: u64 = line("committed: ").parse().unwrap();
    let recovered: u64 = line("recovered: ").parse().unwrap();
    assert!(committed > 0, "the tmpfs should hold some blocks");
    assert_eq!(
        recovered, committed,
        "every committed block is kept, none more"
    );
}

/// The child's entry point; a no-op in an ordinary test run.
#[test]
fn disk_full_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_VAR) else {
        return;
    };
    let dir = Path::new(&dir);
    let (store, mut state) = fresh_store_with(dir, &options());
    let mut committed = 0;
    let error = loop {
        assert!(committed < BLOCKS_MAX, "the disk never filled");
        let height = state.height() + 1;
        let (block, outcome) = state
            .propose(common::transactions(height), &config())
            .unwrap();
        match store.append_with_state(&block, &outcome.dropped, &state) {
            Ok(()) => committed = height,
            Err(error) => break error,
        }
    };
    println!("\nerror: {error}");
    assert!(matches!(error, StoreError::DiskFull { .. }), "{error:?}");
    println!("committed: {committed}");
    drop(store);
    let store = BlockStore::open_with(dir, &options()).expect("the store reopens");
    let recovery = recover_store_with(&store, &config(), 1, |_, _| {}).expect("it recovers");
    println!("recovered: {}", recovery.state.height());
}
