//! The ListSessions keyset token (semantics §1.8): base64url without padding of
//! `"<created_at unix ns>\0<uid>"`, naming the last row returned.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::{JournalError, Result};

/// The keyset position after a page: the last row's creation time and uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// `created_at` of the last returned row, unix nanoseconds.
    pub created_at_ns: i64,
    /// uid of the last returned row.
    pub uid: String,
}

impl PageCursor {
    /// Encodes the cursor as an opaque token.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}\0{}", self.created_at_ns, self.uid))
    }

    /// Decodes a token; `Ok(None)` for the empty token (first page).
    ///
    /// # Errors
    /// [`JournalError::InvalidPageToken`] when the token is not base64url, has no NUL separator
    /// or carries a non-integer time.
    pub fn decode(token: &str) -> Result<Option<Self>> {
        if token.is_empty() {
            return Ok(None);
        }
        let bad = |why: &str| JournalError::InvalidPageToken(why.to_owned());
        let raw = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| bad("not base64url"))?;
        let text = String::from_utf8(raw).map_err(|_| bad("not utf-8"))?;
        let (time, uid) = text
            .split_once('\0')
            .ok_or_else(|| bad("missing separator"))?;
        let created_at_ns = time
            .parse::<i64>()
            .map_err(|_| bad("time is not an integer"))?;
        Ok(Some(Self {
            created_at_ns,
            uid: uid.to_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_format_is_base64url_of_time_nul_uid() {
        // semantics §1.8: exact token format
        let c = PageCursor {
            created_at_ns: 1_700_000_000_000_000_001,
            uid: "sess-ab".into(),
        };
        let token = c.encode();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(&token).unwrap(),
            b"1700000000000000001\0sess-ab".to_vec()
        );
        assert!(!token.contains('='));
        assert_eq!(PageCursor::decode(&token).unwrap(), Some(c));
    }

    #[test]
    fn bad_tokens_are_invalid_not_a_restart() {
        // semantics §1.8: unparseable token -> INVALID_ARGUMENT, never a silent restart
        assert_eq!(PageCursor::decode("").unwrap(), None);
        for t in [
            "***",
            &URL_SAFE_NO_PAD.encode("12345"),
            &URL_SAFE_NO_PAD.encode("abc\0uid"),
        ] {
            assert!(
                matches!(
                    PageCursor::decode(t),
                    Err(JournalError::InvalidPageToken(_))
                ),
                "{t}"
            );
        }
    }
}
