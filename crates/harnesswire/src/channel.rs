//! [`channel`]: a lazily connected tonic channel to a harness address.

use std::time::Duration;

use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::error::{HarnessWireError, Result};

/// How long one connection attempt may take (semantics §10.3).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A channel to the harness at `address`, dialed on first use (so an unreachable harness is an
/// error of the first call, not of this one). Addresses take three forms:
///
/// - `unix:///run/harness.sock` (or `unix:relative.sock`): a unix socket path;
/// - `http://host:port`: cleartext HTTP/2;
/// - `host:port`: the same as `http://host:port`.
///
/// # Errors
///
/// [`HarnessWireError::InvalidAddress`] when the address is not a URI tonic can dial;
/// [`HarnessWireError::NoRuntime`] outside a tokio runtime (the channel runs a worker task).
pub fn channel(address: &str) -> Result<Channel> {
    channel_tls(address, None)
}

/// [`channel`] over TLS when `tls` is set: a TCP address (`host:port`, `http://…` or
/// `https://…`) is dialed as `https://` and the harness's certificate is verified with `tls`
/// (which may also carry this host's client certificate, for mutual TLS). A unix socket address
/// with `tls` is refused: a local socket is protected by its file permissions, not by TLS.
///
/// # Errors
///
/// As [`channel`], and [`HarnessWireError::InvalidTls`] when tonic refuses the TLS settings or
/// the address is a unix socket.
pub fn channel_tls(address: &str, tls: Option<ClientTlsConfig>) -> Result<Channel> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(HarnessWireError::NoRuntime);
    }
    let invalid_tls = |reason: String| HarnessWireError::InvalidTls {
        address: address.to_owned(),
        reason,
    };
    let unix = address.starts_with("unix:");
    if unix && tls.is_some() {
        return Err(invalid_tls(
            "TLS applies to TCP harness addresses; a unix socket is protected by its file \
             permissions"
                .to_owned(),
        ));
    }
    let host_port = address.split_once("://").map_or(address, |(_, rest)| rest);
    let uri = if unix || (tls.is_none() && address.contains("://")) {
        address.to_owned()
    } else if tls.is_some() {
        format!("https://{host_port}")
    } else {
        format!("http://{host_port}")
    };
    let mut endpoint =
        Endpoint::from_shared(uri).map_err(|source| HarnessWireError::InvalidAddress {
            address: address.to_owned(),
            source,
        })?;
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| invalid_tls(e.to_string()))?;
    }
    Ok(endpoint.connect_timeout(CONNECT_TIMEOUT).connect_lazy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_a_runtime() {
        assert!(matches!(
            channel("127.0.0.1:1"),
            Err(HarnessWireError::NoRuntime)
        ));
    }

    #[tokio::test]
    async fn accepts_the_three_address_forms_and_refuses_garbage() {
        for address in ["127.0.0.1:50051", "http://[::1]:80", "unix:///tmp/x.sock"] {
            channel(address).unwrap();
        }
        for bad in ["http://exa mple:1", "host:port:extra:%%"] {
            assert!(
                matches!(channel(bad), Err(HarnessWireError::InvalidAddress { .. })),
                "{bad}"
            );
        }
    }
}
