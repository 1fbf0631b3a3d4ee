package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"ringlog/segment"
)

// TopicConfig is a topic's configuration, typed. Its names (in Entries and
// ParseTopicConfig) are Kafka's topic config names, so that admin tools
// work unchanged.
type TopicConfig struct {
	Log segment.Config
	// CleanupPolicy is "delete", "compact" or "compact,delete".
	CleanupPolicy string
	// MinInsyncReplicas is min.insync.replicas (used with acks=all).
	MinInsyncReplicas int32
	// LogAppendTime is message.timestamp.type=LogAppendTime.
	LogAppendTime bool
	// TimestampBeforeMaxMs and TimestampAfterMaxMs bound how far a CreateTime
	// timestamp may be from the broker's clock (KIP-937).
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// LeaderThrottledReplicas and FollowerThrottledReplicas are
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas as given: "" (none), "*"
	// (all) or "partition:broker,...". ThrottledReplicas reads them.
	LeaderThrottledReplicas   string
	FollowerThrottledReplicas string
}

// DefaultTopicConfig is Kafka's default topic configuration.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		Log:                  segment.DefaultConfig(),
		CleanupPolicy:        "delete",
		MinInsyncReplicas:    1,
		TimestampBeforeMaxMs: math.MaxInt64,
		TimestampAfterMaxMs:  3600_000,
	}
}

// ConfigEntry is one configuration value as DescribeConfigs shows it.
type ConfigEntry struct {
	Name  string
	Value string
	// Default is true when the topic does not override the value (the
	// broker's default applies).
	Default bool
	// Type is Kafka's config type name: BOOLEAN, STRING, INT, LONG, DOUBLE, LIST.
	Type string
	Doc  string
}

// ErrInvalidConfig is returned for an unknown config name or a bad value.
var ErrInvalidConfig = errors.New("engine: invalid config")

// configError is a bad value, worded as Kafka's ConfigException words it
// ("Invalid value 14 for configuration segment.bytes: Value must be at
// least 1048576"), so that clients and tools show Kafka's message.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return ErrInvalidConfig }

func invalidValue(name, v string, reason error) error {
	return &configError{fmt.Sprintf("Invalid value %s for configuration %s: %v", v, name, reason)}
}

// configKey describes one topic config: how to read it from and write it
// into a TopicConfig.
type configKey struct {
	name string
	typ  string
	doc  string
	// floor, when set, is Kafka's minimum for a value given by a client or
	// an operator, above what the log itself can hold (segment.bytes,
	// KIP-1030). A value stored before the floor existed still loads (see
	// loadTopicConfig): an upgrade must not lose a topic.
	floor int64
	get   func(c *TopicConfig) string
	set   func(c *TopicConfig, v string) error
}

// parseLong reads an INT or LONG config value in [lo, hi], with Kafka's
// reasons for a refusal (a value beyond an INT's range is not a number of
// type INT to Kafka's parser).
func parseLong(typ, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || (typ == "INT" && (n < math.MinInt32 || n > math.MaxInt32)) {
		return 0, fmt.Errorf("Not a number of type %s", typ)
	}
	if n < lo {
		return 0, fmt.Errorf("Value must be at least %d", lo)
	}
	if n > hi {
		return 0, fmt.Errorf("Value must be no more than %d", hi)
	}
	return n, nil
}

func longKey(name, doc string, lo, hi int64, field func(c *TopicConfig) *int64) configKey {
	return numKey("LONG", name, doc, lo, hi, field)
}

func intKey(name, doc string, lo, hi int64, field func(c *TopicConfig) *int64) configKey {
	return numKey("INT", name, doc, lo, hi, field)
}

func numKey(typ, name, doc string, lo, hi int64, field func(c *TopicConfig) *int64) configKey {
	return configKey{name: name, typ: typ, doc: doc,
		get: func(c *TopicConfig) string { return strconv.FormatInt(*field(c), 10) },
		set: func(c *TopicConfig, v string) error {
			n, err := parseLong(typ, v, lo, hi)
			if err == nil {
				*field(c) = n
			}
			return err
		}}
}

// withFloor sets k's floor (see configKey.floor).
func withFloor(k configKey, floor int64) configKey {
	k.floor = floor
	return k
}

