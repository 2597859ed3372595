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
