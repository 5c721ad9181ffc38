//! [`WireError`], the one error type of this crate, and its [`Result`] alias.
//!
//! Every variant names what was wrong with the input and carries what a person needs to find it:
//! a field path in proto field names (`tool.args.x[2]`, `message.parts[0].file`), the offending
//! number, or the timestamp as received. None of them is retryable: the same input fails the same
//! way every time, so callers reject the input (a harness frame, a request, a stored record) instead
//! of retrying.

/// Shorthand for results whose error is [`WireError`].
pub type Result<T, E = WireError> = std::result::Result<T, E>;

/// What went wrong converting, encoding or hashing wire data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A `google.protobuf.Struct` holds a NaN or infinite number, which JSON cannot carry (Go's
    /// `protojson` refuses to marshal it, so such a value can never be hashed or journaled).
    #[error("non-finite number at {path}")]
    NonFiniteNumber {
        /// Where the number sits, e.g. `tool.args.x[2]`.
        path: String,
    },

    /// A `google.protobuf.Timestamp` outside its documented domain: `nanos` must lie in
    /// `0..=999_999_999` and the instant within `0001-01-01T00:00:00Z..=9999-12-31T23:59:59Z`.
    #[error("invalid timestamp: seconds {seconds}, nanos {nanos}")]
    InvalidTimestamp {
        /// Seconds since the Unix epoch, as received.
        seconds: i64,
        /// Nanoseconds within the second, as received.
        nanos: i32,
    },

    /// An enum field holds a number this build does not define (a peer on a newer contract, or a
    /// corrupt frame). Closed enums fail instead of silently becoming `UNSPECIFIED`, because that
    /// would change the meaning, and the hash, of what is recorded.
    #[error("unknown {enum_name} value {value} at {field}")]
    UnknownEnumValue {
        /// Where the field sits, e.g. `result.code` or `message.parts[1].tool_call.mediation`.
        field: String,
        /// The fully qualified proto enum, e.g. `agentsessions.v1.Mediation`.
        enum_name: &'static str,
        /// The number received.
        value: i32,
    },

    /// A field whose presence the contract requires was left unset, e.g.
    /// `ApproveRequest.approved` (absent is not "deny").
    #[error("missing required field {field}")]
    MissingField {
        /// Where the field sits, e.g. `approved`.
        field: String,
    },

    /// Go `encoding/json` input that is not JSON, or a value that does not decode into the Go type
    /// expected where it sits (a string where Go has an integer, an enum name this build does not
    /// know, invalid base64 for a `[]byte`).
    #[error("invalid go json{}: {reason}", go_json_location(.path))]
    GoJson {
        /// Where the value sits, in Go field names, e.g. `[2].Event.Message.Parts[0].File.Bytes`;
        /// empty for the document as a whole (syntax errors give line and column in `reason`).
        path: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A value the requested Go JSON shape (an older writer's struct layout) has no field for, so
    /// writing it in that shape would lose it.
    #[error("{path} cannot be written in the {shape} go json shape")]
    GoShape {
        /// The field, in Go field names, e.g. `ExecutionStart` or `Result.Code`.
        path: String,
        /// The shape's name, e.g. `v0.1.2`.
        shape: &'static str,
    },

    /// An event body that only travels on `Harness.Connect` (the `mint_request` extension) where
    /// a session event is expected: it is never journaled, hashed or converted.
    #[error("{body} is a Harness.Connect request, not a session event")]
    ConnectOnly {
        /// The body's field name, e.g. `mint_request`.
        body: &'static str,
    },
}

/// Renders a [`WireError::GoJson`] path for its message: ` at <path>`, or nothing for the
/// document as a whole.
fn go_json_location(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

impl WireError {
    /// Places the error one level deeper: `segment` (a field name, or `parts[3]`) becomes the first
    /// component of the path, so a conversion that recurses into a sub-message reports the full
    /// path from the message the caller converted. Variants without a path are returned unchanged.
    #[must_use]
    pub fn within(self, segment: &str) -> Self {
        fn join(segment: &str, path: &str) -> String {
            if path.is_empty() {
                segment.to_owned()
            } else if path.starts_with('[') {
                format!("{segment}{path}")
            } else {
                format!("{segment}.{path}")
            }
        }
        match self {
            Self::NonFiniteNumber { path } => Self::NonFiniteNumber {
                path: join(segment, &path),
            },
            Self::UnknownEnumValue {
                field,
                enum_name,
                value,
            } => Self::UnknownEnumValue {
                field: join(segment, &field),
                enum_name,
                value,
            },
            Self::MissingField { field } => Self::MissingField {
                field: join(segment, &field),
            },
            Self::GoJson { path, reason } => Self::GoJson {
                path: join(segment, &path),
                reason,
            },
            Self::GoShape { path, shape } => Self::GoShape {
                path: join(segment, &path),
                shape,
            },
            other @ (Self::InvalidTimestamp { .. } | Self::ConnectOnly { .. }) => other,
        }
    }

    /// Whether retrying the same operation could succeed. Always `false`: every variant describes
    /// bad input, which fails the same way on every attempt.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::NonFiniteNumber { .. }
            | Self::InvalidTimestamp { .. }
            | Self::UnknownEnumValue { .. }
            | Self::MissingField { .. }
            | Self::GoJson { .. }
            | Self::GoShape { .. }
            | Self::ConnectOnly { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_builds_dotted_paths_and_attaches_indices() {
        let e = WireError::NonFiniteNumber {
            path: "x[2]".into(),
        }
        .within("args")
        .within("tool_call")
        .within("[0]")
        .within("parts");
        assert_eq!(
            e,
            WireError::NonFiniteNumber {
                path: "parts[0].tool_call.args.x[2]".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "non-finite number at parts[0].tool_call.args.x[2]"
        );
    }

    #[test]
    fn within_leaves_timestamps_alone() {
        let e = WireError::InvalidTimestamp {
            seconds: 1,
            nanos: -1,
        };
        assert_eq!(e.clone().within("ts"), e);
        assert!(!e.is_retryable());
    }
}
