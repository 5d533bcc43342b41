//! Guards with their selectors resolved to keys and their labels to domain positions, once
//! per analysis: a guard is read by every check that reaches it, and resolving a selector
//! means hashing its node name and comparing label strings.

use std::cell::RefCell;
use std::rc::Rc;

use trellis_graph::{ControlSelector, EnumSet, Guard};

use crate::domain::{SelKey, domain, key_of};
use crate::index::{FastMap, Index};

/// A selector that names a node and a legal key: the key and the positions in its domain of
/// the labels the guard lists (a range of [`ResolvedGuard::labels`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyRef<'g> {
    pub(crate) key: SelKey<'g>,
    pub(crate) labels: (u32, u32),
}

/// The shape of a guard with resolved selectors (`None`: the selector names no node or no
/// legal key, so it never matches).
#[derive(Debug)]
pub(crate) enum Shape<'g> {
    In(Option<KeyRef<'g>>),
    All(Vec<Shape<'g>>),
    Any(Vec<Shape<'g>>),
    Not(Box<Shape<'g>>),
    KOfN {
        count: u64,
        values: Vec<Option<KeyRef<'g>>>,
    },
    KOfMap {
        count: u64,
        key: Option<KeyRef<'g>>,
    },
}

/// One guard, resolved.
#[derive(Debug)]
pub(crate) struct ResolvedGuard<'g> {
    pub(crate) shape: Shape<'g>,
    /// Every selector occurrence with a legal key, in authored order, with whether it sits
    /// under a `k_of_map`.
    pub(crate) uses: Vec<(SelKey<'g>, &'g EnumSet, bool)>,
    pub(crate) labels: Vec<u32>,
}

impl ResolvedGuard<'_> {
    /// The label positions of a resolved selector.
    pub(crate) fn labels_of(&self, key: &KeyRef) -> &[u32] {
        &self.labels[key.labels.0 as usize..key.labels.1 as usize]
    }
}

/// Resolved guards by address; guards live in the graph, which outlives the analysis.
#[derive(Debug, Default)]
pub(crate) struct GuardTable<'g> {
    resolved: RefCell<FastMap<*const Guard, Rc<ResolvedGuard<'g>>>>,
}

impl<'g> GuardTable<'g> {
    /// The resolved form of `guard`, resolved on first use.
    pub(crate) fn get(&self, index: &Index<'g>, guard: &'g Guard) -> Rc<ResolvedGuard<'g>> {
        let address = guard as *const Guard;
        if let Some(found) = self.resolved.borrow().get(&address) {
            return found.clone();
        }
        let mut resolved = ResolvedGuard {
            shape: Shape::Any(Vec::new()),
            uses: Vec::new(),
            labels: Vec::new(),
        };
        resolved.shape = Resolver {
            index,
            out: &mut resolved,
        }
        .shape(guard);
        let resolved = Rc::new(resolved);
        self.resolved.borrow_mut().insert(address, resolved.clone());
        resolved
    }
}

struct Resolver<'a, 'g> {
    index: &'a Index<'g>,
    out: &'a mut ResolvedGuard<'g>,
}

impl<'g> Resolver<'_, 'g> {
    fn key(
        &mut self,
        sel: &'g ControlSelector,
        labels: &EnumSet,
        in_k_of_map: bool,
    ) -> Option<KeyRef<'g>> {
        let key = key_of(self.index, sel)?;
        let domain = domain(self.index, &key)?;
        self.out.uses.push((key, domain, in_k_of_map));
        let start = self.out.labels.len() as u32;
        for label in labels.iter() {
            if let Some(at) = domain.iter().position(|l| l == label) {
                self.out.labels.push(at as u32);
            }
        }
        Some(KeyRef {
            key,
            labels: (start, self.out.labels.len() as u32),
        })
    }

    fn shape(&mut self, guard: &'g Guard) -> Shape<'g> {
        match guard {
            Guard::In { value, labels } => Shape::In(self.key(value, labels, false)),
            Guard::All { guards } => Shape::All(guards.iter().map(|g| self.shape(g)).collect()),
            Guard::Any { guards } => Shape::Any(guards.iter().map(|g| self.shape(g)).collect()),
            Guard::Not { guard } => Shape::Not(Box::new(self.shape(guard))),
            Guard::KOfN {
                count,
                values,
                labels,
            } => Shape::KOfN {
                count: count.get(),
                values: values.iter().map(|v| self.key(v, labels, false)).collect(),
            },
            Guard::KOfMap {
                count,
                value,
                labels,
            } => Shape::KOfMap {
                count: count.get(),
                key: self.key(value, labels, true),
            },
        }
    }
}
