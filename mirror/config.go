package mirror

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/admincli"
)

// MM2's defaults, kept under MM2's names.
const (
	defaultTopicsExclude = `.*[\-\.]internal, .*\.replica, __.*`
	defaultGroupsExclude = `console-consumer-.*, connect-.*, __.*`
	// DefaultConfigPropertyFilter's deny list.
	defaultConfigExclude = `follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, ` +
		`message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, min\.insync\.replicas`
)

// Flow is one replication flow, source -> target, run by one worker.
type Flow struct {
	SourceAlias, TargetAlias string
	SourceBootstrap          []string
	TargetBootstrap          []string
	Topics, TopicsExclude    patternList
	Policy                   Policy
	// ExactlyOnce commits each batch of records and the flow's source
	// offsets in one transaction on the target; off, the target gets an
	// idempotent producer and the offsets after the records (at least
	// once: a crash between the two mirrors records again).
	ExactlyOnce bool
	// OffsetFlushInterval is how often the source offsets are written
	// without exactly once (Connect's offset.flush.interval.ms).
	OffsetFlushInterval time.Duration
	RefreshInterval     time.Duration // refresh.topics.interval.seconds
	HeartbeatInterval   time.Duration // emit.heartbeats.interval.seconds; 0: off
	EmitOffsetSyncs     bool          // emit.offset-syncs.enabled
	// OffsetLagMax is MM2's offset.lag.max: with exactly once, an offset
	// sync is written (in the records' transaction) at least every
	// OffsetLagMax records of a partition, which bounds what a group
	// moved to the target with translated offsets reads again.
	OffsetLagMax      int
	SyncTopicConfigs  bool          // sync.topic.configs.enabled
	SyncTopicACLs     bool          // sync.topic.acls.enabled
	ACLSyncInterval   time.Duration // sync.topic.acls.interval.seconds
	ConfigExclude     patternList   // config.properties.exclude
	ReplicationFactor int16         // replication.factor of created topics; -1: the target's default
	// Checkpoints: the selected groups' offsets translated every
	// CheckpointInterval into <source>.checkpoints.internal on the target
	// (emit.checkpoints.enabled), and committed there for the same group
	// with SyncGroupOffsets (sync.group.offsets.enabled).
	EmitCheckpoints       bool
	SyncGroupOffsets      bool
	CheckpointInterval    time.Duration // emit.checkpoints.interval.seconds (and the group offsets' sync)
	Groups, GroupsExclude patternList
	// TransactionalID is the flow's transactional id on the target, the
	// base of each task's (tasks.go).
	TransactionalID string
	// Tasks is MM2's tasks.max: above 1, the flow's source partitions are
	// split into that many tasks by a fixed map, each with transactional
	// ids of its own, and the tasks are shared by every process running
	// the flow through the consumer group GroupID on the source, whose
	// members time out after SessionTimeout (tasks.go).
	Tasks          int
	GroupID        string
	SessionTimeout time.Duration
	// SourceSecurity and TargetSecurity are the clients' TLS and SASL
	// options, from each cluster's Kafka client properties
	// (A.security.protocol, A.sasl.mechanism, A.sasl.jaas.config,
	// A.ssl.truststore.location, ...), read as `ringlog admin
	// --command-config` reads them.
	SourceSecurity, TargetSecurity []kgo.Opt
}

// Name is the flow's name, MM2's "A->B".
func (f *Flow) Name() string { return f.SourceAlias + "->" + f.TargetAlias }

// OffsetsTopic is MM2's offset storage topic on the target.
func (f *Flow) OffsetsTopic() string { return "mm2-offsets." + f.SourceAlias + ".internal" }

// OffsetSyncsTopic is MM2's offset-syncs topic, here on the target
// (offset-syncs.topic.location=target), written in the flow's transactions.
// MM2 names it after the cluster it does not live on
// (MirrorSourceConfig.offsetSyncsTopic): on the target, after the source,
// so that A->agg and B->agg, whose syncs both name a topic "t", each have
// their own.
func (f *Flow) OffsetSyncsTopic() string { return "mm2-offset-syncs." + f.SourceAlias + ".internal" }

// props is a parsed properties file.
type props map[string]string

