//! [`HarnessAddress`]: a harness address to dial, shared by [`crate::RemoteRuntime`] (refusing a
//! bad address at construction) and [`crate::WireDialer`] (refusing it at dial).
//!
//! The forms are the dial side of the one address grammar,
//! [`agentsessions_harnesswire::address`] (semantics §10.7): `host:port`, `dns:///host:port`,
//! `dns://resolver/host:port`, `unix:<path>` and `unix://<path>`.

use std::fmt;
use std::path::Path;

use agentsessions_harnesswire::AddressRole;
pub use agentsessions_harnesswire::AddressTarget;

use crate::error::{Result, RuntimeError};

/// A parsed harness address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessAddress {
    text: String,
    target: AddressTarget,
}

impl HarnessAddress {
    /// Parses `address`; see the module docs for the forms.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::InvalidAddress`] naming what is wrong.
    pub fn parse(address: &str) -> Result<Self> {
        let target = AddressTarget::parse(address, AddressRole::Dial).map_err(|reason| {
            RuntimeError::InvalidAddress {
                address: address.to_owned(),
                reason,
            }
        })?;
        Ok(Self {
            text: address.to_owned(),
            target,
        })
    }

    /// A unix socket address for `path` (`unix://<path>`).
    pub fn unix(path: &Path) -> Self {
        Self {
            text: format!("unix://{}", path.display()),
            target: AddressTarget::Unix(path.to_path_buf()),
        }
    }

    /// The address as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Where it points.
    pub fn target(&self) -> &AddressTarget {
        &self.target
    }

    /// The form `agentsessions_harnesswire::channel` dials: `http://host:port` or
    /// `unix:<path>`.
    pub fn dial_uri(&self) -> String {
        match &self.target {
            AddressTarget::Tcp { host, port, .. } => format!("http://{host}:{port}"),
            AddressTarget::Unix(path) => format!("unix:{}", path.display()),
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

    fn tcp(host: &str, port: u16, resolver: Option<&str>) -> AddressTarget {
        AddressTarget::Tcp {
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
                AddressTarget::Unix("/run/h.sock".into()),
                "unix:/run/h.sock",
            ),
            (
                "unix:///run/h.sock",
                AddressTarget::Unix("/run/h.sock".into()),
                "unix:/run/h.sock",
            ),
            (
                "unix:relative.sock",
                AddressTarget::Unix("relative.sock".into()),
                "unix:relative.sock",
            ),
            (
                "unix://relative.sock",
                AddressTarget::Unix("relative.sock".into()),
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
