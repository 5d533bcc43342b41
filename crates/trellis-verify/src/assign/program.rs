//! Compiled form of a check's predicates: a flat key layout for assignments and a predicate
//! program evaluated once per assignment (shared sub-predicates evaluated once).

use std::collections::BTreeMap;
use std::rc::Rc;

use trellis_graph::{ControlSelector, EnumSet, Guard};

use crate::domain::{SelKey, domain, key_of};
use crate::index::Index;
use crate::predicate::{Pred, PredNode};

/// One selector key of a check with its domain and the slot range it occupies.
#[derive(Debug, Clone)]
pub(crate) struct KeySlot<'g> {
    pub(crate) key: SelKey<'g>,
    pub(crate) domain: &'g EnumSet,
    /// Offset of the presence flag; the label counts follow it.
    pub(crate) offset: usize,
}

impl KeySlot<'_> {
    pub(crate) fn width(&self) -> usize {
        self.domain.len()
    }

    pub(crate) fn label_index(&self, label: &str) -> Option<usize> {
        self.domain.iter().position(|l| l.as_str() == label)
    }
}

/// Layouts up to this many keys find a key by scanning: nearly every check reads a handful of
/// keys, and a B-tree cost an allocation and a search per check. Larger layouts keep an
/// ordered map as well, so lookups stay logarithmic however many keys a check reads.
const SCANNED_KEYS: usize = 16;

/// The keys of a check in a fixed order, and where each lives inside an assignment vector.
/// An assignment is `[present, count_0, .., count_d]` per key, concatenated.
#[derive(Debug, Default)]
pub(crate) struct Layout<'g> {
    pub(crate) keys: Vec<KeySlot<'g>>,
    /// Key positions, filled once the layout outgrows [`SCANNED_KEYS`].
    by_key: BTreeMap<SelKey<'g>, usize>,
    pub(crate) stride: usize,
}

impl<'g> Layout<'g> {
    /// The position of `key`, when the layout has it.
    fn position(&self, key: &SelKey<'g>) -> Option<usize> {
        if self.keys.len() <= SCANNED_KEYS {
            self.keys.iter().position(|slot| slot.key == *key)
        } else {
            self.by_key.get(key).copied()
        }
    }

    /// Adds a key (if it has a domain) and returns its position.
    pub(crate) fn add(&mut self, index: &Index<'g>, key: SelKey<'g>) -> Option<usize> {
        if let Some(at) = self.position(&key) {
            return Some(at);
        }
        let domain = domain(index, &key)?;
        let at = self.keys.len();
        self.keys.push(KeySlot {
            key,
            domain,
            offset: self.stride,
        });
        self.stride += 1 + domain.len();
        if self.keys.len() > SCANNED_KEYS + 1 {
            self.by_key.insert(key, at);
        } else if self.keys.len() == SCANNED_KEYS + 1 {
            self.by_key = self
                .keys
                .iter()
                .enumerate()
                .map(|(i, s)| (s.key, i))
                .collect();
        }
        Some(at)
    }

    pub(crate) fn slot(&self, index: &Index<'g>, sel: &'g ControlSelector) -> Option<usize> {
        key_of(index, sel).and_then(|k| self.position(&k))
    }
}

/// A guard with selectors resolved to layout positions and labels to domain indices.
#[derive(Debug)]
enum CGuard {
    In {
        key: Option<(usize, Vec<usize>)>,
    },
    All(Vec<CGuard>),
    Any(Vec<CGuard>),
    Not(Box<CGuard>),
    KOfN {
        count: u64,
        values: Vec<Option<(usize, Vec<usize>)>>,
    },
    KOfMap {
        count: u64,
        key: Option<(usize, Vec<usize>)>,
    },
}

#[derive(Debug)]
enum Op {
    Const(bool),
    Guard(CGuard),
    Not(usize),
    And(Vec<usize>),
    Or(Vec<usize>),
    AtLeast(usize, Vec<usize>),
}

/// Predicates compiled against a layout; operands always precede their users.
#[derive(Debug, Default)]
pub(crate) struct Program {
    ops: Vec<Op>,
    /// Compiled ops by predicate address; the predicates outlive the program (they are owned
    /// by the check's roots and the analyzer's control facts), so addresses stay unique.
    memo: crate::addrmap::AddrMap<usize>,
}

/// A label test against one key: present and some listed label counted.
fn resolve_labels<'g>(
    layout: &Layout<'g>,
    index: &Index<'g>,
    sel: &'g ControlSelector,
    labels: &EnumSet,
) -> Option<(usize, Vec<usize>)> {
    let at = layout.slot(index, sel)?;
    let slot = &layout.keys[at];
    let wanted = labels
        .iter()
        .filter_map(|l| slot.label_index(l.as_str()))
        .collect();
    Some((at, wanted))
}

