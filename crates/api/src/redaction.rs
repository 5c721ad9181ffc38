//! The journal's last line of defence against secrets (`docs/security.md`, "Redaction"): the
//! host knows its own secret values (the model key, the values of `headers_from_env`, tokens it
//! minted, what the operator names), and before a record is journaled every exact occurrence of
//! one of them in its content is replaced by `[REDACTED:<name>]`. Optional patterns catch values
//! the host never held. The record lists the names it was redacted for
//! ([`Event::redacted`](crate::Event::redacted), extensions §1).
//!
//! A journal is hash-chained and cannot be scrubbed afterwards, so this runs before the append;
//! what the harness is handed back is the redacted value too, so a replay or a resume sees
//! exactly what the live turn saw.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Mutex, PoisonError, RwLock};

use regex::Regex;

use crate::content::{JsonObject, Message, Part, ToolCall, ToolResult};
use crate::event::EventBody;

/// Values shorter than this are never redacted: replacing every `abc` in a log would destroy it
/// and protect nothing. The host logs (by name) each secret it skips.
pub const MIN_SECRET_LEN: usize = 8;

/// How many minted tokens are remembered; the oldest are forgotten first (they expire long
/// before the host mints this many more).
const MINTED_KEPT: usize = 4096;

/// The name minted tokens are redacted under.
pub const MINTED_TOKEN_NAME: &str = "delegated-token";

/// A `[redaction] patterns` entry that is not a valid regular expression.
#[derive(Debug, thiserror::Error)]
#[error("redaction pattern {index} is not a valid regular expression: {reason}")]
pub struct PatternError {
    /// Its position in the list, from 1.
    pub index: usize,
    /// What the regex parser said.
    pub reason: String,
}

#[derive(Debug)]
struct Secret {
    name: String,
    value: String,
}

/// What one scrub took out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scrubbed {
    /// The names redacted, sorted, each once.
    pub names: Vec<String>,
    /// How many occurrences were replaced.
    pub occurrences: u64,
}

impl Scrubbed {
    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.occurrences == 0
    }
}

/// Replaces known secret values and configured patterns in record content.
#[derive(Debug, Default)]
pub struct Redactor {
    /// Longest value first, so a secret that contains another is replaced whole.
    secrets: RwLock<Vec<Secret>>,
    minted: Mutex<VecDeque<String>>,
    patterns: Vec<(String, Regex)>,
}

#[derive(Default)]
struct Tally {
    names: BTreeSet<String>,
    occurrences: u64,
}

impl Redactor {
    /// A redactor with no secrets and no patterns (it changes nothing until told).
    pub fn new() -> Self {
        Self::default()
    }

