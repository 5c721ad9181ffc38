//! Token usage summed per session: the journal adds each USAGE record to its session's totals in
//! the commit that appends it, so showing a session's cost reads one row, never its log.
//!
//! Totals count the records a session committed itself: a fork child starts at zero, because the
//! usage its shared prefix records was its parent's.

use agentsessions_api::{Event, EventBody, EventKind, Usage};

/// A session's summed token usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
    /// Prompt tokens the provider served from its cache (counted within `input_tokens`).
    pub cached_input_tokens: i64,
}

impl UsageTotals {
    /// The totals one USAGE record adds.
    pub fn of(usage: &Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            cached_input_tokens: usage.cached_input_tokens,
        }
    }

    /// What committing `event` adds; `None` for anything but a USAGE record.
    pub fn added_by(event: &Event) -> Option<Self> {
        match (&event.kind, &event.body) {
            (EventKind::Usage, Some(EventBody::Usage(usage))) => Some(Self::of(usage)),
            _ => None,
        }
    }

    /// `self + other`, saturating: a counter never wraps into a negative total.
    #[must_use]
    pub fn plus(self, other: Self) -> Self {
        Self {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(other.reasoning_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_add(other.cached_input_tokens),
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_records_add_and_others_do_not() {
        let usage = Event::new(
            EventKind::Usage,
            EventBody::Usage(Usage {
                model: "m".into(),
                input_tokens: 10,
                output_tokens: 5,
                reasoning_tokens: 2,
                cached_input_tokens: 4,
            }),
        );
        let once = UsageTotals::added_by(&usage).unwrap();
        assert_eq!(once.plus(once).input_tokens, 20);
        assert_eq!(once.plus(once).cached_input_tokens, 8);
        assert_eq!(
            UsageTotals::added_by(&Event::default()),
            None,
            "an event without a usage body adds nothing"
        );
        let max = UsageTotals {
            output_tokens: i64::MAX,
            ..UsageTotals::default()
        };
        assert_eq!(max.plus(once).output_tokens, i64::MAX);
    }
}
