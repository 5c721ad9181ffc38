//! Bounded label values: a metric label fed by names the host does not fully control (tool
//! names a harness sends, model ids it asks for) keeps the first [`LIMIT`] distinct values and
//! reports every later one as [`OTHER`], so a misbehaving caller cannot grow the registry
//! without end. Values are also cut to [`MAX_LEN`] bytes.

use std::collections::HashSet;
use std::sync::Mutex;

/// Distinct values one label keeps.
pub const LIMIT: usize = 200;
/// The value reported once [`LIMIT`] is reached.
pub const OTHER: &str = "other";
/// Longest value kept, in bytes (cut on a character boundary).
pub const MAX_LEN: usize = 96;

/// The values seen so far for one label.
#[derive(Debug, Default)]
pub struct BoundedLabel {
    seen: Mutex<HashSet<String>>,
}

impl BoundedLabel {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// `value` as the label may carry it: itself (cut to [`MAX_LEN`]) while there is room or it
    /// was seen before, [`OTHER`] after that. An empty value stays empty.
    pub fn admit(&self, value: &str) -> String {
        let value = cut(value);
        let Ok(mut seen) = self.seen.lock() else {
            return OTHER.to_owned();
        };
        if seen.contains(value) {
            return value.to_owned();
        }
        if seen.len() >= LIMIT {
            return OTHER.to_owned();
        }
        seen.insert(value.to_owned());
        value.to_owned()
    }
}

fn cut(value: &str) -> &str {
    if value.len() <= MAX_LEN {
        return value;
    }
    let mut end = MAX_LEN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_values_then_reports_other() {
        let label = BoundedLabel::new();
        for i in 0..LIMIT {
            assert_eq!(label.admit(&format!("tool{i}")), format!("tool{i}"));
        }
        assert_eq!(label.admit("one-too-many"), OTHER);
        assert_eq!(label.admit("tool3"), "tool3", "a value seen before stays");
    }

    #[test]
    fn cuts_long_values_on_a_character_boundary() {
        let label = BoundedLabel::new();
        let long = "é".repeat(MAX_LEN);
        let kept = label.admit(&long);
        assert!(kept.len() <= MAX_LEN);
        assert!(long.starts_with(&kept));
    }
}
