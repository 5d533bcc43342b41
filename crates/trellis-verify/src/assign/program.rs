//! Compiled form of a check's predicates: a flat key layout for assignments and a predicate
//! program evaluated once per assignment (shared sub-predicates evaluated once).

use std::collections::BTreeMap;
use std::rc::Rc;

use trellis_graph::EnumSet;

use super::resolved::{GuardTable, KeyRef, ResolvedGuard, Shape};
use crate::domain::SelKey;
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

    /// For a par's `joined`/`raced` key: the domain positions of its positive (`reached`,
    /// `satisfied`) and negative (`quorum_unreachable`, `no_satisfier`) labels,
    /// [`LABEL_ABSENT`] where the domain lacks one.
    pub(crate) fn join_labels(&self) -> JoinLabels {
        let label = |l: &str| self.label_index(l).map_or(LABEL_ABSENT, |at| at as u32);
        JoinLabels {
            positive: [label("reached"), label("satisfied")],
            negative: [label("quorum_unreachable"), label("no_satisfier")],
        }
    }
}

/// A label position a domain lacks.
pub(crate) const LABEL_ABSENT: u32 = u32::MAX;

/// The positive and negative labels of a join key (see [`KeySlot::join_labels`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct JoinLabels {
    pub(crate) positive: [u32; 2],
    pub(crate) negative: [u32; 2],
}

impl JoinLabels {
    /// Whether `counts` (a join key's label counts) counts one of `labels`.
    pub(crate) fn any_counted(labels: &[u32; 2], counts: &[u32]) -> bool {
        labels
            .iter()
            .any(|l| *l != LABEL_ABSENT && counts.get(*l as usize).is_some_and(|c| *c > 0))
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

    /// Adds a key known to take `domain` and returns its position.
    pub(crate) fn add(&mut self, key: SelKey<'g>, domain: &'g EnumSet) -> usize {
        match self.position(&key) {
            Some(at) => at,
            None => self.insert(key, domain),
        }
    }

    /// Empties the layout for the next check, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.by_key.clear();
        self.stride = 0;
    }

    fn insert(&mut self, key: SelKey<'g>, domain: &'g EnumSet) -> usize {
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
        at
    }
}

/// One compiled operation; operands always precede their users, so one pass in order
/// evaluates a program.
#[derive(Debug, Clone, Copy)]
enum Op {
    Const(bool),
    /// The key at layout position `key` (its words start at `offset`) is present and counts
    /// one of the labels in `labels` (a range of [`Program::labels`]).
    In {
        key: u32,
        offset: u32,
        labels: (u32, u32),
    },
    /// The key is present and its listed labels count at least `count` in all.
    KOfMap {
        key: u32,
        offset: u32,
        labels: (u32, u32),
        count: u64,
    },
    Not(u32),
    /// Ranges of [`Program::operands`].
    And(u32, u32),
    Or(u32, u32),
    AtLeast(u64, u32, u32),
}

/// Predicates compiled against a layout.
#[derive(Debug, Default)]
pub(crate) struct Program {
    ops: Vec<Op>,
    operands: Vec<u32>,
    labels: Vec<u32>,
    /// Operands of the compounds being compiled (a stack: nested compounds push above their
    /// parent's and move theirs out before the parent continues).
    pending: Vec<u32>,
    /// Compiled ops by predicate address; the predicates outlive the program (they are owned
    /// by the check's roots and the analyzer's control facts), so addresses stay unique.
    memo: crate::addrmap::AddrMap<usize>,
}

/// Compiles one check's predicates: the layout they read and the resolved guards.
pub(crate) struct Compiler<'a, 'g> {
    pub(crate) program: &'a mut Program,
    pub(crate) layout: &'a Layout<'g>,
    pub(crate) index: &'a Index<'g>,
    pub(crate) guards: &'a GuardTable<'g>,
}