// SegmentBytesFloor is Kafka 4's minimum segment.bytes (KIP-1030): below
// it a client could make a partition roll a segment (three files, two
// mappings) every few batches.
const SegmentBytesFloor = 1 << 20

// configKeys lists every topic config ringlog honours, in Kafka's names.
var configKeys = []configKey{
	{name: "cleanup.policy", typ: "LIST", doc: "delete, compact, or compact,delete",
		get: func(c *TopicConfig) string { return c.CleanupPolicy },
		set: func(c *TopicConfig, v string) error {
			parts := strings.Split(strings.ReplaceAll(v, " ", ""), ",")
			slices.Sort(parts)
			parts = slices.Compact(parts)
			switch strings.Join(parts, ",") {
			case "delete":
				c.CleanupPolicy = "delete"
			case "compact":
				c.CleanupPolicy = "compact"
			case "compact,delete":
				c.CleanupPolicy = "compact,delete"
			default:
				return fmt.Errorf("want delete, compact or compact,delete, got %q", v)
			}
			return nil
		}},
	{name: "compression.type", typ: "STRING", doc: "only producer: batches are stored as the producer compressed them",
		get: func(c *TopicConfig) string { return "producer" },
		set: func(c *TopicConfig, v string) error {
			if strings.TrimSpace(v) != "producer" {
				return fmt.Errorf("only \"producer\" is supported (ringlog stores batches as sent), got %q", v)
			}
			return nil
		}},
	longKey("retention.ms", "how long to keep a segment after its newest record (-1: forever)", -1, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.RetentionMs }),
	longKey("retention.bytes", "largest size of a partition's log before old segments go (-1: no limit)", -1, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.RetentionBytes }),
	withFloor(intKey("segment.bytes", "size at which a segment rolls", 14, math.MaxInt32,
		func(c *TopicConfig) *int64 { return &c.Log.SegmentBytes }), SegmentBytesFloor),
	longKey("segment.ms", "age at which a segment rolls", 1, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.SegmentMs }),
	intKey("segment.index.bytes", "largest size of each index file (they grow as entries arrive)", 4, math.MaxInt32,
		func(c *TopicConfig) *int64 { return &c.Log.SegmentIndexBytes }),
	intKey("index.interval.bytes", "bytes between offset index entries", 0, math.MaxInt32,
		func(c *TopicConfig) *int64 { return &c.Log.IndexIntervalBytes }),
	intKey("max.message.bytes", "largest record batch accepted", 0, math.MaxInt32,
		func(c *TopicConfig) *int64 { return &c.Log.MaxMessageBytes }),
	longKey("flush.messages", "records between fsyncs; 1 syncs every append (group commit per round)", 1, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.FlushMessages }),
	longKey("flush.ms", "time between fsyncs", 0, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.FlushMs }),
	{name: "min.insync.replicas", typ: "INT", doc: "replicas that must acknowledge an acks=all produce",
		get: func(c *TopicConfig) string { return strconv.Itoa(int(c.MinInsyncReplicas)) },
		set: func(c *TopicConfig, v string) error {
			n, err := parseLong("INT", v, 1, math.MaxInt32)
			if err == nil {
				c.MinInsyncReplicas = int32(n)
			}
			return err
		}},
	{name: "message.timestamp.type", typ: "STRING", doc: "CreateTime or LogAppendTime",
		get: func(c *TopicConfig) string {
			if c.LogAppendTime {
				return "LogAppendTime"
			}
			return "CreateTime"
		},
		set: func(c *TopicConfig, v string) error {
			switch strings.TrimSpace(v) {
			case "CreateTime":
				c.LogAppendTime = false
			case "LogAppendTime":
				c.LogAppendTime = true
			default:
				return fmt.Errorf("want CreateTime or LogAppendTime, got %q", v)
			}
			return nil
		}},
	longKey("message.timestamp.before.max.ms", "how far in the past a CreateTime timestamp may be", 0, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.TimestampBeforeMaxMs }),
	longKey("message.timestamp.after.max.ms", "how far in the future a CreateTime timestamp may be", 0, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.TimestampAfterMaxMs }),
	longKey("delete.retention.ms", "how long a tombstone stays after the cleaner first rewrote it (compacted topics)", 0, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.DeleteRetentionMs }),
	{name: "min.cleanable.dirty.ratio", typ: "DOUBLE", doc: "share of a compacted log written since its last clean that makes it due for cleaning",
		get: func(c *TopicConfig) string { return strconv.FormatFloat(c.Log.MinCleanableDirtyRatio, 'g', -1, 64) },
		set: func(c *TopicConfig, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("want a number in [0, 1], got %q", v)
			}
			c.Log.MinCleanableDirtyRatio = f
			return nil
		}},
	longKey("min.compaction.lag.ms", "how old a record must be before the cleaner may remove it", 0, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.MinCompactionLagMs }),
	longKey("max.compaction.lag.ms", "how old an uncleaned record may get before the cleaner must run", 1, math.MaxInt64,
		func(c *TopicConfig) *int64 { return &c.Log.MaxCompactionLagMs }),
	throttledReplicasKey(LeaderThrottledReplicasConfig, "replicas whose replication the leader throttles to leader.replication.throttled.rate: [partitionId]:[brokerId],... or '*'",
		func(c *TopicConfig) *string { return &c.LeaderThrottledReplicas }),
	throttledReplicasKey(FollowerThrottledReplicasConfig, "replicas whose replication the follower throttles to follower.replication.throttled.rate: [partitionId]:[brokerId],... or '*'",
		func(c *TopicConfig) *string { return &c.FollowerThrottledReplicas }),
}

