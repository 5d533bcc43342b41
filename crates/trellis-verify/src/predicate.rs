//! Completion and presence predicates over control assignments, shared as a DAG of guards.

use std::rc::Rc;

use trellis_graph::Guard;

/// A shared predicate; sub-predicates are reused by reference, never copied.
pub(crate) type Pred<'g> = Rc<PredNode<'g>>;

/// A boolean formula whose atoms are authored guards.
#[derive(Debug)]
pub(crate) enum PredNode<'g> {
    Always,
    Never,
    Guard(&'g Guard),
    Not(Pred<'g>),
    And(Vec<Pred<'g>>),
    Or(Vec<Pred<'g>>),
    /// At least `k` of the operands hold.
    AtLeast(usize, Vec<Pred<'g>>),
}

thread_local! {
    /// The two constants, shared: every empty effect starts from `always`, and a fresh node
    /// each time was one of the analyzer's most frequent allocations. Predicates are compared
    /// by structure or memoized by address, and a constant compiles the same wherever it is.
    static ALWAYS: Pred<'static> = Rc::new(PredNode::Always);
    static NEVER: Pred<'static> = Rc::new(PredNode::Never);
}

pub(crate) fn always<'g>() -> Pred<'g> {
    ALWAYS.with(Rc::clone)
}

pub(crate) fn never<'g>() -> Pred<'g> {
    NEVER.with(Rc::clone)
}

pub(crate) fn guard(g: &Guard) -> Pred<'_> {
    Rc::new(PredNode::Guard(g))
}

pub(crate) fn not(p: Pred<'_>) -> Pred<'_> {
    match &*p {
        PredNode::Always => never(),
        PredNode::Never => always(),
        _ => Rc::new(PredNode::Not(p)),
    }
}

/// Conjunction. Constant-true operands are dropped; constant-false ones are kept so the
/// guards of the other operands still count towards the assignment space (as upstream).
pub(crate) fn and(parts: Vec<Pred<'_>>) -> Pred<'_> {
    let mut kept: Vec<Pred> = parts
        .into_iter()
        .filter(|p| !matches!(**p, PredNode::Always))
        .collect();
    match kept.len() {
        0 => always(),
        1 => kept.pop().unwrap_or_else(always),
        _ => Rc::new(PredNode::And(kept)),
    }
}

/// Disjunction; constant-false operands are dropped and a constant-true operand absorbs the
/// rest (a first-join that settles once every branch completes is unconstrained, as upstream).
pub(crate) fn or(parts: Vec<Pred<'_>>) -> Pred<'_> {
    if parts.iter().any(|p| matches!(**p, PredNode::Always)) {
        return always();
    }
    let mut kept: Vec<Pred> = parts
        .into_iter()
        .filter(|p| !matches!(**p, PredNode::Never))
        .collect();
    match kept.len() {
        0 => never(),
        1 => kept.pop().unwrap_or_else(never),
        _ => Rc::new(PredNode::Or(kept)),
    }
}

pub(crate) fn at_least(k: usize, parts: Vec<Pred<'_>>) -> Pred<'_> {
    if k == 0 {
        return always();
    }
    // Constant operands read no guards, so folding them loses no key from the space (an
    // all-join of branches that always complete is unconstrained).
    if parts.iter().all(|p| constant(p).is_some()) {
        let holding = parts.iter().filter(|p| constant(p) == Some(true)).count();
        return if holding >= k { always() } else { never() };
    }
    Rc::new(PredNode::AtLeast(k, parts))
}

/// The value of a constant predicate (`Always`/`Never`), `None` when it reads guards.
pub(crate) fn constant(pred: &Pred<'_>) -> Option<bool> {
    match **pred {
        PredNode::Always => Some(true),
        PredNode::Never => Some(false),
        _ => None,
    }
}

/// Whether a predicate is false on every assignment by its structure alone (a conjunction
/// with a `Never` operand, and the like). `false` means "not known", not "satisfiable".
pub(crate) fn never_holds(pred: &Pred<'_>) -> bool {
    match &**pred {
        PredNode::Never => true,
        PredNode::Always | PredNode::Guard(_) | PredNode::Not(_) => false,
        PredNode::And(parts) => parts.iter().any(never_holds),
        PredNode::Or(parts) => parts.iter().all(never_holds),
        PredNode::AtLeast(k, parts) => parts.iter().filter(|p| !never_holds(p)).count() < *k,
    }
}

/// Nodes seen up to this many are kept in a plain array: most predicates have a handful of
/// nodes, and a hash set's allocation and hashing dominated collecting their guards.
const SMALL_SEEN: usize = 16;

/// Addresses of the predicate nodes a walk has visited.
struct Seen {
    small: [*const (); SMALL_SEEN],
    len: usize,
    large: Option<crate::index::FastSet<*const ()>>,
}

impl Default for Seen {
    fn default() -> Self {
        Self {
            small: [std::ptr::null(); SMALL_SEEN],
            len: 0,
            large: None,
        }
    }
}

impl Seen {
    /// Records `node`; false when it was already seen.
    fn insert(&mut self, node: *const ()) -> bool {
        if let Some(large) = &mut self.large {
            return large.insert(node);
        }
        if self.small[..self.len].contains(&node) {
            return false;
        }
        if self.len < SMALL_SEEN {
            self.small[self.len] = node;
            self.len += 1;
            return true;
        }
        let mut large: crate::index::FastSet<*const ()> = self.small.iter().copied().collect();
        large.insert(node);
        self.large = Some(large);
        true
    }
}

/// Every guard atom of a predicate DAG, each shared sub-predicate visited once.
pub(crate) fn guards_of<'g>(pred: &Pred<'g>, out: &mut Vec<&'g Guard>) {
    if let PredNode::Guard(g) = &**pred {
        out.push(g);
        return;
    }
    // Borrowed nodes (no reference counting while walking); shared nodes are visited once.
    let mut seen = Seen::default();
    let mut stack: Vec<&PredNode<'g>> = vec![pred];
    while let Some(p) = stack.pop() {
        if !seen.insert(p as *const PredNode<'g> as *const ()) {
            continue;
        }
        match p {
            PredNode::Always | PredNode::Never => {}
            PredNode::Guard(g) => out.push(g),
            PredNode::Not(inner) => stack.push(inner),
            PredNode::And(parts) | PredNode::Or(parts) | PredNode::AtLeast(_, parts) => {
                stack.extend(parts.iter().rev().map(|part| &**part))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_guard() -> Guard {
        serde_json::from_value::<serde_json::Value>(serde_json::json!({
            "kind": "in", "value": {"name": "n", "source": "error", "field": null},
            "labels": ["timeout"]}))
        .ok()
        .and_then(|v| Guard::parse(&v, &trellis_graph::json::JsonPath::root()).ok())
        .unwrap()
    }

    #[test]
    fn conjunctions_keep_false_operands_but_disjunctions_absorb_true_ones() {
        let g = sample_guard();
        let with_never = and(vec![guard(&g), never()]);
        assert!(
            matches!(*with_never, PredNode::And(_)),
            "guards still count for the space"
        );
        assert!(never_holds(&with_never));
        assert_eq!(constant(&or(vec![guard(&g), always()])), Some(true));
        assert_eq!(constant(&and(vec![always(), always()])), Some(true));
        assert!(!never_holds(&guard(&g)));
        assert!(never_holds(&at_least(2, vec![guard(&g), never()])));
    }

    #[test]
    fn guard_collection_visits_shared_parts_once() {
        let g = sample_guard();
        let shared = guard(&g);
        let both = and(vec![shared.clone(), not(shared)]);
        let mut out = Vec::new();
        guards_of(&both, &mut out);
        assert_eq!(out.len(), 1);
    }
}