    /// A redactor that also replaces what each of `patterns` matches, named `pattern-<n>`.
    ///
    /// # Errors
    /// [`PatternError`] for the first pattern that does not compile.
    pub fn with_patterns(patterns: &[String]) -> Result<Self, PatternError> {
        let patterns = patterns
            .iter()
            .enumerate()
            .map(|(i, pattern)| {
                Regex::new(pattern)
                    .map(|regex| (format!("pattern-{}", i + 1), regex))
                    .map_err(|e| PatternError {
                        index: i + 1,
                        reason: e.to_string(),
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            patterns,
            ..Self::default()
        })
    }

    /// Adds a secret held in the variable `name`. Returns false, adding nothing, for a value
    /// shorter than [`MIN_SECRET_LEN`].
    pub fn add_secret(&self, name: &str, value: &str) -> bool {
        if value.len() < MIN_SECRET_LEN {
            return false;
        }
        let mut secrets = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        if !secrets.iter().any(|s| s.value == value) {
            secrets.push(Secret {
                name: name.to_owned(),
                value: value.to_owned(),
            });
            secrets.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
        }
        true
    }

    /// Remembers a token the host minted, so a harness or tool that echoes it back does not
    /// journal it.
    pub fn remember_minted(&self, token: &str) {
        if token.len() < MIN_SECRET_LEN {
            return;
        }
        let mut minted = self.minted.lock().unwrap_or_else(PoisonError::into_inner);
        if minted.len() == MINTED_KEPT {
            minted.pop_front();
        }
        minted.push_back(token.to_owned());
    }

    /// The names of the secrets it knows (never their values), for the startup log.
    pub fn secret_names(&self) -> Vec<String> {
        let secrets = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        let names: BTreeSet<_> = secrets.iter().map(|s| s.name.clone()).collect();
        names.into_iter().collect()
    }

    /// Replaces every known secret and pattern match in `body`'s content (message text, data
    /// and files' names, tool arguments, tool outputs, errors and reasons).
    pub fn scrub(&self, body: &mut EventBody) -> Scrubbed {
        let secrets = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        let minted = self.minted.lock().unwrap_or_else(PoisonError::into_inner);
        if secrets.is_empty() && minted.is_empty() && self.patterns.is_empty() {
            return Scrubbed::default();
        }
        let pass = Pass {
            secrets: &secrets,
            minted: &minted,
            patterns: &self.patterns,
        };
        let mut tally = Tally::default();
        pass.body(body, &mut tally);
        Scrubbed {
            names: tally.names.into_iter().collect(),
            occurrences: tally.occurrences,
        }
    }

    /// [`Redactor::scrub`] of every string in a JSON value (a stored tool outcome).
    pub fn scrub_json(&self, value: &mut serde_json::Value) -> Scrubbed {
        let secrets = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        let minted = self.minted.lock().unwrap_or_else(PoisonError::into_inner);
        let pass = Pass {
            secrets: &secrets,
            minted: &minted,
            patterns: &self.patterns,
        };
        let mut tally = Tally::default();
        pass.value(value, &mut tally);
        Scrubbed {
            names: tally.names.into_iter().collect(),
            occurrences: tally.occurrences,
        }
    }

    /// [`Redactor::scrub`] of one message.
    pub fn scrub_message(&self, message: &mut Message) -> Scrubbed {
        let mut body = EventBody::Message(std::mem::take(message));
        let scrubbed = self.scrub(&mut body);
        if let EventBody::Message(m) = body {
            *message = m;
        }
        scrubbed
    }
}

/// One scrub, under the locks it read.
struct Pass<'a> {
    secrets: &'a [Secret],
    minted: &'a VecDeque<String>,
    patterns: &'a [(String, Regex)],
}

impl Pass<'_> {
    fn body(&self, body: &mut EventBody, tally: &mut Tally) {
        match body {
            EventBody::Message(message) => self.parts(&mut message.parts, tally),
            EventBody::ToolCall(call) => self.call(call, tally),
            EventBody::Result(result) => self.result(result, tally),
            EventBody::Approval(request) => self.text(&mut request.reason, tally),
            EventBody::ApprovalResult(result) => self.text(&mut result.reason, tally),
            EventBody::End(end) => {
                if let Some(error) = end.error.as_mut() {
                    self.text(&mut error.description, tally);
                }
            }
            EventBody::Error(error) => self.text(&mut error.description, tally),
            EventBody::ModelCall(_)
            | EventBody::Usage(_)
            | EventBody::Lifecycle(_)
            | EventBody::ExecutionStart(_)
            | EventBody::Parked(_) => {}
        }
    }

    fn parts(&self, parts: &mut [Part], tally: &mut Tally) {
        for part in parts {
            match part {
                Part::Text(text) => self.text(&mut text.text, tally),
                Part::File(file) => {
                    self.text(&mut file.name, tally);
                    self.text(&mut file.uri, tally);
                }
                Part::Data(data) => self.object(data, tally),
                Part::Reasoning(reasoning) => self.parts(&mut reasoning.summary, tally),
                Part::ToolCall(call) => self.call(call, tally),
                Part::ToolResult(result) => self.result(result, tally),
                Part::Empty => {}
            }
        }
    }

    fn call(&self, call: &mut ToolCall, tally: &mut Tally) {
        if let Some(args) = call.args.as_mut() {
            self.object(args, tally);
        }
    }

    fn result(&self, result: &mut ToolResult, tally: &mut Tally) {
        if let Some(output) = result.output.as_mut() {
            self.object(output, tally);
        }
        self.text(&mut result.error, tally);
        self.parts(&mut result.content, tally);
    }

    fn object(&self, object: &mut JsonObject, tally: &mut Tally) {
        object.values_mut().for_each(|v| self.value(v, tally));
    }

