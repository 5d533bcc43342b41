//! `trellis-module-cycles`: fails when any two source files of a workspace crate import each
//! other, directly or through others (CI runs it; `docs/architecture.md` says why).

mod edges;
mod tree;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use edges::FileEdges;
use tree::CrateTree;

const HELP: &str = "\
Lists import circles between the source files of every crate under crates/ (library, binary,
tests and benches targets). A file imports another when a path it names (in a `use` or in code,
followed through re-exports to the defining module) leads into that file. Exits 1 when any circle
exists, printing each circle's files and one path per edge so it can be broken.

usage: trellis-module-cycles [WORKSPACE_ROOT]   (default: the current directory)";

fn main() -> ExitCode {
    let argument = std::env::args().nth(1);
    if matches!(argument.as_deref(), Some("-h" | "--help")) {
        println!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let root = PathBuf::from(argument.unwrap_or_else(|| ".".to_string()));
    match check(&root) {
        Ok(0) => {
            println!("module cycles: 0 circles");
            ExitCode::SUCCESS
        }
        Ok(files) => {
            eprintln!("module cycles: {files} files in import circles (listed above)");
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("module cycles: {message}");
            ExitCode::from(2)
        }
    }
}

/// Checks every crate target and returns how many files sit in circles.
fn check(root: &Path) -> Result<usize, String> {
    let crates_dir = root.join("crates");
    let mut crate_dirs: Vec<PathBuf> = std::fs::read_dir(&crates_dir)
        .map_err(|error| format!("cannot list {}: {error}", crates_dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.join("Cargo.toml").exists())
        .collect();
    crate_dirs.sort();
    let mut files_in_circles = 0;
    let mut circles = 0;
    for crate_dir in crate_dirs {
        for target in target_roots(&crate_dir) {
            let tree = CrateTree::read(&target).map_err(|error| error.to_string())?;
            let edges = edges::file_edges(&tree);
            for circle in circles_of(tree.files.len(), &edges) {
                circles += 1;
                files_in_circles += circle.len();
                report(root, &tree, &edges, &circle);
            }
        }
    }
    if circles > 0 {
        eprintln!("{circles} circles");
    }
    Ok(files_in_circles)
}

fn target_roots(crate_dir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for fixed in ["src/lib.rs", "src/main.rs"] {
        let path = crate_dir.join(fixed);
        if path.exists() {
            roots.push(path);
        }
    }
    for folder in ["src/bin", "tests", "benches", "examples"] {
        let Ok(entries) = std::fs::read_dir(crate_dir.join(folder)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .collect();
        found.sort();
        roots.extend(found);
    }
    roots
}

fn report(root: &Path, tree: &CrateTree, edges: &FileEdges, circle: &BTreeSet<usize>) {
    let name = |file: usize| {
        let path = &tree.files[file];
        path.strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    eprintln!("circle of {} files:", circle.len());
    for ((from, to), example) in edges {
        if circle.contains(from) && circle.contains(to) {
            eprintln!("  {} -> {}   ({example})", name(*from), name(*to));
        }
    }
}

/// Strongly connected components with two or more files (Tarjan, iterative).
fn circles_of(nodes: usize, edges: &FileEdges) -> Vec<BTreeSet<usize>> {
    let mut successors = vec![Vec::new(); nodes];
    for (from, to) in edges.keys() {
        successors[*from].push(*to);
    }
    let mut index_of = vec![usize::MAX; nodes];
    let mut low = vec![0; nodes];
    let mut on_stack = vec![false; nodes];
    let mut stack = Vec::new();
    let mut next_index = 0;
    let mut found = Vec::new();
    for start in 0..nodes {
        if index_of[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        while let Some((node, child)) = work.pop() {
            if child == 0 {
                index_of[node] = next_index;
                low[node] = next_index;
                next_index += 1;
                stack.push(node);
                on_stack[node] = true;
            }
            if let Some(&next) = successors[node].get(child) {
                work.push((node, child + 1));
                if index_of[next] == usize::MAX {
                    work.push((next, 0));
                } else if on_stack[next] {
                    low[node] = low[node].min(index_of[next]);
                }
                continue;
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index_of[node] {
                let mut component = BTreeSet::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.insert(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    found.push(component);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temp dir");
        let crate_dir = root.path().join("crates/sample");
        for (path, text) in files {
            let path = crate_dir.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
            std::fs::write(path, text).expect("write");
        }
        std::fs::write(
            crate_dir.join("Cargo.toml"),
            "[package]\nname = \"sample\"\n",
        )
        .expect("manifest");
        root
    }

    #[test]
    fn a_circle_through_a_parent_module_is_found() {
        let root = crate_with(&[
            ("src/lib.rs", "mod api;\npub use api::Api;\n"),
            (
                "src/api/mod.rs",
                "mod reads;\npub struct Api;\npub fn serve() { reads::list(); }\n",
            ),
            (
                "src/api/reads.rs",
                "use super::Api;\npub fn list() -> Option<Api> { None }\n",
            ),
        ]);
        assert_eq!(check(root.path()), Ok(2));
    }

    #[test]
    fn re_exports_are_followed_to_the_defining_file() {
        // reads.rs names `crate::Api`, which lib.rs re-exports from state.rs: the edge goes to
        // state.rs, so no circle runs through lib.rs or api/mod.rs.
        let root = crate_with(&[
            ("src/lib.rs", "mod api;\npub use api::state::Api;\n"),
            (
                "src/api/mod.rs",
                "pub mod state;\nmod reads;\npub fn serve() { reads::list(); }\n",
            ),
            ("src/api/state.rs", "pub struct Api;\n"),
            (
                "src/api/reads.rs",
                "pub fn list() -> Option<crate::Api> { None }\n",
            ),
        ]);
        assert_eq!(check(root.path()), Ok(0));
    }

    #[test]
    fn test_modules_are_leaves() {
        let root = crate_with(&[
            ("src/lib.rs", "mod a;\npub fn top() { a::f(); }\n"),
            (
                "src/a.rs",
                "pub fn f() {}\n#[cfg(test)]\nmod tests { #[test] fn t() { crate::top(); } }\n",
            ),
        ]);
        assert_eq!(check(root.path()), Ok(0));
    }
}
