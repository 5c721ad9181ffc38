//! Harness address rules shared by static configuration and registrations. The routes
//! themselves (name → runtime, dialer) live in [`agentsessions_placement::Registry`].

use crate::error::Result;

/// Checks a static harness address (semantics §10.7): `host:port`, `dns:///host:port`,
/// `dns://resolver/host:port`, `unix:<path>` or `unix://<path>`; URLs, missing ports and empty
/// paths are refused. The runtime's address parser is the one definition.
///
/// # Errors
/// Why the address is refused.
pub fn check_harness_address(address: &str) -> Result<(), String> {
    agentsessions_runtime::HarnessAddress::parse(address)
        .map(|_| ())
        .map_err(|e| e.to_string())
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
