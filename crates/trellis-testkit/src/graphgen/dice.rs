//! A deterministic source of choices: the same seed always draws the same numbers.

use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// A deterministic source of choices.
pub struct Dice(TestRng);

impl Dice {
    pub fn new(seed: u64) -> Self {
        let mut bytes = [0u8; 32];
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&seed.wrapping_add(i as u64).to_le_bytes());
        }
        Dice(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { self.0.random_range(0..n) }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.0.random_bool(p.clamp(0.0, 1.0))
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An index into `weights`, each chosen in proportion to its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut roll = self.below(total as usize) as u32;
        for (i, w) in weights.iter().enumerate() {
            if roll < *w {
                return i;
            }
            roll -= w;
        }
        weights.len().saturating_sub(1)
    }
}
