//! Pass 2–3: indexes every node occurrence in authored pre-order with its path, depth and map
//! owner, and checks duplicate names, depth, attempts and the global node and guard ceilings.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use trellis_graph::limits::ceilings;
use trellis_graph::{DiagnosticCode, GraphNode, Guard, Join, NodeName, PathSegment};

use crate::diag::{Diags, Path, Step, extend};
use crate::nodeset::NodeId;

/// The hasher of the verifier's maps (names, ids and addresses): eight bytes at a time, each
/// word mixed in with one folded multiply. SipHash's setup dominated lookups of short names,
/// and byte-wise FNV-1a still cost a multiply per byte.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl WordHasher {
    /// Mixes one word in: the 128-bit product's halves folded together spread every input bit
    /// over the low bits (bucket index) and the high bits (control byte) alike, which aligned
    /// addresses and small ids need.
    fn mix(&mut self, word: u64) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let product = u128::from(self.0 ^ word) * u128::from(K);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        // The tail's length is mixed in too, so "a" and "a\0" differ.
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
    }

    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
}

/// A hash map keyed by small ids, names or addresses, hashed with [`WordHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;
/// A hash set hashed with [`WordHasher`].
pub(crate) type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<WordHasher>>;

/// How an occurrence hangs below its parent; used to materialize paths on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Root,
    SeqChild(usize),
    ChoiceBranch(usize),
    Otherwise,
    ParBranch(usize),
    Body,
}

/// One authored node occurrence.
#[derive(Debug)]
pub(crate) struct Entry<'g> {
    pub(crate) node: &'g GraphNode,
    pub(crate) parent: Option<NodeId>,
    pub(crate) via: Via,
    /// The id of the first occurrence of this name; every name-based lookup lands there.
    pub(crate) canon: NodeId,
    /// The canonical id of the innermost enclosing `map` (for a map: the one around it).
    pub(crate) map_owner: Option<NodeId>,
    pub(crate) children: Vec<NodeId>,
}

/// The number of node occurrences in the tree under `node`, itself included.
fn subtree_size(node: &GraphNode) -> usize {
    1 + match node {
        GraphNode::Seq(seq) => seq.children.iter().map(subtree_size).sum(),
        GraphNode::Choice(choice) => {
            let branches: usize = choice.branches.iter().map(|b| subtree_size(&b.node)).sum();
            branches + choice.otherwise.as_deref().map_or(0, subtree_size)
        }
        GraphNode::Par(par) => par.branches.iter().map(subtree_size).sum(),
        GraphNode::Loop(l) => subtree_size(&l.body),
        GraphNode::Map(m) => subtree_size(&m.body),
        _ => 0,
    }
}

/// The number of direct children of `node`.
fn child_count(node: &GraphNode) -> usize {
    match node {
        GraphNode::Seq(seq) => seq.children.len(),
        GraphNode::Choice(choice) => {
            choice.branches.len() + usize::from(choice.otherwise.is_some())
        }
        GraphNode::Par(par) => par.branches.len(),
        GraphNode::Loop(_) | GraphNode::Map(_) => 1,
        _ => 0,
    }
}

/// The node index plus the facts the index pass collects for later passes.
#[derive(Debug)]
pub(crate) struct Index<'g> {
    pub(crate) entries: Vec<Entry<'g>>,
    by_name: FastMap<&'g str, NodeId>,
    /// Executable → write-binding source names (self-reads excluded), in authored order.
    pub(crate) write_references: Vec<(NodeId, &'g NodeName)>,
    /// Loop occurrences in pre-order (the termination ranking).
    pub(crate) loops: Vec<NodeId>,
}

