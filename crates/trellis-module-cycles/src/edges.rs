//! Turns a crate's module tree into file-to-file import edges: each path is followed through
//! `use` re-exports to the module that defines the item it names.

use std::collections::BTreeMap;

use crate::tree::{CrateTree, Module};

/// How deep re-export chains are followed before giving up (a guard against `use` loops).
const MAX_DEPTH: usize = 24;

/// Where a path ends: the module holding the item, or the module the path itself names.
#[derive(Debug, Clone, Copy)]
struct Target {
    module: usize,
    names_module: bool,
}

/// File-to-file edges of one crate, each with one example path that caused it.
pub type FileEdges = BTreeMap<(usize, usize), String>;

/// Every edge between two different files of the crate.
pub fn file_edges(tree: &CrateTree) -> FileEdges {
    let mut edges = FileEdges::new();
    for (index, module) in tree.modules.iter().enumerate() {
        let mut note = |target: Option<Target>, path: &[String], skip_module: bool| {
            let Some(target) = target else { return };
            if skip_module && target.names_module {
                return;
            }
            let from = module.file;
            let to = tree.modules[target.module].file;
            if from != to {
                edges.entry((from, to)).or_insert_with(|| path.join("::"));
            }
        };
        for binding in module.uses.values() {
            // Importing a module only names a namespace; its uses are counted where made.
            note(resolve(tree, index, &binding.path, 0), &binding.path, true);
        }
        for glob in &module.globs {
            note(resolve(tree, index, glob, 0), glob, false);
        }
        for path in &module.references {
            if is_local_start(module, tree, index, path) {
                note(resolve(tree, index, path, 0), path, false);
            }
        }
    }
    edges
}

/// Whether a code path starts inside this crate (not at an external crate or a local binding).
fn is_local_start(module: &Module, tree: &CrateTree, index: usize, path: &[String]) -> bool {
    let Some(first) = path.first() else {
        return false;
    };
    matches!(first.as_str(), "crate" | "super" | "self")
        || module.children.contains_key(first)
        || module.uses.contains_key(first)
        || tree.modules[index].items.contains(first)
}

fn resolve(tree: &CrateTree, from: usize, path: &[String], depth: usize) -> Option<Target> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (first, rest) = path.split_first()?;
    let module = &tree.modules[from];
    let start = match first.as_str() {
        "crate" => 0,
        "self" => from,
        "super" => module.parent?,
        name => {
            if let Some(child) = module.children.get(name) {
                *child
            } else if let Some(binding) = module.uses.get(name) {
                let mut joined = binding.path.clone();
                joined.extend_from_slice(rest);
                return resolve(tree, from, &joined, depth + 1);
            } else if module.items.contains(name) {
                return Some(Target {
                    module: from,
                    names_module: false,
                });
            } else {
                return None;
            }
        }
    };
    walk(tree, start, rest, depth)
}

fn walk(tree: &CrateTree, start: usize, rest: &[String], depth: usize) -> Option<Target> {
    let mut current = start;
    for (position, segment) in rest.iter().enumerate() {
        let module = &tree.modules[current];
        if segment == "super" {
            current = module.parent?;
            continue;
        }
        if segment == "self" {
            continue;
        }
        if let Some(child) = module.children.get(segment) {
            current = *child;
            continue;
        }
        let item_found = Target {
            module: current,
            names_module: false,
        };
        if module.items.contains(segment) {
            return Some(item_found);
        }
        if let Some(binding) = module.uses.get(segment) {
            let mut joined = binding.path.clone();
            joined.extend_from_slice(&rest[position + 1..]);
            return resolve(tree, current, &joined, depth + 1).or(Some(item_found));
        }
        for glob in &module.globs {
            let mut joined = glob.clone();
            joined.extend_from_slice(&rest[position..]);
            if let Some(found) = resolve(tree, current, &joined, depth + 1)
                && (!found.names_module || found.module != current)
            {
                return Some(found);
            }
        }
        // An item this reader does not see (macro-made, a variant, an associated item).
        return Some(item_found);
    }
    Some(Target {
        module: current,
        names_module: true,
    })
}
