//! One dimension of a check: its partial assignments stored flat, and the helpers that read
//! and merge partials (shared by the dimension builder, the option lists, enumeration and
//! candidate merging).

use super::program::Layout;

/// A partial assignment, flat: for each present key (ascending layout position) the key
/// followed by its label counts (as many as the key's domain has labels). Dimensions keep
/// theirs back to back in a [`Dim`].
pub(crate) type Partial = Vec<u32>;

/// The `(key, counts)` entries of a partial.
pub(crate) fn entries<'p>(
    layout: &'p Layout<'_>,
    partial: &'p [u32],
) -> impl Iterator<Item = (usize, &'p [u32])> + 'p {
    let mut at = 0;
    std::iter::from_fn(move || {
        let key = *partial.get(at)? as usize;
        let width = layout.keys.get(key)?.width();
        let counts = partial.get(at + 1..at + 1 + width)?;
        at += 1 + width;
        Some((key, counts))
    })
}

/// The partials of one dimension, flat: each partial's words one after the other, so a
/// dimension costs one allocation however many partials it has (checks build thousands of
/// dimensions of a few partials each).
#[derive(Debug, Default)]
pub(crate) struct Dim {
    words: Vec<u32>,
    /// Per partial: the end of its words.
    ends: Vec<usize>,
}

impl Dim {
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u32]> + '_ {
        (0..self.len()).map(|i| &self[i])
    }

    /// Empties the dimension, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.words.clear();
        self.ends.clear();
    }

    /// Makes room for `partials` more partials of `words_each` words.
    pub(crate) fn reserve(&mut self, partials: usize, words_each: usize) {
        self.words.reserve(partials * words_each);
        self.ends.reserve(partials);
    }

    /// Adds a copy of `partial` and returns it for editing in place.
    pub(crate) fn push_zeroed(&mut self, partial: &[u32]) -> &mut [u32] {
        let start = self.words.len();
        self.words.extend_from_slice(partial);
        self.ends.push(self.words.len());
        &mut self.words[start..]
    }

    pub(super) fn push(&mut self, partial: &[u32]) {
        self.words.extend_from_slice(partial);
        self.ends.push(self.words.len());
    }

    /// Adds the merge of two partials over disjoint keys (see [`merge_into`]).
    pub(super) fn push_merged(&mut self, layout: &Layout, a: &[u32], b: &[u32]) {
        merge_into(layout, a, b, &mut self.words);
        self.ends.push(self.words.len());
    }
}

impl std::ops::Index<usize> for Dim {
    type Output = [u32];

    fn index(&self, i: usize) -> &[u32] {
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1],
        };
        &self.words[start..self.ends[i]]
    }
}

pub(super) fn push_entry(out: &mut Partial, key: usize, counts: &[u32]) {
    out.push(key as u32);
    out.extend_from_slice(counts);
}

/// Appends the merge of two partials over disjoint keys to `out`, keeping keys ascending.
pub(super) fn merge_into(layout: &Layout, a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    let mut left = entries(layout, a).peekable();
    let mut right = entries(layout, b).peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(x), Some(y)) => x.0 <= y.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some((key, counts)) = next {
            push_entry(out, key, counts);
        }
    }
}
