//! `walras gen workload` as a user runs it: the real binary writes a tiny workload, and every
//! file it promises is there and decodes (genesis, each block, faults.csv, workload.json), the
//! counts agree with the blocks, and another thread count gives the same bytes. Bad arguments and
//! a non-empty output directory fail with a message that says what to do, never a panic.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use walras_types::{Genesis, Operation, SignedTransaction};

fn walras(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_walras"))
        .args(args)
        .output()
        .expect("walras runs")
}

/// A fresh, missing directory under the system temp directory.
fn fresh_directory(name: &str) -> PathBuf {
    let directory = std::env::temp_dir()
        .join(format!("walras-gen-workload-{}", std::process::id()))
        .join(name);
    let _ = fs::remove_dir_all(&directory);
    directory
}

fn generate(out: &Path, threads: &str, extra: &[&str]) -> Output {
    let out = out.to_str().expect("utf-8 temp path");
    let mut args = vec![
        "gen",
        "workload",
        "--accounts",
        "60",
        "--assets",
        "3",
        "--blocks",
        "2",
        "--txs-per-block",
        "150",
        "--seed",
        "5",
        "--threads",
        threads,
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    walras(&args)
}

fn assert_succeeded(output: &Output) {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn blocks(out: &Path) -> Vec<Vec<SignedTransaction>> {
    (1..=2)
        .map(|number| {
            let bytes = read(&out.join("blocks").join(format!("{number:06}.bin")));
            SignedTransaction::decode_list(&bytes).expect("block decodes")
        })
        .collect()
}

#[test]
fn writes_a_workload_that_decodes() {
    let out = fresh_directory("decodes");
    let output = generate(&out, "2", &[]);
    assert_succeeded(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("block 2/2 signed"), "progress: {stderr}");

    let genesis = Genesis::decode(&read(&out.join("genesis.bin"))).expect("genesis decodes");
    assert_eq!((genesis.assets, genesis.accounts.len()), (3, 60));
    let blocks = blocks(&out);
    assert!(blocks.iter().all(|block| block.len() == 150));
    assert!(!out.join("blocks").join("000003.bin").exists());

    let faults = fs::read_to_string(out.join("faults.csv")).expect("faults.csv");
    let mut lines = faults.lines();
    assert_eq!(lines.next(), Some("block,index,kind"));
    let mut fault_rows = 0u64;
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 3, "{line}");
        let block: usize = fields[0].parse().expect("block number");
        let index: usize = fields[1].parse().expect("index");
        assert!((1..=2).contains(&block) && index < 150, "{line}");
        fault_rows += 1;
    }

    let summary: serde_json::Value =
        serde_json::from_slice(&read(&out.join("workload.json"))).expect("workload.json");
    assert_eq!(summary["params"]["accounts"], 60);
    assert_eq!(summary["params"]["payments_only"], false);
    let stats = &summary["stats"];
    assert_eq!(stats["transactions"], 300);
    let payments = blocks
        .iter()
        .flatten()
        .filter(|signed| matches!(signed.transaction.operation, Operation::Payment { .. }))
        .count();
    assert_eq!(stats["operations"]["payment"], payments as u64);
    let fault_total: u64 = stats["faults"]
        .as_object()
        .expect("fault counts")
        .values()
        .map(|count| count.as_u64().expect("a count"))
        .sum();
    assert_eq!(fault_total, fault_rows);
}

#[test]
fn any_thread_count_writes_the_same_bytes() {
    let one = fresh_directory("one-thread");
    let three = fresh_directory("three-threads");
    assert_succeeded(&generate(&one, "1", &[]));
    assert_succeeded(&generate(&three, "3", &[]));
    for file in [
        "genesis.bin",
        "faults.csv",
        "workload.json",
        "blocks/000001.bin",
        "blocks/000002.bin",
    ] {
        assert_eq!(read(&one.join(file)), read(&three.join(file)), "{file}");
    }
}

