package ringlog;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An idempotent producer with acks=all, once per compression codec: each
 * sends n records across the topic's partitions (record i to partition
 * i % partitions, up to five requests in flight per connection, small
 * batches so that there are many), flushes, and prints every ack.
 *
 * <p>Usage: Producer bootstrap topic partitions n
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
