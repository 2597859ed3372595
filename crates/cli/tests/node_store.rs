//! Which chain a data directory holds: a directory with a store file is never re-initialised,
//! a new chain needs a named genesis (`--genesis FILE` or the opt-in `--dev`), a named genesis
//! must be the stored one, and damaged store files are refused with a message instead of a new
//! chain or a SIGBUS.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use walras_testkit::TempDir;

/// How long a refusing node may take to exit; a node that starts serving runs past it.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(30);

/// What a `walras` run did: its exit status (`None`: still running at the timeout, killed),
/// stdout and stderr.
struct Run {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

fn walras(args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_walras"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("walras starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait on walras") {
            break Some(status);
        }
        if started.elapsed() > REFUSAL_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut stdout);
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    Run {
        status,
        stdout,
        stderr,
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

const DEV_ARGS: [&str; 5] = ["--dev", "--dev-accounts", "50", "--dev-assets", "3"];

fn node_args<'a>(data: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["node", "--data", text(data), "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    args
}

fn assert_refused(run: &Run, expected: &str) {
    let status = run.status.unwrap_or_else(|| {
        panic!(
            "the node kept running instead of refusing; stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    });
    assert!(!status.success(), "{}", run.stderr);
    assert!(
        run.stderr.contains(expected),
        "{expected:?} missing from:\n{}",
        run.stderr
    );
    assert!(!run.stdout.contains("listening"), "{}", run.stdout);
}

/// Trigger: a data directory whose `data.mdb` is empty. The node used to take it for a new
/// store, print "new store, generating a development genesis", serve height 0 and overwrite
/// the evidence.
#[test]
fn node_refuses_to_start_on_a_zero_byte_store() {
    let dir = TempDir::new("zero-byte-store");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("data.mdb"), b"").unwrap();
    let run = walras(&node_args(&data, &DEV_ARGS));
    assert_refused(&run, "truncated");
    assert_eq!(std::fs::metadata(data.join("data.mdb")).unwrap().len(), 0);
}

/// Trigger: `walras node --data DIR` on a new directory with neither `--dev` nor `--genesis`.
/// The development genesis (keys anyone can derive) used to be the default.
#[test]
fn node_without_a_named_genesis_refuses_a_directory_without_a_store() {
    let dir = TempDir::new("no-genesis-named");
    let data = dir.path().join("data");
    let run = walras(&node_args(&data, &[]));
    assert_refused(&run, "holds no store");
    assert!(!data.join("data.mdb").exists());
}

/// Trigger: `--genesis FILE` on a store created from another genesis. It used to be ignored
/// silently on an existing store.
#[test]
fn node_refuses_a_genesis_file_that_differs_from_the_stored_genesis_naming_both_hashes() {
    let dir = TempDir::new("genesis-mismatch");
    let data = dir.path().join("data");
    let init = walras(&[
        "init",
        "--data",
        text(&data),
        "--dev",
        "--dev-accounts",
        "50",
    ]);
    assert!(
        init.status.is_some_and(|status| status.success()),
        "{}",
        init.stderr
    );
    let stored_hash = init.stdout.trim().to_string();
    assert_eq!(
        stored_hash.len(),
        64,
        "init prints the genesis hash: {stored_hash:?}"
    );
    let workload = dir.path().join("workload");
    let generated = walras(&[
        "gen",
        "workload",
        "--accounts",
        "20",
        "--assets",
        "3",
        "--blocks",
        "1",
        "--txs-per-block",
        "5",
        "--seed",
        "1",
        "--out",
        text(&workload),
    ]);
    assert!(
        generated.status.is_some_and(|status| status.success()),
        "{}",
        generated.stderr
    );
    let genesis = workload.join("genesis.bin");
    let run = walras(&node_args(&data, &["--genesis", text(&genesis)]));
    assert_refused(&run, "genesis mismatch");
    assert!(run.stderr.contains(&stored_hash), "{}", run.stderr);
    let file_hash = walras(&[
        "init",
        "--data",
        text(&dir.path().join("other")),
        "--genesis",
        text(&genesis),
    ]);
    let file_hash = file_hash.stdout.trim();
    assert_eq!(file_hash.len(), 64);
    assert!(run.stderr.contains(file_hash), "{}", run.stderr);
}

#[test]
fn init_refuses_a_directory_that_already_holds_a_store() {
    let dir = TempDir::new("init-twice");
    let data = dir.path().join("data");
    let first = walras(&[
        "init",
        "--data",
        text(&data),
        "--dev",
        "--dev-accounts",
        "50",
    ]);
    assert!(
        first.status.is_some_and(|status| status.success()),
        "{}",
        first.stderr
    );
    let before = std::fs::read(data.join("data.mdb")).unwrap();
    let second = walras(&[
        "init",
        "--data",
        text(&data),
        "--dev",
        "--dev-accounts",
        "60",
    ]);
    assert_refused(&second, "already holds a store");
    assert_eq!(std::fs::read(data.join("data.mdb")).unwrap(), before);
}

/// A development chain says so on every start, and a restart with other development
/// parameters is refused.
#[test]
fn dev_mode_warns_on_stderr_and_refuses_other_dev_parameters_on_restart() {
    let dir = TempDir::new("dev-warning");
    let data = dir.path().join("data");
    let init = walras(&[
        "init",
        "--data",
        text(&data),
        "--dev",
        "--dev-accounts",
        "50",
        "--dev-assets",
        "3",
    ]);
    assert!(
        init.status.is_some_and(|status| status.success()),
        "{}",
        init.stderr
    );
    assert!(init.stderr.contains("WARNING"), "{}", init.stderr);
    let run = walras(&node_args(
        &data,
        &["--dev", "--dev-accounts", "51", "--dev-assets", "3"],
    ));
    assert_refused(&run, "genesis mismatch");
    assert!(run.stderr.contains("WARNING: --dev"), "{}", run.stderr);
}
