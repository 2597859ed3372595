//! Command-line input hygiene, as a user meets it through the real binary: `walras clear
//! --fills` never destroys a file it was not told to (its own input, or any existing file
//! without `--force`); `walras replay` refuses a workload whose files do not match its manifest
//! (missing, empty, truncated, duplicated, extra) or whose state roots differ, instead of
//! replaying something else and exiting 0; offers CSV errors stay short and clear.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn walras(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_walras"))
        .args(args)
        .output()
        .expect("walras runs")
}

/// A fresh directory under the system temp directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir()
            .join(format!("walras-cli-checks-{}", std::process::id()))
            .join(name);
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }

    fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_fails_with(output: &Output, expected: &str) {
    let stderr = stderr(output);
    assert!(!output.status.success(), "succeeded; stderr: {stderr}");
    assert!(
        stderr.contains(expected),
        "stderr {stderr:?} lacks {expected:?}"
    );
    assert!(!stderr.contains("panicked"), "panicked: {stderr}");
}

const OFFERS: &str =
    "offer_id,account,sell,buy,amount,min_price\n1,7,0,1,100,1.5\n2,8,1,0,50,0.5\n";

fn clear(offers: &Path, fills: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "clear",
        "--offers",
        text(offers),
        "--assets",
        "2",
        "--fills",
        fills,
    ];
    args.extend_from_slice(extra);
    walras(&args)
}

/// Trigger: `walras clear --offers o.csv --fills o.csv` (or a path that names the same file:
/// `./o.csv`, a symbolic link) overwrote the offers with the fills, even with `--force`.
#[test]
fn clear_never_writes_fills_over_its_own_offers_file() {
    let scratch = Scratch::new("own-input");
    let offers = scratch.file("offers.csv", OFFERS.as_bytes());
    let link = scratch.0.join("link.csv");
    std::os::unix::fs::symlink(&offers, &link).unwrap();
    let dotted = scratch.0.join(".").join("offers.csv");
    for fills in [&offers, &link, &dotted] {
        for extra in [&[][..], &["--force"][..]] {
            let output = clear(&offers, text(fills), extra);
            assert_fails_with(&output, "is the offers file");
            assert_eq!(
                fs::read_to_string(&offers).unwrap(),
                OFFERS,
                "the input is intact"
            );
        }
    }
}

/// Trigger: `--fills` named an existing file, which was silently replaced.
#[test]
fn clear_overwrites_an_existing_fills_file_only_with_force() {
    let scratch = Scratch::new("existing");
    let offers = scratch.file("offers.csv", OFFERS.as_bytes());
    let fills = scratch.file("fills.csv", b"precious\n");
    let output = clear(&offers, text(&fills), &[]);
    assert_fails_with(&output, "exists; add --force");
    assert_eq!(fs::read_to_string(&fills).unwrap(), "precious\n");
    let output = clear(&offers, text(&fills), &["--force"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(fs::read_to_string(&fills)
        .unwrap()
        .starts_with("offer_id,sold,bought\n"));
    let fresh = scratch.0.join("fresh.csv");
    let output = clear(&offers, text(&fresh), &[]);
    assert!(
        output.status.success(),
        "a new file needs no --force: {}",
        stderr(&output)
    );
}

/// A small generated workload (3 blocks) in `dir`.
fn generate(dir: &Path) {
    let output = walras(&[
        "gen",
        "workload",
        "--accounts",
        "60",
        "--assets",
        "3",
        "--blocks",
        "3",
        "--txs-per-block",
        "120",
        "--seed",
        "9",
        "--threads",
        "2",
        "--out",
        text(dir),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
}

fn replay(dir: &Path) -> Output {
    walras(&["replay", text(dir), "--threads", "2", "--json"])
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to.join("blocks")).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
    for entry in fs::read_dir(from.join("blocks")).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, to.join("blocks").join(path.file_name().unwrap())).unwrap();
    }
}

/// Trigger: a workload with a block file missing, emptied, truncated, replaced by a copy of
/// another block, or an extra block file beside them, replayed to a different root and exited 0.
#[test]
fn replay_refuses_a_workload_whose_block_files_do_not_match_its_manifest() {
    let scratch = Scratch::new("replay");
    let good = scratch.0.join("good");
    generate(&good);
    let output = replay(&good);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("all 3 state roots match the manifest"));

    let block = |dir: &Path, number: u32| dir.join("blocks").join(format!("{number:06}.bin"));
    type Damage = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Damage, &str)> = vec![
        (
            "missing",
            Box::new(move |dir: &Path| fs::remove_file(block(dir, 2)).unwrap()),
            "000002.bin (No such file",
        ),
        (
            "empty",
            Box::new(move |dir: &Path| fs::write(block(dir, 2), b"").unwrap()),
            "the file is empty",
        ),
        (
            "truncated",
            Box::new(move |dir: &Path| {
                let bytes = fs::read(block(dir, 3)).unwrap();
                fs::write(block(dir, 3), &bytes[..bytes.len() - 100]).unwrap();
            }),
            "the file is truncated",
        ),
        (
            "duplicated",
            Box::new(move |dir: &Path| {
                // Same size is not guaranteed: pad or cut the copy to the original's size so
                // only the hash can tell.
                let original = fs::read(block(dir, 2)).unwrap();
                let mut copy = fs::read(block(dir, 1)).unwrap();
                copy.resize(original.len(), 0);
                fs::write(block(dir, 2), copy).unwrap();
            }),
            "was changed or replaced",
        ),
        (
            "extra",
            Box::new(move |dir: &Path| {
                fs::copy(block(dir, 1), block(dir, 4)).unwrap();
            }),
            "000004.bin is not listed in manifest.json",
        ),
        (
            "no-manifest",
            Box::new(|dir: &Path| fs::remove_file(dir.join("manifest.json")).unwrap()),
            "replay needs the manifest",
        ),
    ];
    for (name, damage, expected) in cases {
        let dir = scratch.0.join(name);
        copy_dir(&good, &dir);
        damage(&dir);
        let output = replay(&dir);
        assert_fails_with(&output, expected);
        assert!(output.stdout.is_empty(), "{name}: no summary on failure");
    }
}

