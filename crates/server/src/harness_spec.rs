//! What a harness registration's request holds, checked without I/O: the spec parsed from its
//! proto3-JSON (strictly), its canonical form and digest, the placement this host can serve,
//! names as RFC 1123 labels, and the listing's page tokens (semantics §7.2).

use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_spec::Placement;

use crate::error::{Result, ServerError};
use crate::harnesses::check_harness_address;

/// Largest canonical spec a registration may have.
const MAX_SPEC_BYTES: usize = 4096;

pub(crate) fn is_rfc1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

/// Parses a `HarnessSpec` from its proto3-JSON (proto field names, enum names), strictly:
/// unknown keys, wrong types and unknown enum names are refused. Stored registrations and
/// `agentctl harness register --spec` files both go through here.
///
/// # Errors
/// [`ServerError::InvalidSpec`] naming the offending key.
pub fn spec_from_json(text: &str) -> Result<pb::HarnessSpec> {
    use serde_json::{Map, Value};
    let bad = |reason: String| ServerError::InvalidSpec { reason };
    fn object<'a>(
        value: &'a Value,
        at: &str,
    ) -> std::result::Result<&'a Map<String, Value>, String> {
        value
            .as_object()
            .ok_or_else(|| format!("{at} must be an object"))
    }
    fn only(map: &Map<String, Value>, at: &str, keys: &[&str]) -> std::result::Result<(), String> {
        match map.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown field {at}.{k}")),
            None => Ok(()),
        }
    }
    fn string(
        map: &Map<String, Value>,
        at: &str,
        key: &str,
    ) -> std::result::Result<String, String> {
        match map.get(key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!("{at}.{key} must be a string")),
        }
    }
    fn flag(map: &Map<String, Value>, at: &str, key: &str) -> std::result::Result<bool, String> {
        match map.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{at}.{key} must be true or false")),
        }
    }
    let parse = || -> std::result::Result<pb::HarnessSpec, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let root = object(&value, "spec")?;
        only(
            root,
            "spec",
            &["remote", "substrate", "capabilities", "descriptor_id"],
        )?;
        let placement = match (root.get("remote"), root.get("substrate")) {
            (Some(_), Some(_)) => return Err("give remote or substrate, not both".into()),
            (Some(remote), None) => {
                let remote = object(remote, "remote")?;
                only(remote, "remote", &["address"])?;
                Some(Placement::Remote(pb::RemotePlacement {
                    address: string(remote, "remote", "address")?,
                }))
            }
            (None, Some(substrate)) => {
                let substrate = object(substrate, "substrate")?;
                only(substrate, "substrate", &["atespace", "template"])?;
                Some(Placement::Substrate(pb::SubstratePlacement {
                    atespace: string(substrate, "substrate", "atespace")?,
                    template: string(substrate, "substrate", "template")?,
                }))
            }
            (None, None) => None,
        };
        let capabilities = match root.get("capabilities") {
            None => None,
            Some(c) => {
                let at = "capabilities";
                let c = object(c, at)?;
                only(
                    c,
                    at,
                    &[
                        "resumability",
                        "fork_safe",
                        "requires_gpu",
                        "streaming",
                        "reasoning_replay",
                    ],
                )?;
                let name = string(c, at, "resumability")?;
                let resumability = if name.is_empty() {
                    0
                } else {
                    pb::Resumability::from_str_name(&name).ok_or_else(|| {
                        format!("capabilities.resumability {name:?} is not a known value")
                    })? as i32
                };
                Some(pb::Capabilities {
                    resumability,
                    fork_safe: flag(c, at, "fork_safe")?,
                    requires_gpu: flag(c, at, "requires_gpu")?,
                    streaming: flag(c, at, "streaming")?,
                    reasoning_replay: flag(c, at, "reasoning_replay")?,
                })
            }
        };
        Ok(pb::HarnessSpec {
            capabilities,
            descriptor_id: string(root, "spec", "descriptor_id")?,
            placement,
        })
    };
    parse().map_err(bad)
}

