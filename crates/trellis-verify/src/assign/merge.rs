//! Merges the candidates of a dimension that nothing downstream can tell apart: when no two
//! dimensions share a key, every answer a check gives (guard values, correlation filters,
//! which nodes fail) depends on a candidate only through the guards that read its keys and a
//! few facts per key, so candidates that agree on those lead to the same answers (the four
//! error labels of a step that every guard lists together, for example).

use super::dim::{Dim, entries};
use super::dims::DimList;
use super::program::{JoinLabels, Layout, Program};
use crate::domain::is_correlation_key;
use crate::index::Index;

use trellis_graph::ControlSource;

#[cfg(test)]
thread_local! {
    /// Lets the differential test below analyse the same graph without merging.
    static DISABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What the failure classification and the correlation filters read from a key.
#[derive(Debug, Clone, Copy)]
enum Reading {
    /// Present, and whether anything is counted (errors and signals).
    Counted,
    /// Present, and whether a positive or a negative join label is counted.
    Correlation(JoinLabels),
    /// Read by guards only.
    Guards,
}

/// Buffers kept between checks.
#[derive(Debug, Default)]
pub(crate) struct MergeBuffers {
    readings: Vec<Reading>,
    /// The ops reading each key: `reads[starts[k]..starts[k + 1]]`.
    reads: Vec<usize>,
    starts: Vec<usize>,
    /// The keys every candidate of the dimension being merged assigns, ascending.
    keys: Vec<usize>,
    signature: Signature,
    /// Signatures of the candidates kept so far, back to back.
    kept: Vec<u64>,
    /// The ops reading keys, by key.
    by_key: Vec<(usize, usize)>,
    merged: Dim,
}

/// Replaces every dimension by one candidate per class of indistinguishable candidates (the
/// first of each class, in order). Only for dimensions that share no key: a key absent from a
/// candidate is then absent from every assignment built with it, whatever the other
/// dimensions choose.
pub(crate) fn merge_indistinguishable(
    index: &Index,
    layout: &Layout,
    program: &Program,
    dims: &mut DimList,
    buffers: &mut MergeBuffers,
) {
    #[cfg(test)]
    if DISABLED.get() {
        return;
    }
    let MergeBuffers {
        readings,
        reads,
        starts,
        keys,
        signature,
        kept,
        by_key,
        merged,
    } = buffers;
    readings.clear();
    readings.extend(layout.keys.iter().map(|slot| match slot.key.source {
        ControlSource::Error | ControlSource::Signal => Reading::Counted,
        ControlSource::Group if is_correlation_key(index, &slot.key) => {
            Reading::Correlation(slot.join_labels())
        }
        ControlSource::Group => Reading::Guards,
    }));
    // The ops reading each key, grouped by key.
    by_key.clear();
    by_key.extend(program.key_reads().map(|(op, k)| (k, op)));
    by_key.sort_unstable();
    reads.clear();
    starts.clear();
    let mut next = 0;
    for k in 0..=layout.keys.len() {
        starts.push(reads.len());
        while next < by_key.len() && by_key[next].0 == k {
            reads.push(by_key[next].1);
            next += 1;
        }
    }
    'dims: for dim in dims.as_mut_slice() {
        if dim.len() < 2 {
            continue;
        }
        kept.clear();
        merged.clear();
        keys.clear();
        keys.extend(entries(layout, &dim[0]).map(|(k, _)| k));
        for candidate in dim.iter() {
            signature.clear();
            let mut listed = 0;
            for (k, counts) in entries(layout, candidate) {
                if keys.get(listed) != Some(&k) {
                    // Candidates over different keys (aggregates can be): left as built.
                    continue 'dims;
                }
                listed += 1;
                for op in &reads[starts[k]..starts[k + 1]] {
                    signature.push(program.read_present(*op, counts));
                }
                push_facts(counts, readings[k], signature);
            }
            if listed != keys.len() {
                continue 'dims;
            }
            let width = signature.words.len();
            let seen = match width {
                // Nothing reads these keys: every candidate is alike.
                0 => merged.len() > 0,
                _ => kept
                    .chunks(width)
                    .any(|other| other == signature.words.as_slice()),
            };
            if !seen {
                kept.extend_from_slice(&signature.words);
                merged.push_zeroed(candidate);
            }
        }
        if merged.len() < dim.len() {
            std::mem::swap(dim, merged);
        }
    }
}

