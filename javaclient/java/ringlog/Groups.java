package ringlog;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A consumer group of two members (two KafkaConsumers, a thread each) on
 * one topic, with the classic protocol or KIP-848's consumer protocol.
 * Members commit synchronously after every poll that returned records and
 * when partitions are revoked, so that each record is consumed once.
 *
 * <ol>
 *   <li>Member a joins alone and owns every partition; it consumes what the
 *       topic already holds.
 *   <li>Member b joins; the two split the partitions between them.
 *   <li>phase2 records are produced across the partitions and consumed.
 *   <li>Member b leaves (close); a owns every partition again.
 *   <li>phase3 records are produced and consumed; a leaves.
 * </ol>
 *
 * <p>Usage: Groups bootstrap topic partitions group protocol before phase2 phase3 [assignors]
 * (before: how many records the topic holds at the start; assignors: the
 * classic protocol's partition.assignment.strategy, else the client's
 * default, range then cooperative-sticky, of which range is chosen).
 *
 * <p>Prints {@code rec member partition offset value} per record consumed,
 * {@code sent partition offset value} per record produced, {@code assigned},
 * {@code revoked} and {@code lost} events with their partitions, {@code phase n}
 * when a phase starts, {@code member.commitRetried} for commits that failed
 * while a rebalance ran, and {@code consumed=} at the end.
 */
public final class Groups {
    private Groups() {}

    private static final AtomicInteger consumed = new AtomicInteger();

    /** One member: its consumer is touched by its thread alone. */
    private static final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final String topic;
        final KafkaConsumer<String, String> consumer;
        final Thread thread;
        volatile Set<TopicPartition> owned = Set.of();
        volatile boolean stop;
        volatile Throwable failure;
        int commitRetries;

        Member(String name, String topic, Properties props) {
            this.name = name;
            this.topic = topic;
            Properties p = new Properties();
            p.putAll(props);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, "member-" + name);
            this.consumer = new KafkaConsumer<>(p);
            this.thread = new Thread(this, "member-" + name);
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (!stop) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : records) {
                        Out.event("rec", name, r.partition(), r.offset(), r.value());
                        consumed.incrementAndGet();
                    }
                    if (!records.isEmpty()) {
                        try {
                            consumer.commitSync();
                        } catch (RebalanceInProgressException | CommitFailedException e) {
                            // The revocation that follows commits the same positions.
                            commitRetries++;
                        }
                    }
                }
            } catch (Throwable e) {
                failure = e;
                Out.put(name + ".error", Out.describe(e));
            } finally {
                Out.put(name + ".commitRetries", commitRetries);
                consumer.close();
                Out.event("closed", name);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            Out.event("revoked", name, Out.partitions(partitions));
            if (!partitions.isEmpty()) {
                consumer.commitSync();
            }
            Set<TopicPartition> now = new HashSet<>(owned);
            now.removeAll(partitions);
            owned = Set.copyOf(now);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            Out.event("assigned", name, Out.partitions(partitions));
            Set<TopicPartition> now = new HashSet<>(owned);
            now.addAll(partitions);
            owned = Set.copyOf(now);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            Out.event("lost", name, Out.partitions(partitions));
            Set<TopicPartition> now = new HashSet<>(owned);
            now.removeAll(partitions);
            owned = Set.copyOf(now);
        }

        void check() {
            if (failure != null) {
                throw new IllegalStateException("member " + name + " failed", failure);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        String group = args[3];
        String protocol = args[4];
        int before = Integer.parseInt(args[5]);
        int phase2 = Integer.parseInt(args[6]);
        int phase3 = Integer.parseInt(args[7]);

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (protocol.equals("classic")) {
            // The consumer protocol takes its heartbeat interval from the
            // broker and refuses these settings.
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            if (args.length > 8) {
                props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, args[8]);
            }
        }
        Set<TopicPartition> all = new HashSet<>();
        for (int p = 0; p < partitions; p++) {
            all.add(new TopicPartition(topic, p));
        }

        Member a = new Member("a", topic, props);
        Member b = new Member("b", topic, props);
        try (KafkaProducer<String, String> producer = producer(bootstrap)) {
            Out.event("phase", 1);
            a.thread.start();
            Out.waitFor("member a to own every partition", 30_000, () -> {
                a.check();
                return a.owned.equals(all);
            });
            b.thread.start();
            Out.waitFor("members a and b to split the partitions", 30_000, () -> {
                a.check();
                b.check();
                Set<TopicPartition> union = new HashSet<>(a.owned);
                union.addAll(b.owned);
                return !a.owned.isEmpty() && !b.owned.isEmpty() && union.equals(all)
                        && a.owned.size() + b.owned.size() == partitions;
            });
            Out.event("split", Out.partitions(a.owned), Out.partitions(b.owned));

            Out.event("phase", 2);
            produce(producer, topic, partitions, "p2", phase2);
            int want2 = before + phase2;
            Out.waitFor(want2 + " records consumed", 30_000, () -> {
                a.check();
                b.check();
                return consumed.get() >= want2;
            });

            b.stop = true;
            b.thread.join();
            Out.waitFor("member a to own every partition again", 30_000, () -> {
                a.check();
                return a.owned.equals(all);
            });

            Out.event("phase", 3);
            produce(producer, topic, partitions, "p3", phase3);
            int want3 = want2 + phase3;
            Out.waitFor(want3 + " records consumed", 30_000, () -> {
                a.check();
                return consumed.get() >= want3;
            });
            // A duplicate would show within the next polls.
            Thread.sleep(300);
        } finally {
            a.stop = true;
            b.stop = true;
            a.thread.join();
            b.thread.join(); // at once if it never started
        }
        Out.put("consumed", consumed.get());
    }

    private static KafkaProducer<String, String> producer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    /** Sends n records round-robin over the partitions, values prefix-i, and prints each ack. */
    private static void produce(KafkaProducer<String, String> producer, String topic, int partitions, String prefix, int n)
            throws Exception {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            acks.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, prefix + "-" + i)));
        }
        producer.flush();
        for (int i = 0; i < n; i++) {
            RecordMetadata md = acks.get(i).get();
            Out.event("sent", md.partition(), md.offset(), prefix + "-" + i);
        }
    }
}
