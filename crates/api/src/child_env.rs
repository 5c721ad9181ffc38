//! The environment a child process of the host starts with (an MCP server over stdio, a harness
//! process, a microVM's QEMU): never the host's whole environment, which holds the model key and
//! every token the operator exported, but a cleared one plus what the configuration names
//! (`docs/security.md`, "What a child process gets").
//!
//! The computation is pure: the caller hands in its own environment and applies the result with
//! `env_clear().envs(..)`.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// Variables every child gets from the host when the host has them: what a program needs to
/// find its tools, home and locale, and nothing that names a credential (the set the MCP SDKs
/// pass to the servers they start).
pub const DEFAULT_ENV_ALLOWLIST: [&str; 9] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "TZ", "LANG", "LANGUAGE",
];

/// Locale variables (`LC_ALL`, `LC_CTYPE`, …) pass as well.
const LOCALE_PREFIX: &str = "LC_";

/// What one child's configuration says about its environment.
#[derive(Debug, Clone, Copy)]
pub struct ChildEnvSpec<'a> {
    /// Variables set to these values (the entry's `env` table); they win over the host's.
    pub set: &'a BTreeMap<String, String>,
    /// Host variables passed through by name (`env_passthrough`), beyond the default allowlist.
    pub passthrough: &'a [String],
}

/// The environment a child starts with, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    vars: BTreeMap<OsString, OsString>,
}

impl ChildEnv {
    /// The child's environment for `spec`, drawn from `host` (the host's own environment, as
    /// `std::env::vars_os()` gives it): the default allowlist and the locale variables, the
    /// passthrough names, then the `set` table.
    pub fn resolve(
        spec: ChildEnvSpec<'_>,
        host: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Self {
        let passes = |name: &OsStr| {
            let Some(name) = name.to_str() else {
                return false;
            };
            DEFAULT_ENV_ALLOWLIST.contains(&name)
                || name.starts_with(LOCALE_PREFIX)
                || spec.passthrough.iter().any(|p| p == name)
        };
        let mut vars: BTreeMap<OsString, OsString> =
            host.into_iter().filter(|(name, _)| passes(name)).collect();
        for (name, value) in spec.set {
            vars.insert(name.into(), value.into());
        }
        Self { vars }
    }

    /// The variables, for `Command::env_clear().envs(..)`.
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The names only, comma-separated, for the child's startup log line (never the values).
    pub fn names(&self) -> String {
        let names: Vec<_> = self.vars.keys().map(|k| k.to_string_lossy()).collect();
        names.join(",")
    }
}

/// Names of passthrough variables that, by their name, hold a credential (`*KEY*`, `*TOKEN*`,
/// `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`): the host redacts their values from the journal.
pub fn names_a_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|word| upper.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("LC_ALL", "C.UTF-8"),
            ("MODEL_API_KEY", "sk-secret"),
            ("AGENTCTL_TOKEN", "tok"),
            ("TOOLS_REGION", "eu"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    #[test]
    fn only_the_allowlist_passes_by_default() {
        let set = BTreeMap::new();
        let env = ChildEnv::resolve(
            ChildEnvSpec {
                set: &set,
                passthrough: &[],
            },
            host(),
        );
        assert_eq!(env.names(), "HOME,LC_ALL,PATH");
    }

    #[test]
    fn passthrough_and_the_table_add_to_it_and_the_table_wins() {
        let set = BTreeMap::from([("PATH".to_owned(), "/opt/bin".to_owned())]);
        let passthrough = ["TOOLS_REGION".to_owned(), "NOT_SET".to_owned()];
        let env = ChildEnv::resolve(
            ChildEnvSpec {
                set: &set,
                passthrough: &passthrough,
            },
            host(),
        );
        assert_eq!(env.names(), "HOME,LC_ALL,PATH,TOOLS_REGION");
        let path = env.vars().find(|(k, _)| *k == "PATH").map(|(_, v)| v);
        assert_eq!(path, Some(OsStr::new("/opt/bin")));
    }

    #[test]
    fn credential_names_are_recognised() {
        assert!(names_a_credential("OPENAI_API_KEY"));
        assert!(names_a_credential("github_token"));
        assert!(!names_a_credential("TOOLS_REGION"));
    }
}
