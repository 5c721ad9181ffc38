//! [`HarnessAddress`]: the one parser for harness addresses, shared by [`crate::RemoteRuntime`]
//! (refusing a bad address at construction) and [`crate::WireDialer`] (refusing it at dial).
//!
//! Accepted (semantics §10.7): `host:port`, `dns:///host:port`, `dns://resolver/host:port`,
//! `unix:<path>` and `unix://<path>` (absolute or relative path). Refused: URLs such as
//! `http://…` (the harness protocol is cleartext HTTP/2 with no scheme choice), a missing or
//! non-numeric port, an empty unix path, a dns address without a `host:port` target, and a host
//! named like a scheme (`dns:9000`, `unix:` is always a path).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Result, RuntimeError};

/// A parsed harness address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessAddress {
    text: String,
    target: Target,
}

/// Where an address points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP endpoint, resolved by the system resolver when `host` is a name.
    Tcp {
        /// Host name or IP literal (IPv6 in brackets).
        host: String,
        /// Port.
        port: u16,
        /// The resolver a `dns://resolver/…` address named. Not used for dialing: names are
        /// resolved by the system resolver (recorded so the choice is visible).
        resolver: Option<String>,
    },
    /// A unix socket path.
    Unix(PathBuf),
}

impl HarnessAddress {
    /// Parses `address`; see the module docs for the forms.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::InvalidAddress`] naming what is wrong.
    pub fn parse(address: &str) -> Result<Self> {
        let invalid = |reason| RuntimeError::InvalidAddress {
            address: address.to_owned(),
            reason,
        };
        if let Some(path) = address
            .strip_prefix("unix://")
            .or_else(|| address.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err(invalid("a unix address needs a socket path"));
            }
            return Ok(Self {
                text: address.to_owned(),
                target: Target::Unix(PathBuf::from(path)),
            });
        }
        let (resolver, host_port) = if let Some(rest) = address.strip_prefix("dns://") {
            match rest.split_once('/') {
                Some((resolver, target)) if !target.is_empty() => {
                    let resolver = (!resolver.is_empty()).then(|| resolver.to_owned());
                    (resolver, target)
                }
                _ => {
                    return Err(invalid(
                        "a dns address is dns:///host:port or dns://resolver/host:port",
                    ));
                }
            }
        } else if address.contains("://") {
            return Err(invalid(
                "give host:port, dns:///host:port or unix:<path>, not a URL",
            ));
        } else {
            (None, address)
        };
        let Some((host, port)) = host_port.rsplit_once(':') else {
            return Err(invalid("the address needs a port (host:port)"));
        };
        if host.is_empty() {
            return Err(invalid("the address needs a host before the port"));
        }
        if matches!(host, "dns" | "unix" | "http" | "https") {
            return Err(invalid(
                "the host is named like an address scheme; write dns:///host:port or unix:<path>",
            ));
        }
        if host.contains(['/', ' ', '@', '?', '#']) {
            return Err(invalid("the host is not a host name or IP address"));
        }
        let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
        if unbracketed.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
            return Err(invalid("an IPv6 host goes in brackets: [::1]:port"));
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| invalid("the port is not a number from 0 to 65535"))?;
        Ok(Self {
            text: address.to_owned(),
            target: Target::Tcp {
                host: host.to_owned(),
                port,
                resolver,
            },
        })
    }

    /// A unix socket address for `path` (`unix://<path>`).
    pub fn unix(path: &Path) -> Self {
        Self {
            text: format!("unix://{}", path.display()),
            target: Target::Unix(path.to_path_buf()),
        }
    }

    /// The address as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Where it points.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The form `agentsessions_harnesswire::channel` dials: `http://host:port` or
    /// `unix:<path>`.
    pub fn dial_uri(&self) -> String {
        match &self.target {
            Target::Tcp { host, port, .. } => format!("http://{host}:{port}"),
            Target::Unix(path) => format!("unix:{}", path.display()),
        }
    }
}

impl fmt::Display for HarnessAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16, resolver: Option<&str>) -> Target {
        Target::Tcp {
            host: host.into(),
            port,
            resolver: resolver.map(Into::into),
        }
    }

    // semantics §10.7: the accepted forms, and what each dials.
    #[test]
    fn accepted_addresses_and_what_they_dial() {
        let table = [
            (
                "127.0.0.1:9000",
                tcp("127.0.0.1", 9000, None),
                "http://127.0.0.1:9000",
            ),
            (
                "harness.internal:443",
                tcp("harness.internal", 443, None),
                "http://harness.internal:443",
            ),
            ("[::1]:7", tcp("[::1]", 7, None), "http://[::1]:7"),
            (
                "dns:///harness:9000",
                tcp("harness", 9000, None),
                "http://harness:9000",
            ),
            (
                "dns://8.8.8.8/harness:9000",
                tcp("harness", 9000, Some("8.8.8.8")),
                "http://harness:9000",
            ),
            (
                "unix:/run/h.sock",
                Target::Unix("/run/h.sock".into()),
                "unix:/run/h.sock",
            ),
            (
                "unix:///run/h.sock",
                Target::Unix("/run/h.sock".into()),
                "unix:/run/h.sock",
            ),
            (
                "unix:relative.sock",
                Target::Unix("relative.sock".into()),
                "unix:relative.sock",
            ),
            (
                "unix://relative.sock",
                Target::Unix("relative.sock".into()),
                "unix:relative.sock",
            ),
        ];
        for (text, target, uri) in table {
            let address = HarnessAddress::parse(text).unwrap();
            assert_eq!(address.target(), &target, "{text}");
            assert_eq!(address.dial_uri(), uri, "{text}");
            assert_eq!(address.to_string(), text);
        }
    }

    // semantics §10.7: refused at startup, each with a reason.
    #[test]
    fn refused_addresses_say_why() {
        let table = [
            ("http://127.0.0.1:9000", "not a URL"),
            ("https://h:1", "not a URL"),
            ("127.0.0.1", "needs a port"),
            ("harness", "needs a port"),
            ("unix:", "socket path"),
            ("unix://", "socket path"),
            ("dns://", "dns:///host:port"),
            ("dns:///", "dns:///host:port"),
            ("dns:9000", "scheme"),
            ("host:notaport", "port"),
            ("host:70000", "port"),
            (":9000", "host"),
            ("::1:9000", "brackets"),
            ("a b:1", "host name"),
            ("", "needs a port"),
        ];
        for (text, reason) in table {
            match HarnessAddress::parse(text) {
                Err(RuntimeError::InvalidAddress {
                    address,
                    reason: got,
                }) => {
                    assert_eq!(address, text);
                    assert!(got.contains(reason), "{text}: {got}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn unix_constructor_round_trips_through_parse() {
        let address = HarnessAddress::unix(Path::new("/tmp/a.sock"));
        assert_eq!(address.as_str(), "unix:///tmp/a.sock");
        assert_eq!(HarnessAddress::parse(address.as_str()).unwrap(), address);
    }
}