// ParseProperties reads Java properties: key=value or key: value lines,
// # and ! comments. Continuation lines and escapes are not supported
// (MM2's examples need neither).
func parseProperties(r io.Reader) (props, error) {
	p := props{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			return nil, fmt.Errorf("mirror: config line %d: no '=' in %q", n, line)
		}
		p[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return p, sc.Err()
}

// get looks key up for flow "A->B" the MM2 way: "A->B.key", then "key".
func (p props) get(flow, key, def string) string {
	if v, ok := p[flow+"."+key]; ok {
		return v
	}
	if v, ok := p[key]; ok {
		return v
	}
	return def
}

// Load reads an MM2-style configuration: clusters, <alias>.bootstrap.servers
// and the enabled flows with their settings.
func Load(r io.Reader) ([]*Flow, error) {
	p, err := parseProperties(r)
	if err != nil {
		return nil, err
	}
	return LoadProperties(p)
}

// LoadProperties is Load on properties already read (the flags of the
// simple case, for one).
func LoadProperties(m map[string]string) ([]*Flow, error) {
	p := props(m)
	var aliases []string
	for _, a := range strings.Split(p["clusters"], ",") {
		if a = strings.TrimSpace(a); a != "" {
			aliases = append(aliases, a)
		}
	}
	if len(aliases) < 2 {
		return nil, fmt.Errorf("mirror: clusters = %q: name at least two", p["clusters"])
	}
	var flows []*Flow
	for _, src := range aliases {
		for _, dst := range aliases {
			name := src + "->" + dst
			if src == dst || p[name+".enabled"] != "true" {
				continue
			}
			f, err := flowFrom(p, src, dst)
			if err != nil {
				return nil, err
			}
			flows = append(flows, f)
		}
	}
	for k := range p {
		if i := strings.Index(k, "->"); i > 0 && strings.HasSuffix(k, ".enabled") {
			if _, ok := p[k[:i]+".bootstrap.servers"]; !ok {
				return nil, fmt.Errorf("mirror: %s: cluster %q is not in clusters", k, k[:i])
			}
		}
	}
	if len(flows) == 0 {
		return nil, fmt.Errorf("mirror: no flow enabled (A->B.enabled = true)")
	}
	return flows, nil
}

func flowFrom(p props, src, dst string) (*Flow, error) {
	name := src + "->" + dst
	f := &Flow{SourceAlias: src, TargetAlias: dst}
	for _, side := range []struct {
		alias string
		out   *[]string
	}{{src, &f.SourceBootstrap}, {dst, &f.TargetBootstrap}} {
		v := p[side.alias+".bootstrap.servers"]
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*side.out = append(*side.out, s)
			}
		}
		if len(*side.out) == 0 {
			return nil, fmt.Errorf("mirror: %s: %s.bootstrap.servers is missing", name, side.alias)
		}
	}
	var err error
	if f.SourceSecurity, err = security(p, src); err != nil {
		return nil, fmt.Errorf("mirror: %s: %w", name, err)
	}
	if f.TargetSecurity, err = security(p, dst); err != nil {
		return nil, fmt.Errorf("mirror: %s: %w", name, err)
	}
	if f.Topics, err = compileList(p.get(name, "topics", ".*")); err != nil {
		return nil, err
	}
	if f.TopicsExclude, err = compileList(p.get(name, "topics.exclude", defaultTopicsExclude)); err != nil {
		return nil, err
	}
	if f.ConfigExclude, err = compileList(p.get(name, "config.properties.exclude", defaultConfigExclude)); err != nil {
		return nil, err
	}
	if f.Groups, err = compileList(p.get(name, "groups", ".*")); err != nil {
		return nil, err
	}
	if f.GroupsExclude, err = compileList(p.get(name, "groups.exclude", defaultGroupsExclude)); err != nil {
		return nil, err
	}
	if f.Policy, err = PolicyByName(p.get(name, "replication.policy.class", ""), p.get(name, "replication.policy.separator", ".")); err != nil {
		return nil, err
	}
	secs := func(key, def string) (time.Duration, error) {
		v := p.get(name, key, def)
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("mirror: %s.%s = %q: want seconds", name, key, v)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	boolean := func(key, def string) (bool, error) {
		v := p.get(name, key, def)
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("mirror: %s.%s = %q: want true or false", name, key, v)
		}
		return b, nil
	}
	if f.RefreshInterval, err = secs("refresh.topics.interval.seconds", "600"); err != nil {
		return nil, err
	}
	if f.RefreshInterval == 0 {
		f.RefreshInterval = 600 * time.Second
	}
	if f.HeartbeatInterval, err = secs("emit.heartbeats.interval.seconds", "1"); err != nil {
		return nil, err
	}
	if on, err := boolean("emit.heartbeats.enabled", "true"); err != nil {
		return nil, err
	} else if !on {
		f.HeartbeatInterval = 0
	}
	if f.EmitOffsetSyncs, err = boolean("emit.offset-syncs.enabled", "true"); err != nil {
		return nil, err
	}
	if f.EmitCheckpoints, err = boolean("emit.checkpoints.enabled", "true"); err != nil {
		return nil, err
	}
	if f.SyncGroupOffsets, err = boolean("sync.group.offsets.enabled", "false"); err != nil {
		return nil, err
	}
	if f.CheckpointInterval, err = secs("emit.checkpoints.interval.seconds", "60"); err != nil {
		return nil, err
	}
	if f.CheckpointInterval == 0 {
		f.CheckpointInterval = 60 * time.Second
	}
	if (f.EmitCheckpoints || f.SyncGroupOffsets) && !f.EmitOffsetSyncs {
		return nil, fmt.Errorf("mirror: %s: checkpoints translate with the offset syncs: emit.offset-syncs.enabled must stay true (or set emit.checkpoints.enabled and sync.group.offsets.enabled to false)", name)
	}
	if f.SyncTopicConfigs, err = boolean("sync.topic.configs.enabled", "true"); err != nil {
		return nil, err
	}
	if f.SyncTopicACLs, err = boolean("sync.topic.acls.enabled", "true"); err != nil {
		return nil, err
	}
	if f.ACLSyncInterval, err = secs("sync.topic.acls.interval.seconds", "600"); err != nil {
		return nil, err
	}
	if f.ACLSyncInterval == 0 {
		f.ACLSyncInterval = 600 * time.Second
	}
	switch v := p.get(name, "exactly.once.source.support", "enabled"); v {
	case "enabled", "required":
		f.ExactlyOnce = true
	case "disabled":
	default:
		return nil, fmt.Errorf("mirror: %s.exactly.once.source.support = %q: want enabled or disabled", name, v)
	}
	ms, err := strconv.ParseInt(p.get(name, "offset.flush.interval.ms", "10000"), 10, 64)
	if err != nil || ms < 0 {
		return nil, fmt.Errorf("mirror: %s.offset.flush.interval.ms: want milliseconds", name)
	}
	f.OffsetFlushInterval = time.Duration(ms) * time.Millisecond
	lag, err := strconv.ParseInt(p.get(name, "offset.lag.max", "100"), 10, 32)
	if err != nil || lag < 1 {
		return nil, fmt.Errorf("mirror: %s.offset.lag.max: want a positive record count", name)
	}
	f.OffsetLagMax = int(lag)
	rf, err := strconv.ParseInt(p.get(name, "replication.factor", "-1"), 10, 16)
	if err != nil || rf == 0 || rf < -1 {
		return nil, fmt.Errorf("mirror: %s.replication.factor: want -1 or a positive count", name)
	}
	f.ReplicationFactor = int16(rf)
	f.TransactionalID = p.get(name, "transactional.id", "ringlog-mirror."+name)
	tasks, err := strconv.Atoi(p.get(name, "tasks.max", "1"))
	if err != nil || tasks < 1 || tasks > tasksMax {
		return nil, fmt.Errorf("mirror: %s.tasks.max: want a count from 1 to %d", name, tasksMax)
	}
	f.Tasks = tasks
	f.GroupID = p.get(name, "group.id", "ringlog-mirror."+name)
	ms, err = strconv.ParseInt(p.get(name, "consumer.session.timeout.ms", "10000"), 10, 64)
	if err != nil || ms <= 0 {
		return nil, fmt.Errorf("mirror: %s.consumer.session.timeout.ms: want milliseconds", name)
	}
	f.SessionTimeout = time.Duration(ms) * time.Millisecond
	return f, nil
}

