package ringlog;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An idempotent producer with acks=all, once per compression codec: each
 * sends n records across the topic's partitions (record i to partition
 * i % partitions, up to five requests in flight per connection, small
 * batches so that there are many), flushes, and prints every ack.
 *
 * <p>Then the limits of record sizes on topic large, and a transactional
 * producer on topic txn.
 *
 * <p>Usage: Producer bootstrap topic partitions n large
 *
 * <p>Prints {@code ack codec i partition offset} per record, and per codec
 * {@code codec.errors} and {@code codec.retries} from the producer's
 * metrics.
 */
public final class Producer {
    private Producer() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int n = Integer.parseInt(args[3]);
        for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
            Out.step(codec, () -> produce(bootstrap, topic, partitions, n, codec));
        }
        Out.step("limits", () -> limits(bootstrap, args[4]));
        Out.step("transactional", () -> transactional(bootstrap));
    }

    /**
     * Record sizes against max.message.bytes (1048588 by default): a record
     * of 900 kB is taken, one of 2 MB refused, and a consumer whose
     * max.partition.fetch.bytes is 1000 still reads the large one (KIP-74:
     * the first batch comes whatever its size).
     */
    private static void limits(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "3000000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(p)) {
            Out.put("limits.large", producer.send(new ProducerRecord<>(topic, 0, null, new byte[900_000])).get().offset());
            Out.step("limits.tooLarge", () -> producer.send(new ProducerRecord<>(topic, 0, null, new byte[2_000_000])).get());
            Out.put("limits.after", producer.send(new ProducerRecord<>(topic, 0, null, new byte[10])).get().offset());
        }
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1000");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<String, byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<String> read = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 10_000;
            while (read.size() < 2 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    read.add(r.offset() + ":" + r.value().length);
                }
            }
            Out.put("limits.read", String.join(",", read));
        }
    }

    /**
     * A transactional producer on topic txn (one partition): three records
     * committed, two aborted; then a read_committed consumer reads the
     * partition from its start and prints the values it got.
     */
    private static void transactional(String bootstrap) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx-1");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            Out.step("transactional.init", producer::initTransactions);
            Out.step("transactional.commit", () -> {
                producer.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>("txn", 0, null, "c" + i));
                }
                producer.commitTransaction();
            });
            Out.step("transactional.abort", () -> {
                producer.beginTransaction();
                for (int i = 0; i < 2; i++) {
                    producer.send(new ProducerRecord<>("txn", 0, null, "a" + i));
                }
                producer.flush();
                producer.abortTransaction();
            });
        }
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition("txn", 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<String> read = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 5_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    read.add(r.value());
                }
            }
            Out.put("transactional.read", String.join(",", read));
        }
    }

    private static void produce(String bootstrap, String topic, int partitions, int n, String codec) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "producer-" + codec);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "1");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1024");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, i % partitions, "key-" + i, codec + "-" + i)));
            }
            producer.flush();
            for (int i = 0; i < n; i++) {
                RecordMetadata md = acks.get(i).get();
                Out.event("ack", codec, i, md.partition(), md.offset());
            }
            Out.put(codec + ".errors", metric(producer.metrics(), "record-error-total"));
            Out.put(codec + ".retries", metric(producer.metrics(), "record-retry-total"));
        }
    }

    /** The value of the producer-wide metric name. */
    private static Object metric(Map<MetricName, ? extends Metric> metrics, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().group().equals("producer-metrics") && e.getKey().name().equals(name)) {
                Object v = e.getValue().metricValue();
                return v instanceof Double ? String.valueOf(((Double) v).longValue()) : v;
            }
        }
        return "none";
    }
}
