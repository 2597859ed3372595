//! The Python package (`python/`) as a user gets it: a fresh virtual environment,
//! `pip install "./python[test,examples]"` (maturin builds the extension from the workspace's
//! crates), then its pytest suite, which compares results with this build's `walras` binary
//! and drives a `walras node --dev` it starts. A failure shows pytest's (or pip's) output.
//!
//! Needs `python3` (3.9 or newer, with `venv`) and PyPI. The extension is built once per run
//! with the dev profile into `target/python-package` (its own directory: no lock shared with
//! the cargo running this test), so a second run only relinks what changed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use walras_testkit::TempDir;

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/cli sits two levels below the workspace root")
}

/// Where the extension's own build goes: beside the workspace's builds, kept between runs.
fn package_target_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("python-package")
}

/// Runs `command`, failing the test with its output when it fails.
fn run(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: cannot start: {error}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn the_python_package_installs_with_pip_and_its_suite_passes() {
    let root = workspace_root();
    let venv = TempDir::new("python-venv");
    run(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(venv.path()),
        "python3 -m venv (install python3 and python3-venv)",
    );
    let python = venv.path().join("bin").join("python");
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(format!("{}[test,examples]", root.join("python").display()))
            .env("CARGO_TARGET_DIR", package_target_dir())
            // The dev profile (dependencies at opt-level 2): a release build with LTO would
            // add minutes to every CI run for no test's benefit.
            .env("MATURIN_PEP517_ARGS", "--profile dev"),
        "pip install ./python",
    );
    // The venv's `pytest` script from outside the source tree: `python -m pytest` inside
    // python/ would put python/ on sys.path and import the source package, which has no
    // built extension, instead of the installed one.
    let output = run(
        Command::new(venv.path().join("bin").join("pytest"))
            .args(["-q", "-p", "no:cacheprovider"])
            .arg(root.join("python").join("tests"))
            .current_dir(venv.path())
            .env("WALRAS_BIN", env!("CARGO_BIN_EXE_walras"))
            .env("MPLBACKEND", "Agg"),
        "pytest python/tests",
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    let last = summary.lines().last().unwrap_or_default();
    assert!(last.contains("passed"), "pytest ran no test: {summary}");
    println!("python/tests: {last}");
}