#[test]
fn a_non_empty_directory_needs_force() {
    let out = fresh_directory("force");
    assert_succeeded(&generate(&out, "1", &[]));
    let stale = out.join("blocks").join("000009.bin");
    fs::write(&stale, b"old").expect("write a stale block");
    let refused = generate(&out, "1", &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("not empty") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_succeeded(&generate(&out, "1", &["--force", "--payments-only"]));
    assert!(!stale.exists(), "stale block files are removed");
    assert!(blocks(&out)
        .iter()
        .flatten()
        .all(|signed| matches!(signed.transaction.operation, Operation::Payment { .. })));
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let out = fresh_directory("bad");
    let out = out.to_str().expect("utf-8 temp path");
    let base = |name: &str, value: &str| {
        let mut args = vec![
            "gen",
            "workload",
            "--accounts",
            "60",
            "--assets",
            "3",
            "--blocks",
            "2",
            "--txs-per-block",
            "150",
            "--out",
            out,
        ];
        let at = args
            .iter()
            .position(|arg| *arg == name)
            .expect("known flag");
        args[at + 1] = value;
        walras(&args)
    };
    let cases = [
        ("--accounts", "1", "accounts must be 2..=20000000, got 1"),
        ("--accounts", "x", "invalid value 'x'"),
        ("--assets", "1", "use 2..=1024 assets"),
        ("--assets", "2000", "use 2..=1024 assets"),
        ("--blocks", "0", "blocks must be 1..=100000"),
        ("--txs-per-block", "0", "transactions per block must be"),
        ("--txs-per-block", "5000", "need at least 157 accounts"),
    ];
    for (flag, value, expected) in cases {
        let output = base(flag, value);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flag} {value} succeeded");
        assert!(stderr.contains(expected), "{flag} {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{flag} {value}: {stderr}");
    }
    assert!(
        !Path::new(out).exists(),
        "nothing is created for bad arguments"
    );
}

#[test]
fn a_market_shaped_workload_records_its_spread_and_replays_to_the_manifests_roots() {
    let out = fresh_directory("market");
    assert_succeeded(&generate(&out, "2", &["--spread", "0.1%"]));
    let summary: serde_json::Value =
        serde_json::from_slice(&read(&out.join("workload.json"))).expect("workload.json");
    assert_eq!(summary["params"]["market_spread_ppm"], 1_000);
    let replay = walras(&["replay", out.to_str().expect("utf-8 temp path")]);
    assert_succeeded(&replay);
    assert!(String::from_utf8_lossy(&replay.stderr).contains("state roots match the manifest"));
    // The JSON report says how many tâtonnement iterations each block's clearing took (the
    // clearing phase's time follows them): a number for every block of the batch engine (0
    // when the starting valuations already clear, as they do on these books).
    let replay = walras(&["replay", out.to_str().expect("utf-8 temp path"), "--json"]);
    assert_succeeded(&replay);
    let report: serde_json::Value = serde_json::from_slice(&replay.stdout).expect("replay JSON");
    let iterations: Vec<u64> = report["per_block"]
        .as_array()
        .expect("per_block")
        .iter()
        .map(|block| {
            block["clearing_iterations"]
                .as_u64()
                .expect("a count per block")
        })
        .collect();
    assert_eq!(iterations.len(), 2, "{report}");
    assert!(
        iterations.iter().all(|count| *count <= 5_000),
        "{iterations:?}"
    );
    let refused = generate(&fresh_directory("market-bad"), "1", &["--spread", "30%"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("spread"));
    let _ = fs::remove_dir_all(&out);
}

/// `--asset-names` writes a genesis that names its assets (`"WALRASG3"`), the blocks are the
/// same bytes as without names (names change no state), and a table that breaks a rule is
/// refused before anything is written.
#[test]
fn asset_names_go_into_the_genesis_and_bad_ones_are_refused() {
    let plain = fresh_directory("names-plain");
    assert_succeeded(&generate(&plain, "1", &[]));
    let named = fresh_directory("names");
    assert_succeeded(&generate(
        &named,
        "1",
        &["--asset-names", "USD:2,BTC:8,ETH:18"],
    ));
    let genesis = walras_types::Genesis::decode(&read(&named.join("genesis.bin"))).unwrap();
    assert_eq!(genesis.symbol(1), "BTC");
    assert_eq!(genesis.asset_info[2].decimals, 18);
    assert_eq!(blocks(&plain), blocks(&named));
    for (names, expected) in [
        ("USD:2,BTC:8", "names 2 assets but has 3"),
        ("USD:2,btc:8,ETH:1", "symbol \"btc\""),
        ("USD:2,BTC:8,USD:1", "symbol \"USD\""),
        ("USD:2,BTC:19,ETH:1", "19 decimals"),
        ("USD,BTC:8,ETH:1", "expected SYMBOL:DECIMALS"),
    ] {
        let out = fresh_directory("names-bad");
        let output = generate(&out, "1", &["--asset-names", names]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{names} succeeded");
        assert!(stderr.contains(expected), "{names}: {stderr}");
        assert!(
            !out.join("genesis.bin").exists(),
            "{names}: nothing written"
        );
    }
}
