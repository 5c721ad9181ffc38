//! Shared-prefix fork children: which stored rows make up a session's chain.
//!
//! A child made by [`Log::fork_session`](crate::Log::fork_session) stores only its own
//! records. A *prefix link* `(child → parent, fork_seq)` says that its records `1..=fork_seq` are
//! the parent's chain up to that seq, which may itself continue into the grandparent:
//!
//! ```text
//!  P  rows:  1 2 3 4 5 6 7 8 …            (P keeps growing; C never sees 6..)
//!  C  link:  P@5     rows: 6 7 8           chain(C) = P[1..=5] ++ C[6..]
//!  G  link:  C@7     rows: 8 9             chain(G) = P[1..=5] ++ C[6..=7] ++ G[8..]
//!  H  link:  C@3     rows: 4               chain(H) = P[1..=3] ++ H[4..]
//! ```
//!
//! [`segments`] turns the link walk into the stored runs, oldest first; every backend reads a
//! chain by reading those runs in order. Links are written once with the child and never
//! changed, so the runs of a chain only grow at its end.
//!
//! Whoever deletes sessions one day must keep every row a link still reaches (the parent's rows
//! up to the largest `fork_seq` of its children, recursively), or the children lose their
//! prefix.

use crate::error::{JournalError, Result};

/// Longest chain of prefix links followed before a chain is declared corrupt (a cycle cannot be
/// written through the journal, so only tampering makes one).
pub const MAX_FORK_DEPTH: usize = 10_000;

/// Where a shared-prefix child's records `1..=fork_seq` live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixLink {
    /// The session whose chain the child continues.
    pub parent: String,
    /// The last shared seq.
    pub fork_seq: i64,
}

/// A run of a chain's records stored under one session: seqs `lo..=hi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The session whose rows hold the run.
    pub session: String,
    /// First seq of the run.
    pub lo: i64,
    /// Last seq of the run (`i64::MAX` for the session's own open end).
    pub hi: i64,
}

impl Segment {
    /// The run cut to the window `from..=to`, or `None` when they do not overlap.
    pub fn clip(&self, from: i64, to: i64) -> Option<Self> {
        let (lo, hi) = (self.lo.max(from), self.hi.min(to));
        (lo <= hi).then(|| Self {
            session: self.session.clone(),
            lo,
            hi,
        })
    }
}

/// The runs of `session`'s chain, oldest first. `link_of` looks up a session's prefix link; a
/// session without one owns its records from seq 1.
///
/// # Errors
/// What `link_of` returns, and [`JournalError::InvalidArgument`] for a chain of links longer
/// than [`MAX_FORK_DEPTH`] (a cycle).
pub fn segments(
    session: &str,
    mut link_of: impl FnMut(&str) -> Result<Option<PrefixLink>>,
) -> Result<Vec<Segment>> {
    let mut out = Vec::new();
    let mut current = session.to_owned();
    let mut hi = i64::MAX;
    for _ in 0..MAX_FORK_DEPTH {
        match link_of(&current)? {
            None => {
                if hi >= 1 {
                    out.push(Segment {
                        session: current,
                        lo: 1,
                        hi,
                    });
                }
                out.reverse();
                return Ok(out);
            }
            Some(link) => {
                let lo = link.fork_seq.saturating_add(1);
                if lo <= hi {
                    out.push(Segment {
                        session: current,
                        lo,
                        hi,
                    });
                }
                hi = hi.min(link.fork_seq);
                current = link.parent;
            }
        }
    }
    Err(JournalError::InvalidArgument(format!(
        "session {session}: fork lineage is deeper than {MAX_FORK_DEPTH} links (a cycle?)"
    )))
}

/// The run holding `seq`.
pub fn segment_of(segments: &[Segment], seq: i64) -> Option<&Segment> {
    segments.iter().find(|s| s.lo <= seq && seq <= s.hi)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn runs(session: &str, links: &[(&str, &str, i64)]) -> Vec<(String, i64, i64)> {
        let map: HashMap<&str, PrefixLink> = links
            .iter()
            .map(|(c, p, k)| {
                (
                    *c,
                    PrefixLink {
                        parent: (*p).to_owned(),
                        fork_seq: *k,
                    },
                )
            })
            .collect();
        segments(session, |s| Ok(map.get(s).cloned()))
            .unwrap()
            .into_iter()
            .map(|s| (s.session, s.lo, s.hi))
            .collect()
    }

    #[test]
    fn chains_follow_links_and_clip_at_each_fork_point() {
        let links = [("C", "P", 5), ("G", "C", 7), ("H", "C", 3)];
        let max = i64::MAX;
        assert_eq!(runs("P", &links), [("P".into(), 1, max)]);
        assert_eq!(
            runs("C", &links),
            [("P".into(), 1, 5), ("C".into(), 6, max)]
        );
        assert_eq!(
            runs("G", &links),
            [("P".into(), 1, 5), ("C".into(), 6, 7), ("G".into(), 8, max)]
        );
        // A fork inside the parent's own shared prefix skips the parent's rows.
        assert_eq!(
            runs("H", &links),
            [("P".into(), 1, 3), ("H".into(), 4, max)]
        );
    }

    #[test]
    fn a_cycle_is_refused() {
        let err = segments("A", |s| {
            Ok(Some(PrefixLink {
                parent: if s == "A" { "B" } else { "A" }.to_owned(),
                fork_seq: 3,
            }))
        })
        .unwrap_err();
        assert!(matches!(err, JournalError::InvalidArgument(_)));
    }

    #[test]
    fn clip_cuts_to_the_window() {
        let s = Segment {
            session: "P".into(),
            lo: 1,
            hi: 5,
        };
        assert_eq!(s.clip(3, i64::MAX).map(|c| (c.lo, c.hi)), Some((3, 5)));
        assert_eq!(s.clip(6, 9), None);
    }
}