impl<'g> Compiler<'_, 'g> {
    /// Compiles a predicate (memoized per shared node) and returns its op index.
    pub(crate) fn compile(&mut self, pred: &Pred<'g>) -> usize {
        let ptr = Rc::as_ptr(pred) as *const ();
        if let Some(at) = self.program.memo.get(ptr) {
            return *at;
        }
        let at = match &**pred {
            PredNode::Always => self.program.push(Op::Const(true)),
            PredNode::Never => self.program.push(Op::Const(false)),
            PredNode::Guard(g) => {
                let resolved = self.guards.get(self.index, g);
                self.shape(&resolved, &resolved.shape)
            }
            PredNode::Not(inner) => {
                let inner = self.compile(inner) as u32;
                self.program.push(Op::Not(inner))
            }
            PredNode::And(parts) => {
                let range = self.compile_all(parts);
                self.program.push(Op::And(range.0, range.1))
            }
            PredNode::Or(parts) => {
                let range = self.compile_all(parts);
                self.program.push(Op::Or(range.0, range.1))
            }
            PredNode::AtLeast(k, parts) => {
                let range = self.compile_all(parts);
                self.program.push(Op::AtLeast(*k as u64, range.0, range.1))
            }
        };
        self.program.memo.insert_new(ptr, at);
        at
    }

    fn compile_all(&mut self, parts: &[Pred<'g>]) -> (u32, u32) {
        let base = self.program.pending.len();
        for part in parts {
            let op = self.compile(part) as u32;
            self.program.pending.push(op);
        }
        self.program.operands_from(base)
    }

    /// Where the key lives in this check's assignments, with its labels copied into the
    /// program; `None` when the check does not read the key.
    fn locate(
        &mut self,
        resolved: &ResolvedGuard<'g>,
        key: &KeyRef<'g>,
    ) -> Option<(u32, u32, (u32, u32))> {
        let at = self.layout.position(&key.key)?;
        let offset = self.layout.keys[at].offset as u32;
        let start = self.program.labels.len() as u32;
        self.program
            .labels
            .extend_from_slice(resolved.labels_of(key));
        Some((at as u32, offset, (start, self.program.labels.len() as u32)))
    }

    fn matches(&mut self, resolved: &ResolvedGuard<'g>, key: &Option<KeyRef<'g>>) -> usize {
        match key.as_ref().and_then(|k| self.locate(resolved, k)) {
            Some((key, offset, labels)) => self.program.push(Op::In {
                key,
                offset,
                labels,
            }),
            None => self.program.push(Op::Const(false)),
        }
    }

    fn shape(&mut self, resolved: &ResolvedGuard<'g>, shape: &Shape<'g>) -> usize {
        match shape {
            Shape::In(key) => self.matches(resolved, key),
            Shape::All(parts) | Shape::Any(parts) => {
                let base = self.program.pending.len();
                for part in parts {
                    let op = self.shape(resolved, part) as u32;
                    self.program.pending.push(op);
                }
                let (start, end) = self.program.operands_from(base);
                let op = match shape {
                    Shape::All(_) => Op::And(start, end),
                    _ => Op::Or(start, end),
                };
                self.program.push(op)
            }
            Shape::Not(inner) => {
                let inner = self.shape(resolved, inner) as u32;
                self.program.push(Op::Not(inner))
            }
            Shape::KOfN { count, values } => {
                let base = self.program.pending.len();
                for value in values {
                    let op = self.matches(resolved, value) as u32;
                    self.program.pending.push(op);
                }
                let (start, end) = self.program.operands_from(base);
                self.program.push(Op::AtLeast(*count, start, end))
            }
            Shape::KOfMap { count, key } => {
                match key.as_ref().and_then(|k| self.locate(resolved, k)) {
                    Some((key, offset, labels)) => self.program.push(Op::KOfMap {
                        key,
                        offset,
                        labels,
                        count: *count,
                    }),
                    None => self.program.push(Op::Const(false)),
                }
            }
        }
    }
}

impl Program {
    fn push(&mut self, op: Op) -> usize {
        self.ops.push(op);
        self.ops.len() - 1
    }

    /// Moves the operands gathered on [`Program::pending`] since `base` into the operand list.
    fn operands_from(&mut self, base: usize) -> (u32, u32) {
        let start = self.operands.len() as u32;
        self.operands.extend(self.pending.drain(base..));
        (start, self.operands.len() as u32)
    }

    /// Empties the program for the next check, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.ops.clear();
        self.operands.clear();
        self.labels.clear();
        self.pending.clear();
        self.memo.clear();
    }

    /// Evaluates every op over one assignment.
    pub(crate) fn evaluate(&self, assignment: &[u32], values: &mut Vec<bool>) {
        values.clear();
        let range = |start: u32, end: u32| &self.operands[start as usize..end as usize];
        for op in &self.ops {
            let value = match *op {
                Op::Const(b) => b,
                Op::In { .. } | Op::KOfMap { .. } => self.read(op, assignment),
                Op::Not(i) => !values[i as usize],
                Op::And(start, end) => range(start, end).iter().all(|i| values[*i as usize]),
                Op::Or(start, end) => range(start, end).iter().any(|i| values[*i as usize]),
                Op::AtLeast(k, start, end) => {
                    range(start, end)
                        .iter()
                        .filter(|i| values[**i as usize])
                        .count() as u64
                        >= k
                }
            };
            values.push(value);
        }
    }

    /// Every op that reads a key, with the key's layout position.
    pub(crate) fn key_reads(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.ops.iter().enumerate().filter_map(|(at, op)| match op {
            Op::In { key, .. } | Op::KOfMap { key, .. } => Some((at, *key as usize)),
            _ => None,
        })
    }

    /// The value of an op that reads a key, on an assignment.
    fn read(&self, op: &Op, assignment: &[u32]) -> bool {
        match *op {
            Op::In { offset, .. } | Op::KOfMap { offset, .. } => {
                let at = offset as usize;
                assignment[at] != 0 && self.read_counts(op, &assignment[at + 1..])
            }
            _ => false,
        }
    }

    /// The value of op `at` (one that reads a key) given the key present with `counts`.
    pub(crate) fn read_present(&self, at: usize, counts: &[u32]) -> bool {
        self.read_counts(&self.ops[at], counts)
    }

    fn read_counts(&self, op: &Op, counts: &[u32]) -> bool {
        let labels = |(start, end): (u32, u32)| &self.labels[start as usize..end as usize];
        let count = |l: &u32| counts.get(*l as usize).copied().unwrap_or(0);
        match *op {
            Op::In { labels: l, .. } => labels(l).iter().any(|l| count(l) > 0),
            Op::KOfMap {
                labels: l,
                count: k,
                ..
            } => labels(l).iter().map(|l| u64::from(count(l))).sum::<u64>() >= k,
            _ => false,
        }
    }
}
