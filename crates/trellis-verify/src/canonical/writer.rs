//! The canonical JSON writer: compact output with byte-sorted keys, every object written with
//! its keys already in UTF-8 byte order, and the identity-order-insensitive collections
//! (bindings, par branches, promoted paths, commutative guard operands, `k_of_n` selectors)
//! written into buffers and sorted by their bytes.

use trellis_graph::{
    ControlSelector, DataSelector, EnumSet, FieldPath, GraphNode, GraphProfile, Guard,
    InputBinding, Join, OutputChannel, PayloadType, PolicyBinding, StepNode, StructuralBounds,
    TerminationWitness, WriteBinding,
};

#[derive(Default)]
pub(super) struct Writer {
    pub(super) out: Vec<u8>,
}

/// The parts of a compiled IR after its bounds, in canonical key order.
pub(super) struct Tail<'a> {
    pub(super) initial_input: &'a PayloadType,
    pub(super) policy: &'a PolicyBinding,
    pub(super) profile: GraphProfile,
    pub(super) root: &'a GraphNode,
}

impl Writer {
    /// `{"bounds":…` up to (not including) the comma before `initialInput`.
    pub(super) fn head(&mut self, bounds: &StructuralBounds) {
        self.raw("{\"bounds\":");
        self.bounds(bounds);
    }

    /// Everything after the bounds: `,"initialInput":…` through the closing brace.
    pub(super) fn tail(&mut self, tail: &Tail) {
        self.raw(",\"initialInput\":");
        self.payload(tail.initial_input);
        self.raw(",\"policy\":{\"default\":\"deny\",\"policy\":");
        self.string(tail.policy.policy.as_str());
        self.raw("},\"profile\":");
        self.string(tail.profile.as_str());
        self.raw(",\"root\":");
        self.node(tail.root);
        self.raw("}");
    }

