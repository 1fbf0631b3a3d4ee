package ringlog;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.config.ConfigResource;

/**
 * describeConfigs and incrementalAlterConfigs on topic adm-a (created by
 * Admin with retention.ms=123456) and on the broker: SET, APPEND,
 * SUBTRACT and DELETE, validateOnly, and the refusals of an unknown name,
 * a bad value and a missing topic.
 */
final class AdminConfigs {
    private AdminConfigs() {}

    private static final ConfigResource TOPIC = new ConfigResource(ConfigResource.Type.TOPIC, "adm-a");

    static void run(Admin admin, int node) {
        Out.step("configs.describe", () -> {
            Config c = describe(admin, TOPIC);
            put("configs.describe", c, "retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes");
            ConfigEntry e = c.get("retention.ms");
            List<String> synonyms = new ArrayList<>();
            e.synonyms().forEach(s -> synonyms.add(s.name() + ":" + s.source()));
            Out.put("configs.describe.retention.ms.synonyms", String.join(",", synonyms));
            Out.put("configs.describe.entries", c.entries().size() > 10);
        });
        Out.step("configs.alter", () -> {
            alter(admin, TOPIC, List.of(
                    op("retention.ms", "777", AlterConfigOp.OpType.SET),
                    op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND),
                    op("max.message.bytes", "2000000", AlterConfigOp.OpType.SET)), false);
            put("configs.alter", describe(admin, TOPIC), "retention.ms", "cleanup.policy", "max.message.bytes");
        });
        Out.step("configs.subtract", () -> {
            alter(admin, TOPIC, List.of(
                    op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT),
                    op("max.message.bytes", null, AlterConfigOp.OpType.DELETE)), false);
            put("configs.subtract", describe(admin, TOPIC), "cleanup.policy", "max.message.bytes");
        });
        Out.step("configs.validateOnly", () -> {
            alter(admin, TOPIC, List.of(op("retention.ms", "1", AlterConfigOp.OpType.SET)), true);
            put("configs.validateOnly", describe(admin, TOPIC), "retention.ms");
        });
        Out.step("configs.unknownName",
                () -> alter(admin, TOPIC, List.of(op("no.such.config", "1", AlterConfigOp.OpType.SET)), false));
        Out.step("configs.badValue",
                () -> alter(admin, TOPIC, List.of(op("retention.ms", "soon", AlterConfigOp.OpType.SET)), false));
        Out.step("configs.missingTopic",
                () -> describe(admin, new ConfigResource(ConfigResource.Type.TOPIC, "adm-none")));
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node));
        Out.step("configs.broker", () -> {
            Config c = describe(admin, broker);
            Out.put("configs.broker.entries", c.entries().size() > 10);
            put("configs.broker", c, "num.partitions", "auto.create.topics.enable");
        });
    }

    static Config describe(Admin admin, ConfigResource r) throws Exception {
        return admin.describeConfigs(List.of(r), new DescribeConfigsOptions().includeSynonyms(true)).all().get().get(r);
    }

    static void alter(Admin admin, ConfigResource r, Collection<AlterConfigOp> ops, boolean validateOnly) throws Exception {
        admin.incrementalAlterConfigs(Map.of(r, ops), new AlterConfigsOptions().validateOnly(validateOnly)).all().get();
    }

    static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    /** Prints prefix.name=value source for each name ("absent" when c lacks it). */
    static void put(String prefix, Config c, String... names) {
        for (String name : names) {
            ConfigEntry e = c.get(name);
            Out.put(prefix + "." + name, e == null ? "absent" : e.value() + " " + e.source());
        }
    }
}
