//! Which windows an event belongs to.

use crate::runtime::bindings::weir::function::types::Window;

/// How event time is cut into windows (all in milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowAssigner {
    /// Back-to-back windows of `size`, starting at multiples of `size`
    /// shifted by `offset`.
    Tumbling {
        /// Window length.
        size: i64,
        /// Shift of the window starts.
        offset: i64,
    },
    /// Per-key sessions: an event opens `[timestamp, timestamp + gap)`,
    /// and windows that overlap or touch merge into one (as Flink's).
    Session {
        /// Inactivity that closes a session.
        gap: i64,
    },
    /// Windows of `size` starting every `slide`; an event belongs to
    /// `size / slide` of them.
    Sliding {
        /// Window length.
        size: i64,
        /// Distance between window starts.
        slide: i64,
        /// Shift of the window starts.
        offset: i64,
    },
}

impl WindowAssigner {
    /// The fixed window length (`None` for sessions, whose length varies).
    pub fn size(&self) -> Option<i64> {
        match *self {
            WindowAssigner::Tumbling { size, .. } | WindowAssigner::Sliding { size, .. } => {
                Some(size)
            }
            WindowAssigner::Session { .. } => None,
        }
    }

    /// Whether windows merge (sessions).
    pub fn is_merging(&self) -> bool {
        matches!(self, WindowAssigner::Session { .. })
    }

    /// The windows containing `timestamp`, latest first, appended to `out`
    /// (for sessions: the event's own, not yet merged, window).
    pub fn assign(&self, timestamp: i64, out: &mut Vec<Window>) {
        let (size, slide, offset) = match *self {
            WindowAssigner::Tumbling { size, offset } => (size, size, offset),
            WindowAssigner::Sliding { size, slide, offset } => (size, slide, offset),
            WindowAssigner::Session { gap } => {
                out.push(Window { start: timestamp, end: timestamp.saturating_add(gap) });
                return;
            }
        };
        let mut start = timestamp - (timestamp - offset).rem_euclid(slide);
        while start > timestamp - size {
            out.push(Window { start, end: start + size });
            start -= slide;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(assigner: WindowAssigner, timestamp: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        assigner.assign(timestamp, &mut out);
        out.into_iter().map(|w| (w.start, w.end)).collect()
    }

    #[test]
    fn tumbling_windows_with_and_without_offset() {
        let minute = WindowAssigner::Tumbling { size: 60, offset: 0 };
        assert_eq!(windows(minute, 0), vec![(0, 60)]);
        assert_eq!(windows(minute, 59), vec![(0, 60)]);
        assert_eq!(windows(minute, 60), vec![(60, 120)]);
        assert_eq!(windows(minute, -1), vec![(-60, 0)]);
        assert_eq!(windows(WindowAssigner::Tumbling { size: 60, offset: 15 }, 10), vec![(-45, 15)]);
    }

    #[test]
    fn sliding_windows_cover_an_event_size_over_slide_times() {
        let sliding = WindowAssigner::Sliding { size: 60, slide: 20, offset: 0 };
        assert_eq!(windows(sliding, 45), vec![(40, 100), (20, 80), (0, 60)]);
        assert_eq!(windows(sliding, 40), vec![(40, 100), (20, 80), (0, 60)]);
        assert_eq!(windows(sliding, 39), vec![(20, 80), (0, 60), (-20, 40)]);
    }
}
