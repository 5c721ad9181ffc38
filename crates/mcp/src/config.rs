//! What the daemon's TOML file says about MCP servers: how to reach each one, which of its tools
//! need a person's approval, and how long a call may take.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use agentsessions_api::{ChildEnv, ChildEnvSpec, Mediation};
use serde::Deserialize;

use crate::error::McpError;

/// How long a tool call may run when the configuration says nothing.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 60;

/// Separates the server name from the tool name in the name the model sees.
pub const NAME_SEPARATOR: &str = "__";

/// One `[[mcp_servers]]` entry: a child process over stdio (`command`) or a streamable-HTTP
/// endpoint (`url`), never both.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerConfig {
    /// Unique name: lowercase letters, digits and `-`. The model sees each tool as
    /// `<name>__<tool>`.
    pub name: String,
    /// Program to start (stdio transport).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for the child. The child never inherits the daemon's whole
    /// environment: it starts with a cleared one plus the default allowlist
    /// ([`agentsessions_api::DEFAULT_ENV_ALLOWLIST`] and the locale variables), the names in
    /// `env_passthrough`, and this table (`docs/security.md`, "What a child process gets").
    pub env: BTreeMap<String, String>,
    /// Names of the daemon's environment variables the child gets as they are
    /// (`env_passthrough = ["GITHUB_TOKEN"]`); a name that says it holds a credential
    /// (`*KEY*`, `*TOKEN*`, `*SECRET*`, …) is also redacted from the journal.
    pub env_passthrough: Vec<String>,
    /// Working directory of the child (default: the daemon's).
    pub cwd: Option<PathBuf>,
    /// Streamable-HTTP endpoint (HTTP transport).
    pub url: String,
    /// HTTP headers by name, each naming the ENVIRONMENT VARIABLE that holds its value, so no
    /// secret is written in the file (`{ Authorization = "TOOLS_TOKEN" }`).
    pub headers_from_env: BTreeMap<String, String>,
    /// Which tools need a person's approval before they run.
    pub approval: ApprovalRule,
    /// Seconds a call to one of its tools may take (default [`DEFAULT_TOOL_TIMEOUT_SECS`]).
    pub timeout_secs: Option<u64>,
    /// Per-tool overrides of `timeout_secs`, by the server's own tool name.
    pub tool_timeouts: BTreeMap<String, u64>,
    /// Attach a delegated token to every `tools/call` (a `url` server on a host with
    /// `[identity]`): `delegated_token = { audience = "https://tools.example" }`.
    pub delegated_token: Option<DelegatedTokenConfig>,
}

/// `delegated_token = { audience = ".." }`: each `tools/call` to the server carries
/// `Authorization: Bearer <token>`, minted by the host for that audience, the session's
/// principal and the execution and tool call it is for.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DelegatedTokenConfig {
    /// The one audience every token for this server names (its resource identifier).
    pub audience: String,
}

/// `approval = "never" | "always" | ["tool_a", "tool_b"]`: a list names the tools (by the
/// server's own name) that need approval; the others run without.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ApprovalRule {
    /// `"never"` or `"always"`.
    Keyword(ApprovalKeyword),
    /// Only these tools need approval.
    Tools(Vec<String>),
    /// Not set: no approval needed.
    #[default]
    #[serde(skip)]
    Unset,
}

/// The two keyword forms of [`ApprovalRule`].
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalKeyword {
    /// Every tool runs without approval.
    Never,
    /// Every tool needs approval.
    Always,
}

impl ApprovalRule {
    /// The mediation a call to `tool` must carry.
    pub fn mediation(&self, tool: &str) -> Mediation {
        let needs_approval = match self {
            Self::Keyword(ApprovalKeyword::Always) => true,
            Self::Keyword(ApprovalKeyword::Never) | Self::Unset => false,
            Self::Tools(tools) => tools.iter().any(|t| t == tool),
        };
        if needs_approval {
            Mediation::RequiresApproval
        } else {
            Mediation::ControllerMediated
        }
    }
}

