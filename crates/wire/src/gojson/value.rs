//! [`GoValue`], a parsed JSON document that keeps what Go's decoder looks at, and its parser.

use crate::error::{Result, WireError};

use super::write::{write_bool, write_string};

/// The deepest nesting of arrays and objects [`GoValue::parse`] accepts. Go allows 10 000; the
/// documents this module reads nest fewer than 20 levels, and the lower bound keeps the recursive
/// parser and decoders far from the stack limit of any thread.
pub const MAX_DEPTH: usize = 512;

/// A JSON value as Go's decoder sees it: object members in document order (duplicates kept, Go
/// lets the last one win) and numbers as their literal text, so each Go target type can parse
/// them its own way (`int64` refuses `1.0`, `float64` accepts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, exactly as written (`-0`, `1.50`, `1e3`).
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<GoValue>),
    /// An object: members in document order.
    Object(Vec<(String, GoValue)>),
}

impl GoValue {
    /// Parses one JSON document (RFC 8259; surrounding whitespace allowed, nothing else after the
    /// value). As in Go, an escape that leaves a lone UTF-16 surrogate yields U+FFFD.
    ///
    /// # Errors
    ///
    /// [`WireError::GoJson`] with an empty path and the line and column (1-based, in characters)
    /// of the offending character in the reason, for a syntax error or nesting deeper than
    /// [`MAX_DEPTH`].
    pub fn parse(text: &str) -> Result<Self> {
        let mut p = Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        };
        p.skip_ws();
        let value = p.value(0)?;
        p.skip_ws();
        if p.pos < p.bytes.len() {
            return Err(p.error("invalid character after top-level value"));
        }
        Ok(value)
    }

    /// The member of an object that Go would decode into the struct field `name`. Go matches a
    /// key to a field exactly or, failing that, ignoring case, and decodes every matching member
    /// in document order, so the last member whose key equals `name` up to case wins. `None` when
    /// there is no such member or this is not an object.
    pub fn field(&self, name: &str) -> Option<&GoValue> {
        match self {
            Self::Object(members) => members
                .iter()
                .rev()
                .find(|(key, _)| key == name || key_folds_to(key, name))
                .map(|(_, value)| value),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// What kind of JSON value this is, for messages: `null`, `bool`, `number`, `string`,
    /// `array` or `object`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "bool",
            Self::Number(_) => "number",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::Object(_) => "object",
        }
    }

    /// Writes the value back as compact JSON: members in document order, numbers as written,
    /// strings escaped the way Go's `json.Marshal` escapes them. For a document Go wrote, this
    /// is the `json.Marshal` output it was indented from.
    pub fn to_compact(&self) -> String {
        let mut out = String::new();
        self.write_compact(&mut out);
        out
    }

    fn write_compact(&self, out: &mut String) {
        match self {
            Self::Null => out.push_str("null"),
            Self::Bool(b) => write_bool(out, *b),
            Self::Number(n) => out.push_str(n),
            Self::String(s) => write_string(out, s),
            Self::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_compact(out);
                }
                out.push(']');
            }
            Self::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, key);
                    out.push(':');
                    value.write_compact(out);
                }
                out.push('}');
            }
        }
    }
}