// The throttled-replicas topic configs (KIP-73), by Kafka's names.
const (
	LeaderThrottledReplicasConfig   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicasConfig = "follower.replication.throttled.replicas"
)

func throttledReplicasKey(name, doc string, field func(c *TopicConfig) *string) configKey {
	return configKey{name: name, typ: "LIST", doc: doc,
		get: func(c *TopicConfig) string { return *field(c) },
		set: func(c *TopicConfig, v string) error {
			if err := validateThrottledReplicas(name, v); err != nil {
				return err
			}
			*field(c) = v
			return nil
		}}
}

// validateThrottledReplicas is Kafka's ThrottledReplicaListValidator on
// the list ConfigDef makes of v (split at commas with the blanks around
// them, empty items kept): every item "partition:broker" or empty, or
// the items together "*". Its error is the whole ConfigException message,
// which shows the list as Java prints one.
func validateThrottledReplicas(name, v string) error {
	items := listItems(v)
	ok := true
	for _, it := range items {
		if !isReplicaItem(strings.TrimSpace(it)) {
			ok = false
			break
		}
	}
	if ok || strings.Join(items, "") == "*" {
		return nil
	}
	return &configError{fmt.Sprintf("Invalid value [%s] for configuration %s: %s must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
		strings.Join(items, ", "), name, name)}
}

