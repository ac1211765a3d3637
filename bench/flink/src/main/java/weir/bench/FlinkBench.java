package weir.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.util.Collector;

/**
 * Workloads (a) and (b) of `weir bench` on Apache Flink, over orders (order
 * id, customer, amount in cents) from a generator, keyed by customer, RocksDB
 * state, incremental checkpoints every second:
 *
 * <ul>
 *   <li>{@code sum}: each customer's running total in keyed state, one
 *       (customer, total) out per order;
 *   <li>{@code window}: the total per customer per 1-minute tumbling
 *       event-time window (orders 1 ms apart, watermarks 5 s behind), one
 *       (customer, total) out at each window's end.
 * </ul>
 *
 * <p>Customers, amounts and timestamps come from the same SplitMix64 stream
 * and schedule as Weir's generator with the same seed, so both sides see the
 * same orders. Results go to a sink that discards them. Prints one JSON line:
 * events, the job's net run time, and the seconds and events per second from
 * the first order read to the last result written (leaving out the job's
 * start-up, in Flink's favour).
 *
 * <p>Arguments: workload events keys parallelism checkpoint-dir [state
 * backend: rocksdb (default) or hashmap].
 */
public final class FlinkBench {
    private FlinkBench() {}

    /** SplitMix64's increment, as in Weir's generator. */
    private static final long GAMMA = 0x9e3779b97f4a7c15L;

    /** The seed `weir bench` gives its generator for these workloads. */
    private static final long SEED = 7;

    /** The generator's default start time (ms since the epoch), as Weir's. */
    private static final long START_MILLIS = 1_768_471_200_000L;

    /** When any subtask read its first order (System.nanoTime). */
    private static final AtomicLong FIRST = new AtomicLong(Long.MAX_VALUE);

    /** When any subtask wrote its last result. */
    private static final AtomicLong LAST = new AtomicLong(Long.MIN_VALUE);

    public static void main(String[] args) throws Exception {
        if (args.length < 5 || !(args[0].equals("sum") || args[0].equals("window"))) {
            System.err.println(
                    "usage: FlinkBench sum|window EVENTS KEYS PARALLELISM CHECKPOINT_DIR [rocksdb|hashmap]");
            System.exit(2);
        }
        String workload = args[0];
        long events = Long.parseLong(args[1]);
        long keys = Long.parseLong(args[2]);
        int parallelism = Integer.parseInt(args[3]);
        Path checkpoints = Path.of(args[4]).toAbsolutePath();
        String backend = args.length > 5 ? args[5] : "rocksdb";
        Files.createDirectories(checkpoints);

        Map<String, String> settings = new HashMap<>();
        settings.put("state.backend.type", backend);
        settings.put("execution.checkpointing.incremental", "true");
        settings.put("execution.checkpointing.interval", "1s");
        settings.put("execution.checkpointing.dir", checkpoints.toUri().toString());
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.createLocalEnvironment(parallelism, Configuration.fromMap(settings));

        DataGeneratorSource<Tuple3<Long, Long, Long>> generator =
                new DataGeneratorSource<>(
                        index -> order(index, keys),
                        events,
                        Types.TUPLE(Types.LONG, Types.LONG, Types.LONG));
        WatermarkStrategy<Tuple3<Long, Long, Long>> watermarks =
                workload.equals("window")
                        ? WatermarkStrategy.<Tuple3<Long, Long, Long>>forBoundedOutOfOrderness(Duration.ofSeconds(5))
                                .withTimestampAssigner((order, previous) -> START_MILLIS + (order.f0 - 1))
                        : WatermarkStrategy.noWatermarks();
        DataStream<Tuple3<Long, Long, Long>> orders =
                env.fromSource(generator, watermarks, "orders").map(new FirstRead()).name("first-read");
        DataStream<Tuple2<Long, Long>> results =
                workload.equals("window")
                        ? orders.keyBy(order -> order.f1)
                                .window(TumblingEventTimeWindows.of(Duration.ofMinutes(1)))
                                .aggregate(new WindowSum())
                        : orders.keyBy(order -> order.f1).process(new RunningSum());
        results.sinkTo(new LastWritten());

        JobExecutionResult result = env.execute("weir-bench-" + workload);
        double job = result.getNetRuntime(TimeUnit.MICROSECONDS) / 1e6;
        double seconds = (LAST.get() - FIRST.get()) / 1e9;
        System.out.printf(
                "{\"engine\":\"flink\",\"workload\":\"%s\",\"backend\":\"%s\",\"events\":%d,\"keys\":%d,"
                        + "\"parallelism\":%d,\"job_seconds\":%.3f,\"seconds\":%.3f,\"events_per_s\":%.0f}%n",
                workload, backend, events, keys, parallelism, job, seconds, events / seconds);
    }

    /** Order `index` (from 0) of Weir's generator with {@link #SEED}: (id, customer, cents). */
    static Tuple3<Long, Long, Long> order(long index, long keys) {
        long state = SEED + GAMMA * (2 * index);
        long customer = Long.remainderUnsigned(mix(state + GAMMA), keys) + 1;
        long cents = Long.remainderUnsigned(mix(state + 2 * GAMMA), 10_000) + 1;
        return Tuple3.of(index + 1, customer, cents);
    }

    /** SplitMix64's output function. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    /** Passes orders on, noting when the first one was read (chained to the source). */
    static final class FirstRead extends RichMapFunction<Tuple3<Long, Long, Long>, Tuple3<Long, Long, Long>> {
        private transient boolean started;

        @Override
        public Tuple3<Long, Long, Long> map(Tuple3<Long, Long, Long> order) {
            if (!started) {
                started = true;
                FIRST.accumulateAndGet(System.nanoTime(), Math::min);
            }
            return order;
        }
    }

    /** Each customer's running total; one (customer, total) per order. */
    static final class RunningSum
            extends KeyedProcessFunction<Long, Tuple3<Long, Long, Long>, Tuple2<Long, Long>> {
        private transient ValueState<Long> total;

        @Override
        public void open(OpenContext context) {
            total = getRuntimeContext().getState(new ValueStateDescriptor<>("total", Types.LONG));
        }

        @Override
        public void processElement(
                Tuple3<Long, Long, Long> order, Context context, Collector<Tuple2<Long, Long>> out)
                throws Exception {
            Long before = total.value();
            long sum = (before == null ? 0 : before) + order.f2;
            total.update(sum);
            out.collect(Tuple2.of(order.f1, sum));
        }
    }

    /** A window's (customer, total), added up order by order. */
    static final class WindowSum
            implements AggregateFunction<Tuple3<Long, Long, Long>, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Tuple3<Long, Long, Long> order, Tuple2<Long, Long> total) {
            return Tuple2.of(order.f1, total.f1 + order.f2);
        }

        @Override
        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> total) {
            return total;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0, a.f1 + b.f1);
        }
    }

    /** Discards results, noting when the last one was written. */
    static final class LastWritten implements Sink<Tuple2<Long, Long>> {
        @Override
        public SinkWriter<Tuple2<Long, Long>> createWriter(WriterInitContext context) {
            return new SinkWriter<>() {
                private long last;

                @Override
                public void write(Tuple2<Long, Long> result, Context context) {
                    last = System.nanoTime();
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {
                    if (last != 0) {
                        LAST.accumulateAndGet(last, Math::max);
                    }
                }
            };
        }
    }
}
