//! [`WireDialer`]: reaches the harness behind an [`Incarnation`] over `Harness.Connect`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentsessions_api::{Harness, HarnessDialer, Incarnation, Result as ApiResult};
use agentsessions_harnesswire::RemoteHarness;
use async_trait::async_trait;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::Channel;

use crate::address::HarnessAddress;
use crate::error::{Result, RuntimeError};

/// Dials incarnation addresses with [`RemoteHarness`], keeping one channel per address so every
/// turn of every session on one harness shares its HTTP/2 connection (a channel reconnects by
/// itself after the harness restarts at the same address).
///
/// The cache holds one entry per distinct address ever dialed; [`WireDialer::forget`] drops one
/// whose harness is gone for good.
#[derive(Debug, Default)]
pub struct WireDialer {
    channels: Mutex<HashMap<String, Channel>>,
    describe_timeout: Option<Duration>,
    tls: Option<tonic::transport::ClientTlsConfig>,
}

impl WireDialer {
    /// A dialer with the default describe timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds each dialed harness's Describe by `timeout`.
    #[must_use]
    pub fn with_describe_timeout(mut self, timeout: Duration) -> Self {
        self.describe_timeout = Some(timeout);
        self
    }

    /// Dials every TCP harness address over TLS with `tls` (with a client identity in it,
    /// mutual TLS); a unix socket address is then refused.
    #[must_use]
    pub fn with_tls(mut self, tls: tonic::transport::ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The harness at `incarnation`'s address, carrying its call metadata. Nothing is dialed until
    /// the first call on the returned harness.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::InvalidAddress`], [`RuntimeError::InvalidMetadata`], or
    /// [`RuntimeError::Channel`] outside a tokio runtime.
    pub fn remote_harness(&self, incarnation: &Incarnation) -> Result<RemoteHarness> {
        let address = HarnessAddress::parse(&incarnation.address)?;
        let metadata = call_metadata(incarnation)?;
        let channel = self.channel(&address)?;
        let harness = RemoteHarness::new(channel).with_metadata(metadata);
        Ok(match self.describe_timeout {
            Some(timeout) => harness.with_describe_timeout(timeout),
            None => harness,
        })
    }

    /// Drops the cached channel for `address`, if any.
    pub fn forget(&self, address: &str) {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        channels.remove(address);
    }

    fn channel(&self, address: &HarnessAddress) -> Result<Channel> {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(channel) = channels.get(address.as_str()) {
            return Ok(channel.clone());
        }
        let channel = agentsessions_harnesswire::channel_tls(&address.dial_uri(), self.tls.clone())
            .map_err(|source| RuntimeError::Channel {
                address: address.to_string(),
                source,
            })?;
        channels.insert(address.as_str().to_owned(), channel.clone());
        Ok(channel)
    }
}

/// The incarnation's call metadata as gRPC metadata; keys are lowercased by gRPC rules.
fn call_metadata(incarnation: &Incarnation) -> Result<MetadataMap> {
    let mut metadata = MetadataMap::new();
    for (key, value) in &incarnation.call_metadata {
        let invalid = || RuntimeError::InvalidMetadata { key: key.clone() };
        // Binary (`-bin`) entries would need base64 values; routing metadata is plain text.
        if key.ends_with("-bin") {
            return Err(invalid());
        }
        let name = AsciiMetadataKey::from_bytes(key.to_ascii_lowercase().as_bytes())
            .map_err(|_| invalid())?;
        let value = AsciiMetadataValue::try_from(value.as_str()).map_err(|_| invalid())?;
        metadata.insert(name, value);
    }
    Ok(metadata)
}

#[async_trait]
impl HarnessDialer for WireDialer {
    async fn dial(&self, incarnation: &Incarnation) -> ApiResult<Arc<dyn Harness>> {
        Ok(Arc::new(self.remote_harness(incarnation)?))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentsessions_api::{ApiError, StatusCode};

    use super::*;

    fn incarnation(address: &str, metadata: &[(&str, &str)]) -> Incarnation {
        Incarnation {
            id: "s1".into(),
            address: address.into(),
            call_metadata: metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            ..Incarnation::default()
        }
    }

    #[tokio::test]
    async fn bad_addresses_and_metadata_are_invalid_arguments() {
        let dialer = WireDialer::new();
        for (inc, needle) in [
            (incarnation("http://127.0.0.1:1", &[]), "not a URL"),
            (incarnation("127.0.0.1", &[]), "port"),
            (incarnation("unix:", &[]), "socket path"),
            (incarnation("127.0.0.1:1", &[("bad key", "v")]), "bad key"),
            (incarnation("127.0.0.1:1", &[("k", "line\nbreak")]), "\"k\""),
            (incarnation("127.0.0.1:1", &[("x-bin", "v")]), "x-bin"),
        ] {
            match dialer.dial(&inc).await {
                Err(ApiError::Status { code, message }) => {
                    assert_eq!(code, StatusCode::InvalidArgument, "{message}");
                    assert!(message.contains(needle), "{message}");
                }
                Err(other) => panic!("{other:?}"),
                Ok(_) => panic!("dialed {inc:?}"),
            }
        }
    }

    #[tokio::test]
    async fn one_channel_per_address() {
        let dialer = WireDialer::new();
        dialer
            .dial(&incarnation("127.0.0.1:1", &[("X-Route", "s1")]))
            .await
            .unwrap();
        dialer.dial(&incarnation("127.0.0.1:1", &[])).await.unwrap();
        dialer
            .dial(&incarnation("unix:/tmp/x.sock", &[]))
            .await
            .unwrap();
        assert_eq!(dialer.channels.lock().unwrap().len(), 2);
        dialer.forget("127.0.0.1:1");
        assert_eq!(dialer.channels.lock().unwrap().len(), 1);
    }
}
