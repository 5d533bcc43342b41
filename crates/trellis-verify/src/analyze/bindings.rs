//! Executables and terminals: data selectors, input bindings (§6.8) and write bindings with
//! their pending write facts.

use std::rc::Rc;

use trellis_graph::{
    DataSelector, DiagnosticCode, FieldName, FieldPath, Fields, GraphNode, InputBinding,
    OutputChannel, PayloadType, StepNode, WriteBinding,
};

use super::{Analyzer, Scope};
use crate::at::At;
use crate::flow::{Effects, Flow, Ty, WriteFact, record_possible, required_paths};
use crate::nodeset::NodeId;
use crate::predicate::never;

impl<'g> Analyzer<'_, 'g> {
    /// Resolves and checks a data selector at `at`; returns the type it produces.
    pub(crate) fn data_selector(
        &mut self,
        selector: &DataSelector,
        at: At,
        flow: &Flow,
        scope: &Scope<'g>,
    ) -> Option<Ty> {
        match selector {
            DataSelector::Item { path } => {
                // A map whose `over` has no element type analyses its body with no item type
                // at all, as if outside a map (§13.8).
                let Some(item) = scope.map.as_ref().and_then(|map| map.item.clone()) else {
                    self.diags.emit(
                        DiagnosticCode::InvalidGraphShape,
                        "item selector is legal only inside a map body",
                        at.path(self.index),
                        [],
                    );
                    return None;
                };
                let Some((ty, required)) = item.lookup(path) else {
                    self.missing_selector_path(at);
                    return None;
                };
                if !required {
                    self.undefined_selector(at);
                }
                Some(Rc::new(ty.clone()))
            }
            DataSelector::State { path } => {
                let key = Rc::new(path.clone());
                if let Some(element) = scope.map.as_ref().and_then(|m| m.overrides.get(&key)) {
                    return match flow.defined.get(&key) {
                        Some(t) if t.is_subtype_of(element) => Some(t.clone()),
                        _ => {
                            self.undefined_selector(at);
                            Some(element.clone())
                        }
                    };
                }
                let definition = flow.defined.get(&key);
                let Some((declared, required)) = scope.state.lookup(path) else {
                    // A definition made outside a narrower group state still types the
                    // read, as the reference does.
                    self.missing_selector_path(at);
                    return definition.cloned();
                };
                if !required && definition.is_none() {
                    self.undefined_selector(at);
                }
                Some(
                    definition
                        .cloned()
                        .unwrap_or_else(|| Rc::new(declared.clone())),
                )
            }
        }
    }

    fn missing_selector_path(&mut self, at: At) {
        self.diags.emit(
            DiagnosticCode::SchemaSafety,
            "selector path does not exist in its payload type",
            at.path(self.index),
            [],
        );
    }

    fn undefined_selector(&mut self, at: At) {
        self.diags.emit(
            DiagnosticCode::UndefinedRead,
            "selector path is not definitely defined on every reaching path",
            at.path(self.index),
            [],
        );
    }

    /// Checks bindings that construct `payload` (an executable's input or a succeed's output).
    pub(crate) fn input_bindings(
        &mut self,
        id: NodeId,
        payload: &PayloadType,
        bindings: &[InputBinding],
        fields: (&'static str, &'static str),
        flow: &Flow,
        scope: &Scope<'g>,
    ) {
        let (payload_field, bindings_field) = fields;
        // The bindings are still checked one by one (their targets cannot exist), as the
        // reference does.
        if !matches!(payload, PayloadType::Null | PayloadType::Record { .. }) {
            self.diags.emit(
                DiagnosticCode::SchemaSafety,
                "v1 field bindings cannot construct a whole non-record payload; use null or record",
                At::node(id).field(payload_field).path(self.index),
                [],
            );
        }
        for (i, binding) in bindings.iter().enumerate() {
            let b = At::node(id).field(bindings_field).index(i);
            let target = payload.lookup(&binding.target).map(|(t, _)| t);
            if target.is_none() {
                self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "binding target does not exist in declared payload",
                    b.field("target").path(self.index),
                    [],
                );
            }
            let source = self.data_selector(&binding.value, b.field("value"), flow, scope);
            if let (Some(source), Some(target)) = (&source, target)
                && !source.is_subtype_of(target)
            {
                self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "binding source is not a subtype of its target",
                    b.path(self.index),
                    [],
                );
            }
            if bindings[..i]
                .iter()
                .any(|earlier| earlier.target.overlaps(&binding.target))
            {
                self.diags.emit(
                    DiagnosticCode::WriteConflict,
                    "bindings have overlapping targets",
                    b.field("target").path(self.index),
                    [],
                );
            }
        }
        let Some(fields) = payload.fields() else {
            return;
        };
        uncovered_leaves(fields, bindings, &mut Vec::new(), &mut |leaf| {
            let Ok(leaf) = FieldPath::new(leaf.iter().map(|name| (*name).clone()).collect()) else {
                return;
            };
            self.diags.emit(
                DiagnosticCode::UndefinedRead,
                format!(
                    "required payload target {} is not defined by a binding",
                    leaf.dotted()
                ),
                At::node(id).field(bindings_field).path(self.index),
                [],
            );
        });
    }

    /// Step and verifier: input bindings, write bindings, and the executable's effects.
    pub(crate) fn executable(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let node = self.index.node(id);
        let Some(exec) = node.executable() else {
            return Effects::empty(flow);
        };
        self.input_bindings(
            id,
            &exec.input,
            &exec.input_bindings,
            ("input", "inputBindings"),
            flow,
            scope,
        );
        let writes = self.write_bindings(id, node, exec, flow, scope);
        let canon = self.canon(id);
        let mut effects = Effects::empty(flow);
        effects.definite_nodes.insert(canon);
        for fact in &writes {
            record_possible(&mut effects.possible_writes, &fact.target, &fact.ty);
        }
        if !writes.is_empty() {
            effects.pending.push((canon, writes));
        }
        effects.exit_failed.insert(canon);
        effects
    }

    /// Succeed and fail: terminals never fall through.
    pub(crate) fn terminal(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        if let GraphNode::Succeed(succeed) = self.index.node(id) {
            self.input_bindings(
                id,
                &succeed.output,
                &succeed.bindings,
                ("output", "bindings"),
                flow,
                scope,
            );
        }
        let mut effects = Effects::empty(flow);
        effects.definite_nodes.insert(self.canon(id));
        effects.falls_through = false;
        effects.completion = never();
        effects
    }

    /// Checks write bindings and returns the write facts (pending on this node's success).
    fn write_bindings(
        &mut self,
        id: NodeId,
        node: &'g GraphNode,
        exec: &'g StepNode,
        flow: &Flow,
        scope: &Scope<'g>,
    ) -> Vec<WriteFact> {
        let mut facts = Vec::new();
        for (i, write) in exec.write_bindings.iter().enumerate() {
            let w = At::node(id).field("writeBindings").index(i);
            let target_key = Rc::new(write.target.clone());
            let override_ty = scope
                .map
                .as_ref()
                .and_then(|m| m.overrides.get(&target_key));
            let target: Option<Ty> = match override_ty {
                Some(element) => Some(element.clone()),
                None => scope
                    .state
                    .lookup(&write.target)
                    .map(|(t, _)| Rc::new(t.clone())),
            };
            if target.is_none() {
                self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "write target does not exist in node state",
                    w.field("target").path(self.index),
                    [&exec.name],
                );
            }
            let source = &write.value.node;
            // A name resolves to its first occurrence, so a duplicate reading its own name
            // reads that occurrence, which counts as entered (as the reference has it).
            let source_id = self.index.lookup(source.as_str());
            let value_at = w.field("value");
            let reads_itself = source_id == Some(id);
            if !reads_itself {
                let entered = |s: NodeId| flow.dominates(s) || s == self.canon(id);
                if !source_id.is_some_and(entered) {
                    self.diags.emit(
                        DiagnosticCode::UndefinedRead,
                        format!("node output {source} does not dominate this read"),
                        value_at.path(self.index),
                        [source, &exec.name],
                    );
                }
                if source_id.is_some_and(|s| flow.failed.contains(s)) {
                    self.diags.emit(
                        DiagnosticCode::UndefinedRead,
                        format!("node output {source} is unavailable on its error path"),
                        value_at.path(self.index),
                        [source, &exec.name],
                    );
                }
            }
            // A node's own `out` is read from its own declaration; its signals and
            // diagnostic, like any other node's output, from the name's first occurrence
            // (they differ only for a duplicate name, as the reference has it).
            let source_node = if *source == exec.name && write.value.channel == OutputChannel::Out {
                Some(node)
            } else {
                source_id.map(|s| self.index.node(s))
            };
            let value = source_node.and_then(|n| resolve_output(n, write));
            if value.is_none() {
                self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "node output selector channel or path is invalid",
                    value_at.path(self.index),
                    [source],
                );
            }
            if let (Some((value_ty, _)), Some(target_ty)) = (&value, &target)
                && !value_ty.is_subtype_of(target_ty)
            {
                self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "write value is not a subtype of its state target",
                    w.path(self.index),
                    [source, &exec.name],
                );
            }
            if exec.write_bindings[..i]
                .iter()
                .any(|earlier| earlier.target.overlaps(&write.target))
            {
                self.diags.emit(
                    DiagnosticCode::WriteConflict,
                    "executable has overlapping write targets",
                    w.field("target").path(self.index),
                    [&exec.name],
                );
            }
            if let (Some((value_ty, required)), Some(_)) = (value, &target) {
                facts.push(write_fact(target_key, value_ty, required, self.canon(id)));
            }
        }
        facts
    }
}

