//! Reads one crate's module tree from its root file: which file holds each module, what each
//! module defines, what its `use` declarations bring in, and which paths its code names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Why a crate's tree could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {source}")]
    Parse { path: PathBuf, source: syn::Error },
}

/// One `use` binding: the name it introduces and the path (as written) it stands for.
#[derive(Debug, Clone)]
pub struct UseBinding {
    pub path: Vec<String>,
}

/// One module, inline or a file of its own.
#[derive(Debug, Default)]
pub struct Module {
    /// Index of the file that holds this module's text.
    pub file: usize,
    pub parent: Option<usize>,
    pub children: BTreeMap<String, usize>,
    /// Names of items defined here (types, functions, traits, constants, macros).
    pub items: BTreeSet<String>,
    /// Names brought in by non-glob `use` declarations.
    pub uses: BTreeMap<String, UseBinding>,
    /// Paths of glob imports (`use path::*`).
    pub globs: Vec<Vec<String>>,
    /// Multi-segment paths named in this module's code (not in its `use` declarations).
    pub references: Vec<Vec<String>>,
}

/// A crate's modules and the files that hold them.
#[derive(Debug, Default)]
pub struct CrateTree {
    pub files: Vec<PathBuf>,
    pub modules: Vec<Module>,
}

impl CrateTree {
    /// Reads the crate whose root file is `root` (lib.rs, main.rs, a test or bench file).
    pub fn read(root: &Path) -> Result<Self, TreeError> {
        let mut tree = CrateTree::default();
        let child_dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        tree.read_file(root, None, None, child_dir)?;
        Ok(tree)
    }

    fn read_file(
        &mut self,
        path: &Path,
        parent: Option<usize>,
        name: Option<&str>,
        child_dir: PathBuf,
    ) -> Result<(), TreeError> {
        let text = std::fs::read_to_string(path).map_err(|source| TreeError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let parsed = syn::parse_file(&text).map_err(|source| TreeError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        self.files.push(path.to_path_buf());
        let file = self.files.len() - 1;
        let module = self.new_module(file, parent, name);
        self.read_items(module, &parsed.items, &child_dir)
    }

    fn new_module(&mut self, file: usize, parent: Option<usize>, name: Option<&str>) -> usize {
        self.modules.push(Module {
            file,
            parent,
            ..Module::default()
        });
        let index = self.modules.len() - 1;
        if let (Some(parent), Some(name)) = (parent, name) {
            self.modules[parent]
                .children
                .insert(name.to_string(), index);
        }
        index
    }

    fn read_items(
        &mut self,
        module: usize,
        items: &[syn::Item],
        child_dir: &Path,
    ) -> Result<(), TreeError> {
        for item in items.iter().filter(|item| !is_test_only(item)) {
            match item {
                syn::Item::Mod(declared) => self.read_child(module, declared, child_dir)?,
                syn::Item::Use(declared) => {
                    collect_use(&declared.tree, Vec::new(), &mut self.modules[module]);
                }
                other => {
                    if let Some(name) = item_name(other) {
                        self.modules[module].items.insert(name);
                    }
                    let mut collector = PathCollector::default();
                    collector.visit_item(other);
                    self.modules[module].references.extend(collector.paths);
                }
            }
        }
        Ok(())
    }

    fn read_child(
        &mut self,
        parent: usize,
        declared: &syn::ItemMod,
        child_dir: &Path,
    ) -> Result<(), TreeError> {
        let name = declared.ident.to_string();
        if let Some((_, items)) = &declared.content {
            let file = self.modules[parent].file;
            let module = self.new_module(file, Some(parent), Some(&name));
            return self.read_items(module, items, &child_dir.join(&name));
        }
        let path = match path_attribute(&declared.attrs) {
            // A `#[path]` is relative to the directory of the file that declares the module.
            Some(explicit) => self.files[self.modules[parent].file]
                .parent()
                .map(|dir| dir.join(&explicit))
                .unwrap_or_else(|| PathBuf::from(&explicit)),
            None => {
                let flat = child_dir.join(format!("{name}.rs"));
                if flat.exists() {
                    flat
                } else {
                    child_dir.join(&name).join("mod.rs")
                }
            }
        };
        let grandchild_dir = if path.file_name().is_some_and(|file| file == "mod.rs") {
            path.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            child_dir.join(&name)
        };
        self.read_file(&path, Some(parent), Some(&name), grandchild_dir)
    }
}

/// Whether an item is compiled only for tests (`#[cfg(test)]`): like `cargo modules`, the
/// check looks at the code that ships, where a test module is a leaf.
fn is_test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Mod(item) => &item.attrs,
        syn::Item::Fn(item) => &item.attrs,
        syn::Item::Use(item) => &item.attrs,
        syn::Item::Impl(item) => &item.attrs,
        syn::Item::Struct(item) => &item.attrs,
        syn::Item::Enum(item) => &item.attrs,
        syn::Item::Const(item) => &item.attrs,
        _ => return false,
    };
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        if !attr.path().is_ident("path") {
            return None;
        }
        match &attr.meta {
            syn::Meta::NameValue(syn::MetaNameValue {
                value:
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(text),
                        ..
                    }),
                ..
            }) => Some(text.value()),
            _ => None,
        }
    })
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(item) => &item.ident,
        syn::Item::Enum(item) => &item.ident,
        syn::Item::Fn(item) => &item.sig.ident,
        syn::Item::Static(item) => &item.ident,
        syn::Item::Struct(item) => &item.ident,
        syn::Item::Trait(item) => &item.ident,
        syn::Item::TraitAlias(item) => &item.ident,
        syn::Item::Type(item) => &item.ident,
        syn::Item::Union(item) => &item.ident,
        syn::Item::Macro(item) => item.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

