//! Guard validation (§6.5): selector dominance and legality, then label checks per guard form.

use trellis_graph::{ControlSelector, ControlSource, DiagnosticCode, EnumSet, Guard, NodeName};

use crate::at::At;
use crate::diag::{Diags, Step, extend};
use crate::domain::{domain, key_of};
use crate::index::Index;
use crate::nodeset::NodeId;

/// One guard evaluated before a selector: an earlier conjunct of an `all` (it held) or an
/// earlier disjunct of an `any` (it failed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Earlier<'g> {
    pub(crate) guard: &'g Guard,
    pub(crate) held: bool,
}

/// Decides whether an `error` selector of a node that does not dominate the guard is still
/// legal under the guard's evaluation prefix (§13.6).
pub(crate) type Masked<'m, 'g> = dyn FnMut(NodeId, &[Earlier<'g>]) -> bool + 'm;

/// Validates one guard at `base`; returns whether it is valid (no diagnostic fired).
pub(crate) fn validate<'g>(
    index: &Index<'g>,
    guard: &'g Guard,
    available: &dyn Fn(NodeId) -> bool,
    masked: &mut Masked<'_, 'g>,
    base: At,
    code: DiagnosticCode,
    diags: &mut Diags,
) -> bool {
    let mut valid = true;
    let mut prefix = Vec::new();
    for_each_selector(guard, &mut prefix, &mut |sel, in_k_of_map, prefix| {
        let key = key_of(index, sel);
        let dominates = key.is_some_and(|k| {
            available(k.node)
                || (in_k_of_map && index.entry(k.node).map_owner.is_some_and(available))
                || (sel.source == ControlSource::Error && masked(k.node, prefix))
        });
        if !dominates {
            valid = false;
            diags.emit(
                DiagnosticCode::UndefinedRead,
                format!("control selector {} does not dominate this guard", sel.name),
                base.path(index),
                [&sel.name],
            );
        }
        if key.and_then(|k| domain(index, &k)).is_none() {
            valid = false;
            diags.emit(
                code,
                format!("illegal control selector for node {}", sel.name),
                base.path(index),
                [&sel.name],
            );
        }
    });
    let mut labels = LabelCheck {
        index,
        base,
        code,
        diags,
        valid: true,
    };
    labels.check(guard, &mut Vec::new());
    valid && labels.valid
}

/// Every selector of a guard in pre-order with multiplicity, flagged when read by a
/// `k_of_map`.
pub(crate) fn selectors_with_k_of_map(guard: &Guard) -> Vec<(&ControlSelector, bool)> {
    let mut out = Vec::new();
    for_each_selector(guard, &mut Vec::new(), &mut |sel, in_k_of_map, _| {
        out.push((sel, in_k_of_map))
    });
    out
}

/// Calls `visit` on every selector in pre-order with multiplicity, flagged when read by a
/// `k_of_map`, with the guards evaluated before it (no list is built: validation runs once
/// per guard of every choice).
fn for_each_selector<'g>(
    guard: &'g Guard,
    prefix: &mut Vec<Earlier<'g>>,
    visit: &mut impl FnMut(&'g ControlSelector, bool, &[Earlier<'g>]),
) {
    match guard {
        Guard::In { value, .. } => visit(value, false, prefix),
        Guard::KOfMap { value, .. } => visit(value, true, prefix),
        Guard::KOfN { values, .. } => values.iter().for_each(|v| visit(v, false, prefix)),
        Guard::All { guards } | Guard::Any { guards } => {
            let held = matches!(guard, Guard::All { .. });
            let depth = prefix.len();
            for g in guards {
                for_each_selector(g, prefix, visit);
                prefix.push(Earlier { guard: g, held });
            }
            prefix.truncate(depth);
        }
        Guard::Not { guard } => for_each_selector(guard, prefix, visit),
    }
}

struct LabelCheck<'a, 'g> {
    index: &'a Index<'g>,
    base: At,
    code: DiagnosticCode,
    diags: &'a mut Diags,
    valid: bool,
}