/// What a candidate shows, one bit per guard read or fact, packed.
#[derive(Debug, Default)]
struct Signature {
    words: Vec<u64>,
    bits: usize,
}

impl Signature {
    fn clear(&mut self) {
        self.words.clear();
        self.bits = 0;
    }

    fn push(&mut self, bit: bool) {
        if self.bits.is_multiple_of(64) {
            self.words.push(0);
        }
        if bit && let Some(word) = self.words.last_mut() {
            *word |= 1 << (self.bits % 64);
        }
        self.bits += 1;
    }
}

/// The facts of one present key that failure classification and filters read.
fn push_facts(counts: &[u32], reading: Reading, out: &mut Signature) {
    match reading {
        Reading::Counted => out.push(counts.iter().any(|c| *c > 0)),
        Reading::Correlation(labels) => {
            out.push(JoinLabels::any_counted(&labels.positive, counts));
            out.push(JoinLabels::any_counted(&labels.negative, counts));
        }
        Reading::Guards => {}
    }
}

#[cfg(test)]
#[allow(dead_code)] // shared with the integration tests; not every builder is used here
#[path = "../../tests/support/build.rs"]
mod build;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::build::*;

    /// A guard over the errors of writer `i` or, for a verifier, its verdict.
    fn leaf(writers: usize) -> impl Strategy<Value = Value> {
        let errors = proptest::sample::subsequence(ERRORS.to_vec(), 1..=4);
        let verdicts = proptest::sample::subsequence(vec!["accepted", "rejected"], 1..=2);
        (0..writers, any::<bool>(), errors, verdicts).prop_map(|(i, on_errors, e, v)| {
            if on_errors || i % 2 == 0 {
                is_in(sel(&format!("w{i}"), "error", None), &e)
            } else {
                verdict(&format!("w{i}"), &v)
            }
        })
    }

    fn guard(writers: usize) -> impl Strategy<Value = Value> {
        leaf(writers).prop_recursive(2, 6, 2, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..=2)
                    .prop_map(|g| json!({"kind": "any", "guards": g})),
                prop::collection::vec(inner.clone(), 1..=2)
                    .prop_map(|g| json!({"kind": "all", "guards": g})),
                inner.prop_map(|g| json!({"kind": "not", "guard": g})),
            ]
        })
    }

    /// What an alternative leads to: a failure, or a reader of the writers' result.
    fn ending(tag: usize, reads: bool) -> Value {
        if reads {
            json!({"kind": "succeed", "name": format!("done{tag}"), "output": result_output(),
                   "bindings": [{"target": ["result"],
                                 "value": {"source": "state", "path": ["result"]}}]})
        } else {
            fail(&format!("failed{tag}"))
        }
    }

    /// Writers (even: steps, odd: verifiers), then a choice routing on their outcomes to
    /// failures or readers: reachability, coverage and which writes are definite all depend
    /// on the control checks.
    fn routing() -> impl Strategy<Value = trellis_graph::GraphSpec> {
        (1usize..=3).prop_flat_map(|writers| {
            (
                prop::collection::vec((guard(writers), any::<bool>()), 1..=3),
                prop::option::of(any::<bool>()),
            )
                .prop_map(move |(branches, otherwise)| {
                    let mut children: Vec<Value> = (0..writers)
                        .map(|i| {
                            let name = format!("w{i}");
                            writes(
                                if i % 2 == 0 {
                                    step(&name)
                                } else {
                                    verifier(&name)
                                },
                                "result",
                            )
                        })
                        .collect();
                    let branches = (branches.into_iter().enumerate())
                        .map(|(i, (when, reads))| (when, ending(i, reads)))
                        .collect();
                    children.push(choice("route", branches, otherwise.map(|r| ending(9, r))));
                    graph(seq("root", children))
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Merging is an optimisation only: every diagnostic comes out the same without it.
        #[test]
        fn merging_changes_no_diagnostic(spec in routing()) {
            let merged = crate::analyze(&spec);
            super::DISABLED.set(true);
            let plain = crate::analyze(&spec);
            super::DISABLED.set(false);
            prop_assert_eq!(merged, plain);
        }
    }
}