// Wanted reports whether the flow mirrors the source topic: selected by
// topics, not excluded, not internal, and not from the target (a cycle).
func (f *Flow) Wanted(topic string) bool {
	if isInternalTopic(topic) && !isHeartbeats(topic) {
		return false
	}
	if isCycle(f.Policy, f.TargetAlias, topic) {
		return false
	}
	if isHeartbeats(topic) { // heartbeats are always mirrored, as in MM2
		return true
	}
	return f.Topics.match(topic) && !f.TopicsExclude.match(topic)
}

// security builds a cluster's client security options from its
// "<alias>.security.protocol", "<alias>.ssl.*" and "<alias>.sasl.*" keys.
func security(p props, alias string) ([]kgo.Opt, error) {
	m := map[string]string{}
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, alias+".")
		if ok && (rest == "security.protocol" || strings.HasPrefix(rest, "ssl.") || strings.HasPrefix(rest, "sasl.")) {
			m[rest] = v
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return admincli.SecurityOptions(m)
}

func (f *Flow) sourceClient(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(f.SourceBootstrap...)}, f.SourceSecurity...)
	return kgo.NewClient(append(all, opts...)...)
}

func (f *Flow) targetClient(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(f.TargetBootstrap...)}, f.TargetSecurity...)
	return kgo.NewClient(append(all, opts...)...)
}
