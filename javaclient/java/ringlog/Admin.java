package ringlog;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;

/**
 * Kafka's AdminClient against one broker, section by section: the
 * cluster and topics here, then configs (AdminConfigs), consumer groups
 * (AdminGroups) and offsets (AdminOffsets). Each step prints its results
 * under its name, or name.error when it threw; steps expected to fail
 * print the exception they got as their error.
 *
 * <p>Usage: Admin bootstrap
 */
public final class Admin {
    private Admin() {}

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(p)) {
            int node = cluster(admin);
            topics(admin);
            AdminConfigs.run(admin, node);
            AdminGroups.run(admin, args[0]);
            AdminOffsets.run(admin, args[0], node);
            Out.step("final.listInternal", () -> {
                List<String> internal = new ArrayList<>();
                for (TopicListing l : admin.listTopics(new ListTopicsOptions().listInternal(true)).listings().get()) {
                    if (l.isInternal()) {
                        internal.add(l.name());
                    }
                }
                Out.put("final.listInternal", Out.sorted(internal));
            });
        }
    }

    /** describeCluster; returns the node's id (-1 when the step failed). */
    private static int cluster(org.apache.kafka.clients.admin.Admin admin) {
        int[] node = {-1};
        Out.step("cluster", () -> {
            DescribeClusterResult c = admin.describeCluster();
            String id = c.clusterId().get();
            Out.put("cluster.idLength", id == null ? 0 : id.length());
            List<String> nodes = new ArrayList<>();
            for (Node n : c.nodes().get()) {
                nodes.add(n.id() + "@" + n.host() + ":" + n.port());
                node[0] = n.id();
            }
            Out.put("cluster.nodes", Out.sorted(nodes));
            Out.put("cluster.node", node[0]);
            Out.put("cluster.controller", c.controller().get().id());
        });
        return node[0];
    }

    private static void topics(org.apache.kafka.clients.admin.Admin admin) throws Exception {
        Map<String, Uuid> ids = new TreeMap<>();
        Out.step("topics.create", () -> {
            CreateTopicsResult r = admin.createTopics(List.of(
                    new NewTopic("adm-a", 3, (short) 1).configs(Map.of("retention.ms", "123456")),
                    new NewTopic("adm-b", 1, (short) 1),
                    new NewTopic("adm-c", Optional.empty(), Optional.empty())));
            r.all().get();
            for (String t : List.of("adm-a", "adm-b", "adm-c")) {
                ids.put(t, r.topicId(t).get());
                Out.put("topics.create." + t, "partitions:" + r.numPartitions(t).get() + " rf:" + r.replicationFactor(t).get()
                        + " id:" + !Uuid.ZERO_UUID.equals(r.topicId(t).get()));
            }
            Out.put("topics.create.adm-a.retention.ms", r.config("adm-a").get().get("retention.ms").value());
        });
        Out.step("topics.createExisting", () -> admin.createTopics(List.of(new NewTopic("adm-a", 1, (short) 1))).all().get());
        Out.step("topics.createBadReplicationFactor",
                () -> admin.createTopics(List.of(new NewTopic("adm-rf3", 1, (short) 3))).all().get());
        Out.step("topics.createBadName", () -> admin.createTopics(List.of(new NewTopic("adm bad/name", 1, (short) 1))).all().get());
        Out.step("topics.createValidateOnly", () -> {
            admin.createTopics(List.of(new NewTopic("adm-v", 2, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get();
            Out.put("topics.createValidateOnly.created", admin.listTopics().names().get().contains("adm-v"));
        });
        Out.step("topics.list", () -> Out.put("topics.list", Out.sorted(admin.listTopics().names().get())));
        Out.step("topics.describe", () -> {
            Map<String, TopicDescription> d = admin.describeTopics(List.of("adm-a", "adm-b", "adm-c")).allTopicNames().get();
            for (TopicDescription td : d.values()) {
                String k = "topics.describe." + td.name();
                Out.put(k + ".partitions", td.partitions().size());
                Out.put(k + ".internal", td.isInternal());
                Out.put(k + ".idMatches", td.topicId().equals(ids.get(td.name())));
                for (TopicPartitionInfo pi : td.partitions()) {
                    Out.put(k + ".p" + pi.partition(), partition(pi));
                }
            }
        });
        Out.step("topics.describeById", () -> {
            Map<Uuid, TopicDescription> d = admin.describeTopics(TopicCollection.ofTopicIds(List.of(ids.get("adm-a")))).allTopicIds().get();
            Out.put("topics.describeById", d.get(ids.get("adm-a")).name());
        });
        Out.step("topics.describeMissing", () -> admin.describeTopics(List.of("adm-none")).allTopicNames().get());
        Out.step("topics.createPartitions", () -> {
            admin.createPartitions(Map.of("adm-b", NewPartitions.increaseTo(4))).all().get();
            TopicDescription td = admin.describeTopics(List.of("adm-b")).allTopicNames().get().get("adm-b");
            Out.put("topics.createPartitions.partitions", td.partitions().size());
            Out.put("topics.createPartitions.p3", partition(td.partitions().get(3)));
        });
        Out.step("topics.createPartitionsDecrease",
                () -> admin.createPartitions(Map.of("adm-b", NewPartitions.increaseTo(2))).all().get());
        Out.step("topics.createPartitionsMissing",
                () -> admin.createPartitions(Map.of("adm-none", NewPartitions.increaseTo(2))).all().get());
        Out.step("topics.deleteByName", () -> admin.deleteTopics(List.of("adm-b")).all().get());
        Out.step("topics.deleteById", () -> admin.deleteTopics(TopicCollection.ofTopicIds(List.of(ids.get("adm-c")))).all().get());
        Out.step("topics.deleteMissing", () -> admin.deleteTopics(List.of("adm-none")).all().get());
        Out.step("topics.afterDelete", () -> {
            AtomicReference<Set<String>> names = new AtomicReference<>(Set.of());
            long start = System.currentTimeMillis();
            Out.waitFor("deleted topics to leave the listing", 10_000, () -> {
                try {
                    names.set(admin.listTopics().names().get());
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
                return !names.get().contains("adm-b") && !names.get().contains("adm-c");
            });
            Out.put("topics.afterDelete.list", Out.sorted(names.get()));
            Out.event("topics.afterDelete took", System.currentTimeMillis() - start, "ms");
        });
        Out.step("topics.recreate", () -> {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic("adm-b", 2, (short) 1)));
            r.all().get();
            Out.put("topics.recreate.newId", !r.topicId("adm-b").get().equals(ids.get("adm-b")));
            TopicDescription td = admin.describeTopics(List.of("adm-b")).allTopicNames().get().get("adm-b");
            Out.put("topics.recreate.partitions", td.partitions().size());
        });
    }

    /** A partition as "leader:N replicas:N,.. isr:N,..". */
    static String partition(TopicPartitionInfo pi) {
        List<Integer> replicas = new ArrayList<>();
        pi.replicas().forEach(n -> replicas.add(n.id()));
        List<Integer> isr = new ArrayList<>();
        pi.isr().forEach(n -> isr.add(n.id()));
        return "leader:" + (pi.leader() == null ? "none" : pi.leader().id()) + " replicas:" + Out.ints(replicas) + " isr:" + Out.ints(isr);
    }
}
