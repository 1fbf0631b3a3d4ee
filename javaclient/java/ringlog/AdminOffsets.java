package ringlog;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Offsets through the AdminClient on topic adm-o (two partitions): eleven
 * records in partition 0 with timestamps base+0 s .. base+9 s and then
 * base+0.5 s (out of order), partition 1 empty. listOffsets earliest,
 * latest, by timestamp, max timestamp and the tiered-storage specs;
 * deleteRecords, then listOffsets and a consumer that reads from the new
 * log start; describeLogDirs. Timestamps are printed relative to base.
 */
final class AdminOffsets {
    private AdminOffsets() {}

    private static final TopicPartition O0 = new TopicPartition("adm-o", 0);
    private static final TopicPartition O1 = new TopicPartition("adm-o", 1);

    static void run(Admin admin, String bootstrap, int node) {
        long base = (System.currentTimeMillis() / 1000 - 600) * 1000;
        Out.step("offsets.produce", () -> {
            admin.createTopics(List.of(new NewTopic("adm-o", 2, (short) 1))).all().get();
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>("adm-o", 0, base + i * 1000L, null, "o-" + i)).get();
                }
                producer.send(new ProducerRecord<>("adm-o", 0, base + 500L, null, "o-10")).get();
            }
        });
        Out.step("offsets.p0", () -> {
            list(admin, O0, "offsets.p0.earliest", OffsetSpec.earliest(), base);
            list(admin, O0, "offsets.p0.latest", OffsetSpec.latest(), base);
            list(admin, O0, "offsets.p0.at0", OffsetSpec.forTimestamp(base), base);
            list(admin, O0, "offsets.p0.at300", OffsetSpec.forTimestamp(base + 300), base);
            list(admin, O0, "offsets.p0.at3500", OffsetSpec.forTimestamp(base + 3500), base);
            list(admin, O0, "offsets.p0.at9000", OffsetSpec.forTimestamp(base + 9000), base);
            list(admin, O0, "offsets.p0.at9001", OffsetSpec.forTimestamp(base + 9001), base);
            list(admin, O0, "offsets.p0.maxTimestamp", OffsetSpec.maxTimestamp(), base);
            Out.step("offsets.p0.earliestLocal", () -> list(admin, O0, "offsets.p0.earliestLocal", OffsetSpec.earliestLocal(), base));
            Out.step("offsets.p0.latestTiered", () -> list(admin, O0, "offsets.p0.latestTiered", OffsetSpec.latestTiered(), base));
            ListOffsetsResultInfo committed = admin.listOffsets(Map.of(O0, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(O0).get();
            Out.put("offsets.p0.latestReadCommitted", committed.offset());
        });
        Out.step("offsets.p1", () -> {
            list(admin, O1, "offsets.p1.earliest", OffsetSpec.earliest(), base);
            list(admin, O1, "offsets.p1.latest", OffsetSpec.latest(), base);
            list(admin, O1, "offsets.p1.at0", OffsetSpec.forTimestamp(base), base);
            list(admin, O1, "offsets.p1.maxTimestamp", OffsetSpec.maxTimestamp(), base);
        });
        // Kafka's admin client looks for the leader of a partition the
        // metadata does not list until the call times out.
        Out.step("offsets.missing", () -> admin.listOffsets(Map.of(new TopicPartition("adm-o", 7), OffsetSpec.latest()),
                new ListOffsetsOptions().timeoutMs(1000)).all().get());
        Out.step("offsets.consumerApi", () -> {
            try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
                Out.put("offsets.consumerApi.beginning", c.beginningOffsets(List.of(O0, O1)).get(O0));
                Out.put("offsets.consumerApi.end", c.endOffsets(List.of(O0, O1)).get(O0));
                OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(O0, base + 3500)).get(O0);
                Out.put("offsets.consumerApi.forTimes", ot == null ? "null" : ot.offset() + "@" + (ot.timestamp() - base));
            }
        });
        Out.step("offsets.deleteRecords", () -> {
            Map<TopicPartition, RecordsToDelete> m = Map.of(O0, RecordsToDelete.beforeOffset(4), O1, RecordsToDelete.beforeOffset(0));
            var r = admin.deleteRecords(m).lowWatermarks();
            Out.put("offsets.deleteRecords.p0", r.get(O0).get().lowWatermark());
            Out.put("offsets.deleteRecords.p1", r.get(O1).get().lowWatermark());
            list(admin, O0, "offsets.deleteRecords.earliest", OffsetSpec.earliest(), base);
            list(admin, O0, "offsets.deleteRecords.at0", OffsetSpec.forTimestamp(base), base);
            list(admin, O0, "offsets.deleteRecords.latest", OffsetSpec.latest(), base);
        });
        Out.step("offsets.readAfterDelete", () -> {
            try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
                c.assign(List.of(O0));
                c.seekToBeginning(List.of(O0));
                Out.put("offsets.readAfterDelete.position", c.position(O0));
                List<String> read = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 10_000;
                while (read.size() < 7 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                        read.add(r.offset() + ":" + r.value());
                    }
                }
                Out.put("offsets.readAfterDelete.records", String.join(",", read));
            }
        });
        Out.step("offsets.deleteBeyondEnd", () -> admin.deleteRecords(Map.of(O0, RecordsToDelete.beforeOffset(100))).all().get());
        Out.step("offsets.deleteToEnd", () -> {
            Out.put("offsets.deleteToEnd.p0",
                    admin.deleteRecords(Map.of(O0, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(O0).get().lowWatermark());
            list(admin, O0, "offsets.deleteToEnd.earliest", OffsetSpec.earliest(), base);
        });
        Out.step("offsets.logDirs", () -> {
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node);
            Out.put("offsets.logDirs.count", dirs.size());
            for (LogDirDescription d : dirs.values()) {
                ReplicaInfo ri = d.replicaInfos().get(O0);
                Out.put("offsets.logDirs.p0", ri == null ? "absent" : "size>0:" + (ri.size() > 0) + " lag:" + ri.offsetLag());
                Out.put("offsets.logDirs.totalBytes", d.totalBytes().isPresent());
            }
        });
    }

    /** Prints key=offset@timestamp-base (timestamp -1 as is) for one spec. */
    private static void list(Admin admin, TopicPartition tp, String key, OffsetSpec spec, long base) throws Exception {
        ListOffsetsResultInfo i = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        Out.put(key, i.offset() + "@" + (i.timestamp() < 0 ? i.timestamp() : i.timestamp() - base));
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }
}
