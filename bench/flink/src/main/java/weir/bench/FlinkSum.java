package weir.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * Workload (a) of `weir bench` on Apache Flink: orders (order id, customer,
 * amount in cents) from a generator, keyed by customer, each customer's
 * running total in keyed state, one (customer, total) out per order, into a
 * discarding sink; RocksDB state, incremental checkpoints every second.
 *
 * <p>Customers and amounts come from the same SplitMix64 stream as Weir's
 * generator with the same seed, so both sides see the same keys in the same
 * order. Prints one JSON line: events, the job's net run time, and the
 * seconds and events per second from the first order processed to the last
 * (leaving out the job's start-up and its end, in Flink's favour).
 *
 * <p>Arguments: events keys parallelism checkpoint-dir [state backend:
 * rocksdb (default) or hashmap].
 */
public final class FlinkSum {
    private FlinkSum() {}

    /** SplitMix64's increment, as in Weir's generator. */
    private static final long GAMMA = 0x9e3779b97f4a7c15L;

    /** The seed `weir bench` gives its generator for the running sum. */
    private static final long SEED = 7;

    /** When any subtask processed its first order (System.nanoTime). */
    private static final AtomicLong FIRST = new AtomicLong(Long.MAX_VALUE);

    /** When any subtask processed its last order. */
    private static final AtomicLong LAST = new AtomicLong(Long.MIN_VALUE);

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: FlinkSum EVENTS KEYS PARALLELISM CHECKPOINT_DIR [rocksdb|hashmap]");
            System.exit(2);
        }
        long events = Long.parseLong(args[0]);
        long keys = Long.parseLong(args[1]);
        int parallelism = Integer.parseInt(args[2]);
        Path checkpoints = Path.of(args[3]).toAbsolutePath();
        String backend = args.length > 4 ? args[4] : "rocksdb";
        Files.createDirectories(checkpoints);

        Map<String, String> settings = new HashMap<>();
        settings.put("state.backend.type", backend);
        settings.put("execution.checkpointing.incremental", "true");
        settings.put("execution.checkpointing.interval", "1s");
        settings.put("execution.checkpointing.dir", checkpoints.toUri().toString());
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.createLocalEnvironment(parallelism, Configuration.fromMap(settings));

        DataGeneratorSource<Tuple3<Long, Long, Long>> orders =
                new DataGeneratorSource<>(
                        index -> order(index, keys),
                        events,
                        Types.TUPLE(Types.LONG, Types.LONG, Types.LONG));
        env.fromSource(orders, WatermarkStrategy.noWatermarks(), "orders")
                .keyBy(order -> order.f1)
                .process(new RunningSum())
                .sinkTo(new DiscardingSink<>());

        JobExecutionResult result = env.execute("weir-bench-sum");
        double job = result.getNetRuntime(TimeUnit.MICROSECONDS) / 1e6;
        double seconds = (LAST.get() - FIRST.get()) / 1e9;
        System.out.printf(
                "{\"engine\":\"flink\",\"backend\":\"%s\",\"events\":%d,\"keys\":%d,\"parallelism\":%d,"
                        + "\"job_seconds\":%.3f,\"seconds\":%.3f,\"events_per_s\":%.0f}%n",
                backend, events, keys, parallelism, job, seconds, events / seconds);
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

    /** Each customer's running total; one (customer, total) per order. */
    static final class RunningSum
            extends KeyedProcessFunction<Long, Tuple3<Long, Long, Long>, Tuple2<Long, Long>> {
        private transient ValueState<Long> total;
        private transient long last;
        private transient boolean started;

        @Override
        public void open(OpenContext context) {
            total = getRuntimeContext().getState(new ValueStateDescriptor<>("total", Types.LONG));
        }

        @Override
        public void processElement(
                Tuple3<Long, Long, Long> order, Context context, Collector<Tuple2<Long, Long>> out)
                throws Exception {
            last = System.nanoTime();
            if (!started) {
                started = true;
                FIRST.accumulateAndGet(last, Math::min);
            }
            Long before = total.value();
            long sum = (before == null ? 0 : before) + order.f2;
            total.update(sum);
            out.collect(Tuple2.of(order.f1, sum));
        }

        @Override
        public void close() throws Exception {
            if (started) {
                LAST.accumulateAndGet(last, Math::max);
            }
            super.close();
        }
    }
}
