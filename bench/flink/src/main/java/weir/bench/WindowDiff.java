package weir.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.datastream.WindowedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Flink's side of `scripts/dev window-diff` (docs/benchmarks.md): Flink's own
 * window operator over a file of orders, for Weir's window operator to be
 * compared with, firing by firing.
 *
 * <p>Reads JSON lines {@code {"order_id":1,"customer_id":3,"amount":12.34,
 * "event_time":1768471200000}} (amount with two decimals, event time in epoch
 * ms), in file order from one source subtask, with a watermark after every
 * order of (newest event time − bound − 1 ms), as Weir's {@code batch_size: 1}
 * gives. Keyed by customer, it runs tumbling, sliding and session event-time
 * windows with allowed lateness and a late side output, each at every given
 * parallelism (one job, a branch each), and writes, per window kind and parallelism,
 *
 * <ul>
 *   <li>{@code flink-<kind>-p<P>.jsonl}: every firing,
 *       {@code {"customer_id","window_start","window_end","cents","count","firing"}}, where
 *       {@code firing} counts earlier firings of the same (customer, window): 0 on time, 1 and
 *       up for re-firings caused by late orders;
 *   <li>{@code flink-<kind>-p<P>-late.jsonl}: every order sent to the late side output, {@code
 *       {"order_id"}}.
 * </ul>
 *
 * <p>Arguments: ORDERS OUT_DIR SIZE_MS SLIDE_MS GAP_MS BOUND_MS LATENESS_MS P... (tumbling
 * windows of SIZE, sliding windows of SIZE every SLIDE, sessions of GAP).
 */
public final class WindowDiff {
    private WindowDiff() {}

    /** What each branch's sinks received: `<kind>-p<P>` and `<kind>-p<P>-late` → lines. */
    private static final Map<String, Queue<String>> OUTPUTS = new ConcurrentHashMap<>();

    private static final Pattern FIELD = Pattern.compile("\"(\\w+)\"\\s*:\\s*\"?([-0-9.]+)");

    /** (order id, customer, cents, event time). */
    private static final TypeInformation<Tuple4<Long, Long, Long, Long>> ORDER =
            Types.TUPLE(Types.LONG, Types.LONG, Types.LONG, Types.LONG);

    /** (cents, count). */
    private static final TypeInformation<Tuple2<Long, Long>> PAIR = Types.TUPLE(Types.LONG, Types.LONG);

    public static void main(String[] args) throws Exception {
        if (args.length < 8) {
            System.err.println(
                    "usage: WindowDiff ORDERS OUT_DIR SIZE_MS SLIDE_MS GAP_MS BOUND_MS LATENESS_MS P...");
            System.exit(2);
        }
        List<Tuple4<Long, Long, Long, Long>> orders = read(Path.of(args[0]));
        Path out = Path.of(args[1]);
        Files.createDirectories(out);
        long size = Long.parseLong(args[2]);
        long slide = Long.parseLong(args[3]);
        long gap = Long.parseLong(args[4]);
        long bound = Long.parseLong(args[5]);
        long lateness = Long.parseLong(args[6]);
        List<Integer> parallelisms = new ArrayList<>();
        for (int i = 7; i < args.length; i++) {
            parallelisms.add(Integer.parseInt(args[i]));
        }
        // One job, one source, a branch per window kind and parallelism (a
        // local cluster's start and stop cost seconds per job).
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(
                parallelisms.stream().max(Integer::compare).orElse(1), new Configuration());
        WatermarkStrategy<Tuple4<Long, Long, Long, Long>> watermarks =
                WatermarkStrategy.<Tuple4<Long, Long, Long, Long>>forGenerator(context -> new EveryOrder(bound))
                        .withTimestampAssigner((order, previous) -> order.f3);
        SingleOutputStreamOperator<Tuple4<Long, Long, Long, Long>> timed =
                env.fromData(orders, ORDER)
                        .setParallelism(1)
                        .assignTimestampsAndWatermarks(watermarks)
                        .setParallelism(1);
        List<String> names = new ArrayList<>();
        for (int parallelism : parallelisms) {
            for (String kind : List.of("tumbling", "sliding", "session")) {
                String name = kind + "-p" + parallelism;
                names.add(name);
                OUTPUTS.put(name, new ConcurrentLinkedQueue<>());
                OUTPUTS.put(name + "-late", new ConcurrentLinkedQueue<>());
                branch(timed, name, kind, size, slide, gap, lateness, parallelism);
            }
        }
        env.execute("window-diff");
        for (String name : names) {
            write(out.resolve("flink-" + name + ".jsonl"), OUTPUTS.get(name));
            write(out.resolve("flink-" + name + "-late.jsonl"), OUTPUTS.get(name + "-late"));
            System.out.printf("flink %s: %d firings, %d late%n",
                    name, OUTPUTS.get(name).size(), OUTPUTS.get(name + "-late").size());
        }
    }

