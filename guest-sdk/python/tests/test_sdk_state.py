"""State, timers, outputs and errors through the harness (the SDK's real
glue over an in-memory host)."""

import pytest

from weir import (
    RAW,
    AggregateFunction,
    Event,
    Events,
    FunctionError,
    KeyFunction,
    ListState,
    LogLevel,
    MapState,
    ProcessFunction,
    TimeDomain,
    TransformFunction,
    Ttl,
    TtlUpdate,
    ValueState,
    Window,
    function,
)
from weir.testing import Harness


@function
class Sessions(ProcessFunction):
    """Counts events per key, remembers words, and flushes on a timer."""

    def __init__(self):
        self.count = ValueState[int]("count")
        self.words = MapState[str, int]("words")
        self.seen = ListState[str]("seen")
        self.raw = ValueState[bytes]("raw", codec=RAW)

    def process(self, key, events, ctx):
        self.count.set(self.count.get(0) + len(events))
        for event in events:
            word = event.text()
            self.words.put(word, self.words.get(word, 0) + 1)
            self.seen.add(word)
            if word == "boom":
                raise ValueError("boom!")
            if word == "late":
                ctx.emit_to("late", event)
        self.raw.set(key + b"!")
        ctx.register_event_time_timer(events[-1].timestamp + 10)
        ctx.log(f"{key!r}: {len(events)}", LogLevel.DEBUG)
        print("hello from print")

    def on_timer(self, key, timer, ctx):
        assert timer.domain == TimeDomain.EVENT_TIME
        ctx.emit(f"{key.decode()}:{self.count.get()}:{sorted(self.words.keys())}", timer.timestamp)
        self.count.clear()


def test_value_map_list_and_timers():
    h = Harness(Sessions)
    assert h.process(b"a", [Event("x", 1), Event("y", 2), Event("x", 3)]) == []
    assert h.value(b"a", "count") == 3
    assert h.map(b"a", "words") == {"x": 2, "y": 1}
    assert h.list(b"a", "seen") == ["x", "y", "x"]
    assert h.value(b"a", "raw", codec=RAW) == b"a!"
    assert h.pending_timers() == [(TimeDomain.EVENT_TIME, 13, b"a")]
    # The second batch is served from the host's read-ahead.
    h.process_batch([(b"a", [Event("z", 5)]), (b"b", [Event("x", 6)])])
    assert h.value(b"a", "count") == 4 and h.value(b"b", "count") == 1
    out = h.advance_watermark(100)
    assert [e.value for e in out] == [b"a:4:['x', 'y', 'z']", b"a:None:['x', 'y', 'z']", b"b:1:['x']"]
    assert [e.timestamp for e in out] == [13, 15, 16]
    assert h.value(b"a", "count") is None
    assert h.pending_timers() == []


def test_side_outputs_and_logs():
    h = Harness(Sessions)
    h.process("k", [Event("late", 7)])
    assert h.side_output("late") == [Event("late", 7)]
    assert (LogLevel.DEBUG, "b'k': 1") in h.logs


def test_an_error_names_nothing_it_should_not_and_keeps_earlier_state():
    h = Harness(Sessions)
    h.process(b"a", [Event("x", 1)])
    with pytest.raises(FunctionError, match="ValueError: boom!") as failure:
        h.process_batch([(b"a", [Event("y", 2)]), (b"b", [Event("boom", 3)])])
    assert isinstance(failure.value.__cause__, ValueError)
    assert h.host.key == b"b"  # the host was told which key failed
    assert h.value(b"a", "count") == 2  # written before the error: kept


@function
class Expiring(ProcessFunction):
    def __init__(self):
        self.last = ValueState[str]("last", ttl=Ttl(1000))
        self.touched = ValueState[str]("touched", ttl=Ttl(1000, TtlUpdate.ON_READ_AND_WRITE))

    def process(self, key, events, ctx):
        ctx.emit(f"{self.last.get()}/{self.touched.get()}", ctx.processing_time())
        self.last.set(events[-1].text())
        if self.touched.get() is None:
            self.touched.set(events[-1].text())


def test_ttl_expires_values():
    h = Harness(Expiring)
    h.process(b"k", [Event("a")])
    h.set_processing_time(900)
    assert h.process(b"k", [Event("b")])[0].value == b"a/a"  # renews last; reads renew touched
    h.set_processing_time(1800)
    assert h.process(b"k", [Event("c")])[0].value == b"b/a"
    h.set_processing_time(5000)
    assert h.process(b"k", [Event("d")])[0].value == b"None/None"


@function
class Words(TransformFunction):
    def transform(self, event, out):
        for word in event.text().split():
            out.emit(word, event.timestamp)


def test_transform_flat_maps():
    assert [e.value for e in Harness(Words).transform([Event("a b", 1), Event("", 2), "c"])] == [b"a", b"b", b"c"]


@function
class Average(KeyFunction, AggregateFunction[list]):
    def key(self, event):
        return event.value[:1]

    def create_accumulator(self):
        return [0, 0]

    def add(self, acc, event):
        return [acc[0] + int(event.value[1:]), acc[1] + 1]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]

    def result(self, key, window, acc):
        return [Event(f"{key.decode()}@{window.start}={acc[0] / acc[1]}", window.end - 1)]


def test_aggregate_with_a_json_accumulator():
    h = Harness(Average)
    assert h.keys(["a1", "b2"]) == [b"a", b"b"]
    out = h.aggregate("a", Window(0, 10), ["a1", "a2"])
    assert out == [Event("a@0=1.5", 9)]
    assert h.function.merge([1, 1], [2, 2]) == [3, 3]


def test_events_view():
    events = Events.of([Event(b"ab", 1), Event(b"c", 2, key=b"k", headers=[("h", b"v")])])
    assert len(events) == 2
    assert list(events.values()) == [b"ab", b"c"]
    assert events.timestamps() == [1, 2]
    assert events.starts() == [0, 2] and events.ends() == [2, 3] and events.span() == (0, 3)
    assert events[1].key == b"k" and events[1].header("h") == b"v"
    assert events[-1] == events[1]


def test_a_class_without_a_role_is_refused():
    with pytest.raises(TypeError, match="no role"):
        function(type("Nothing", (), {}))
    with pytest.raises(TypeError, match="does not define process"):
        function(type("Half", (ProcessFunction,), {}))