/// Calls `uncovered` with every required leaf path of `fields` (in the order of
/// `PayloadType::required_leaf_paths`) that no binding target covers; the leaves are walked,
/// not listed, since every executable's input is checked.
fn uncovered_leaves<'t>(
    fields: &'t Fields,
    bindings: &[InputBinding],
    prefix: &mut Vec<&'t FieldName>,
    uncovered: &mut impl FnMut(&[&'t FieldName]),
) {
    for (name, field) in fields {
        if !field.required {
            continue;
        }
        prefix.push(name);
        match field.ty.fields() {
            Some(inner) if inner.values().any(|f| f.required) => {
                uncovered_leaves(inner, bindings, prefix, uncovered);
            }
            _ => {
                let covered = bindings.iter().any(|b| {
                    let target = b.target.segments();
                    target.len() <= prefix.len()
                        && target.iter().zip(prefix.iter()).all(|(t, p)| t == *p)
                });
                if !covered {
                    uncovered(prefix);
                }
            }
        }
        prefix.pop();
    }
}

/// The type a node-output selector reads and whether it is present on every success.
fn resolve_output(node: &GraphNode, write: &WriteBinding) -> Option<(Ty, bool)> {
    let selector = &write.value;
    let exec = node.executable()?;
    match selector.channel {
        OutputChannel::Out => exec
            .output
            .lookup(&selector.path)
            .map(|(t, r)| (Rc::new(t.clone()), r)),
        OutputChannel::Signal => {
            let GraphNode::Verifier(v) = node else {
                return None;
            };
            let [field] = selector.path.segments() else {
                return None;
            };
            let labels = v.signals.get(field)?;
            Some((
                Rc::new(PayloadType::Enum {
                    values: labels.clone(),
                }),
                true,
            ))
        }
        OutputChannel::Diagnostic => {
            let GraphNode::Verifier(v) = node else {
                return None;
            };
            v.diagnostic
                .lookup(&selector.path)
                .map(|(t, r)| (Rc::new(t.clone()), r))
        }
    }
}

/// A write's guaranteed paths: the target and the value's required descendants, but only
/// when the source path is required all the way down.
pub(crate) fn write_fact(
    target: Rc<FieldPath>,
    ty: Ty,
    required: bool,
    producer: NodeId,
) -> WriteFact {
    let mut guaranteed = std::collections::BTreeMap::new();
    if required {
        guaranteed.insert(target.clone(), ty.clone());
        let mut below = std::collections::BTreeMap::new();
        required_paths(&ty, &mut target.segments().to_vec(), &mut below);
        guaranteed.extend(below);
    }
    WriteFact {
        target,
        ty,
        guaranteed,
        producers: vec![producer],
    }
}
