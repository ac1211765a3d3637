//! Weir's window operator against Apache Flink's, firing by firing: the
//! differential run of `scripts/dev window-diff` (`weir_devkit::window_diff`)
//! on fewer orders. Seeded out-of-order orders with late ones go through
//! tumbling, sliding and session windows with allowed lateness and a late
//! output, on both engines at parallelism 1 and 3; every firing (customer,
//! window, total, on time or which late re-firing) and every late order
//! must be the same multiset.
//!
//! It needs Maven and Java to build `bench/flink` (Flink's jars come from
//! Maven Central once, then from `~/.m2`); without them, or when the build
//! fails (no network and no cached jars), it says SKIPPED and why.

use std::path::Path;

use weir_devkit::window_diff::{self, WindowDiff};

use crate::support::function;

/// Orders in this test: `scripts/dev window-diff` runs 20,000; this keeps
/// the test to seconds while still covering every kind of lateness.
const ORDERS: usize = 4_000;

#[test]
fn windows_fire_as_flink_s_do_firing_by_firing_with_late_orders() {
    for tool in ["mvn", "java"] {
        if !weir_devkit::process::on_path(tool) {
            eprintln!("SKIPPED: no `{tool}` on PATH to build and run bench/flink's Flink job");
            return;
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("mvn.log");
    if let Err(error) = window_diff::build_flink(&root, &log) {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> =
            log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        eprintln!(
            "SKIPPED: cannot build Flink's jobs in bench/flink ({error:#}):\n{}",
            tail.join("\n")
        );
        return;
    }
    let diff = WindowDiff {
        root,
        weir: env!("CARGO_BIN_EXE_weir").into(),
        function: function("windowed-revenue"),
        orders: ORDERS,
        seed: 11,
        parallelisms: vec![1, 3],
    };
    let comparisons = diff.compare(scratch.path()).unwrap();
    eprintln!("{}", window_diff::header());
    for comparison in &comparisons {
        eprintln!("{}", comparison.row());
    }
    assert_eq!(comparisons.len(), 6);
    for comparison in &comparisons {
        assert_eq!(
            comparison.different, 0,
            "{} windows at parallelism {} differ from Flink's: {:#?}",
            comparison.kind, comparison.parallelism, comparison.differences
        );
        // The data reaches what is compared: late re-firings and late orders.
        assert!(comparison.flink_refirings > 0, "{comparison:?}");
        assert!(comparison.flink_late > 0, "{comparison:?}");
    }
}
