//! Where a run's connection variables take their values: the caller's own (sent with a
//! submission to a team server, held in memory only) first, then this host's environment as
//! far as its operator allows.

use std::collections::{BTreeMap, BTreeSet};

use trellis_agents::binding::is_env_name;

/// Most variables one submission may carry.
pub const MAX_CALLER_CONNECTIONS: usize = 64;
/// Longest value of one variable a caller may send.
pub const MAX_CONNECTION_VALUE_BYTES: usize = 64 * 1024;

/// Which connection variables this host's own environment may supply to a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ServerConnections {
    /// Any variable the caller did not send (the behaviour before callers could send any).
    #[default]
    All,
    /// Only these; a run needing another one must bring it.
    Only(BTreeSet<String>),
}

impl ServerConnections {
    /// Reads `all`, `none` or a comma-separated list of variable names.
    pub fn parse(text: &str) -> Result<Self, ConnectionsError> {
        match text.trim() {
            "all" => Ok(Self::All),
            "none" | "" => Ok(Self::Only(BTreeSet::new())),
            list => {
                let names: BTreeSet<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned)
                    .collect();
                match names.iter().find(|name| !is_env_name(name)) {
                    Some(bad) => Err(ConnectionsError::BadName(bad.clone())),
                    None => Ok(Self::Only(names)),
                }
            }
        }
    }

    fn allows(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => names.contains(name),
        }
    }
}

/// Why a caller's connection values were refused. Never carries a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionsError {
    #[error("{0:?} is not an environment variable name")]
    BadName(String),
    #[error("the value of {0} holds a NUL byte, which no environment can carry")]
    NulInValue(String),
    #[error("the value of {0} is longer than {MAX_CONNECTION_VALUE_BYTES} bytes")]
    ValueTooLong(String),
    #[error("more than {MAX_CALLER_CONNECTIONS} connection values were sent")]
    TooMany,
    #[error(
        "{} sent, but the run does not require {}: send only the variables the target reported",
        .0.join(", "),
        if .0.len() == 1 { "it" } else { "them" }
    )]
    NotRequired(Vec<String>),
    #[error("{0} is the runtime's own variable; a caller cannot set it")]
    Reserved(String),
}

impl ConnectionsError {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadName(_) | Self::NulInValue(_) | Self::ValueTooLong(_) | Self::TooMany => {
                "connections.invalid"
            }
            Self::NotRequired(_) => "connections.not_required",
            Self::Reserved(_) => "connections.reserved",
        }
    }
}

/// The values a run's connection variables take. The caller's values live only here (and in
/// the controller's environment it is handed): never on disk, in the ledger or in messages.
#[derive(Clone, Default)]
pub struct Connections {
    caller: BTreeMap<String, String>,
    server: ServerConnections,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: a value never reaches debug output.
        f.debug_struct("Connections")
            .field("caller", &self.caller.keys().collect::<Vec<_>>())
            .field("server", &self.server)
            .finish()
    }
}

impl Connections {
    /// A caller's values, checked, over what `server` lets this host's environment supply.
    pub fn from_caller(
        values: BTreeMap<String, String>,
        server: ServerConnections,
    ) -> Result<Self, ConnectionsError> {
        if values.len() > MAX_CALLER_CONNECTIONS {
            return Err(ConnectionsError::TooMany);
        }
        for (name, value) in &values {
            if !is_env_name(name) {
                return Err(ConnectionsError::BadName(name.clone()));
            }
            if value.contains('\0') {
                return Err(ConnectionsError::NulInValue(name.clone()));
            }
            if value.len() > MAX_CONNECTION_VALUE_BYTES {
                return Err(ConnectionsError::ValueTooLong(name.clone()));
            }
        }
        Ok(Self {
            caller: values,
            server,
        })
    }

    /// The value of connection variable `name`: the caller's, else this host's when allowed.
    pub fn value(&self, name: &str) -> Option<String> {
        match self.caller.get(name) {
            Some(value) => Some(value.clone()),
            None if self.server.allows(name) => std::env::var(name).ok(),
            None => None,
        }
    }

    /// Whether the caller sent any value.
    pub fn from_caller_any(&self) -> bool {
        !self.caller.is_empty()
    }

    /// The variables the caller sent, sorted.
    pub fn caller_names(&self) -> Vec<String> {
        self.caller.keys().cloned().collect()
    }

    /// Refuses values for variables outside `required` (a caller sends exactly what the
    /// admitted run needs) and for names `reserved` says belong to the runtime.
    pub fn check_against(
        &self,
        required: &[String],
        reserved: &dyn Fn(&str) -> bool,
    ) -> Result<(), ConnectionsError> {
        if let Some(name) = self.caller.keys().find(|name| reserved(name)) {
            return Err(ConnectionsError::Reserved(name.clone()));
        }
        let extra: Vec<String> = self
            .caller
            .keys()
            .filter(|name| !required.contains(name))
            .cloned()
            .collect();
        if extra.is_empty() {
            Ok(())
        } else {
            Err(ConnectionsError::NotRequired(extra))
        }
    }

    /// A lookup for checks that read both connection variables and the host's own settings
    /// (`PATH`, …): the names in `connections` resolve here, every other from the environment.
    pub fn lookup<'a>(&'a self, connections: &'a [String]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name: &str| {
            if connections.iter().any(|known| known == name) {
                self.value(name)
            } else {
                std::env::var(name).ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_values_win_and_the_policy_limits_the_host() {
        let path = std::env::var("PATH").ok();
        let caller = BTreeMap::from([("PATH".to_owned(), "caller".to_owned())]);
        let all = Connections::from_caller(caller.clone(), ServerConnections::All).unwrap();
        assert_eq!(all.value("PATH").as_deref(), Some("caller"));
        let none =
            Connections::from_caller(BTreeMap::new(), ServerConnections::parse("none").unwrap())
                .unwrap();
        assert_eq!(none.value("PATH"), None);
        let listed = Connections::from_caller(
            BTreeMap::new(),
            ServerConnections::parse("PATH, X").unwrap(),
        )
        .unwrap();
        assert_eq!(listed.value("PATH"), path);
        // Names outside the run's connections always come from the host.
        assert_eq!(none.lookup(&[])("PATH"), path);
    }

    #[test]
    fn bad_or_unrequired_values_are_refused_without_echoing_them() {
        let bad = |name: &str, value: &str| {
            Connections::from_caller(
                BTreeMap::from([(name.to_owned(), value.to_owned())]),
                ServerConnections::All,
            )
            .unwrap_err()
        };
        assert_eq!(
            bad("not-a-name", "x"),
            ConnectionsError::BadName("not-a-name".into())
        );
        let nul = bad("KEY", "se\0cret");
        assert!(!nul.to_string().contains("se"));
        let sent = Connections::from_caller(
            BTreeMap::from([("A".to_owned(), "secret-a".to_owned())]),
            ServerConnections::All,
        )
        .unwrap();
        let refused = sent
            .check_against(&["B".to_owned()], &|_| false)
            .unwrap_err();
        assert!(refused.to_string().starts_with("A sent"));
        assert!(!refused.to_string().contains("secret-a"));
        assert!(!format!("{sent:?}").contains("secret-a"));
        assert_eq!(
            sent.check_against(&["A".to_owned()], &|name| name == "A"),
            Err(ConnectionsError::Reserved("A".into()))
        );
        assert!(ServerConnections::parse("A,b-c").is_err());
    }
}
