//! Server-sent events as both providers stream them: only `data:` fields matter (OpenAI sends
//! nothing else; Anthropic repeats the `event:` name as the data's `type`), an event ends at a
//! blank line, and no line or event may outgrow a cap.

use crate::error::{ModelError, Result};
use crate::http::Response;

/// Longest line, and longest event, a stream may send.
pub(crate) const MAX_LINE_BYTES: usize = 8 << 20;

/// What an event handler tells [`read_events`] to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// The provider marked the end of the stream; stop reading.
    Stop,
}

/// Feeds the data of each event in `response` to `on_event`, in order, until it returns
/// [`Flow::Stop`] (→ `true`) or the body ends (→ `false`).
pub(crate) async fn read_events(
    response: &mut Response,
    max_line: usize,
    mut on_event: impl FnMut(&str) -> Result<Flow>,
) -> Result<bool> {
    let mut decoder = Decoder::new(max_line);
    let mut events = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        decoder.push(chunk.as_ref(), &mut events)?;
        for event in events.drain(..) {
            if on_event(&event)? == Flow::Stop {
                return Ok(true);
            }
        }
    }
    decoder.finish(&mut events)?;
    for event in events.drain(..) {
        if on_event(&event)? == Flow::Stop {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Splits a byte stream into event data, one chunk at a time.
#[derive(Debug)]
struct Decoder {
    /// The current, unfinished line.
    line: Vec<u8>,
    /// The data lines of the current event, joined by `\n`.
    data: String,
    /// Whether the current event has any `data:` line (an empty one counts).
    has_data: bool,
    max_line: usize,
}

impl Decoder {
    fn new(max_line: usize) -> Self {
        Self {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            max_line,
        }
    }

    /// Consumes `bytes`, appending the data of every event they complete to `events`.
    fn push(&mut self, mut bytes: &[u8], events: &mut Vec<String>) -> Result<()> {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            self.extend_line(&bytes[..end])?;
            self.end_line(events)?;
            bytes = &bytes[end + 1..];
        }
        self.extend_line(bytes)
    }

    /// Ends the stream: a last line without a newline, and an event without its blank line, still
    /// count.
    fn finish(&mut self, events: &mut Vec<String>) -> Result<()> {
        if !self.line.is_empty() {
            self.end_line(events)?;
        }
        self.dispatch(events);
        Ok(())
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<()> {
        if self.line.len() + bytes.len() > self.max_line {
            return Err(ModelError::LineTooLong {
                limit: self.max_line,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, events: &mut Vec<String>) -> Result<()> {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        let Some(value) = line.strip_prefix(b"data") else {
            // Comments (`:`), `event:`, `id:` and `retry:` carry nothing the providers need.
            return Ok(());
        };
        let value = match value {
            [b':', b' ', rest @ ..] | [b':', rest @ ..] => rest,
            [] => &[],
            // `dataX:` is another field name.
            _ => return Ok(()),
        };
        let value = std::str::from_utf8(value).map_err(|_| ModelError::MalformedResponse {
            detail: "stream line is not utf-8".to_owned(),
        })?;
        if self.has_data {
            self.data.push('\n');
        }
        if self.data.len() + value.len() > self.max_line {
            return Err(ModelError::LineTooLong {
                limit: self.max_line,
            });
        }
        self.data.push_str(value);
        self.has_data = true;
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<String>) {
        if self.has_data {
            events.push(std::mem::take(&mut self.data));
            self.has_data = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(pieces: &[&[u8]]) -> Result<Vec<String>> {
        let mut decoder = Decoder::new(64);
        let mut events = Vec::new();
        for piece in pieces {
            decoder.push(piece, &mut events)?;
        }
        decoder.finish(&mut events)?;
        Ok(events)
    }

    // semantics §10.6: only data lines count; events may arrive split at any byte.
    #[test]
    fn events_survive_arbitrary_splits() {
        let stream = b"event: ping\ndata: {\"a\":1}\n\n: comment\r\ndata: [DONE]\r\n\r\n";
        let whole = decode(&[stream]).unwrap();
        assert_eq!(whole, vec!["{\"a\":1}", "[DONE]"]);
        for split in 0..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(decode(&[a, b]).unwrap(), whole, "split at {split}");
        }
    }

    // SSE: several data lines of one event are joined by newlines; a missing final blank line
    // still delivers the event.
    #[test]
    fn multi_line_event_and_unterminated_tail() {
        assert_eq!(
            decode(&[b"data: a\ndata:b\n\ndata: tail"]).unwrap(),
            vec!["a\nb", "tail"]
        );
        assert_eq!(decode(&[b"datum: x\n\n"]).unwrap(), Vec::<String>::new());
    }

    // semantics §10.6: the line buffer is capped.
    #[test]
    fn overlong_line_is_refused() {
        let long = vec![b'x'; 65];
        assert_eq!(
            decode(&[b"data: ", &long]),
            Err(ModelError::LineTooLong { limit: 64 })
        );
        // Many short lines of one event cannot outgrow the cap either.
        let line = b"data: 0123456789\n";
        let many: Vec<&[u8]> = std::iter::repeat_n(&line[..], 10).collect();
        assert_eq!(decode(&many), Err(ModelError::LineTooLong { limit: 64 }));
    }
}