/// Where a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint<'a> {
    /// A child process over stdio.
    Command(&'a str),
    /// A streamable-HTTP URL.
    Url(&'a str),
}

impl McpServerConfig {
    /// Checks the entry: a valid name, exactly one of `command` and `url`, headers and
    /// delegated tokens only over HTTP, never both a delegated token and an `Authorization`
    /// header.
    ///
    /// # Errors
    /// [`McpError::Config`] naming the server and the setting.
    pub fn validate(&self) -> Result<Endpoint<'_>, McpError> {
        let bad = |reason: String| McpError::Config {
            server: self.name.clone(),
            reason,
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(bad(
                "the name must be nonempty lowercase letters, digits and '-'".into(),
            ));
        }
        let endpoint = match (self.command.is_empty(), self.url.is_empty()) {
            (false, true) => Endpoint::Command(&self.command),
            (true, false) => Endpoint::Url(&self.url),
            _ => return Err(bad("set exactly one of `command` and `url`".into())),
        };
        if matches!(endpoint, Endpoint::Command(_)) && !self.headers_from_env.is_empty() {
            return Err(bad(
                "`headers_from_env` applies only to a `url` server".into()
            ));
        }
        if matches!(endpoint, Endpoint::Url(_))
            && (!self.args.is_empty()
                || !self.env.is_empty()
                || !self.env_passthrough.is_empty()
                || self.cwd.is_some())
        {
            return Err(bad(
                "`args`, `env`, `env_passthrough` and `cwd` apply only to a `command` server"
                    .into(),
            ));
        }
        if let Some(delegated) = &self.delegated_token {
            if !matches!(endpoint, Endpoint::Url(_)) {
                return Err(bad(
                    "`delegated_token` applies only to a `url` server".into()
                ));
            }
            if delegated.audience.trim().is_empty() {
                return Err(bad("`delegated_token.audience` must be nonempty".into()));
            }
            if self
                .headers_from_env
                .keys()
                .any(|name| name.eq_ignore_ascii_case("authorization"))
            {
                return Err(bad(
                    "an `Authorization` header in `headers_from_env` and a `delegated_token` \
                     cannot both be set: the delegated token is the call's credential"
                        .into(),
                ));
            }
        }
        if self.timeout_secs == Some(0) || self.tool_timeouts.values().any(|&secs| secs == 0) {
            return Err(bad("timeouts must be at least one second".into()));
        }
        Ok(endpoint)
    }

    /// How long a call to `tool` may take.
    pub fn timeout(&self, tool: &str) -> Duration {
        let secs = self
            .tool_timeouts
            .get(tool)
            .copied()
            .or(self.timeout_secs)
            .unwrap_or(DEFAULT_TOOL_TIMEOUT_SECS);
        Duration::from_secs(secs)
    }

    /// The environment its child process starts with, drawn from `host` (the daemon's own).
    pub fn child_env(
        &self,
        host: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    ) -> ChildEnv {
        ChildEnv::resolve(
            ChildEnvSpec {
                set: &self.env,
                passthrough: &self.env_passthrough,
            },
            host,
        )
    }

    /// The daemon's environment variables whose values this entry hands to its server (its
    /// `headers_from_env` values and its passthrough credentials): the host redacts them from
    /// the journal.
    pub fn secret_variables(&self) -> impl Iterator<Item = &str> {
        let headers = self.headers_from_env.values().map(String::as_str);
        let passed = self
            .env_passthrough
            .iter()
            .map(String::as_str)
            .filter(|name| agentsessions_api::child_env::names_a_credential(name));
        headers.chain(passed)
    }

    /// The name the model sees for this server's `tool`.
    pub fn offered_name(&self, tool: &str) -> String {
        format!("{}{NAME_SEPARATOR}{tool}", self.name)
    }
}