    fn raw(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }

    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.out.extend_from_slice(&digits[at..]);
    }

    /// serde_json's escaping: `\"`, `\\`, short escapes, `\u00xx` for other controls,
    /// everything else raw.
    fn string(&mut self, s: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.out.push(b'"');
        let bytes = s.as_bytes();
        // Most strings (names, labels, kinds) need no escaping and are copied whole.
        if !bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
            self.out.extend_from_slice(bytes);
            self.out.push(b'"');
            return;
        }
        let mut run = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let short: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                0x08 => b"\\b",
                0x0c => b"\\f",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x00..=0x1f => b"",
                _ => continue,
            };
            self.out.extend_from_slice(&bytes[run..i]);
            if short.is_empty() {
                let code = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ];
                self.out.extend_from_slice(&code);
            } else {
                self.out.extend_from_slice(short);
            }
            run = i + 1;
        }
        self.out.extend_from_slice(&bytes[run..]);
        self.out.push(b'"');
    }

    /// Writes `items` each into its own buffer, sorts them by bytes (optionally dropping
    /// duplicates) and emits them as a JSON array.
    fn sorted_array<T>(&mut self, items: &[T], dedup: bool, mut one: impl FnMut(&mut Writer, &T)) {
        let mut parts = encode_each(items, &mut one);
        parts.sort();
        if dedup {
            parts.dedup();
        }
        self.array_of_parts(&parts);
    }

    fn array_of_parts(&mut self, parts: &[Vec<u8>]) {
        self.out.push(b'[');
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(part);
        }
        self.out.push(b']');
    }

    fn path(&mut self, path: &FieldPath) {
        self.out.push(b'[');
        for (i, segment) in path.segments().iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.string(segment.as_str());
        }
        self.out.push(b']');
    }

    fn labels(&mut self, set: &EnumSet) {
        self.out.push(b'[');
        for (i, label) in set.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.string(label.as_str());
        }
        self.out.push(b']');
    }

    fn bounds(&mut self, bounds: &StructuralBounds) {
        self.raw("{\"attemptsPerNode\":{");
        for (i, (name, attempts)) in bounds.attempts_per_node.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.string(name.as_str());
            self.out.push(b':');
            self.number(attempts.get());
        }
        self.raw("},\"maxNodeExecutions\":");
        self.number(bounds.max_node_executions.get());
        self.raw(",\"peakConcurrency\":");
        self.number(bounds.peak_concurrency.get());
        self.raw(",\"termination\":");
        match &bounds.termination {
            TerminationWitness::Acyclic { order } => {
                self.raw("{\"kind\":\"acyclic\",\"order\":[");
                for (i, name) in order.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.string(name.as_str());
                }
                self.raw("]}");
            }
            TerminationWitness::Bounded {
                ranking,
                max_iterations,
            } => {
                self.raw("{\"kind\":\"bounded\",\"maxIterations\":");
                self.number(max_iterations.get());
                self.raw(",\"ranking\":[");
                for (i, path) in ranking.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.path(path);
                }
                self.raw("]}");
            }
        }
        self.raw("}");
    }

    fn payload(&mut self, ty: &PayloadType) {
        match ty {
            PayloadType::Record { fields } => {
                self.raw("{\"fields\":{");
                for (i, (name, field)) in fields.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.string(name.as_str());
                    self.raw(if field.required {
                        ":{\"required\":true,\"type\":"
                    } else {
                        ":{\"required\":false,\"type\":"
                    });
                    self.payload(&field.ty);
                    self.raw("}");
                }
                self.raw("},\"kind\":\"record\"}");
            }
            PayloadType::Array { items } => {
                self.raw("{\"items\":");
                self.payload(items);
                self.raw(",\"kind\":\"array\"}");
            }
            PayloadType::Enum { values } => {
                self.raw("{\"kind\":\"enum\",\"values\":");
                self.labels(values);
                self.raw("}");
            }
            scalar => {
                self.raw("{\"kind\":");
                self.string(scalar.kind_name());
                self.raw("}");
            }
        }
    }

    fn data_selector(&mut self, selector: &DataSelector) {
        self.raw("{\"path\":");
        self.path(selector.path());
        self.raw(match selector {
            DataSelector::State { .. } => ",\"source\":\"state\"}",
            DataSelector::Item { .. } => ",\"source\":\"item\"}",
        });
    }

    fn input_binding(&mut self, binding: &InputBinding) {
        self.raw("{\"target\":");
        self.path(&binding.target);
        self.raw(",\"value\":");
        self.data_selector(&binding.value);
        self.raw("}");
    }

    fn write_binding(&mut self, binding: &WriteBinding) {
        self.raw("{\"target\":");
        self.path(&binding.target);
        self.raw(",\"value\":{\"channel\":");
        self.string(match binding.value.channel {
            OutputChannel::Out => "out",
            OutputChannel::Signal => "signal",
            OutputChannel::Diagnostic => "diagnostic",
        });
        self.raw(",\"node\":");
        self.string(binding.value.node.as_str());
        self.raw(",\"path\":");
        self.path(&binding.value.path);
        self.raw("}}");
    }

    fn selector(&mut self, selector: &ControlSelector) {
        self.raw("{\"field\":");
        match &selector.field {
            Some(field) => self.string(field.as_str()),
            None => self.raw("null"),
        }
        self.raw(",\"name\":");
        self.string(selector.name.as_str());
        self.raw(",\"source\":");
        self.string(selector.source.as_str());
        self.raw("}");
    }

    fn guard(&mut self, guard: &Guard) {
        match guard {
            Guard::In { value, labels } => {
                self.raw("{\"kind\":\"in\",\"labels\":");
                self.labels(labels);
                self.raw(",\"value\":");
                self.selector(value);
                self.raw("}");
            }
            Guard::All { .. } | Guard::Any { .. } => {
                let kind = if matches!(guard, Guard::All { .. }) {
                    "all"
                } else {
                    "any"
                };
                let mut operands = operands(guard);
                operands.sort();
                operands.dedup();
                self.raw("{\"guards\":");
                self.array_of_parts(&operands);
                self.raw(",\"kind\":");
                self.string(kind);
                self.raw("}");
            }
            Guard::Not { guard } => {
                self.raw("{\"guard\":");
                self.guard(guard);
                self.raw(",\"kind\":\"not\"}");
            }
            Guard::KOfN {
                count,
                values,
                labels,
            } => {
                self.raw("{\"count\":");
                self.number(count.get());
                self.raw(",\"kind\":\"k_of_n\",\"labels\":");
                self.labels(labels);
                self.raw(",\"values\":");
                self.sorted_array(values, false, |w, v| w.selector(v));
                self.raw("}");
            }
            Guard::KOfMap {
                count,
                value,
                labels,
            } => {
                self.raw("{\"count\":");
                self.number(count.get());
                self.raw(",\"kind\":\"k_of_map\",\"labels\":");
                self.labels(labels);
                self.raw(",\"value\":");
                self.selector(value);
                self.raw("}");
            }
        }
    }

    fn promoted(&mut self, paths: &[FieldPath]) {
        self.raw("\"promotedStatePaths\":");
        self.sorted_array(paths, true, |w, p| w.path(p));
    }

    fn state_and_close(&mut self, state: &PayloadType) {
        self.raw(",\"state\":");
        self.payload(state);
        self.raw("}");
    }

    fn name(&mut self, name: &str) {
        self.raw(",\"name\":");
        self.string(name);
    }

    fn executable(&mut self, kind: &str, exec: &StepNode, verifier: Option<&GraphNode>) {
        self.raw("{\"attempts\":");
        self.number(exec.attempts.get());
        if let Some(GraphNode::Verifier(v)) = verifier {
            self.raw(",\"diagnostic\":");
            self.payload(&v.diagnostic);
        }
        self.raw(",\"input\":");
        self.payload(&exec.input);
        self.raw(",\"inputBindings\":");
        self.sorted_array(&exec.input_bindings, false, |w, b| w.input_binding(b));
        if let Some(instructions) = &exec.instructions {
            self.raw(",\"instructions\":");
            self.string(instructions.as_str());
        }
        self.raw(",\"kind\":");
        self.string(kind);
        self.name(exec.name.as_str());
        self.raw(",\"output\":");
        self.payload(&exec.output);
        if let Some(GraphNode::Verifier(v)) = verifier {
            self.raw(",\"signals\":{");
            for (i, (name, labels)) in v.signals.iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                self.string(name.as_str());
                self.out.push(b':');
                self.labels(labels);
            }
            self.raw("}");
        }
        if let Some(timeout) = exec.timeout_ms {
            self.raw(",\"timeoutMs\":");
            self.number(timeout.get());
        }
        self.raw(",\"worker\":");
        self.string(exec.worker.as_str());
        self.raw(",\"writeBindings\":");
        self.sorted_array(&exec.write_bindings, false, |w, b| w.write_binding(b));
        self.raw("}");
    }

    fn node(&mut self, node: &GraphNode) {
        match node {
            GraphNode::Step(step) => self.executable("step", step, None),
            GraphNode::Verifier(v) => self.executable("verifier", &v.exec, Some(node)),
            GraphNode::Seq(seq) => {
                self.raw("{\"children\":[");
                for (i, child) in seq.children.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.node(child);
                }
                self.raw("],\"kind\":\"seq\"");
                self.name(seq.name.as_str());
                self.raw(",");
                self.promoted(&seq.promoted_state_paths);
                self.state_and_close(&seq.state);
            }
            GraphNode::Choice(choice) => {
                self.raw("{\"branches\":[");
                for (i, branch) in choice.branches.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.raw("{\"node\":");
                    self.node(&branch.node);
                    self.raw(",\"when\":");
                    self.guard(&branch.when);
                    self.raw("}");
                }
                self.raw("],\"kind\":\"choice\"");
                self.name(choice.name.as_str());
                self.raw(",\"otherwise\":");
                match &choice.otherwise {
                    Some(otherwise) => self.node(otherwise),
                    None => self.raw("null"),
                }
                self.raw(",");
                self.promoted(&choice.promoted_state_paths);
                self.state_and_close(&choice.state);
            }
            GraphNode::Par(par) => {
                let mut branches: Vec<(&str, Vec<u8>)> = par
                    .branches
                    .iter()
                    .map(|b| (b.name().as_str(), encode(|w| w.node(b))))
                    .collect();
                branches.sort_by(|a, b| a.0.cmp(b.0));
                let parts: Vec<Vec<u8>> = branches.into_iter().map(|(_, bytes)| bytes).collect();
                self.raw("{\"branches\":");
                self.array_of_parts(&parts);
                self.raw(",\"join\":");
                match &par.join {
                    Join::All => self.raw("{\"kind\":\"all\"}"),
                    Join::Any => self.raw("{\"kind\":\"any\"}"),
                    Join::Quorum { count } => {
                        self.raw("{\"count\":");
                        self.number(count.get());
                        self.raw(",\"kind\":\"quorum\"}");
                    }
                    Join::First { when } => {
                        self.raw("{\"kind\":\"first\",\"when\":");
                        self.guard(when);
                        self.raw("}");
                    }
                }
                self.raw(",\"kind\":\"par\"");
                self.name(par.name.as_str());
                self.raw(",");
                self.promoted(&par.promoted_state_paths);
                self.state_and_close(&par.state);
            }
            GraphNode::Loop(l) => {
                self.raw("{\"body\":");
                self.node(&l.body);
                self.raw(",\"kind\":\"loop\",\"maxIterations\":");
                self.number(l.max_iterations.get());
                if let Some(input) = &l.max_iterations_input {
                    self.raw(",\"maxIterationsInput\":");
                    self.path(input);
                }
                self.name(l.name.as_str());
                self.raw(",");
                self.promoted(&l.promoted_state_paths);
                self.raw(",\"state\":");
                self.payload(&l.state);
                if let Some(until) = &l.until {
                    self.raw(",\"until\":");
                    self.guard(until);
                }
                self.raw("}");
            }
            GraphNode::Map(m) => {
                self.raw("{\"body\":");
                self.node(&m.body);
                self.raw(",\"kind\":\"map\",\"maxItems\":");
                self.number(m.max_items.get());
                self.name(m.name.as_str());
                self.raw(",\"over\":");
                self.data_selector(&m.over);
                self.raw(",");
                self.promoted(&m.promoted_state_paths);
                self.state_and_close(&m.state);
            }
            GraphNode::Succeed(s) => {
                self.raw("{\"bindings\":");
                self.sorted_array(&s.bindings, false, |w, b| w.input_binding(b));
                self.raw(",\"kind\":\"succeed\"");
                self.name(s.name.as_str());
                self.raw(",\"output\":");
                self.payload(&s.output);
                self.raw("}");
            }
            GraphNode::Fail(f) => {
                self.raw("{\"kind\":\"fail\"");
                self.name(f.name.as_str());
                self.raw(",\"reason\":");
                self.string(f.reason.as_str());
                self.raw("}");
            }
        }
    }
}

fn encode(one: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    one(&mut w);
    w.out
}

fn encode_each<T>(items: &[T], one: &mut impl FnMut(&mut Writer, &T)) -> Vec<Vec<u8>> {
    items
        .iter()
        .map(|item| {
            let mut w = Writer::default();
            one(&mut w, item);
            w.out
        })
        .collect()
}

/// The canonical operands of an `all`/`any`: each operand normalized, and operands of the
/// same kind flattened one level (they are already flat, having been normalized first).
fn operands(guard: &Guard) -> Vec<Vec<u8>> {
    let (Guard::All { guards } | Guard::Any { guards }) = guard else {
        return vec![encode(|w| w.guard(guard))];
    };
    let same_kind = |g: &Guard| {
        matches!(
            (guard, g),
            (Guard::All { .. }, Guard::All { .. }) | (Guard::Any { .. }, Guard::Any { .. })
        )
    };
    let mut out = Vec::with_capacity(guards.len());
    for g in guards {
        if same_kind(g) {
            let mut inner = operands(g);
            inner.sort();
            inner.dedup();
            out.extend(inner);
        } else {
            out.push(encode(|w| w.guard(g)));
        }
    }
    out
}
