//! What the daemon serves for monitoring on its HTTP listener: `GET /metrics`, whose gauges of
//! stored state (sessions by compute state, pending approvals) are read from the journal at
//! scrape time, so hosts sharing a journal report the same truth.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsessions_journal::{ApprovalsQuery, Journal, ListQuery};
use agentsessions_telemetry::GaugeSource;
use agentsessions_telemetry::metrics::Metrics;

/// Scrapes closer together than this reuse the last reading instead of listing again.
const MIN_REFRESH: Duration = Duration::from_secs(1);
/// Pages read per gauge and scrape; a larger journal reports what these pages hold.
const MAX_PAGES: usize = 20;
/// Entries per page.
const PAGE_SIZE: i64 = 500;

/// The stored-state gauges of `project`, read from `journal`.
pub struct JournalGauges {
    journal: Arc<dyn Journal>,
    project: String,
    last: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for JournalGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalGauges")
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl JournalGauges {
    /// Gauges over `journal`'s sessions and approvals in `project`.
    pub fn new(journal: Arc<dyn Journal>, project: impl Into<String>) -> Self {
        Self {
            journal,
            project: project.into(),
            last: Mutex::new(None),
        }
    }

    /// Claims this scrape's refresh; false when the last one is recent enough.
    fn due(&self) -> bool {
        let Ok(mut last) = self.last.lock() else {
            return false;
        };
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < MIN_REFRESH) {
            return false;
        }
        *last = Some(now);
        true
    }

    async fn sessions(&self) -> Result<BTreeMap<&'static str, i64>, String> {
        let mut counts = BTreeMap::new();
        let mut token = String::new();
        for _ in 0..MAX_PAGES {
            let page = self
                .journal
                .list_sessions(ListQuery {
                    project: self.project.clone(),
                    page_size: PAGE_SIZE,
                    page_token: token,
                    owner: None,
                })
                .await
                .map_err(|e| e.to_string())?;
            for session in &page.sessions {
                let state = match session.compute_state.as_str() {
                    "" => "UNSPECIFIED",
                    state => state,
                };
                *counts.entry(state).or_insert(0) += 1;
            }
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        Ok(counts)
    }

    async fn pending_approvals(&self) -> Result<i64, String> {
        let mut pending = 0_i64;
        let mut token = String::new();
        for _ in 0..MAX_PAGES {
            let page = self
                .journal
                .list_pending_approvals(ApprovalsQuery {
                    project: self.project.clone(),
                    page_size: PAGE_SIZE,
                    page_token: token,
                    owner: None,
                })
                .await
                .map_err(|e| e.to_string())?;
            pending += i64::try_from(page.approvals.len()).unwrap_or(i64::MAX);
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        Ok(pending)
    }
}

impl GaugeSource for JournalGauges {
    fn refresh<'a>(
        &'a self,
        metrics: &'a Metrics,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if !self.due() {
                return;
            }
            match self.sessions().await {
                Ok(counts) => {
                    let counts: Vec<(&str, i64)> = counts.into_iter().collect();
                    metrics.set_sessions(&counts);
                }
                Err(error) => {
                    tracing::warn!(component = "metrics", %error, "counting sessions failed")
                }
            }
            match self.pending_approvals().await {
                Ok(pending) => metrics.set_approvals_pending(pending),
                Err(error) => {
                    tracing::warn!(component = "metrics", %error, "counting pending approvals failed")
                }
            }
        })
    }
}

/// `GET /metrics` for the daemon, its stored-state gauges read from `journal` in `project`.
pub fn metrics_router(journal: Arc<dyn Journal>, project: &str) -> axum::Router {
    agentsessions_telemetry::metrics_router(Some(Arc::new(JournalGauges::new(journal, project))))
}
