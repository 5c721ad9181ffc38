//! Harness address rules shared by static configuration and registrations. The routes
//! themselves (name → runtime, dialer) live in [`agentsessions_placement::Registry`].

use crate::error::Result;

/// Checks a static harness address (semantics §10.7): `host:port`, `dns:///host:port`,
/// `dns://resolver/host:port`, `unix:<path>` or `unix://<path>`; URLs, missing ports and empty
/// paths are refused.
///
/// # Errors
/// Why the address is refused.
pub fn check_harness_address(address: &str) -> Result<(), String> {
    if let Some(path) = address
        .strip_prefix("unix://")
        .or_else(|| address.strip_prefix("unix:"))
    {
        return if path.is_empty() {
            Err("a unix address needs a socket path".into())
        } else {
            Ok(())
        };
    }
    let target = if let Some(rest) = address.strip_prefix("dns://") {
        // dns:///host:port or dns://resolver/host:port
        match rest.split_once('/') {
            Some((_, target)) if !target.is_empty() => target,
            _ => {
                return Err("a dns address is dns:///host:port or dns://resolver/host:port".into());
            }
        }
    } else if address.contains("://") {
        return Err("give host:port, dns:///host:port or unix:<path>, not a URL".into());
    } else {
        address
    };
    let Some((host, port)) = target.rsplit_once(':') else {
        return Err("the address needs a port (host:port)".into());
    };
    if host.is_empty() || host == "dns" || host == "unix" {
        return Err(format!("{host:?} is not a host name"));
    }
    port.parse::<u16>()
        .map(|_| ())
        .map_err(|_| format!("{port:?} is not a port number"))
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    // semantics §10.7: the accepted and refused static harness address forms.
    #[test]
    fn harness_addresses_are_checked_before_startup() {
        for good in [
            "127.0.0.1:9000",
            "harness.internal:443",
            "dns:///harness:9000",
            "dns://8.8.8.8/harness:9000",
            "unix:/run/h.sock",
            "unix:///run/h.sock",
            "unix:relative.sock",
        ] {
            assert_eq!(check_harness_address(good), Ok(()), "{good}");
        }
        for bad in [
            "http://127.0.0.1:9000",
            "127.0.0.1",
            "unix:",
            "unix://",
            "dns://",
            "dns:9000",
            "host:notaport",
            ":9000",
        ] {
            assert!(check_harness_address(bad).is_err(), "{bad}");
        }
    }
}
