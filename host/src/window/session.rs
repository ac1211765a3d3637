//! Merging session windows, as Flink's `MergingWindowSet` with
//! `TimeWindow.intersects`: an event's own window `[t, t + gap)` joins
//! every session of its key that it overlaps or touches (one ends where
//! the other starts), transitively. The window operator and the window
//! join both merge with this; what a session holds (accumulated events,
//! encoded join records) is theirs.

use crate::runtime::bindings::weir::function::types::Window;

/// Whether two session windows merge: they overlap or touch, as Flink's
/// `TimeWindow.intersects`.
pub fn meets(a: Window, b: Window) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// A session of one key while a batch is merged into its sessions.
pub struct Session<A> {
    /// Its window.
    pub window: Window,
    /// The stored sessions it absorbed (a stored session is its own source
    /// until it merges).
    pub sources: Vec<Window>,
    /// What the batch adds to it.
    pub added: A,
}

/// The sessions of one key: the stored ones, and the batch merged in.
pub struct Sessions<A> {
    /// The sessions, in no particular order.
    pub list: Vec<Session<A>>,
}

impl<A> Sessions<A>
where
    A: Default + IntoIterator + Extend<<A as IntoIterator>::Item>,
{
    /// The key's stored sessions, nothing added yet.
    pub fn from_stored(stored: impl IntoIterator<Item = Window>) -> Self {
        let list = stored
            .into_iter()
            .map(|window| Session { window, sources: vec![window], added: A::default() })
            .collect();
        Sessions { list }
    }

    /// The window `own` becomes when merged with every session it meets
    /// (and every session those meet, and so on). Whether that window is
    /// late is for the caller to decide before [`Self::absorb`].
    pub fn merged(&self, own: Window) -> Window {
        let mut merged = own;
        while let Some(other) = self
            .list
            .iter()
            .map(|s| s.window)
            .find(|w| meets(*w, merged) && (w.start < merged.start || w.end > merged.end))
        {
            merged =
                Window { start: merged.start.min(other.start), end: merged.end.max(other.end) };
        }
        merged
    }

    /// Make `merged` (from [`Self::merged`]) a session, absorbing the
    /// sessions it meets with their sources and additions; returns its
    /// additions, for the caller to add the event to.
    pub fn absorb(&mut self, merged: Window) -> &mut A {
        let mut session = Session { window: merged, sources: Vec::new(), added: A::default() };
        for absorbed in self.list.extract_if(.., |s| meets(s.window, merged)) {
            session.sources.extend(absorbed.sources);
            session.added.extend(absorbed.added);
        }
        self.list.push(session);
        &mut self.list.last_mut().expect("just pushed").added
    }

    /// The sessions' windows, to store.
    pub fn windows(&self) -> Vec<Window> {
        self.list.iter().map(|s| s.window).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: i64, end: i64) -> Window {
        Window { start, end }
    }

    #[test]
    fn touching_sessions_merge_and_apart_ones_do_not() {
        assert!(meets(w(0, 8), w(8, 16)), "touching");
        assert!(meets(w(8, 16), w(0, 8)));
        assert!(meets(w(0, 8), w(5, 9)), "overlapping");
        assert!(!meets(w(0, 8), w(9, 17)), "a millisecond apart");
    }

    #[test]
    fn an_event_bridges_sessions_transitively_and_keeps_what_they_held() {
        let mut sessions = Sessions::<Vec<u32>>::from_stored([w(0, 8), w(16, 24), w(40, 48)]);
        sessions.absorb(w(0, 8)).push(1);
        // [8, 16) touches both [0, 8) and [16, 24).
        let merged = sessions.merged(w(8, 16));
        assert_eq!((merged.start, merged.end), (0, 24));
        sessions.absorb(merged).push(2);
        let mut windows: Vec<(i64, i64)> =
            sessions.windows().iter().map(|w| (w.start, w.end)).collect();
        windows.sort();
        assert_eq!(windows, vec![(0, 24), (40, 48)]);
        let bridged = sessions.list.iter().find(|s| s.window.start == 0).unwrap();
        assert_eq!(bridged.added, vec![1, 2]);
        let mut sources: Vec<i64> = bridged.sources.iter().map(|w| w.start).collect();
        sources.sort();
        assert_eq!(sources, vec![0, 16]);
    }
}