fn collect_use(tree: &syn::UseTree, prefix: Vec<String>, module: &mut Module) {
    match tree {
        syn::UseTree::Path(step) => {
            let mut next = prefix;
            next.push(step.ident.to_string());
            collect_use(&step.tree, next, module);
        }
        syn::UseTree::Name(leaf) => {
            let name = leaf.ident.to_string();
            let mut path = prefix;
            // `use a::b::{self}` binds `b` to `a::b`.
            if name != "self" {
                path.push(name);
            }
            if let Some(bound) = path.last().cloned() {
                module.uses.insert(bound, UseBinding { path });
            }
        }
        syn::UseTree::Rename(renamed) => {
            let mut path = prefix;
            if renamed.ident != "self" {
                path.push(renamed.ident.to_string());
            }
            if renamed.rename != "_" {
                module
                    .uses
                    .insert(renamed.rename.to_string(), UseBinding { path });
            } else {
                // `use Trait as _` still depends on where the trait lives.
                module.references.push(path);
            }
        }
        syn::UseTree::Glob(_) => module.globs.push(prefix),
        syn::UseTree::Group(group) => {
            for branch in &group.items {
                collect_use(branch, prefix.clone(), module);
            }
        }
    }
}

/// Collects multi-segment paths from code, including `crate::`/`super::` paths inside macro
/// invocations (whose tokens syn leaves unparsed).
#[derive(Default)]
struct PathCollector {
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() >= 2 {
            self.paths
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        // A `use` inside a function body scopes a name locally; its target is still a
        // dependency of this module.
        let mut scratch = Module::default();
        collect_use(&item.tree, Vec::new(), &mut scratch);
        self.paths
            .extend(scratch.uses.into_values().map(|binding| binding.path));
        self.paths.extend(scratch.globs);
        self.paths.extend(scratch.references);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        scan_tokens(mac.tokens.clone(), &mut self.paths);
        syn::visit::visit_macro(self, mac);
    }
}

fn scan_tokens(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut index = 0;
    while index < tokens.len() {
        match &tokens[index] {
            TokenTree::Group(group) => scan_tokens(group.stream(), out),
            TokenTree::Ident(ident) if ident == "crate" || ident == "super" => {
                let mut path = vec![ident.to_string()];
                let mut next = index + 1;
                while let (Some(TokenTree::Punct(first)), Some(TokenTree::Punct(second))) =
                    (tokens.get(next), tokens.get(next + 1))
                {
                    if first.as_char() != ':' || second.as_char() != ':' {
                        break;
                    }
                    match tokens.get(next + 2) {
                        Some(TokenTree::Ident(segment)) => path.push(segment.to_string()),
                        _ => break,
                    }
                    next += 3;
                }
                if path.len() >= 2 {
                    out.push(path);
                }
                index = next.max(index + 1);
                continue;
            }
            _ => {}
        }
        index += 1;
    }
}