impl<'g> LabelCheck<'_, 'g> {
    fn domain(&self, sel: &'g ControlSelector) -> Option<&'g EnumSet> {
        key_of(self.index, sel).and_then(|k| domain(self.index, &k))
    }

    fn fail<'n>(
        &mut self,
        message: &str,
        steps: &[Step],
        related: impl IntoIterator<Item = &'n NodeName>,
    ) {
        self.valid = false;
        self.diags.emit(
            self.code,
            message,
            extend(&self.base.path(self.index), steps),
            related,
        );
    }

    fn check(&mut self, guard: &'g Guard, steps: &mut Vec<Step>) {
        match guard {
            Guard::In { value, labels } => {
                if let Some(dom) = self.domain(value)
                    && !labels.is_subset(dom)
                {
                    steps.push(Step::Field("labels"));
                    self.fail(
                        "guard labels exceed the selector's closed domain",
                        steps,
                        [&value.name],
                    );
                    steps.pop();
                }
            }
            Guard::All { guards } | Guard::Any { guards } => {
                for (j, inner) in guards.iter().enumerate() {
                    steps.extend([Step::Field("guards"), Step::Index(j)]);
                    self.check(inner, steps);
                    steps.truncate(steps.len() - 2);
                }
            }
            Guard::Not { guard } => {
                steps.push(Step::Field("guard"));
                self.check(guard, steps);
                steps.pop();
            }
            Guard::KOfN {
                count,
                values,
                labels,
            } => self.check_k_of_n(count.get(), values, labels, steps),
            Guard::KOfMap {
                count,
                value,
                labels,
            } => {
                let owner =
                    key_of(self.index, value).and_then(|k| self.index.entry(k.node).map_owner);
                match owner {
                    None => {
                        steps.push(Step::Field("value"));
                        self.fail(
                            "k_of_map selector has no bounded enclosing map scope",
                            steps,
                            [&value.name],
                        );
                        steps.pop();
                    }
                    Some(map) => {
                        let bound = match self.index.node(map) {
                            trellis_graph::GraphNode::Map(m) => m.max_items.get(),
                            _ => u64::MAX,
                        };
                        if count.get() > bound {
                            steps.push(Step::Field("count"));
                            self.fail(
                                "k_of_map count exceeds the selected map bound",
                                steps,
                                [&value.name],
                            );
                            steps.pop();
                        }
                    }
                }
                if let Some(dom) = self.domain(value)
                    && !labels.is_subset(dom)
                {
                    steps.push(Step::Field("labels"));
                    self.fail(
                        "k_of_map labels exceed the selector's closed domain",
                        steps,
                        [&value.name],
                    );
                    steps.pop();
                }
            }
        }
    }

    fn check_k_of_n(
        &mut self,
        count: u64,
        values: &'g [ControlSelector],
        labels: &EnumSet,
        steps: &mut Vec<Step>,
    ) {
        if count > values.len() as u64 {
            steps.push(Step::Field("count"));
            self.fail("k_of_n count exceeds selector count", steps, []);
            steps.pop();
        }
        let domains: Vec<Option<&'g EnumSet>> = values.iter().map(|v| self.domain(v)).collect();
        let covered = labels
            .iter()
            .all(|label| domains.iter().flatten().any(|d| d.contains(label.as_str())));
        steps.push(Step::Field("labels"));
        if !covered {
            self.fail(
                "k_of_n labels exceed the selectors' combined closed domains",
                steps,
                values.iter().map(|v| &v.name),
            );
        }
        for (value, dom) in values.iter().zip(&domains) {
            if let Some(dom) = dom
                && !labels.iter().any(|l| dom.contains(l.as_str()))
            {
                self.fail(
                    "k_of_n labels do not intersect a selector domain",
                    steps,
                    [&value.name],
                );
            }
        }
        steps.pop();
    }
}
