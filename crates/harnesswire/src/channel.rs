//! [`channel`]: a lazily connected tonic channel to a harness address.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

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
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(HarnessWireError::NoRuntime);
    }
    let uri = if address.starts_with("unix:") || address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let endpoint =
        Endpoint::from_shared(uri).map_err(|source| HarnessWireError::InvalidAddress {
            address: address.to_owned(),
            source,
        })?;
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
