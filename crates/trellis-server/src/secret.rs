//! The random secrets of a local page server ([`PageToken`]): made from the operating system's
//! randomness, compared in time independent of where a guess goes wrong, never printed.

/// A random secret (never logged): the page token, a launch secret, a session cookie.
#[derive(Clone)]
pub struct PageToken(String);

impl PageToken {
    /// 32 random bytes from the operating system, as hex.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Self(
            bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        ))
    }

    /// A fixed token, for tests.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the texts differ.
    pub(crate) fn matches(&self, offered: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        if expected.len() != offered.len() {
            return false;
        }
        expected
            .iter()
            .zip(offered)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
    }
}

impl std::fmt::Debug for PageToken {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("PageToken(…)")
    }
}
