//! Issue 12's rule "no import circle inside a crate", at every depth (issue 30 item 6): in every
//! crate, and inside every module with children of its own, the graph of sibling modules (an
//! edge where one sibling's non-test code names the other, or anything inside it, through a
//! `crate::`, `super::` or `self::` path) has no circle. A circle is how the supply table once
//! came to be cached inside the books it is built from, how a state type ends up knowing its
//! users, and how the workload's ledger came to know the block planner that drives it.
//!
//! A reference between two modules counts at the level where their paths part: `crate::a::x`
//! named from `b::y` is an edge `b → a` at the crate's top level;
//! `super::ledger` named from `workload::block` is an edge `block → ledger` among `workload`'s
//! children. References from a module to its own ancestors or descendants are not edges (a
//! parent declares its children; a child may use what its parent defines).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path below its crate's root (`["workload", "block"]`; the root is `[]`).
type ModulePath = Vec<String>;

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/rules sits two levels below the workspace root")
}

/// `source` without comments (from `//` to the end of each line) and without the
/// `#[cfg(test)] mod` section and what follows it: tests may reach anywhere, and doc links are
/// not imports.
fn code_of(source: &str) -> String {
    let mut code = String::new();
    for line in source.lines() {
        code.push_str(line.find("//").map_or(line, |at| &line[..at]));
        code.push('\n');
    }
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let start = from + at;
        let rest = code[start + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") || rest.starts_with("pub mod ") {
            code.truncate(start);
            break;
        }
        from = start + 1;
    }
    code
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a `use`-style path names, starting at `text` (just after an anchor's `::`):
/// `a::b` is one path, `a::{b, c::d, self}` three (`a::b`, `a::c::d`, `a`).
fn paths_at(text: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut items = Vec::new();
            let mut start = 0;
            for (at, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        items.push(&group[start..at]);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[start..at]);
                        start = at + 1;
                    }
                    _ => {}
                }
            }
            return items
                .into_iter()
                .flat_map(paths_at)
                .map(|item| {
                    let tail = item.into_iter().filter(|segment| segment != "self");
                    prefix.iter().cloned().chain(tail).collect()
                })
                .collect();
        }
        let segment: String = rest.chars().take_while(|c| is_ident_char(*c)).collect();
        if segment.is_empty() {
            return vec![prefix];
        }
        rest = &rest[segment.len()..];
        prefix.push(segment);
        match rest.trim_start().strip_prefix("::") {
            Some(after) => rest = after.trim_start(),
            None => return vec![prefix],
        }
    }
}

/// The absolute paths (below the crate root) that the code of module `module` names through
/// `crate::`, `super::` (repeated as often as written) and `self::`.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for anchor in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(anchor) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_ident_char(c) || c == ':') {
                continue;
            }
            let mut base: Vec<String> = match anchor {
                "crate::" => Vec::new(),
                "self::" => module.to_vec(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            for path in paths_at(&code[at + anchor.len()..]) {
                let mut segments = path.into_iter().peekable();
                if anchor == "super::" {
                    while segments.peek().is_some_and(|segment| segment == "super") {
                        segments.next();
                        base.pop();
                    }
                }
                found.push(base.iter().cloned().chain(segments).collect());
            }
        }
    }
    found
}

/// The module a path names: its longest prefix that is a module of the crate (`None` for the
/// root or for names outside the crate's modules).
fn module_named<'m>(modules: &'m BTreeSet<ModulePath>, path: &[String]) -> Option<&'m ModulePath> {
    (1..=path.len())
        .rev()
        .find_map(|length| modules.get(&path[..length]))
}

/// Edges between siblings, keyed by their parent: `(parent, from child, to child)`.
fn sibling_edges(
    sources: &BTreeMap<ModulePath, Vec<String>>,
) -> BTreeSet<(ModulePath, String, String)> {
    let modules: BTreeSet<ModulePath> = sources.keys().cloned().collect();
    let mut edges = BTreeSet::new();
    for (module, files) in sources {
        for file in files {
            for path in references(module, &code_of(file)) {
                let Some(target) = module_named(&modules, &path) else {
                    continue;
                };
                let common = module
                    .iter()
                    .zip(target)
                    .take_while(|(a, b)| a == b)
                    .count();
                if common < module.len() && common < target.len() {
                    edges.insert((
                        module[..common].to_vec(),
                        module[common].clone(),
                        target[common].clone(),
                    ));
                }
            }
        }
    }
    edges
}

/// The circles among siblings, each as `parent: a ↔ b ↔ …` (names sorted).
fn module_circles(sources: &BTreeMap<ModulePath, Vec<String>>) -> Vec<String> {
    let mut by_parent: BTreeMap<ModulePath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (parent, from, to) in sibling_edges(sources) {
        by_parent
            .entry(parent)
            .or_default()
            .entry(from)
            .or_default()
            .insert(to);
    }
    let mut circles = BTreeSet::new();
    for (parent, edges) in &by_parent {
        let reach = |from: &str| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.to_string()];
            while let Some(module) = stack.pop() {
                for next in edges.get(&module).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            seen
        };
        let reached: BTreeMap<&String, BTreeSet<String>> =
            edges.keys().map(|module| (module, reach(module))).collect();
        for (module, reaches) in &reached {
            if !reaches.contains(*module) {
                continue;
            }
            let circle: Vec<&str> = reaches
                .iter()
                .filter(|other| {
                    reached
                        .get(other)
                        .is_some_and(|back| back.contains(*module))
                })
                .map(String::as_str)
                .collect();
            let level = if parent.is_empty() {
                "crate".to_string()
            } else {
                parent.join("::")
            };
            circles.insert(format!("{level}: {}", circle.join(" ↔ ")));
        }
    }
    circles.into_iter().collect()
}