    fn value(&self, value: &mut serde_json::Value, tally: &mut Tally) {
        match value {
            serde_json::Value::String(s) => self.text(s, tally),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.value(v, tally)),
            serde_json::Value::Object(object) => self.object(object, tally),
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            }
        }
    }

    fn text(&self, text: &mut String, tally: &mut Tally) {
        if text.len() < MIN_SECRET_LEN {
            return;
        }
        let named = self
            .secrets
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_str()));
        let minted = self.minted.iter().map(|v| (MINTED_TOKEN_NAME, v.as_str()));
        for (name, value) in named.chain(minted) {
            let found = text.matches(value).count();
            if found > 0 {
                *text = text.replace(value, &marker(name));
                tally.occurrences += found as u64;
                tally.names.insert(name.to_owned());
            }
        }
        for (name, regex) in self.patterns {
            let found = regex.find_iter(text).count();
            if found > 0 {
                *text = regex.replace_all(text, marker(name).as_str()).into_owned();
                tally.occurrences += found as u64;
                tally.names.insert(name.clone());
            }
        }
    }
}

/// What a redacted value is replaced by.
pub fn marker(name: &str) -> String {
    format!("[REDACTED:{name}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::TextPart;

    fn text_body(text: &str) -> EventBody {
        EventBody::Message(Message {
            role: "assistant".into(),
            parts: vec![Part::Text(TextPart { text: text.into() })],
        })
    }

    fn text_of(body: &EventBody) -> String {
        match body {
            EventBody::Message(m) => m.text(),
            _ => String::new(),
        }
    }

    #[test]
    fn a_known_value_is_replaced_by_its_name_everywhere_it_occurs() {
        let redactor = Redactor::new();
        assert!(redactor.add_secret("MODEL_API_KEY", "sk-live-0123456789"));
        let mut body = text_body("key sk-live-0123456789 and again sk-live-0123456789.");
        let scrubbed = redactor.scrub(&mut body);
        assert_eq!(
            text_of(&body),
            "key [REDACTED:MODEL_API_KEY] and again [REDACTED:MODEL_API_KEY]."
        );
        assert_eq!(scrubbed.names, ["MODEL_API_KEY"]);
        assert_eq!(scrubbed.occurrences, 2);
    }

    #[test]
    fn short_values_are_refused_and_nothing_changes_without_secrets() {
        let redactor = Redactor::new();
        assert!(!redactor.add_secret("SHORT", "abc"));
        let mut body = text_body("abc abc abc");
        assert!(redactor.scrub(&mut body).is_empty());
        assert_eq!(text_of(&body), "abc abc abc");
    }

    #[test]
    fn a_secret_containing_another_is_replaced_whole() {
        let redactor = Redactor::new();
        redactor.add_secret("INNER", "abcdefgh");
        redactor.add_secret("OUTER", "abcdefgh-ijklmnop");
        let mut body = text_body("x abcdefgh-ijklmnop y abcdefgh");
        let scrubbed = redactor.scrub(&mut body);
        assert_eq!(text_of(&body), "x [REDACTED:OUTER] y [REDACTED:INNER]");
        assert_eq!(scrubbed.names, ["INNER", "OUTER"]);
    }

    #[test]
    fn tool_outputs_arguments_and_errors_are_scrubbed() {
        let redactor = Redactor::new();
        redactor.remember_minted("eyJhbGciOi.minted.token");
        let output: JsonObject = serde_json::from_str(
            r#"{"env": {"T": "eyJhbGciOi.minted.token"}, "list": ["eyJhbGciOi.minted.token"]}"#,
        )
        .unwrap_or_default();
        let mut body = EventBody::Result(ToolResult {
            output: Some(output),
            error: "failed with eyJhbGciOi.minted.token".into(),
            ..ToolResult::default()
        });
        let scrubbed = redactor.scrub(&mut body);
        assert_eq!(scrubbed.occurrences, 3);
        assert_eq!(scrubbed.names, [MINTED_TOKEN_NAME]);
        let EventBody::Result(result) = body else {
            panic!("body kind changed");
        };
        assert_eq!(result.error, "failed with [REDACTED:delegated-token]");
        let rendered = serde_json::to_string(&result.output).unwrap_or_default();
        assert!(!rendered.contains("minted.token"), "{rendered}");
    }

    #[test]
    fn patterns_catch_values_the_host_never_held() {
        let redactor = Redactor::with_patterns(&["ghp_[A-Za-z0-9]{8,}".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let mut body = text_body("token ghp_abcdefgh1234 here");
        let scrubbed = redactor.scrub(&mut body);
        assert_eq!(text_of(&body), "token [REDACTED:pattern-1] here");
        assert_eq!(scrubbed.names, ["pattern-1"]);
        let bad = Redactor::with_patterns(&["ok".to_owned(), "(".to_owned()]);
        assert!(matches!(bad, Err(PatternError { index: 2, .. })));
    }
}
