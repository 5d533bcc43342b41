//! Per-execution outcomes of one node (§6.4 step 4), written straight into a dimension's
//! flat partials: every check builds one such list per node it reads, so this runs thousands
//! of times per large graph.

use std::sync::OnceLock;

use trellis_graph::ControlSource;

use super::ceiling::{ASSIGNMENT_LIMIT, Ceiling};
use super::dim::Dim;
use super::program::Layout;
use crate::domain::{ERROR_LABELS, error_domain};

/// A slot of an outcome row that counts nothing.
const NONE: u32 = u32::MAX;

pub(super) fn capped_product(a: usize, b: usize) -> Result<usize, Ceiling> {
    a.checked_mul(b)
        .filter(|n| *n <= ASSIGNMENT_LIMIT)
        .ok_or(Ceiling)
}

/// Replaces every row by `width` copies of it, copy `l` counting label `l` in `slot`.
fn expand(rows: &mut Vec<u32>, slots: usize, slot: usize, width: usize) -> Result<(), Ceiling> {
    let count = rows.len() / slots;
    capped_product(count, width)?;
    rows.resize(count * width * slots, NONE);
    // Back to front: every copy lands at or after its source row, and past every earlier row
    // still to be read.
    for row in (0..count).rev() {
        for label in (0..width).rev() {
            let to = (row * width + label) * slots;
            rows.copy_within(row * slots..(row + 1) * slots, to);
            rows[to + slot] = label as u32;
        }
    }
    Ok(())
}

/// Buffers [`node_options`] works in, kept between calls.
#[derive(Debug, Default)]
pub(crate) struct OptionBuffers {
    /// Rows of slots: NONE, or the counted label.
    rows: Vec<u32>,
    /// The partial over the node's keys with nothing counted.
    zero: Vec<u32>,
    /// Where each key's counts start in a partial.
    count_at: Vec<usize>,
}

/// [`node_options`] into a new dimension, with fresh buffers.
pub(crate) fn node_options_owned(layout: &Layout, keys: &[usize]) -> Result<Dim, Ceiling> {
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    let mut dim = Dim::default();
    node_options(layout, &keys, &mut OptionBuffers::default(), &mut dim)?;
    Ok(dim)
}

/// The joint signal/error outcomes times one candidate per label of each group key, over
/// `keys` (layout positions of one node, ascending), appended to `out`. Every key is present
/// in every option; a key counts nothing, or one of one label.
pub(crate) fn node_options(
    layout: &Layout,
    keys: &[usize],
    buffers: &mut OptionBuffers,
    out: &mut Dim,
) -> Result<(), Ceiling> {
    let source = |i: usize| layout.keys[keys[i]].key.source;
    let width = |i: usize| layout.keys[keys[i]].width();
    let slots = keys.len().max(1);
    let rows = &mut buffers.rows;
    rows.clear();
    rows.resize(slots, NONE);
    if (0..keys.len()).any(|i| source(i) != ControlSource::Group) {
        for i in (0..keys.len()).filter(|i| source(*i) == ControlSource::Signal) {
            expand(rows, slots, i, width(i))?;
        }
        for (label, position) in ERROR_LABELS.iter().zip(error_positions()) {
            let start = rows.len();
            rows.resize(start + slots, NONE);
            for i in (0..keys.len()).filter(|i| source(*i) == ControlSource::Error) {
                // Error keys take the one error domain; its label positions are known.
                rows[start + i] = match position {
                    Some(at) => *at,
                    None => layout.keys[keys[i]]
                        .label_index(label)
                        .map_or(NONE, |l| l as u32),
                };
            }
            // Adjacent identical outcomes collapse (only-signal reads see one "no signal").
            if start >= slots && rows[start - slots..start] == rows[start..] {
                rows.truncate(start);
            }
        }
        if rows.len() / slots > ASSIGNMENT_LIMIT {
            return Err(Ceiling);
        }
    }
    for i in (0..keys.len()).filter(|i| source(*i) == ControlSource::Group) {
        expand(rows, slots, i, width(i))?;
    }
    // Each option is a copy of the zero partial over `keys` with its counted labels set.
    let (zero, count_at) = (&mut buffers.zero, &mut buffers.count_at);
    zero.clear();
    count_at.clear();
    for (i, key) in keys.iter().enumerate() {
        zero.push(*key as u32);
        count_at.push(zero.len());
        zero.resize(zero.len() + width(i), 0);
    }
    out.reserve(rows.len() / slots, zero.len());
    for row in rows.chunks(slots) {
        let option = out.push_zeroed(zero);
        for (label, at) in row.iter().zip(count_at.iter()) {
            if *label != NONE {
                option[at + *label as usize] = 1;
            }
        }
    }
    Ok(())
}

/// Position of each of [`ERROR_LABELS`] in the error domain (`None` if it lacked one, which
/// would make the caller look the label up instead).
fn error_positions() -> &'static [Option<u32>; 4] {
    static POSITIONS: OnceLock<[Option<u32>; 4]> = OnceLock::new();
    POSITIONS.get_or_init(|| {
        ERROR_LABELS.map(|label| {
            error_domain()
                .and_then(|d| d.iter().position(|l| l.as_str() == label))
                .map(|at| at as u32)
        })
    })
}
