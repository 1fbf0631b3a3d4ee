package ringlog;

import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A producer and a consumer configured from a client properties file (the
 * security settings an operator writes: security.protocol, sasl.*, ssl.*):
 * n records sent with acks=all, then read back from the beginning.
 *
 * <p>Usage: Secure bootstrap client.properties topic n
 *
 * <p>Prints {@code produce.last} (the last record's offset) and
 * {@code consume.values} (the values read, comma-separated).
 */
public final class Secure {
    private Secure() {}

    public static void main(String[] args) throws Exception {
        Properties base = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) {
            base.load(in);
        }
        base.put("bootstrap.servers", args[0]);
        String topic = args[2];
        int n = Integer.parseInt(args[3]);
        Out.step("produce", () -> {
            Properties p = new Properties();
            p.putAll(base);
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                long last = -1;
                for (int i = 0; i < n; i++) {
                    last = producer.send(new ProducerRecord<>(topic, 0, null, "v" + i)).get().offset();
                }
                Out.put("produce.last", last);
            }
        });
        Out.step("consume", () -> {
            Properties c = new Properties();
            c.putAll(base);
            c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                StringBuilder values = new StringBuilder();
                int got = 0;
                long deadline = System.currentTimeMillis() + 30_000;
                while (got < n && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        if (got++ > 0) {
                            values.append(',');
                        }
                        values.append(r.value());
                    }
                }
                Out.put("consume.values", values);
            }
        });
    }
}
