//! The house rules on dependencies, read from `cargo tree --locked` (the committed lock files,
//! never rewritten by the test; a stale `fuzz/Cargo.lock` fails here with cargo's message, and
//! `cargo tree --manifest-path fuzz/Cargo.toml` refreshes it): the production build of
//! `walras` (`--no-default-features`) links neither the workload generator (`walras-sim`) nor
//! the development keys (`walras-devnet`), and the fuzz targets build without tokio, axum or
//! hyper.

use std::path::Path;
use std::process::Command;

/// The packages `cargo tree` lists for the normal (non-dev) dependencies of `args`.
fn packages(manifest: &Path, args: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .arg("tree")
        .arg("--manifest-path")
        .arg(manifest)
        .args(["-e", "normal", "--prefix", "none", "--locked"])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/rules sits two levels below the workspace root")
}

#[test]
fn the_production_binary_links_no_workload_generator_and_no_development_keys() {
    let manifest = workspace_root().join("Cargo.toml");
    let production = packages(&manifest, &["-p", "walras-cli", "--no-default-features"]);
    assert!(production.iter().any(|name| name == "walras-server"));
    for forbidden in [
        "walras-sim",
        "walras-devnet",
        "walras-loadgen",
        "walras-bench",
    ] {
        assert!(
            !production.iter().any(|name| name == forbidden),
            "the production build links {forbidden}"
        );
    }
    let full = packages(&manifest, &["-p", "walras-cli"]);
    assert!(
        full.iter().any(|name| name == "walras-sim"),
        "the default build has the development tools (the check above can fail)"
    );
}

#[test]
fn the_fuzz_targets_build_without_tokio_or_axum() {
    let manifest = workspace_root().join("fuzz").join("Cargo.toml");
    let fuzz = packages(&manifest, &[]);
    assert!(fuzz.iter().any(|name| name == "walras-api"));
    for forbidden in ["tokio", "axum", "hyper", "reqwest"] {
        assert!(
            !fuzz.iter().any(|name| name == forbidden),
            "the fuzz targets link {forbidden}"
        );
    }
}

/// Every `.rs` file under `dir`, read.
fn sources_under(dir: &Path) -> Vec<String> {
    let mut sources = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                sources.push(std::fs::read_to_string(&path).expect("a readable source"));
            }
        }
    }
    sources
}

/// Issue 30's rule "engine depends on payments only through a narrow certificate-checking
/// interface": every `walras_payments::` path in the engine's sources (comments aside) goes
/// through `walras_payments::bridge`, never into the lane's state machines. Trigger: an engine
/// module importing `walras_payments::bls` or `walras_payments::ValidatorShard` directly.
#[test]
fn the_engine_reaches_payments_only_through_its_bridge_module() {
    let src = workspace_root().join("crates").join("engine").join("src");
    let sources = sources_under(&src);
    assert!(sources.len() >= 10, "engine's sources were not found");
    let found: Vec<String> = sources
        .iter()
        .flat_map(|source| payments_paths_outside_the_bridge(source))
        .collect();
    assert!(
        found.is_empty(),
        "the engine uses walras-payments outside walras_payments::bridge: {found:?}"
    );
}

/// The `walras_payments::…` paths of `source`'s code lines (not comments) that do not start
/// with `walras_payments::bridge::`.
fn payments_paths_outside_the_bridge(source: &str) -> Vec<String> {
    source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| {
            line.match_indices("walras_payments::")
                .map(move |(at, _)| &line[at..])
        })
        .filter(|path| !path.starts_with("walras_payments::bridge::"))
        .map(|path| path.chars().take(60).collect())
        .collect()
}

#[test]
fn the_payments_path_check_sees_a_path_outside_the_bridge() {
    let source = "use walras_payments::bridge::{ChainId};\n// walras_payments::bls in words\n\
                  use walras_payments::bls::BlsError;\nfn f() { walras_payments::deposit_output_id(); }\n";
    let found = payments_paths_outside_the_bridge(source);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("walras_payments::bls::BlsError"));
}
