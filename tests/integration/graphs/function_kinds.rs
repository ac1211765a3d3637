//! The graph example of the two function kinds run in a graph:
//! `functions/order-status`, a transform chained into a source (filter and
//! map of payments) and a keyed co-process function with event-time timers
//! (orders and cleaned payments), run from its own `pipeline.yaml` at
//! parallelism 1 and 3 and compared line by line with its `expected.jsonl`
//! (written by its `expected.py`, independently of the host).

use serde_json::Value;

use super::examples::{expected, run_example, sorted_by};

/// The order of `order-status/expected.jsonl`: order id, then status in
/// the order paid, unpaid, late-payment.
fn by_order_then_status(record: &Value) -> (u64, u8) {
    let rank = match record["status"].as_str().unwrap() {
        "paid" => 0,
        "unpaid" => 1,
        "late-payment" => 2,
        other => panic!("unknown status {other:?} in {record}"),
    };
    (record["order_id"].as_u64().unwrap(), rank)
}

#[test]
fn order_status_from_a_transform_and_a_co_process_is_exact_at_parallelism_one_and_three() {
    let expected = expected("order-status");
    assert_eq!(expected.len(), 160);
    for parallelism in [1, 3] {
        let output = run_example(
            "order-status",
            &["orders.jsonl", "payments.jsonl"],
            "status.jsonl",
            parallelism,
            &[("status", parallelism)],
        );
        assert_eq!(sorted_by(output, by_order_then_status), expected, "parallelism {parallelism}");
    }
}