/// Checks every entry and that no two share a name; `identity` says whether the host mints
/// delegated tokens (`[identity]` is configured), which a `delegated_token` entry needs.
///
/// # Errors
/// [`McpError::Config`].
pub fn validate_all(servers: &[McpServerConfig], identity: bool) -> Result<(), McpError> {
    let mut seen = std::collections::BTreeSet::new();
    for server in servers {
        server.validate()?;
        if server.delegated_token.is_some() && !identity {
            return Err(McpError::Config {
                server: server.name.clone(),
                reason: "`delegated_token` needs the host to mint tokens: configure [identity]"
                    .into(),
            });
        }
        if !seen.insert(server.name.as_str()) {
            return Err(McpError::Config {
                server: server.name.clone(),
                reason: "two servers have this name".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServerConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn approval_rules_map_to_mediations() {
        let always = parse("name = \"a\"\ncommand = \"x\"\napproval = \"always\"\n").unwrap();
        assert_eq!(always.approval.mediation("t"), Mediation::RequiresApproval);
        let never = parse("name = \"a\"\ncommand = \"x\"\napproval = \"never\"\n").unwrap();
        assert_eq!(never.approval.mediation("t"), Mediation::ControllerMediated);
        let unset = parse("name = \"a\"\ncommand = \"x\"\n").unwrap();
        assert_eq!(unset.approval.mediation("t"), Mediation::ControllerMediated);
        let listed = parse("name = \"a\"\ncommand = \"x\"\napproval = [\"rm\"]\n").unwrap();
        assert_eq!(listed.approval.mediation("rm"), Mediation::RequiresApproval);
        assert_eq!(
            listed.approval.mediation("ls"),
            Mediation::ControllerMediated
        );
        assert!(parse("name = \"a\"\ncommand = \"x\"\napproval = \"sometimes\"\n").is_err());
    }

    #[test]
    fn entries_need_one_endpoint_and_a_plain_name() {
        let ok = parse("name = \"a-1\"\ncommand = \"x\"\n").unwrap();
        assert_eq!(ok.validate().ok(), Some(Endpoint::Command("x")));
        for bad in [
            "name = \"a\"\n",
            "name = \"a\"\ncommand = \"x\"\nurl = \"http://h\"\n",
            "name = \"A\"\ncommand = \"x\"\n",
            "name = \"a_b\"\ncommand = \"x\"\n",
            "name = \"a\"\ncommand = \"x\"\nheaders_from_env = { X = \"Y\" }\n",
            "name = \"a\"\nurl = \"http://h\"\nargs = [\"z\"]\n",
            "name = \"a\"\ncommand = \"x\"\ntimeout_secs = 0\n",
        ] {
            let config = parse(bad).unwrap();
            assert!(config.validate().is_err(), "{bad}");
        }
        let twice = [ok.clone(), ok];
        assert!(validate_all(&twice, false).is_err());
    }

    #[test]
    fn tool_timeouts_override_the_server_default() {
        let config = parse(
            "name = \"a\"\ncommand = \"x\"\ntimeout_secs = 5\ntool_timeouts = { slow = 90 }\n",
        )
        .unwrap();
        assert_eq!(config.timeout("slow"), Duration::from_secs(90));
        assert_eq!(config.timeout("fast"), Duration::from_secs(5));
        assert_eq!(
            McpServerConfig::default().timeout("t"),
            Duration::from_secs(DEFAULT_TOOL_TIMEOUT_SECS)
        );
        assert_eq!(config.offered_name("slow"), "a__slow");
    }

    #[test]
    fn delegated_tokens_need_an_http_server_an_audience_and_no_authorization_header() {
        let ok = parse(
            "name = \"a\"\nurl = \"http://h\"\ndelegated_token = { audience = \"https://t\" }\n",
        )
        .unwrap();
        assert_eq!(ok.validate().ok(), Some(Endpoint::Url("http://h")));
        assert_eq!(
            ok.delegated_token.as_ref().map(|d| d.audience.as_str()),
            Some("https://t")
        );
        assert!(validate_all(std::slice::from_ref(&ok), true).is_ok());
        // semantics: a token the host cannot mint refuses startup instead of calling without it
        let no_identity = validate_all(std::slice::from_ref(&ok), false).unwrap_err();
        assert!(
            no_identity.to_string().contains("[identity]"),
            "{no_identity}"
        );
        for bad in [
            "name = \"a\"\ncommand = \"x\"\ndelegated_token = { audience = \"https://t\" }\n",
            "name = \"a\"\nurl = \"http://h\"\ndelegated_token = { audience = \" \" }\n",
            "name = \"a\"\nurl = \"http://h\"\ndelegated_token = { audience = \"https://t\" }\n\
             headers_from_env = { authorization = \"TOKEN\" }\n",
        ] {
            let config = parse(bad).unwrap();
            assert!(config.validate().is_err(), "{bad}");
        }
        let both = parse(
            "name = \"a\"\nurl = \"http://h\"\ndelegated_token = { audience = \"https://t\" }\n\
             headers_from_env = { Authorization = \"TOKEN\" }\n",
        )
        .unwrap();
        let refused = both.validate().unwrap_err().to_string();
        assert!(refused.contains("Authorization"), "{refused}");
        // An unknown key inside the table is a typo, not a token without an audience.
        assert!(
            parse("name = \"a\"\nurl = \"http://h\"\ndelegated_token = { audiense = \"x\" }\n")
                .is_err()
        );
    }
}
