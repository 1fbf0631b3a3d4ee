package difftest

import (
	"regexp"
	"strings"
)

// knownDifference is a difference written down in README.md: ringlog
// answers differently on purpose, or the fix waits. It is matched by test,
// step label ("*": any step of the test) and path, where [*] stands for any
// index or key. A known difference that a test no longer shows fails the
// test, so the list stays true.
type knownDifference struct {
	test, step, path string
	ref              string // the row of README.md's table: D1, D2, ...
	re               *regexp.Regexp
}

var known = func() []knownDifference {
	var k []knownDifference
	add := func(ref, test, step string, paths ...string) {
		for _, p := range paths {
			k = append(k, knownDifference{test: test, step: step, path: p, ref: ref})
		}
	}
	// The produce, fetch and offset surface.
	add("D10", "TestProduce", "unknown codec", "Topics[*].Partitions[*].ErrorCode")
	add("D17", "TestCompression", "a gzip stream that does not inflate", "Topics[*].Partitions[*].ErrorCode")
	add("D16", "TestMetadata", "auto-create", "Topics[*].ErrorCode", "Topics[*].TopicID", "Topics[*].Partitions[*]")

	// Topic administration and configs.
	for _, name := range kafkaOnlyTopicConfigs {
		add("D4", "TestCreateTopics", "*", "Topics[*].Configs["+name+"]")
		add("D4", "TestControllerMutationQuota", "*", "Topics[*].Configs["+name+"]")
		add("D4", "TestDescribeConfigs", "topic, all", "Resources[*].Configs["+name+"]")
	}
	add("D5", "TestCreateTopics", "*", "Topics[*].Configs[min.insync.replicas].Source")
	add("D5", "TestControllerMutationQuota", "*", "Topics[*].Configs[min.insync.replicas].Source")
	add("D5", "TestDescribeConfigs", "*",
		"Resources[*].Configs[min.insync.replicas].Source",
		"Resources[*].Configs[min.insync.replicas].ConfigSynonyms[min.insync.replicas].Source",
		"Resources[*].Configs[min.insync.replicas].ConfigSynonyms[min.insync.replicas#2]")
	for _, name := range dynamicBrokerConfigs {
		add("D6", "TestDescribeConfigs", "broker, by name", "Resources[BROKER 1].Configs["+name+"].ReadOnly")
	}
	add("D7", "TestDescribeConfigs", "broker, cluster default", "Resources[BROKER ].Configs[log.retention.ms]")
	add("D8", "TestCreateTopics", "validate only", "Topics[*].TopicID")
	add("D8", "TestCreateTopics", "name of 249", "Topics[*].TopicID")
	add("D9", "TestIncrementalAlterConfigs", "unknown op", "Resources[*].ErrorCode")

	// Groups.
	for _, test := range []string{"TestConsumerGroup", "TestConsumerGroupStatic"} {
		add("D14", test, "*", "MemberEpoch", "Groups[*].Epoch", "Groups[*].AssignmentEpoch", "Groups[*].Members[*].MemberEpoch")
	}
	add("D14, D18", "TestConsumerGroupRegex", "*", "MemberEpoch", "Groups[*].Epoch", "Groups[*].AssignmentEpoch", "Groups[*].Members[*].MemberEpoch")

	// Idempotent producers, ApiVersions.
	add("D2", "TestApiVersions", "versions", "ApiKeys[*].MinVersion")
	add("D3", "TestApiVersions", "versions", "SupportedFeatures[*]", "FinalizedFeatures[*]", "FinalizedFeaturesEpoch")

	// The metadata quorum.
	add("D20", "TestDescribeQuorum", "the metadata partition v2", "Nodes[*]")

	for i := range k {
		k[i].re = regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(k[i].path), `\[\*\]`, `\[[^\]]*\]`) + "$")
	}
	return k
}()

// kafkaOnlyTopicConfigs are the topic configs Kafka 4.4 has and ringlog
// does not honour, so does not list (D4).
var kafkaOnlyTopicConfigs = []string{
	"compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
	"errors.deadletterqueue.group.enable", "file.delete.delay.ms",
	"local.retention.bytes", "local.retention.ms", "max.decompressed.message.bytes", "preallocate",
	"remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable",
	"remote.storage.enable", "segment.jitter.ms", "unclean.leader.election.enable",
}

// dynamicBrokerConfigs are the broker configs TestDescribeConfigs asks for
// that Kafka can change at run time and ringlog cannot (D6).
var dynamicBrokerConfigs = []string{
	"compression.type", "log.cleaner.delete.retention.ms", "log.cleanup.policy", "log.flush.interval.messages",
	"log.flush.interval.ms", "log.index.interval.bytes", "log.message.timestamp.type", "log.retention.bytes",
	"log.retention.ms", "log.roll.ms", "log.segment.bytes", "message.max.bytes", "min.insync.replicas",
}

func lookupKnown(test, step, path string) *knownDifference {
	for i := range known {
		kd := &known[i]
		if kd.test == test && (kd.step == step || kd.step == "*") && kd.re.MatchString(path) {
			return kd
		}
	}
	return nil
}
