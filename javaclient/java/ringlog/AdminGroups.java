package ringlog;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Consumer groups through the AdminClient: offsets committed into a group
 * that has no members (alterConsumerGroupOffsets), listed, described,
 * deleted; a live group of each protocol (one KafkaConsumer on adm-a)
 * described while it runs, refused deletion and offset changes, and
 * described again once its member left.
 */
final class AdminGroups {
    private AdminGroups() {}

    private static final TopicPartition A0 = new TopicPartition("adm-a", 0);
    private static final TopicPartition A1 = new TopicPartition("adm-a", 1);

    static void run(Admin admin, String bootstrap) {
        Out.step("groups.alterOffsets", () -> admin.alterConsumerGroupOffsets("adm-g",
                Map.of(A0, new OffsetAndMetadata(5, "meta-0"), A1, new OffsetAndMetadata(7))).all().get());
        Out.step("groups.listOffsets", () -> Out.put("groups.listOffsets", offsets(admin, "adm-g")));
        Out.step("groups.list", () -> Out.put("groups.list", listConsumerGroups(admin)));
        Out.step("groups.listGroups", () -> Out.put("groups.listGroups", listGroups(admin)));
        Out.step("groups.describe", () -> describe(admin, "adm-g", "groups.describe"));

        live(admin, bootstrap, "classic");
        live(admin, bootstrap, "consumer");

        Out.step("groups.deleteOffsets", () -> {
            admin.deleteConsumerGroupOffsets("adm-g", Set.of(A1)).all().get();
            Out.put("groups.deleteOffsets.left", offsets(admin, "adm-g"));
        });
        Out.step("groups.delete",
                () -> admin.deleteConsumerGroups(List.of("adm-g", "adm-live-classic", "adm-live-consumer")).all().get());
        Out.step("groups.afterDelete", () -> Out.put("groups.afterDelete.list", listConsumerGroups(admin)));
        Out.step("groups.describeDeleted", () -> describe(admin, "adm-g", "groups.describeDeleted"));
        Out.step("groups.deleteMissing", () -> admin.deleteConsumerGroups(List.of("adm-none")).all().get());
        Out.step("groups.listOffsetsMissing", () -> Out.put("groups.listOffsetsMissing", offsets(admin, "adm-none")));
    }

    /** A group of one member with the given protocol, described live and after it left. */
    private static void live(Admin admin, String bootstrap, String protocol) {
        String group = "adm-live-" + protocol;
        String k = "groups.live." + protocol;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "live-" + protocol);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Out.step(k, () -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of("adm-a"));
                long deadline = System.currentTimeMillis() + 20_000;
                while (c.assignment().size() < 3) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("no assignment of adm-a's 3 partitions after 20 s: " + c.assignment());
                    }
                    c.poll(Duration.ofMillis(100));
                }
                c.commitSync();
                describe(admin, group, k);
                Out.put(k + ".listed", listConsumerGroups(admin));
                Out.step(k + ".deleteLive", () -> admin.deleteConsumerGroups(List.of(group)).all().get());
                Out.step(k + ".alterOffsetsLive",
                        () -> admin.alterConsumerGroupOffsets(group, Map.of(A0, new OffsetAndMetadata(1))).all().get());
            }
            describe(admin, group, k + ".left");
        });
    }

    /** Describes a group as prefix.state, .type, .members, ... and each member. */
    private static void describe(Admin admin, String group, String prefix) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        Out.put(prefix + ".state", d.groupState());
        Out.put(prefix + ".type", d.type());
        Out.put(prefix + ".simple", d.isSimpleConsumerGroup());
        Out.put(prefix + ".assignor", d.partitionAssignor());
        Out.put(prefix + ".coordinator", d.coordinator() == null ? "none" : d.coordinator().id());
        Out.put(prefix + ".members", d.members().size());
        Out.put(prefix + ".groupEpoch", d.groupEpoch().map(String::valueOf).orElse("none"));
        Out.put(prefix + ".targetAssignmentEpoch", d.targetAssignmentEpoch().map(String::valueOf).orElse("none"));
        for (MemberDescription m : d.members()) {
            Out.put(prefix + ".member.clientId", m.clientId());
            Out.put(prefix + ".member.hasId", !m.consumerId().isEmpty());
            Out.put(prefix + ".member.host", m.host());
            Out.put(prefix + ".member.assignment", Out.partitions(m.assignment().topicPartitions()));
            Out.put(prefix + ".member.target",
                    m.targetAssignment().map(a -> Out.partitions(a.topicPartitions())).orElse("none"));
            Out.put(prefix + ".member.epoch", m.memberEpoch().map(String::valueOf).orElse("none"));
        }
    }

    /** The group's committed offsets as topic-partition:offset:metadata, sorted. */
    private static String offsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        List<String> out = new ArrayList<>();
        m.forEach((tp, om) -> out.add(tp + ":" + (om == null ? "null" : om.offset() + ":" + om.metadata())));
        return Out.sorted(out);
    }

    /** listConsumerGroups, deprecated in 4.1 for listGroups and what kafka-consumer-groups --list still calls. */
    @SuppressWarnings({"deprecation", "removal"})
    private static String listConsumerGroups(Admin admin) throws Exception {
        Collection<ConsumerGroupListing> all = admin.listConsumerGroups().all().get();
        List<String> out = new ArrayList<>();
        for (ConsumerGroupListing l : all) {
            out.add(l.groupId() + ":" + l.groupState().map(Object::toString).orElse("?") + ":"
                    + l.type().map(Object::toString).orElse("?") + ":" + (l.isSimpleConsumerGroup() ? "simple" : "consumer"));
        }
        return Out.sorted(out);
    }

    private static String listGroups(Admin admin) throws Exception {
        List<String> out = new ArrayList<>();
        for (GroupListing l : admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
            out.add(l.groupId() + ":" + l.groupState().map(Object::toString).orElse("?") + ":"
                    + l.type().map(Object::toString).orElse("?") + ":" + l.protocol());
        }
        return Out.sorted(out);
    }
}