// listItems splits a LIST config value as Kafka's ConfigDef does.
func listItems(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// isReplicaItem matches ([0-9]+:[0-9]+)?.
func isReplicaItem(s string) bool {
	if s == "" {
		return true
	}
	p, b, found := strings.Cut(s, ":")
	digits := func(x string) bool {
		return x != "" && strings.Trim(x, "0123456789") == ""
	}
	return found && digits(p) && digits(b)
}

// ThrottledReplicas reads a throttled-replicas value (validated) for
// broker, as Kafka's TopicConfigHandler does: all true for "*", else the
// partitions listed with that broker.
func ThrottledReplicas(v string, broker int32) (all bool, partitions []int32) {
	items := listItems(v)
	if strings.Join(items, "") == "*" {
		return true, nil
	}
	for _, it := range items {
		p, b, found := strings.Cut(it, ":")
		if !found {
			continue
		}
		bn, err1 := strconv.ParseInt(b, 10, 32)
		pn, err2 := strconv.ParseInt(p, 10, 32)
		if err1 == nil && err2 == nil && int32(bn) == broker {
			partitions = append(partitions, int32(pn))
		}
	}
	return false, partitions
}

func lookupKey(name string) (*configKey, bool) {
	for i := range configKeys {
		if configKeys[i].name == name {
			return &configKeys[i], true
		}
	}
	return nil, false
}

// ConfigNames lists the supported topic config names.
func ConfigNames() []string {
	names := make([]string, len(configKeys))
	for i, k := range configKeys {
		names[i] = k.name
	}
	return names
}

// ParseTopicConfig applies overrides (Kafka names) to base, as given by a
// client (CreateTopics, AlterConfigs) or an operator (server.properties):
// with Kafka's minimums. An unknown name or a bad value is ErrInvalidConfig
// naming it, in Kafka's words.
func ParseTopicConfig(base TopicConfig, overrides map[string]string) (TopicConfig, error) {
	return parseTopicConfig(base, overrides, true)
}

// loadTopicConfig applies overrides that were accepted before (topics.json,
// the cluster's metadata): a value below a floor added since still loads,
// within what the log can hold.
func loadTopicConfig(base TopicConfig, overrides map[string]string) (TopicConfig, error) {
	return parseTopicConfig(base, overrides, false)
}

func parseTopicConfig(base TopicConfig, overrides map[string]string, floors bool) (TopicConfig, error) {
	c := base
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	slices.Sort(names) // deterministic error for several bad keys
	for _, n := range names {
		k, ok := lookupKey(n)
		if !ok {
			return base, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, n)
		}
		v := overrides[n]
		if floors && k.floor != 0 {
			if f, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && f < k.floor {
				return base, invalidValue(n, v, fmt.Errorf("Value must be at least %d", k.floor))
			}
		}
		if err := k.set(&c, v); err != nil {
			var ce *configError
			if errors.As(err, &ce) {
				return base, err // worded in full already
			}
			return base, invalidValue(n, v, err)
		}
	}
	c.Log.Flush = flushPolicy(c.Log)
	c.Log.Cleanup = cleanupPolicy(c.CleanupPolicy)
	if err := c.Log.Validate(); err != nil {
		return base, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return c, nil
}

// flushPolicy derives the log's flush policy from Kafka's flush settings:
// flush.messages=1 syncs every append (as a group commit per round),
// unbounded values never sync, anything else syncs on the interval.
func flushPolicy(c segment.Config) segment.FlushPolicy {
	switch {
	case c.FlushMessages <= 1:
		return segment.FlushAlways
	case c.FlushMessages == math.MaxInt64 && c.FlushMs == math.MaxInt64:
		return segment.FlushNever
	}
	return segment.FlushInterval
}

// cleanupPolicy is the log's form of cleanup.policy, as parsed above.
func cleanupPolicy(p string) segment.CleanupPolicy {
	switch p {
	case "compact":
		return segment.CleanupCompact
	case "compact,delete":
		return segment.CleanupCompactDelete
	}
	return segment.CleanupDelete
}

// Entries lists every config of c, marking those not in overrides as
// defaults. An override shows as it was written (c holds it parsed):
// Kafka stores and describes a topic config's string as it was sent,
// "delete,compact" as well as "compact,delete".
func (c TopicConfig) Entries(overrides map[string]string) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(configKeys))
	for _, k := range configKeys {
		v, set := overrides[k.name]
		if !set {
			v = k.get(&c)
		}
		out = append(out, ConfigEntry{Name: k.name, Value: v, Default: !set, Type: k.typ, Doc: k.doc})
	}
	return out
}

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Name string
	// Op is Kafka's: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT (the last two
	// only for LIST configs).
	Op    int8
	Value string
}

// applyOps returns overrides changed by ops.
func applyOps(overrides map[string]string, base TopicConfig, ops []ConfigOp) (map[string]string, error) {
	out := make(map[string]string, len(overrides)+len(ops))
	for k, v := range overrides {
		out[k] = v
	}
	for _, op := range ops {
		k, ok := lookupKey(op.Name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, op.Name)
		}
		switch op.Op {
		case 0:
			out[op.Name] = op.Value
		case 1:
			delete(out, op.Name)
		case 2, 3:
			if k.typ != "LIST" {
				return nil, fmt.Errorf("%w: %s is not a list: APPEND and SUBTRACT do not apply", ErrInvalidConfig, op.Name)
			}
			cur, ok := out[op.Name]
			if !ok {
				cur = k.get(&base)
			}
			items := strings.Split(cur, ",")
			if cur == "" {
				items = nil
			}
			for _, v := range strings.Split(op.Value, ",") {
				i := slices.Index(items, v)
				if op.Op == 2 && i < 0 {
					items = append(items, v)
				} else if op.Op == 3 && i >= 0 {
					items = slices.Delete(items, i, i+1)
				}
			}
			out[op.Name] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: unknown operation %d on %s", ErrInvalidConfig, op.Op, op.Name)
		}
	}
	return out, nil
}
