package weir.bench;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The revenue pipeline of `weir bench cluster` as a Kafka Streams application: orders keyed by
 * customer, each customer's running total in integer cents in a persistent (RocksDB) key-value
 * store, one output record per order with the customer's new total, in exactly the bytes Weir's
 * revenue function writes ({@code {"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}}).
 *
 * <p>Input: key = the customer id (decimal text), value = {@code
 * {"order_id":N,"customer_id":C,"amount":12.34}}. The input topic is partitioned by customer, so
 * every task owns its customers' totals and nothing is repartitioned. The output keeps the input
 * record's key and timestamp.
 *
 * <pre>
 * java -cp weir-bench-kstreams-1.jar:lib/* weir.bench.KafkaStreamsRevenue \
 *   --bootstrap-servers HOST:PORT --input IN --output OUT --application-id ID --state-dir DIR \
 *   [--guarantee exactly_once_v2|at_least_once] [--threads 2] [--commit-interval-ms 1000] \
 *   [--client-id ks] [--property NAME=VALUE]...
 * </pre>
 *
 * <p>Prints nothing per record: one line to stderr at each state change. SIGTERM closes it (its
 * last commit, at most 30 s); an error in a stream thread shuts it down with exit code 1.
 */
public final class KafkaStreamsRevenue {
  /** The store of totals, in cents, by customer. */
  static final String STORE = "totals";

  private KafkaStreamsRevenue() {}

  public static void main(String[] args) throws InterruptedException {
    Properties props;
    String input;
    String output;
    try {
      Arguments parsed = Arguments.parse(args);
      props = parsed.properties();
      input = parsed.input;
      output = parsed.output;
    } catch (IllegalArgumentException e) {
      System.err.println("kafka-streams-revenue: " + e.getMessage());
      System.err.println(Arguments.USAGE);
      System.exit(2);
      return;
    }
    KafkaStreams streams = new KafkaStreams(topology(input, output), props);
    CountDownLatch stopped = new CountDownLatch(1);
    AtomicInteger exitCode = new AtomicInteger(0);
    streams.setStateListener(
        (now, before) -> {
          System.err.println(
              java.time.Instant.now() + " kafka-streams-revenue: state " + before + " -> " + now);
          if (now == KafkaStreams.State.ERROR) {
            exitCode.set(1);
          }
          if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
            stopped.countDown();
          }
        });
    streams.setUncaughtExceptionHandler(
        error -> {
          System.err.println("kafka-streams-revenue: a stream thread failed: " + error);
          exitCode.set(1);
          return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close(Duration.ofSeconds(30));
                  stopped.countDown();
                },
                "shutdown"));
    streams.start();
    stopped.await();
    streams.close(Duration.ofSeconds(30));
    System.exit(exitCode.get());
  }

  /** Source (the input topic) → the revenue processor with its store → sink (the output topic). */
  static Topology topology(String input, String output) {
    Topology topology = new Topology();
    topology.addSource(
        "orders", Serdes.String().deserializer(), Serdes.ByteArray().deserializer(), input);
    topology.addProcessor("revenue", Revenue::new, "orders");
    // Cached (as the DSL's stores are by default): the store and its changelog are written once
    // per key per commit; logged, so a task's totals are restored from the changelog.
    topology.addStateStore(
        Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long())
            .withCachingEnabled(),
        "revenue");
    topology.addSink(
        "totals-out",
        output,
        Serdes.String().serializer(),
        Serdes.ByteArray().serializer(),
        "revenue");
    return topology;
  }

  /** One order in, the customer's new total out. */
  static final class Revenue implements Processor<String, byte[], String, byte[]> {
    private ProcessorContext<String, byte[]> context;
    private KeyValueStore<String, Long> totals;

    @Override
    public void init(ProcessorContext<String, byte[]> context) {
      this.context = context;
      this.totals = context.getStateStore(STORE);
    }

    @Override
    public void process(Record<String, byte[]> record) {
      Order order = Order.parse(record.value());
      Long before = totals.get(record.key());
      long total = Math.addExact(before == null ? 0L : before, order.cents);
      totals.put(record.key(), total);
      context.forward(record.withValue(output(order, total)));
    }
  }

  /** The output record's value, as Weir's revenue function writes it. */
  static byte[] output(Order order, long total) {
    StringBuilder out = new StringBuilder(80);
    out.append("{\"order_id\":").append(order.orderId);
    out.append(",\"customer_id\":").append(order.customerId);
    out.append(",\"amount\":");
    appendCents(out, order.cents);
    out.append(",\"total\":");
    appendCents(out, total);
    out.append('}');
    return out.toString().getBytes(StandardCharsets.US_ASCII);
  }

  /** Cents as a decimal with two places: 5000 → 50.00, 7 → 0.07, -5 → -0.05. */
  static void appendCents(StringBuilder out, long cents) {
    if (cents < 0) {
      out.append('-');
    }
    long whole = Math.abs(cents / 100);
    long fraction = Math.abs(cents % 100);
    out.append(whole).append('.');
    if (fraction < 10) {
      out.append('0');
    }
    out.append(fraction);
  }

  /**
   * A decimal amount such as {@code 20}, {@code 7.5} or {@code -12.25} (at most two decimals) in
   * integer cents, digit by digit, never through floating point; overflow is an error.
   */
  static long parseCents(String text) {
    boolean negative = text.startsWith("-");
    String digits = negative ? text.substring(1) : text;
    int point = digits.indexOf('.');
    String whole = point < 0 ? digits : digits.substring(0, point);
    String fraction = point < 0 ? "" : digits.substring(point + 1);
    if (whole.isEmpty() || fraction.length() > 2) {
      throw new IllegalArgumentException(
          "amount " + text + " is not a decimal with at most two decimals");
    }
    long cents = 0;
    for (int i = 0; i < whole.length() + 2; i++) {
      int f = i - whole.length();
      char c = f < 0 ? whole.charAt(i) : f < fraction.length() ? fraction.charAt(f) : '0';
      if (c < '0' || c > '9') {
        throw new IllegalArgumentException("amount " + text + " is not a decimal");
      }
      cents = Math.addExact(Math.multiplyExact(cents, 10), c - '0');
    }
    return negative ? -cents : cents;
  }

  /** The fields of an order the pipeline uses. */
  static final class Order {
    private static final JsonFactory JSON = new JsonFactory();

    long orderId = -1;
    long customerId = -1;
    long cents;
    private boolean hasAmount;

    /** Parse an order with Jackson's streaming parser (fields in any order, others skipped). */
    static Order parse(byte[] value) {
      Order order = new Order();
      try (JsonParser parser = JSON.createParser(value)) {
        if (parser.nextToken() != JsonToken.START_OBJECT) {
          throw new IllegalArgumentException("an order is not a JSON object");
        }
        while (parser.nextToken() == JsonToken.FIELD_NAME) {
          String field = parser.currentName();
          JsonToken token = parser.nextToken();
          switch (field) {
            case "order_id" -> order.orderId = parser.getLongValue();
            case "customer_id" -> order.customerId = parser.getLongValue();
            case "amount" -> {
              if (token != JsonToken.VALUE_NUMBER_INT
                  && token != JsonToken.VALUE_NUMBER_FLOAT
                  && token != JsonToken.VALUE_STRING) {
                throw new IllegalArgumentException("an order's amount is not a number");
              }
              order.cents = parseCents(parser.getText());
              order.hasAmount = true;
            }
            default -> parser.skipChildren();
          }
        }
      } catch (IOException e) {
        throw new IllegalArgumentException("an order is not JSON: " + e.getMessage(), e);
      }
      if (order.orderId < 0 || order.customerId < 0 || !order.hasAmount) {
        throw new IllegalArgumentException("an order needs order_id, customer_id and amount");
      }
      return order;
    }
  }

  /** The command line. */
  static final class Arguments {
    static final String USAGE =
        "usage: KafkaStreamsRevenue --bootstrap-servers HOST:PORT --input TOPIC --output TOPIC"
            + " --application-id ID --state-dir DIR [--guarantee exactly_once_v2|at_least_once]"
            + " [--threads N (2)] [--commit-interval-ms MS (1000)] [--client-id ID (ks)]"
            + " [--property NAME=VALUE]...";

    String bootstrapServers;
    String input;
    String output;
    String applicationId;
    String stateDir;
    String guarantee = StreamsConfig.EXACTLY_ONCE_V2;
    int threads = 2;
    long commitIntervalMs = 1000;
    String clientId = "ks";
    final Properties extra = new Properties();

    static Arguments parse(String[] args) {
      Arguments a = new Arguments();
      for (int i = 0; i < args.length; i++) {
        String flag = args[i];
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(flag + " needs a value");
        }
        String value = args[++i];
        switch (flag) {
          case "--bootstrap-servers" -> a.bootstrapServers = value;
          case "--input" -> a.input = value;
          case "--output" -> a.output = value;
          case "--application-id" -> a.applicationId = value;
          case "--state-dir" -> a.stateDir = value;
          case "--guarantee" -> {
            if (!value.equals(StreamsConfig.EXACTLY_ONCE_V2)
                && !value.equals(StreamsConfig.AT_LEAST_ONCE)) {
              throw new IllegalArgumentException("--guarantee: exactly_once_v2 or at_least_once");
            }
            a.guarantee = value;
          }
          case "--threads" -> a.threads = Integer.parseInt(value);
          case "--commit-interval-ms" -> a.commitIntervalMs = Long.parseLong(value);
          case "--client-id" -> a.clientId = value;
          case "--property" -> {
            int eq = value.indexOf('=');
            if (eq <= 0) {
              throw new IllegalArgumentException("--property NAME=VALUE, not " + value);
            }
            a.extra.setProperty(value.substring(0, eq), value.substring(eq + 1));
          }
          default -> throw new IllegalArgumentException("unknown argument " + flag);
        }
      }
      for (String[] required :
          new String[][] {
            {"--bootstrap-servers", a.bootstrapServers},
            {"--input", a.input},
            {"--output", a.output},
            {"--application-id", a.applicationId},
            {"--state-dir", a.stateDir}
          }) {
        if (required[1] == null) {
          throw new IllegalArgumentException(required[0] + " is required");
        }
      }
      return a;
    }

    /**
     * Kafka Streams' configuration: its defaults but for the guarantee, the threads, the commit
     * interval (1 s, as Weir's checkpoints) and any {@code --property}.
     */
    Properties properties() {
      Properties props = new Properties();
      props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
      props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
      props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
      props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
      props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
      props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitIntervalMs);
      // Short thread names (Linux keeps 15 characters), so the bench can group the threads' CPU:
      // `ks-StreamThread-1`, `kafka-producer-network-thread | ks-StreamThread-1-producer`.
      props.put(StreamsConfig.CLIENT_ID_CONFIG, clientId);
      props.putAll(extra);
      return props;
    }
  }
}