impl<'g> Index<'g> {
    /// Indexes `root`, reporting the index-time and global-limit diagnostics.
    pub(crate) fn build(root: &'g GraphNode, diags: &mut Diags) -> Self {
        // Sized once: growing the name table rehashed it a dozen times on a large graph.
        let size = subtree_size(root);
        let mut index = Index {
            entries: Vec::with_capacity(size),
            by_name: FastMap::with_capacity_and_hasher(size, Default::default()),
            write_references: Vec::new(),
            loops: Vec::new(),
        };
        let mut guard_total: u64 = 0;
        index.visit(root, None, Via::Root, 1, None, diags, &mut guard_total);
        if index.entries.len() as u64 > ceilings::GRAPH_NODES {
            diags.emit(
                DiagnosticCode::CeilingExceeded,
                "graph node count exceeds 4096",
                vec![PathSegment::field("root")],
                [],
            );
        }
        if guard_total > ceilings::GUARD_NODES {
            diags.emit(
                DiagnosticCode::CeilingExceeded,
                "graph guard-node count exceeds 4096",
                vec![PathSegment::field("root")],
                [],
            );
        }
        index
    }

    #[allow(clippy::too_many_arguments)]
    fn visit(
        &mut self,
        node: &'g GraphNode,
        parent: Option<NodeId>,
        via: Via,
        depth: usize,
        map_owner: Option<NodeId>,
        diags: &mut Diags,
        guard_total: &mut u64,
    ) -> NodeId {
        let id = self.entries.len() as NodeId;
        let name = node.name();
        let canon = *self.by_name.entry(name.as_str()).or_insert(id);
        self.entries.push(Entry {
            node,
            parent,
            via,
            canon,
            map_owner,
            children: Vec::with_capacity(child_count(node)),
        });
        if canon != id {
            diags.emit(
                DiagnosticCode::InvalidGraphShape,
                format!("duplicate node name {name}"),
                self.occurrence_path(id),
                [name],
            );
        }
        if depth > ceilings::GRAPH_DEPTH {
            diags.emit(
                DiagnosticCode::CeilingExceeded,
                "graph depth exceeds 64",
                self.path(id),
                [name],
            );
        }
        self.index_own_facts(id, node, diags, guard_total);
        let inner_owner = if matches!(node, GraphNode::Map(_)) {
            Some(canon)
        } else {
            map_owner
        };
        // Children are visited straight from the node (no list of them is built per node).
        let mut child = |index: &mut Self, child_via: Via, child: &'g GraphNode| {
            let child_id = index.visit(
                child,
                Some(id),
                child_via,
                depth + 1,
                inner_owner,
                diags,
                guard_total,
            );
            index.entries[id as usize].children.push(child_id);
        };
        match node {
            GraphNode::Seq(seq) => {
                for (i, c) in seq.children.iter().enumerate() {
                    child(self, Via::SeqChild(i), c);
                }
            }
            GraphNode::Choice(choice) => {
                for (i, b) in choice.branches.iter().enumerate() {
                    child(self, Via::ChoiceBranch(i), &b.node);
                }
                if let Some(otherwise) = choice.otherwise.as_deref() {
                    child(self, Via::Otherwise, otherwise);
                }
            }
            GraphNode::Par(par) => {
                for (i, b) in par.branches.iter().enumerate() {
                    child(self, Via::ParBranch(i), b);
                }
            }
            GraphNode::Loop(l) => child(self, Via::Body, &l.body),
            GraphNode::Map(m) => child(self, Via::Body, &m.body),
            _ => {}
        }
        id
    }

    /// Attempts, write references, guard sizes and loops of one occurrence.
    fn index_own_facts(
        &mut self,
        id: NodeId,
        node: &'g GraphNode,
        diags: &mut Diags,
        guard_total: &mut u64,
    ) {
        if let Some(exec) = node.executable() {
            if exec.attempts.get() > ceilings::ATTEMPTS {
                diags.emit(
                    DiagnosticCode::CeilingExceeded,
                    "attempts exceeds full-v1 limit 100",
                    extend(&self.path(id), &[Step::Field("attempts")]),
                    [&exec.name],
                );
            }
            for write in &exec.write_bindings {
                if write.value.node != exec.name {
                    self.write_references.push((id, &write.value.node));
                }
            }
        }
        match node {
            GraphNode::Choice(choice) => {
                for (i, branch) in choice.branches.iter().enumerate() {
                    let steps = [Step::Field("branches"), Step::Index(i), Step::Field("when")];
                    self.count_guard(id, &branch.when, &steps, diags, guard_total);
                }
            }
            GraphNode::Loop(l) => {
                self.loops.push(id);
                if let Some(until) = &l.until {
                    self.count_guard(id, until, &[Step::Field("until")], diags, guard_total);
                }
            }
            GraphNode::Par(par) => {
                if let Join::First { when } = &par.join {
                    let steps = [Step::Field("join"), Step::Field("when")];
                    self.count_guard(id, when, &steps, diags, guard_total);
                }
            }
            _ => {}
        }
    }

    /// Adds a guard's size to the graph's total and checks it against the per-guard ceiling.
    fn count_guard(
        &self,
        id: NodeId,
        guard: &Guard,
        steps: &[Step],
        diags: &mut Diags,
        guard_total: &mut u64,
    ) {
        let count = guard.node_count();
        *guard_total = guard_total.saturating_add(count);
        if count > ceilings::GUARD_NODES {
            diags.emit(
                DiagnosticCode::CeilingExceeded,
                "guard contains more than 4096 nodes",
                extend(&self.path(id), steps),
                [],
            );
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn entry(&self, id: NodeId) -> &Entry<'g> {
        &self.entries[id as usize]
    }

    pub(crate) fn node(&self, id: NodeId) -> &'g GraphNode {
        self.entries[id as usize].node
    }

    pub(crate) fn name(&self, id: NodeId) -> &'g NodeName {
        self.entries[id as usize].node.name()
    }

    /// The canonical id of a name, if any node carries it.
    pub(crate) fn lookup(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The path diagnostics about this node's name use: its first occurrence's path.
    pub(crate) fn path(&self, id: NodeId) -> Path {
        self.occurrence_path(self.entries[id as usize].canon)
    }

    /// The path of exactly this occurrence.
    pub(crate) fn occurrence_path(&self, id: NodeId) -> Path {
        let mut chain = Vec::new();
        let mut current = Some(id);
        while let Some(at) = current {
            chain.push(at);
            current = self.entries[at as usize].parent;
        }
        let mut path = Vec::new();
        for at in chain.into_iter().rev() {
            let entry = &self.entries[at as usize];
            let steps: &[Step] = &match entry.via {
                Via::Root => vec![Step::Field("root")],
                Via::SeqChild(i) => vec![Step::Field("children"), Step::Index(i)],
                Via::ChoiceBranch(i) => {
                    vec![Step::Field("branches"), Step::Index(i), Step::Field("node")]
                }
                Via::Otherwise => vec![Step::Field("otherwise")],
                Via::ParBranch(i) => vec![Step::Field("branches"), Step::Index(i)],
                Via::Body => vec![Step::Field("body")],
            };
            path = extend(&path, steps);
            path.push(PathSegment::node(entry.node.name()));
        }
        path
    }

    /// `attemptsPerNode`: the authored attempts of every executable, keyed by name.
    pub(crate) fn attempts_per_node(&self) -> BTreeMap<NodeName, trellis_graph::PositiveInteger> {
        self.entries
            .iter()
            .filter_map(|e| e.node.executable())
            .map(|exec| (exec.name.clone(), exec.attempts))
            .collect()
    }

    /// The canonical ids of every descendant of `id` (excluding itself).
    pub(crate) fn descendants(&self, id: NodeId, out: &mut Vec<NodeId>) {
        for child in &self.entries[id as usize].children {
            out.push(self.entries[*child as usize].canon);
            self.descendants(*child, out);
        }
    }
}