pub(crate) fn canonical_spec(spec: &pb::HarnessSpec) -> Result<(String, String)> {
    let invalid = |e: agentsessions_wire::WireError| ServerError::InvalidSpec {
        reason: e.to_string(),
    };
    let bytes = agentsessions_wire::canonical::canonical_message(spec).map_err(invalid)?;
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(ServerError::SpecTooLarge {
            bytes: bytes.len(),
            limit: MAX_SPEC_BYTES,
        });
    }
    // Canonical JSON is UTF-8 by construction; a failure here would be the encoder's.
    let json = String::from_utf8(bytes).map_err(|e| ServerError::InvalidSpec {
        reason: format!("canonical form is not UTF-8: {e}"),
    })?;
    let digest = agentsessions_wire::spec_digest(spec).map_err(invalid)?;
    Ok((json, digest))
}

/// Where a checked spec places its harness.
pub(crate) enum Servable {
    Remote(String),
    Substrate { atespace: String, template: String },
}

/// Checks a spec this host can serve and returns where it places the harness.
pub(crate) fn servable_placement(spec: &pb::HarnessSpec) -> Result<Servable> {
    let resumability = spec.capabilities.as_ref().map_or(0, |c| c.resumability);
    if resumability == 0 {
        return Err(ServerError::InvalidSpec {
            reason: "spec.capabilities.resumability must be set (RESUMABILITY_STATELESS_REPLAY or RESUMABILITY_REQUIRES_MEMORY_SNAPSHOT)"
                .into(),
        });
    }
    if pb::Resumability::try_from(resumability).is_err() {
        return Err(ServerError::InvalidSpec {
            reason: format!("spec.capabilities.resumability {resumability} is not a known value"),
        });
    }
    match &spec.placement {
        None => Err(ServerError::InvalidSpec {
            reason: "spec needs a placement: remote {address} or substrate {atespace, template}"
                .into(),
        }),
        Some(Placement::Remote(remote)) if remote.address.is_empty() => {
            Err(ServerError::InvalidSpec {
                reason: "spec.remote.address is required".into(),
            })
        }
        Some(Placement::Remote(remote)) => {
            check_harness_address(&remote.address).map_err(|why| ServerError::InvalidSpec {
                reason: format!("spec.remote.address: {why}"),
            })?;
            Ok(Servable::Remote(remote.address.clone()))
        }
        Some(Placement::Substrate(s)) if s.atespace.is_empty() || s.template.is_empty() => {
            Err(ServerError::InvalidSpec {
                reason: "spec.substrate needs atespace and template".into(),
            })
        }
        Some(Placement::Substrate(s)) => Ok(Servable::Substrate {
            atespace: s.atespace.clone(),
            template: s.template.clone(),
        }),
    }
}

pub(crate) fn encode_token(name: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(name)
}

pub(crate) fn decode_token(token: &str) -> Result<String> {
    use base64::Engine as _;
    let bad = || ServerError::InvalidPageToken {
        token: token.to_owned(),
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let name = String::from_utf8(bytes).map_err(|_| bad())?;
    if name.is_empty() {
        return Err(bad());
    }
    Ok(name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_back_from_their_canonical_form_and_strictly() {
        let spec = pb::HarnessSpec {
            placement: Some(Placement::Remote(pb::RemotePlacement {
                address: "127.0.0.1:9000".into(),
            })),
            capabilities: Some(pb::Capabilities {
                resumability: pb::Resumability::StatelessReplay as i32,
                fork_safe: true,
                ..pb::Capabilities::default()
            }),
            descriptor_id: "echo".into(),
        };
        let (json, _) = canonical_spec(&spec).unwrap();
        assert_eq!(spec_from_json(&json).unwrap(), spec);
        for bad in [
            r#"{"remote":{"address":"a:1"},"extra":1}"#,
            r#"{"remote":{"address":"a:1","port":2}}"#,
            r#"{"remote":{"address":7}}"#,
            r#"{"capabilities":{"resumability":"SOMETIMES"}}"#,
            r#"{"remote":{"address":"a:1"},"substrate":{"atespace":"x","template":"y"}}"#,
            r#"[]"#,
            "not json",
        ] {
            assert!(
                matches!(spec_from_json(bad), Err(ServerError::InvalidSpec { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn names_are_rfc1123_labels() {
        for good in ["a", "echo-2", "x1"] {
            assert!(is_rfc1123_label(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(64)] {
            assert!(!is_rfc1123_label(bad), "{bad}");
        }
    }
}