impl Program {
    /// An empty program with room for about `ops` compiled predicates (sized up front, as a
    /// program lives for one check).
    pub(crate) fn with_capacity(ops: usize) -> Self {
        Self {
            ops: Vec::with_capacity(ops),
            memo: crate::addrmap::AddrMap::default(),
        }
    }

    /// Compiles a predicate (memoized per shared node) and returns its op index.
    pub(crate) fn compile<'g>(
        &mut self,
        pred: &Pred<'g>,
        layout: &Layout<'g>,
        index: &Index<'g>,
    ) -> usize {
        let ptr = Rc::as_ptr(pred) as *const ();
        if let Some(at) = self.memo.get(ptr) {
            return *at;
        }
        let op = match &**pred {
            PredNode::Always => Op::Const(true),
            PredNode::Never => Op::Const(false),
            PredNode::Guard(g) => Op::Guard(compile_guard(g, layout, index)),
            PredNode::Not(inner) => Op::Not(self.compile(inner, layout, index)),
            PredNode::And(parts) => Op::And(self.compile_all(parts, layout, index)),
            PredNode::Or(parts) => Op::Or(self.compile_all(parts, layout, index)),
            PredNode::AtLeast(k, parts) => Op::AtLeast(*k, self.compile_all(parts, layout, index)),
        };
        self.ops.push(op);
        let at = self.ops.len() - 1;
        self.memo.insert_new(ptr, at);
        at
    }

    fn compile_all<'g>(
        &mut self,
        parts: &[Pred<'g>],
        layout: &Layout<'g>,
        index: &Index<'g>,
    ) -> Vec<usize> {
        parts
            .iter()
            .map(|p| self.compile(p, layout, index))
            .collect()
    }

    /// Evaluates every op over one assignment.
    pub(crate) fn evaluate(&self, layout: &Layout, assignment: &[u32], values: &mut Vec<bool>) {
        values.clear();
        for op in &self.ops {
            let value = match op {
                Op::Const(b) => *b,
                Op::Guard(g) => eval_guard(g, layout, assignment),
                Op::Not(i) => !values[*i],
                Op::And(parts) => parts.iter().all(|i| values[*i]),
                Op::Or(parts) => parts.iter().any(|i| values[*i]),
                Op::AtLeast(k, parts) => parts.iter().filter(|i| values[**i]).count() >= *k,
            };
            values.push(value);
        }
    }
}

fn compile_guard<'g>(guard: &'g Guard, layout: &Layout<'g>, index: &Index<'g>) -> CGuard {
    match guard {
        Guard::In { value, labels } => CGuard::In {
            key: resolve_labels(layout, index, value, labels),
        },
        Guard::All { guards } => CGuard::All(
            guards
                .iter()
                .map(|g| compile_guard(g, layout, index))
                .collect(),
        ),
        Guard::Any { guards } => CGuard::Any(
            guards
                .iter()
                .map(|g| compile_guard(g, layout, index))
                .collect(),
        ),
        Guard::Not { guard } => CGuard::Not(Box::new(compile_guard(guard, layout, index))),
        Guard::KOfN {
            count,
            values,
            labels,
        } => CGuard::KOfN {
            count: count.get(),
            values: values
                .iter()
                .map(|v| resolve_labels(layout, index, v, labels))
                .collect(),
        },
        Guard::KOfMap {
            count,
            value,
            labels,
        } => CGuard::KOfMap {
            count: count.get(),
            key: resolve_labels(layout, index, value, labels),
        },
    }
}

/// Sum of the listed label counts of a key, or `None` when the key has no entry.
fn counted(layout: &Layout, assignment: &[u32], key: &(usize, Vec<usize>)) -> Option<u64> {
    let offset = layout.keys[key.0].offset;
    if assignment[offset] == 0 {
        return None;
    }
    Some(
        key.1
            .iter()
            .map(|l| u64::from(assignment[offset + 1 + l]))
            .sum(),
    )
}

fn matches_in(layout: &Layout, assignment: &[u32], key: &Option<(usize, Vec<usize>)>) -> bool {
    key.as_ref().is_some_and(|k| {
        let offset = layout.keys[k.0].offset;
        assignment[offset] != 0 && k.1.iter().any(|l| assignment[offset + 1 + l] > 0)
    })
}

fn eval_guard(guard: &CGuard, layout: &Layout, assignment: &[u32]) -> bool {
    match guard {
        CGuard::In { key } => matches_in(layout, assignment, key),
        CGuard::All(parts) => parts.iter().all(|g| eval_guard(g, layout, assignment)),
        CGuard::Any(parts) => parts.iter().any(|g| eval_guard(g, layout, assignment)),
        CGuard::Not(inner) => !eval_guard(inner, layout, assignment),
        CGuard::KOfN { count, values } => {
            let hits = values
                .iter()
                .filter(|v| matches_in(layout, assignment, v))
                .count();
            hits as u64 >= *count
        }
        CGuard::KOfMap { count, key } => key
            .as_ref()
            .and_then(|k| counted(layout, assignment, k))
            .is_some_and(|sum| sum >= *count),
    }
}