    /** The windows of `kind` at `parallelism` over `timed`, into the outputs named `name`. */
    private static void branch(
            SingleOutputStreamOperator<Tuple4<Long, Long, Long, Long>> timed,
            String name,
            String kind,
            long size,
            long slide,
            long gap,
            long lateness,
            int parallelism) {
        OutputTag<Tuple4<Long, Long, Long, Long>> late = new OutputTag<>("late", ORDER);
        WindowedStream<Tuple4<Long, Long, Long, Long>, Long, TimeWindow> windowed =
                switch (kind) {
                    case "tumbling" -> timed.keyBy(order -> order.f1, Types.LONG)
                            .window(TumblingEventTimeWindows.of(Duration.ofMillis(size)));
                    case "sliding" -> timed.keyBy(order -> order.f1, Types.LONG)
                            .window(SlidingEventTimeWindows.of(Duration.ofMillis(size), Duration.ofMillis(slide)));
                    default -> timed.keyBy(order -> order.f1, Types.LONG)
                            .window(EventTimeSessionWindows.withGap(Duration.ofMillis(gap)));
                };
        SingleOutputStreamOperator<String> fired =
                windowed.allowedLateness(Duration.ofMillis(lateness))
                        .sideOutputLateData(late)
                        .aggregate(new SumCount(), new Emit(), PAIR, PAIR, Types.STRING)
                        .setParallelism(parallelism)
                        .name(name);
        fired.sinkTo(new Into(name)).setParallelism(1);
        fired.getSideOutput(late)
                .map(order -> "{\"order_id\":" + order.f0 + "}", Types.STRING)
                .setParallelism(1)
                .sinkTo(new Into(name + "-late"))
                .setParallelism(1);
    }

    /** The orders of a JSON-lines file, in file order. */
    private static List<Tuple4<Long, Long, Long, Long>> read(Path file) throws IOException {
        List<Tuple4<Long, Long, Long, Long>> orders = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, String> fields = new HashMap<>();
            Matcher matcher = FIELD.matcher(line);
            while (matcher.find()) {
                fields.put(matcher.group(1), matcher.group(2));
            }
            long cents = new java.math.BigDecimal(fields.get("amount")).movePointRight(2).longValueExact();
            orders.add(Tuple4.of(
                    Long.parseLong(fields.get("order_id")),
                    Long.parseLong(fields.get("customer_id")),
                    cents,
                    Long.parseLong(fields.get("event_time"))));
        }
        return orders;
    }

    private static void write(Path file, Queue<String> lines) throws IOException {
        try (PrintWriter writer = new PrintWriter(Files.newBufferedWriter(file, StandardCharsets.UTF_8))) {
            for (String line : lines) {
                writer.println(line);
            }
        }
    }

    /** A watermark after every order: the newest event time − bound − 1 ms (Flink's bounded out-of-orderness, not periodic). */
    static final class EveryOrder implements WatermarkGenerator<Tuple4<Long, Long, Long, Long>> {
        private final long bound;
        private long newest = Long.MIN_VALUE;

        EveryOrder(long bound) {
            this.bound = bound;
        }

        @Override
        public void onEvent(Tuple4<Long, Long, Long, Long> order, long timestamp, WatermarkOutput output) {
            newest = Math.max(newest, timestamp);
            output.emitWatermark(new Watermark(newest - bound - 1));
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {}
    }

    /** (cents, count) of a window's orders. */
    static final class SumCount
            implements AggregateFunction<Tuple4<Long, Long, Long, Long>, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Tuple4<Long, Long, Long, Long> order, Tuple2<Long, Long> total) {
            return Tuple2.of(total.f0 + order.f2, total.f1 + 1);
        }

        @Override
        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> total) {
            return total;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
        }
    }

    /** One JSON line per firing, numbering the firings of each (customer, window) in keyed state. */
    static final class Emit extends ProcessWindowFunction<Tuple2<Long, Long>, String, Long, TimeWindow> {
        @Override
        public void process(Long customer, Context context, Iterable<Tuple2<Long, Long>> totals, Collector<String> out)
                throws Exception {
            TimeWindow window = context.window();
            MapState<String, Integer> fired = context.globalState()
                    .getMapState(new MapStateDescriptor<>("fired", Types.STRING, Types.INT));
            String id = window.getStart() + "/" + window.getEnd();
            Integer before = fired.get(id);
            int firing = before == null ? 0 : before;
            fired.put(id, firing + 1);
            for (Tuple2<Long, Long> total : totals) {
                out.collect(String.format(
                        "{\"customer_id\":%d,\"window_start\":%d,\"window_end\":%d,\"cents\":%d,\"count\":%d,\"firing\":%d}",
                        customer, window.getStart(), window.getEnd(), total.f0, total.f1, firing));
            }
        }
    }

    /** Collects lines into the outputs named {@code name}. */
    static final class Into implements Sink<String> {
        private final String name;

        Into(String name) {
            this.name = name;
        }

        @Override
        public SinkWriter<String> createWriter(WriterInitContext context) {
            Queue<String> into = OUTPUTS.get(name);
            return new SinkWriter<>() {
                @Override
                public void write(String line, Context context) {
                    into.add(line);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }
}