/// Every module of a crate's `src/` with its source files: `a.rs` and `a/mod.rs` are `a`,
/// `a/b.rs` is `a::b`; the crate root (`lib.rs`, `main.rs`) is `[]`; `src/bin/` holds other
/// crates and is left out.
fn crate_sources(src: &Path) -> BTreeMap<ModulePath, Vec<String>> {
    let mut sources: BTreeMap<ModulePath, Vec<String>> = BTreeMap::new();
    let mut stack = vec![(src.to_path_buf(), Vec::<String>::new())];
    while let Some((dir, parent)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable source directory") {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_stem()
                .and_then(|stem| stem.to_str())
                .expect("a UTF-8 file name")
                .to_string();
            if path.is_dir() {
                if !(parent.is_empty() && name == "bin") {
                    let mut child = parent.clone();
                    child.push(name);
                    stack.push((path, child));
                }
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let module = match name.as_str() {
                "mod" => parent.clone(),
                "lib" | "main" if parent.is_empty() => Vec::new(),
                _ => {
                    let mut module = parent.clone();
                    module.push(name);
                    module
                }
            };
            let source = std::fs::read_to_string(&path).expect("a readable source");
            sources.entry(module).or_default().push(source);
        }
    }
    sources
}

#[test]
fn no_crate_has_a_circle_among_its_modules_at_any_depth() {
    let mut found = Vec::new();
    let mut checked = 0;
    let mut nested = 0;
    let roots = [
        workspace_root().join("crates"),
        workspace_root().to_path_buf(),
    ];
    for entry in std::fs::read_dir(&roots[0]).expect("crates/ is readable") {
        let src = entry.expect("a directory entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let sources = crate_sources(&src);
        nested += sources.keys().filter(|module| module.len() > 1).count();
        for circle in module_circles(&sources) {
            found.push(format!("{}: {circle}", src.display()));
        }
    }
    let python = roots[1].join("python").join("src");
    if python.is_dir() {
        for circle in module_circles(&crate_sources(&python)) {
            found.push(format!("{}: {circle}", python.display()));
        }
    }
    assert!(
        checked >= 20,
        "only {checked} crates found under {:?}",
        roots[0]
    );
    assert!(
        nested >= 5,
        "only {nested} nested modules found: the walk misses subdirectories"
    );
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}

fn sources_of(modules: &[(&str, &str)]) -> BTreeMap<ModulePath, Vec<String>> {
    modules
        .iter()
        .map(|(path, source)| {
            let path = path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            (path, vec![source.to_string()])
        })
        .collect()
}

/// The check finds a circle through a `use crate::{…}` group, a `super::` path and a plain
/// path at the top level, ignores comments, doc links and test modules, and no longer misses
/// a circle between two children of one module (the `sim` crate's `workload::block` ↔
/// `workload::ledger`, which the top-level check could not see).
#[test]
fn the_module_circle_check_sees_circles_at_any_depth_and_ignores_tests_and_comments() {
    let mut top = vec![
        ("node", "use crate::{oracle::Handle, limits};\n"),
        ("oracle", "use super::feed;\n"),
        ("feed", "pub fn run(shared: &crate::node::Shared) {}\n"),
        (
            "limits",
            "/// See [`crate::node`].\n// crate::oracle\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::node::Shared;\n}\n",
        ),
    ];
    assert_eq!(
        module_circles(&sources_of(&top)),
        vec!["crate: feed ↔ node ↔ oracle".to_string()]
    );
    top[2] = ("feed", "pub fn run() {}\n");
    assert!(module_circles(&sources_of(&top)).is_empty());

    let mut nested = vec![
        ("", "mod workload;\n"),
        ("workload", "mod block;\nmod ledger;\nuse block::Planner;\n"),
        (
            "workload::block",
            "use super::ledger::{Ledger, VALUE_HI};\n",
        ),
        (
            "workload::ledger",
            "use super::block::BlockPlan;\nuse crate::rng::Rng;\n",
        ),
        ("rng", "pub struct Rng;\n"),
    ];
    assert_eq!(
        module_circles(&sources_of(&nested)),
        vec!["workload: block ↔ ledger".to_string()]
    );
    nested[3] = (
        "workload::ledger",
        "use super::super::rng::Rng;\nuse self::inner::X;\n",
    );
    assert!(module_circles(&sources_of(&nested)).is_empty());

    // A nested module naming a top-level module that names it back is a top-level circle.
    let across = [
        ("a", "mod inner;\n"),
        ("a::inner", "use crate::b::Thing;\n"),
        ("b", "pub fn f(_: crate::a::inner::X) {}\n"),
    ];
    assert_eq!(
        module_circles(&sources_of(&across)),
        vec!["crate: a ↔ b".to_string()]
    );
}
