//! The house rules on dependencies, read from `cargo tree --locked` (the committed lock files,
//! never rewritten by the test; a stale `fuzz/Cargo.lock` fails here with cargo's message, and
//! `cargo tree --manifest-path fuzz/Cargo.toml` refreshes it): the production build of
//! `walras` (`--no-default-features`) links neither the workload generator (`walras-sim`) nor
//! the development keys (`walras-devnet`), and the fuzz targets build without tokio, axum or
//! hyper.

use std::collections::{BTreeMap, BTreeSet};
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
        .expect("crates/cli sits two levels below the workspace root")
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

/// The crate-internal references of one module's source: every `crate::NAME`, the names in
/// `crate::{A, B::…}` groups and, in the module's top file, `super::NAME` (its parent is the
/// crate root). Comments and the module's `#[cfg(test)] mod` sections are left out: tests may
/// reach anywhere, and doc links are not imports.
fn module_references(source: &str, top_file: bool) -> BTreeSet<String> {
    let mut code = String::new();
    for line in source.lines() {
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    let mut cut = code.len();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let start = from + at;
        let rest = code[start + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") || rest.starts_with("pub mod ") {
            cut = start;
            break;
        }
        from = start + 1;
    }
    let code = &code[..cut];
    let mut names = BTreeSet::new();
    let mut prefixes = vec!["crate::"];
    if top_file {
        prefixes.push("super::");
    }
    for prefix in prefixes {
        for (at, _) in code.match_indices(prefix) {
            let preceded_by_ident = code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            if preceded_by_ident {
                continue;
            }
            let rest = &code[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
    names
}

/// The circles in a crate's graph of top-level modules (each module: its files, the first being
/// its top file), as sorted lists of module names.
fn module_circles(modules: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    let edges: BTreeMap<&str, BTreeSet<&str>> = modules
        .iter()
        .map(|(name, files)| {
            let targets = files
                .iter()
                .enumerate()
                .flat_map(|(index, source)| module_references(source, index == 0))
                .filter_map(|target| modules.get_key_value(&target).map(|(key, _)| key.as_str()))
                .filter(|target| target != name)
                .collect();
            (name.as_str(), targets)
        })
        .collect();
    // A module is on a circle with every module that reaches it and that it reaches.
    let reach = |from: &str| -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(module) = stack.pop() {
            for next in &edges[module] {
                if seen.insert(*next) {
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<&str>> = edges
        .keys()
        .map(|module| (*module, reach(module)))
        .collect();
    let mut circles: BTreeSet<Vec<String>> = BTreeSet::new();
    for (module, reaches) in &reached {
        if !reaches.contains(module) {
            continue;
        }
        let circle: Vec<String> = reaches
            .iter()
            .filter(|other| reached[**other].contains(module))
            .map(|other| other.to_string())
            .collect();
        circles.insert(circle);
    }
    circles.into_iter().collect()
}

/// Each top-level module of a crate's `src/` with its source files (top file first).
fn crate_modules(src: &Path) -> BTreeMap<String, Vec<String>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .expect("a UTF-8 file name")
            .to_string();
        if path.is_dir() {
            let mut files = Vec::new();
            let top = path.join("mod.rs");
            let mut stack = vec![path.clone()];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).expect("a readable module directory") {
                    let file = entry.expect("a directory entry").path();
                    if file.is_dir() {
                        stack.push(file);
                    } else if file.extension().is_some_and(|ext| ext == "rs") && file != top {
                        files.push(std::fs::read_to_string(&file).expect("a readable source"));
                    }
                }
            }
            if let Ok(source) = std::fs::read_to_string(&top) {
                files.insert(0, source);
            } else if let Ok(source) = std::fs::read_to_string(src.join(format!("{name}.rs"))) {
                files.insert(0, source);
            }
            modules.entry(name).or_insert_with(Vec::new).extend(files);
        } else if path.extension().is_some_and(|ext| ext == "rs") && name != "lib" && name != "main"
        {
            let source = std::fs::read_to_string(&path).expect("a readable source");
            modules
                .entry(name)
                .or_insert_with(Vec::new)
                .insert(0, source);
        }
    }
    modules
}

/// Issue 12's rule "no import circle inside a crate": for every crate, the graph of its
/// top-level modules (an edge where a module's non-test code names another through `crate::`,
/// or `super::` from its top file) has no circle. A circle is how the supply table once came to
/// be cached inside the books it is built from, and how a state type ends up knowing its users.
#[test]
fn no_crate_has_a_circle_among_its_modules() {
    let crates = workspace_root().join("crates");
    let mut found = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).expect("crates/ is readable") {
        let src = entry.expect("a directory entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        for circle in module_circles(&crate_modules(&src)) {
            found.push(format!("{}: {}", src.display(), circle.join(" ↔ ")));
        }
    }
    assert!(
        checked >= 20,
        "only {checked} crates found under {crates:?}"
    );
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}

/// The circle check finds a circle through a `use crate::{…}` group, a `super::` path and a
/// plain path, and ignores comments, doc links and test modules.
#[test]
fn the_module_circle_check_sees_circles_and_ignores_tests_and_comments() {
    let module = |files: &[&str]| files.iter().map(|file| file.to_string()).collect();
    let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    modules.insert(
        "node".into(),
        module(&["use crate::{oracle::Handle, limits};\n"]),
    );
    modules.insert("oracle".into(), module(&["use super::feed;\n"]));
    modules.insert(
        "feed".into(),
        module(&["pub fn run(shared: &crate::node::Shared) {}\n"]),
    );
    modules.insert(
        "limits".into(),
        module(&[
            "/// See [`crate::node`].\n// crate::oracle\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::node::Shared;\n}\n",
        ]),
    );
    assert_eq!(
        module_circles(&modules),
        vec![vec!["feed".to_string(), "node".into(), "oracle".into()]]
    );
    modules.insert("feed".into(), module(&["pub fn run() {}\n"]));
    assert!(module_circles(&modules).is_empty());
}

/// Issue 30's rule "engine depends on payments only through a narrow certificate-checking
/// interface": every `walras_payments::` path in the engine's sources (comments aside) goes
/// through `walras_payments::bridge`, never into the lane's state machines. Trigger: an engine
/// module importing `walras_payments::bls` or `walras_payments::ValidatorShard` directly.
#[test]
fn the_engine_reaches_payments_only_through_its_bridge_module() {
    let src = workspace_root().join("crates").join("engine").join("src");
    let mut found = Vec::new();
    for files in crate_modules(&src).values() {
        for source in files {
            found.extend(payments_paths_outside_the_bridge(source));
        }
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("engine's lib.rs is readable");
    found.extend(payments_paths_outside_the_bridge(&lib));
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
        .flat_map(|line| line.match_indices("walras_payments::").map(move |(at, _)| &line[at..]))
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
