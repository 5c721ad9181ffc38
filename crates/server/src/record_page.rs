//! ReadRecords (an extension): which records one page holds. A streamed Replay costs a gRPC
//! message per record, which dominates for clients with a high per-message overhead (Python);
//! a page carries many records in one message, bounded by a count and by bytes so an answer
//! always fits a client's default 4 MiB receive limit.

use agentsessions_journal::LogRecord;
use agentsessions_wire::pb;
use prost::Message as _;

use crate::error::ServerError;
use crate::render::record_to_pb;

/// Records a page holds when the request names no count.
pub(crate) const DEFAULT_PAGE_RECORDS: i64 = 1_000;
/// Most records one page holds.
pub(crate) const MAX_PAGE_RECORDS: i64 = 10_000;
/// Encoded bytes after which a page ends (a single larger record still travels alone).
pub(crate) const PAGE_BYTES: usize = 3 * 1024 * 1024;

/// The seq range one ReadRecords call reads, fixed before anything is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordPage {
    /// First seq of the page.
    pub(crate) from: i64,
    /// Last seq the caller asked for (the head when it named none).
    to: i64,
    /// Most records in the page.
    limit: i64,
}

impl RecordPage {
    /// The page `req` asks for when the session's head is `head`. Seqs are read as Replay reads
    /// them (from 1 at least; a `to_seq` of 0 or less is the head).
    pub(crate) fn of(req: &pb::ReadRecordsRequest, head: i64) -> Result<Self, ServerError> {
        let limit = match req.max_records {
            n if n < 0 => return Err(ServerError::NegativeMaxRecords { max_records: n }),
            0 => DEFAULT_PAGE_RECORDS,
            n => i64::from(n).min(MAX_PAGE_RECORDS),
        };
        let to = if req.to_seq <= 0 {
            head
        } else {
            req.to_seq.min(head)
        };
        Ok(Self {
            from: req.from_seq.max(1),
            to,
            limit,
        })
    }

    /// The last seq to read, or `None` when the range holds nothing.
    pub(crate) fn last(&self) -> Option<i64> {
        (self.from <= self.to).then(|| self.to.min(self.from.saturating_add(self.limit - 1)))
    }

    /// The answer holding `records` (read for [`Self::last`]) up to the byte bound.
    pub(crate) fn answer(&self, records: &[LogRecord], head: i64) -> pb::ReadRecordsResponse {
        let mut page = Vec::with_capacity(records.len());
        let mut bytes = 0usize;
        for record in records {
            let rendered = record_to_pb(record);
            let size = rendered.encoded_len();
            if !page.is_empty() && bytes + size > PAGE_BYTES {
                break;
            }
            bytes += size;
            page.push(rendered);
        }
        let next_seq = match page.last() {
            Some(last) if last.seq < self.to => last.seq + 1,
            // Nothing was read although the range was not empty: the journal holds fewer records
            // than its head promised (a deletion raced the read); the range is over.
            _ => 0,
        };
        pb::ReadRecordsResponse {
            records: page,
            next_seq,
            head_seq: head,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(from_seq: i64, to_seq: i64, max_records: i32) -> pb::ReadRecordsRequest {
        pb::ReadRecordsRequest {
            session: "s".into(),
            from_seq,
            to_seq,
            max_records,
        }
    }

    #[test]
    fn defaults_clamps_and_refuses() {
        let page = RecordPage::of(&req(0, 0, 0), 5_000).unwrap();
        assert_eq!((page.from, page.last()), (1, Some(1_000)));
        let page = RecordPage::of(&req(10, 0, 50_000), 100_000).unwrap();
        assert_eq!(page.last(), Some(10_009));
        let page = RecordPage::of(&req(3, 4, 0), 100).unwrap();
        assert_eq!(page.last(), Some(4));
        // Past the head, or an empty session: nothing to read.
        assert_eq!(RecordPage::of(&req(7, 0, 0), 6).unwrap().last(), None);
        assert_eq!(RecordPage::of(&req(0, 0, 0), 0).unwrap().last(), None);
        // A to_seq past the head reads to the head.
        assert_eq!(RecordPage::of(&req(1, 99, 0), 6).unwrap().last(), Some(6));
        assert!(matches!(
            RecordPage::of(&req(1, 0, -1), 6),
            Err(ServerError::NegativeMaxRecords { max_records: -1 })
        ));
    }
}
