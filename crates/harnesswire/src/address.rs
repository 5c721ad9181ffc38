//! The grammar every harness address follows (semantics §10.7), for both sides of the wire: a
//! host dials one ([`AddressRole::Dial`], e.g. the runtime crate's `HarnessAddress`) and a harness
//! listens on one ([`AddressRole::Listen`], [`crate::ListenAddr`]).
//!
//! | form | dial | listen |
//! |---|---|---|
//! | `unix:<path>`, `unix://<path>` (absolute or relative) | yes | yes |
//! | `host:port`, `[v6]:port` | any host name or IP | an IP or `localhost` only |
//! | `:port` | refused (no host) | every IPv4 interface |
//! | `dns:///host:port`, `dns://resolver/host:port` | yes | refused |
//!
//! Both refuse URLs such as `http://…` (the harness protocol is cleartext HTTP/2 with no scheme
//! choice), an empty unix path, a missing or non-numeric port, a host named like a scheme
//! (`dns:9000`: `unix:` is always a path), a host with characters no host name has, and an IPv6
//! host outside brackets.

use std::path::PathBuf;

/// Which side of the wire an address is for; the grammar differs only where the table in the
/// module docs says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressRole {
    /// A host reaching a harness.
    Dial,
    /// A harness binding its server.
    Listen,
}

/// Where an address points, as the grammar reads it. What a host name means is up to the side
/// that uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressTarget {
    /// A TCP endpoint.
    Tcp {
        /// Host name or IP literal (IPv6 in brackets); empty only for a listen address
        /// (`:port`, every interface).
        host: String,
        /// Port.
        port: u16,
        /// The resolver a `dns://resolver/…` dial address named. Not used for dialing: names are
        /// resolved by the system resolver (recorded so the choice is visible).
        resolver: Option<String>,
    },
    /// A unix socket path.
    Unix(PathBuf),
}

impl AddressTarget {
    /// Reads `address` for `role`.
    ///
    /// # Errors
    ///
    /// Why the address is refused, in words a person can act on; the caller wraps it in its own
    /// error together with the address.
    pub fn parse(address: &str, role: AddressRole) -> Result<Self, &'static str> {
        if let Some(path) = address
            .strip_prefix("unix://")
            .or_else(|| address.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err("a unix address needs a socket path");
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        let (resolver, host_port) = match (address.strip_prefix("dns://"), role) {
            (Some(rest), AddressRole::Dial) => match rest.split_once('/') {
                Some((resolver, target)) if !target.is_empty() => {
                    ((!resolver.is_empty()).then(|| resolver.to_owned()), target)
                }
                _ => return Err("a dns address is dns:///host:port or dns://resolver/host:port"),
            },
            (Some(_), AddressRole::Listen) => {
                return Err("listen on host:port or unix:<path>; dns names are for dialing");
            }
            (None, _) if address.contains("://") => {
                return Err(match role {
                    AddressRole::Dial => {
                        "give host:port, dns:///host:port or unix:<path>, not a URL"
                    }
                    AddressRole::Listen => {
                        "give host:port or unix:<path>, not a URL (the harness speaks cleartext \
                         HTTP/2)"
                    }
                });
            }
            (None, _) => (None, address),
        };
        let Some((host, port)) = host_port.rsplit_once(':') else {
            return Err("the address needs a port (host:port)");
        };
        if host.is_empty() && role == AddressRole::Dial {
            return Err("the address needs a host before the port");
        }
        check_host(host)?;
        let port = port
            .parse::<u16>()
            .map_err(|_| "the port is not a number from 0 to 65535")?;
        Ok(Self::Tcp {
            host: host.to_owned(),
            port,
            resolver,
        })
    }
}

/// The host rules both roles share.
fn check_host(host: &str) -> Result<(), &'static str> {
    if matches!(host, "dns" | "unix" | "http" | "https") {
        return Err(
            "the host is named like an address scheme; write dns:///host:port or unix:<path>",
        );
    }
    if host.contains(['/', ' ', '@', '?', '#']) {
        return Err("the host is not a host name or IP address");
    }
    let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
    if unbracketed.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err("an IPv6 host goes in brackets: [::1]:port");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16, resolver: Option<&str>) -> AddressTarget {
        AddressTarget::Tcp {
            host: host.into(),
            port,
            resolver: resolver.map(Into::into),
        }
    }

    fn unix(path: &str) -> AddressTarget {
        AddressTarget::Unix(path.into())
    }

    // semantics §10.7: every accepted form, for each role that accepts it.
    #[test]
    fn accepted_forms_by_role() {
        use AddressRole::{Dial, Listen};
        let table = [
            ("unix:/run/h.sock", unix("/run/h.sock"), &[Dial, Listen][..]),
            ("unix:///run/h.sock", unix("/run/h.sock"), &[Dial, Listen]),
            ("unix:h.sock", unix("h.sock"), &[Dial, Listen]),
            ("unix://h.sock", unix("h.sock"), &[Dial, Listen]),
            ("127.0.0.1:0", tcp("127.0.0.1", 0, None), &[Dial, Listen]),
            ("[::1]:7", tcp("[::1]", 7, None), &[Dial, Listen]),
            (
                "localhost:7070",
                tcp("localhost", 7070, None),
                &[Dial, Listen],
            ),
            (
                "harness.internal:443",
                tcp("harness.internal", 443, None),
                &[Dial, Listen],
            ),
            (":7070", tcp("", 7070, None), &[Listen]),
            ("dns:///harness:9000", tcp("harness", 9000, None), &[Dial]),
            (
                "dns://8.8.8.8/harness:9000",
                tcp("harness", 9000, Some("8.8.8.8")),
                &[Dial],
            ),
        ];
        for (text, want, roles) in table {
            for role in roles {
                assert_eq!(
                    AddressTarget::parse(text, *role),
                    Ok(want.clone()),
                    "{text} {role:?}"
                );
            }
        }
    }

    // semantics §10.7: every refused form, for each role, with its reason.
    #[test]
    fn refused_forms_by_role_say_why() {
        use AddressRole::{Dial, Listen};
        let table = [
            ("http://127.0.0.1:9000", "not a URL", &[Dial, Listen][..]),
            ("https://h:1", "not a URL", &[Dial, Listen]),
            ("unix:", "socket path", &[Dial, Listen]),
            ("unix://", "socket path", &[Dial, Listen]),
            ("127.0.0.1", "needs a port", &[Dial, Listen]),
            ("", "needs a port", &[Dial, Listen]),
            ("dns:9000", "scheme", &[Dial, Listen]),
            ("host:notaport", "port", &[Dial, Listen]),
            ("host:70000", "port", &[Dial, Listen]),
            ("::1:9000", "brackets", &[Dial, Listen]),
            ("a b:1", "host name", &[Dial, Listen]),
            (":9000", "needs a host", &[Dial]),
            ("dns://", "dns:///host:port", &[Dial]),
            ("dns:///", "dns:///host:port", &[Dial]),
            ("dns:///harness:9000", "for dialing", &[Listen]),
        ];
        for (text, reason, roles) in table {
            for role in roles {
                match AddressTarget::parse(text, *role) {
                    Err(got) => assert!(got.contains(reason), "{text} {role:?}: {got}"),
                    Ok(parsed) => panic!("{text} {role:?}: accepted as {parsed:?}"),
                }
            }
        }
    }
}
