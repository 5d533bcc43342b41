//! Tokens and cost spent by a run, an execution, or one turn of it.

use serde::{Deserialize, Serialize};

/// Token counts (and cost in US dollars, when the provider reports it).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl TokenUsage {
    /// Adds `other`, saturating every count; the cost is known once any report carried one.
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        if let Some(cost) = other.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }

    /// True when nothing was spent and no cost was reported.
    pub fn is_empty(&self) -> bool {
        *self == TokenUsage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addition_saturates_and_keeps_a_known_cost() {
        let mut total = TokenUsage {
            input_tokens: u64::MAX - 1,
            ..TokenUsage::default()
        };
        total.add(&TokenUsage {
            input_tokens: 5,
            output_tokens: 7,
            ..TokenUsage::default()
        });
        assert_eq!(total.input_tokens, u64::MAX);
        assert_eq!(total.output_tokens, 7);
        assert_eq!(total.cost_usd, None);
        total.add(&TokenUsage {
            cost_usd: Some(0.25),
            ..TokenUsage::default()
        });
        total.add(&TokenUsage::default());
        assert_eq!(total.cost_usd, Some(0.25));
        assert!(!total.is_empty());
        assert!(TokenUsage::default().is_empty());
    }
}
