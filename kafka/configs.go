package kafka

import (
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// This file describes configs the way DescribeConfigs and CreateTopics v5+
// (KIP-525) show them: each value with where it comes from (KIP-226 config
// sources) and the chain of synonyms that could have set it.

// brokerSynonym names, for each topic config, the broker config that sets
// its default (Kafka's ServerTopicConfigSynonyms): log.retention.ms for
// retention.ms, message.max.bytes for max.message.bytes, and so on. These
// are also the names server.properties uses for them (cmd/ringlog).
var brokerSynonym = map[string]string{
	"cleanup.policy":                  "log.cleanup.policy",
	"delete.retention.ms":             "log.cleaner.delete.retention.ms",
	"min.cleanable.dirty.ratio":       "log.cleaner.min.cleanable.ratio",
	"min.compaction.lag.ms":           "log.cleaner.min.compaction.lag.ms",
	"max.compaction.lag.ms":           "log.cleaner.max.compaction.lag.ms",
	"compression.type":                "compression.type",
	"retention.ms":                    "log.retention.ms",
	"retention.bytes":                 "log.retention.bytes",
	"segment.bytes":                   "log.segment.bytes",
	"segment.ms":                      "log.roll.ms",
	"segment.index.bytes":             "log.index.size.max.bytes",
	"index.interval.bytes":            "log.index.interval.bytes",
	"max.message.bytes":               "message.max.bytes",
	"flush.messages":                  "log.flush.interval.messages",
	"flush.ms":                        "log.flush.interval.ms",
	"min.insync.replicas":             "min.insync.replicas",
	"message.timestamp.type":          "log.message.timestamp.type",
	"message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
	"message.timestamp.after.max.ms":  "log.message.timestamp.after.max.ms",
}

// nullDefault names the broker configs whose Kafka default is null: the
// value then comes from another config (log.retention.hours, log.roll.hours,
// log.flush.scheduler.interval.ms), which Kafka does not list as a synonym.
// Kafka describes such a config at its default as null, with no synonym,
// and lists no default synonym for the topic config it backs.
var nullDefault = map[string]bool{
	"log.retention.ms":      true,
	"log.roll.ms":           true,
	"log.flush.interval.ms": true,
}

// describedConfig is one config entry as the admin APIs show it.
type describedConfig struct {
	name     string
	value    *string
	source   kmsg.ConfigSource
	readOnly bool
	typ      kmsg.ConfigType
	doc      string
	// synonyms are the sources that could set the value, the one in
	// effect first (KIP-226).
	synonyms []configSynonym
}

type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// configType maps the engine's type names to DescribeConfigs v3+ types.
func configType(name string) kmsg.ConfigType {
	switch name {
	case "BOOLEAN":
		return kmsg.ConfigTypeBoolean
	case "STRING":
		return kmsg.ConfigTypeString
	case "INT":
		return kmsg.ConfigTypeInt
	case "SHORT":
		return kmsg.ConfigTypeShort
	case "LONG":
		return kmsg.ConfigTypeLong
	case "DOUBLE":
		return kmsg.ConfigTypeDouble
	case "LIST":
		return kmsg.ConfigTypeList
	}
	return kmsg.ConfigTypeUnknown
}

func entriesByName(es []engine.ConfigEntry) map[string]engine.ConfigEntry {
	m := make(map[string]engine.ConfigEntry, len(es))
	for _, e := range es {
		m[e.Name] = e
	}
	return m
}

// brokerDefaultSynonyms returns the synonyms of a default that the broker
// holds under brokerName: its server.properties value when that differs
// from Kafka's default (STATIC_BROKER_CONFIG), then Kafka's default
// (DEFAULT_CONFIG). The engine does not say whether a value came from the
// file, so a file that repeats Kafka's default reads as the default.
func brokerDefaultSynonyms(brokerName, brokerValue, kafkaValue string) []configSynonym {
	var out []configSynonym
	if brokerValue != kafkaValue {
		out = append(out, configSynonym{brokerName, brokerValue, kmsg.ConfigSourceStaticBrokerConfig})
	}
	if nullDefault[brokerName] {
		return out
	}
	return append(out, configSynonym{brokerName, kafkaValue, kmsg.ConfigSourceDefaultConfig})
}

// topicConfigs describes every config of a topic: the topic's own
// overrides are TOPIC_CONFIG (Kafka's DYNAMIC_TOPIC_CONFIG), the rest come
// from the broker's defaults. Topic configs can be altered, so none is
// read-only; none is sensitive.
func (s *Server) topicConfigs(cfg engine.TopicConfig, overrides map[string]string) []describedConfig {
	kafkaDefaults := entriesByName(engine.DefaultTopicConfig().Entries(nil))
	brokerDefaults := entriesByName(s.eng.Defaults().Entries(nil))
	entries := cfg.Entries(overrides)
	out := make([]describedConfig, 0, len(entries))
	for _, e := range entries {
		var syns []configSynonym
		if !e.Default {
			syns = append(syns, configSynonym{e.Name, e.Value, kmsg.ConfigSourceDynamicTopicConfig})
		}
		if b, ok := brokerSynonym[e.Name]; ok {
			syns = append(syns, brokerDefaultSynonyms(b, brokerDefaults[e.Name].Value, kafkaDefaults[e.Name].Value)...)
		}
		out = append(out, describedConfig{
			name: e.Name, value: &e.Value, source: sourceOf(syns),
			typ: configType(e.Type), doc: e.Doc, synonyms: syns,
		})
	}
	return out
}

// sourceOf is the source of the synonym in effect; a config nothing sets
// is DEFAULT_CONFIG.
func sourceOf(syns []configSynonym) kmsg.ConfigSource {
	if len(syns) == 0 {
		return kmsg.ConfigSourceDefaultConfig
	}
	return syns[0].source
}

// brokerConfigs describes the broker configs that exist on this broker,
// in Kafka's names, sorted: the topic defaults (log.retention.ms, ...) and
// the few settings clients look at. They are read-only: ringlog has no
// dynamic broker configs (KIP-226), they are set in server.properties.
func (s *Server) brokerConfigs() []describedConfig {
	kafkaDefaults := entriesByName(engine.DefaultTopicConfig().Entries(nil))
	var out []describedConfig
	for _, e := range s.eng.Defaults().Entries(nil) {
		b, ok := brokerSynonym[e.Name]
		if !ok {
			continue
		}
		syns := brokerDefaultSynonyms(b, e.Value, kafkaDefaults[e.Name].Value)
		value := &e.Value
		if len(syns) == 0 {
			value = nil // at a default Kafka describes as null
		}
		out = append(out, describedConfig{
			name: b, value: value, source: sourceOf(syns), readOnly: true,
			typ: configType(e.Type), doc: "The default " + e.Name + " of topics: " + e.Doc, synonyms: syns,
		})
	}
	plain := func(name, value, kafkaDefault string, typ kmsg.ConfigType, doc string) {
		syns := brokerDefaultSynonyms(name, value, kafkaDefault)
		out = append(out, describedConfig{
			name: name, value: &value, source: sourceOf(syns), readOnly: true, typ: typ, doc: doc, synonyms: syns,
		})
	}
	// node.id and log.dirs have no default a KRaft broker could run with:
	// they are always the broker's own (static) settings.
	static := func(name, value string, typ kmsg.ConfigType, doc string) {
		syns := []configSynonym{{name, value, kmsg.ConfigSourceStaticBrokerConfig}}
		out = append(out, describedConfig{
			name: name, value: &value, source: kmsg.ConfigSourceStaticBrokerConfig, readOnly: true, typ: typ, doc: doc, synonyms: syns,
		})
	}
	id := strconv.Itoa(int(s.eng.NodeID()))
	static("node.id", id, kmsg.ConfigTypeInt, "The id of this broker.")
	static("broker.id", id, kmsg.ConfigTypeInt, "The id of this broker (node.id's older name).")
	var dirs []string
	for _, d := range s.eng.LogDirs() {
		dirs = append(dirs, d.Path)
	}
	static("log.dirs", strings.Join(dirs, ","), kmsg.ConfigTypeList,
		"The directories holding the partition logs; the first also holds the broker's metadata. A new partition goes to the one with the fewest partitions.")
	plain("num.partitions", strconv.Itoa(int(s.eng.NumPartitions())), "1", kmsg.ConfigTypeInt,
		"The number of partitions of a topic created without a count.")
	plain("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), "true", kmsg.ConfigTypeBoolean,
		"Whether Metadata creates the topics it is asked about.")
	plain("default.replication.factor", "1", "1", kmsg.ConfigTypeInt,
		"The replication factor of a topic created without one (a single node has one replica).")
	rack := describedConfig{name: "broker.rack", source: kmsg.ConfigSourceDefaultConfig, readOnly: true,
		typ: kmsg.ConfigTypeString, doc: "The rack of this broker (KIP-36, KIP-392)."}
	if s.cfg.Rack != "" {
		r := s.cfg.Rack
		rack.value, rack.source = &r, kmsg.ConfigSourceStaticBrokerConfig
		rack.synonyms = []configSynonym{{"broker.rack", r, kmsg.ConfigSourceStaticBrokerConfig}}
	}
	out = append(out, rack)
	slices.SortFunc(out, func(a, b describedConfig) int { return strings.Compare(a.name, b.name) })
	return out
}

// filterConfigs keeps the configs named in keys; no keys (null or empty,
// as Kafka reads both) keeps all. Names that match nothing are ignored.
func filterConfigs(cs []describedConfig, keys []string) []describedConfig {
	if len(keys) == 0 {
		return cs
	}
	return slices.DeleteFunc(cs, func(c describedConfig) bool { return !slices.Contains(keys, c.name) })
}