/// Whether `key` equals the ASCII field name `name` under Unicode simple case folding, which is
/// Go's fallback match. Besides ASCII case, two non-ASCII characters fold onto ASCII letters:
/// KELVIN SIGN onto `k` and LATIN SMALL LETTER LONG S onto `s`.
fn key_folds_to(key: &str, name: &str) -> bool {
    let mut key_chars = key.chars();
    for n in name.chars() {
        let Some(k) = key_chars.next() else {
            return false;
        };
        let same = k.eq_ignore_ascii_case(&n)
            || (k == '\u{212a}' && n.eq_ignore_ascii_case(&'k'))
            || (k == '\u{17f}' && n.eq_ignore_ascii_case(&'s'));
        if !same {
            return false;
        }
    }
    key_chars.next().is_none()
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    /// A syntax error at the current position, with its line and column.
    fn error(&self, what: &str) -> WireError {
        let before = self.text.get(..self.pos).unwrap_or(self.text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        WireError::GoJson {
            path: String::new(),
            reason: format!("{what} at line {line}, column {column}"),
        }
    }

    fn unexpected(&self, looking_for: &str) -> WireError {
        match self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            None => self.error(&format!("unexpected end of input {looking_for}")),
            Some(c) => self.error(&format!("invalid character {c:?} {looking_for}")),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, value: GoValue) -> Result<GoValue> {
        for &expected in word.as_bytes() {
            if self.peek() != Some(expected) {
                return Err(self.unexpected(&format!("in literal {word}")));
            }
            self.pos += 1;
        }
        Ok(value)
    }

    fn value(&mut self, depth: usize) -> Result<GoValue> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(GoValue::String),
            Some(b't') => self.literal("true", GoValue::Bool(true)),
            Some(b'f') => self.literal("false", GoValue::Bool(false)),
            Some(b'n') => self.literal("null", GoValue::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.unexpected("looking for beginning of value")),
        }
    }

    fn enter(&self, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            Err(self.error(&format!("nesting deeper than {MAX_DEPTH} levels")))
        } else {
            Ok(())
        }
    }

    fn object(&mut self, depth: usize) -> Result<GoValue> {
        self.enter(depth)?;
        self.pos += 1;
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(GoValue::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("looking for beginning of object key string"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.unexpected("after object key"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(GoValue::Object(members));
                }
                _ => return Err(self.unexpected("after object key:value pair")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<GoValue> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(GoValue::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(GoValue::Array(items));
                }
                _ => return Err(self.unexpected("after array element")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<GoValue> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.unexpected("in numeric literal")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.unexpected("after decimal point in numeric literal"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.unexpected("in exponent of numeric literal"));
            }
        }
        Ok(GoValue::Number(self.text[start..self.pos].to_owned()))
    }

    fn string(&mut self) -> Result<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while self
                .peek()
                .is_some_and(|b| b != b'"' && b != b'\\' && b >= 0x20)
            {
                self.pos += 1;
            }
            // The run stops at an ASCII byte, so it ends on a character boundary.
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                None => return Err(self.error("unexpected end of input in string literal")),
                Some(_) => return Err(self.unexpected("in string literal")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<()> {
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let first = self.hex4()?;
                let c = if (0xd800..0xdc00).contains(&first) {
                    // A high surrogate forms a character only with a low surrogate escape right
                    // after it; otherwise it becomes U+FFFD and what follows is read on its own.
                    let low = self.bytes[self.pos..]
                        .starts_with(b"\\u")
                        .then(|| {
                            let save = self.pos;
                            self.pos += 2;
                            match self.hex4() {
                                Ok(low) if (0xdc00..0xe000).contains(&low) => Some(low),
                                _ => {
                                    self.pos = save;
                                    None
                                }
                            }
                        })
                        .flatten();
                    match low {
                        Some(low) => {
                            char::from_u32(0x10000 + ((first - 0xd800) << 10) + (low - 0xdc00))
                                .unwrap_or('\u{fffd}')
                        }
                        None => '\u{fffd}',
                    }
                } else {
                    char::from_u32(first).unwrap_or('\u{fffd}')
                };
                out.push(c);
                return Ok(());
            }
            _ => return Err(self.unexpected("in string escape code")),
        };
        self.pos += 1;
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let digit = self
                .peek()
                .and_then(|b| char::from(b).to_digit(16))
                .ok_or_else(|| self.unexpected("in \\u hexadecimal character escape"))?;
            v = v * 16 + digit;
            self.pos += 1;
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> String {
        match GoValue::parse(text) {
            Err(WireError::GoJson { path, reason }) => {
                assert!(path.is_empty());
                reason
            }
            other => panic!("{text:?} parsed: {other:?}"),
        }
    }

    #[test]
    fn parses_values_in_document_order() {
        let v = GoValue::parse(" {\"b\":[1,-0.5e+3,true,null],\"a\":\"x\",\"b\":{}} ").unwrap();
        assert_eq!(
            v,
            GoValue::Object(vec![
                (
                    "b".into(),
                    GoValue::Array(vec![
                        GoValue::Number("1".into()),
                        GoValue::Number("-0.5e+3".into()),
                        GoValue::Bool(true),
                        GoValue::Null,
                    ])
                ),
                ("a".into(), GoValue::String("x".into())),
                ("b".into(), GoValue::Object(vec![])),
            ])
        );
        assert_eq!(v.field("b"), Some(&GoValue::Object(vec![])));
        assert_eq!(
            v.to_compact(),
            "{\"b\":[1,-0.5e+3,true,null],\"a\":\"x\",\"b\":{}}"
        );
    }

    #[test]
    fn field_takes_the_last_key_equal_up_to_case() {
        let v = GoValue::parse(r#"{"Seq":1,"seq":2}"#).unwrap();
        assert_eq!(v.field("Seq"), Some(&GoValue::Number("2".into())));
        let v = GoValue::parse(r#"{"seq":2,"Seq":1,"Fence":3}"#).unwrap();
        assert_eq!(v.field("Seq"), Some(&GoValue::Number("1".into())));
        assert_eq!(v.field("fence"), Some(&GoValue::Number("3".into())));
        let v = GoValue::parse("{\"\u{17f}eq\":3,\"\u{212a}ind\":4}").unwrap();
        assert_eq!(v.field("Seq"), Some(&GoValue::Number("3".into())));
        assert_eq!(v.field("Kind"), Some(&GoValue::Number("4".into())));
        assert_eq!(v.field("Se"), None);
        assert_eq!(GoValue::Null.field("Seq"), None);
    }

    #[test]
    fn unescapes_strings_like_go() {
        let v = GoValue::parse(r#""a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude42\ud800x\udc00\ud800\u0041""#)
            .unwrap();
        assert_eq!(
            v,
            GoValue::String("a\"\\/\u{8}\u{c}\n\r\té🙂\u{fffd}x\u{fffd}\u{fffd}A".into())
        );
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        assert_eq!(
            reason("[\n  {\"a\": 1,\n"),
            "unexpected end of input looking for beginning of object key string at line 3, column 1"
        );
        assert_eq!(
            reason("[1 2]"),
            "invalid character '2' after array element at line 1, column 4"
        );
        assert_eq!(
            reason("{\"a\" 1}"),
            "invalid character '1' after object key at line 1, column 6"
        );
        assert_eq!(
            reason("01"),
            "invalid character after top-level value at line 1, column 2"
        );
        assert_eq!(
            reason("1."),
            "unexpected end of input after decimal point in numeric literal at line 1, column 3"
        );
        assert_eq!(
            reason("-"),
            "unexpected end of input in numeric literal at line 1, column 2"
        );
        assert_eq!(
            reason("tru"),
            "unexpected end of input in literal true at line 1, column 4"
        );
        assert_eq!(
            reason("nul!"),
            "invalid character '!' in literal null at line 1, column 4"
        );
        assert_eq!(
            reason("\"a\u{1}\""),
            "invalid character '\\u{1}' in string literal at line 1, column 3"
        );
        assert_eq!(
            reason("\"\\x\""),
            "invalid character 'x' in string escape code at line 1, column 3"
        );
        assert_eq!(
            reason("\"é"),
            "unexpected end of input in string literal at line 1, column 3"
        );
        assert_eq!(
            reason(""),
            "unexpected end of input looking for beginning of value at line 1, column 1"
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        GoValue::parse(&deep).unwrap();
        let deeper = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(reason(&deeper).starts_with("nesting deeper than 512 levels"));
    }
}