/// Trigger: an engine that reaches another state root than the one the workload was
/// generated with (here: the manifest's root for block 2 changed) still exited 0.
#[test]
fn replay_fails_when_a_state_root_differs_from_the_manifest() {
    let scratch = Scratch::new("roots");
    let dir = scratch.0.join("workload");
    generate(&dir);
    let path = dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let root = &mut manifest["blocks"][1]["state_root"];
    let flipped = root.as_str().unwrap().replacen(|c: char| c != '0', "0", 1);
    *root = serde_json::Value::String(flipped);
    fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let output = replay(&dir);
    assert_fails_with(&output, "block 2: state root");
    assert!(stderr(&output).contains("differs from the manifest"));
}

/// Trigger: a CSV saved with a UTF-8 byte-order mark was refused with a header message
/// showing a header that looks right; a NUL byte was reported as a bad field; a 20 KB field
/// was echoed whole.
#[test]
fn clear_accepts_a_byte_order_mark_and_keeps_errors_short() {
    let scratch = Scratch::new("csv");
    let bom = scratch.file("bom.csv", format!("\u{feff}{OFFERS}").as_bytes());
    let output = walras(&["clear", "--offers", text(&bom), "--assets", "2", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));

    let nul = scratch.file(
        "nul.csv",
        format!("{OFFERS}3,7,0\u{0},1,100,1.5\n").as_bytes(),
    );
    let output = walras(&["clear", "--offers", text(&nul), "--assets", "2"]);
    assert_fails_with(&output, "line 4: contains a NUL byte");

    let huge = format!("{OFFERS}3,7,0,1,100,{}\n", "7".repeat(20_000));
    let huge = scratch.file("huge.csv", huge.as_bytes());
    let output = walras(&["clear", "--offers", text(&huge), "--assets", "2"]);
    assert_fails_with(&output, "line 4: min_price");
    assert!(
        output.stderr.len() < 600,
        "{} bytes of error: {}",
        output.stderr.len(),
        stderr(&output)
    );
}

/// Trigger: `walras gen offers ... | head -1` printed "error: writing the output: Broken pipe
/// (os error 32)" and exited 1 once `head` closed the pipe, so a shell with `pipefail` failed a
/// pipeline that had done exactly what its user asked.
#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_quietly() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_walras"))
        .args([
            "gen", "offers", "--assets", "5", "--offers", "2000000", "--seed", "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("walras runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a first line");
    assert!(first.starts_with("offer_id,"), "{first:?}");
    // The reader is gone (its end of the pipe dropped above); the writer must notice and stop.
    let output = child.wait_with_output().expect("walras ends");
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
