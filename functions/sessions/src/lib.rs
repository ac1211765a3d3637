//! Page-view sessions per user.
//!
//! Input: `{"user":"u1","page":"/home","time":"2026-01-15T10:00:00Z"}`.
//! Key: the user. The host opens a session window of `gap` per view and
//! merges ones that overlap or touch, as Flink does (so a late view can
//! bridge two sessions); this aggregate keeps the view count and the first
//! and last view time, and emits
//! `{"user":"u1","session_start":…,"session_end":…,"views":2,"duration_ms":20000}`.

use serde::{Deserialize, Serialize};
use weir_sdk::{function, AggregateFunction, Error, Event, KeyFunction, Window};

#[derive(Deserialize)]
struct PageView<'a> {
    user: &'a str,
}

/// What a session accumulates.
#[derive(Default, Serialize, Deserialize)]
pub struct Session {
    views: u64,
    /// Event times of the first and last view.
    span: Option<(i64, i64)>,
}

#[derive(Serialize)]
struct SessionSummary<'a> {
    user: &'a str,
    session_start: i64,
    session_end: i64,
    views: u64,
    duration_ms: i64,
}

/// The function: keyed by user, counting views per session.
#[derive(Default)]
pub struct Sessions;

#[function]
impl KeyFunction for Sessions {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<PageView>()?.user.as_bytes().to_vec())
    }
}

fn widen(span: Option<(i64, i64)>, other: Option<(i64, i64)>) -> Option<(i64, i64)> {
    match (span, other) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (one, None) | (None, one) => one,
    }
}

#[function]
impl AggregateFunction for Sessions {
    type Accumulator = Session;

    fn add(&mut self, session: &mut Session, event: &Event) -> Result<(), Error> {
        session.views += 1;
        session.span = widen(session.span, Some((event.timestamp, event.timestamp)));
        Ok(())
    }

    fn merge(&mut self, a: Session, b: Session) -> Result<Session, Error> {
        Ok(Session { views: a.views + b.views, span: widen(a.span, b.span) })
    }

    fn result(
        &mut self,
        key: &[u8],
        window: Window,
        session: Session,
    ) -> Result<Vec<Event>, Error> {
        let (first, last) = session.span.unwrap_or((window.start, window.start));
        let out = SessionSummary {
            user: std::str::from_utf8(key)?,
            session_start: window.start,
            session_end: window.end,
            views: session.views,
            duration_ms: last - first,
        };
        Ok(vec![Event::from_json(&out, window.end - 1)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    #[test]
    fn counts_views_and_measures_the_session() {
        let mut harness = Harness::<Sessions>::new();
        let view = |ms| Event::new(br#"{"user":"u1","page":"/"}"#.to_vec(), ms);
        let out = harness
            .aggregate(b"u1", Window { start: 0, end: 40_000 }, vec![view(10_000), view(0)])
            .unwrap();
        let summary: serde_json::Value = out[0].json().unwrap();
        assert_eq!(
            (summary["views"].as_u64(), summary["duration_ms"].as_i64()),
            (Some(2), Some(10_000))
        );
        let merged = harness
            .function()
            .merge(
                Session { views: 1, span: Some((5, 5)) },
                Session { views: 2, span: Some((1, 3)) },
            )
            .unwrap();
        assert_eq!((merged.views, merged.span), (3, Some((1, 5))));
    }
}
