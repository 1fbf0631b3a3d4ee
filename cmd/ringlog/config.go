package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/ioring"
	"ringlog/segment"
)

// settings is everything the broker is configured with: defaults, then the
// -config file (Kafka's server.properties names), then flags. The broker's
// own configuration is broker.Config; the admin listener is the binary's.
type settings struct {
	broker.Config
	admin string // host:port of the admin HTTP listener (/metrics, /debug/pprof); empty: off
}

func defaultSettings() settings {
	return settings{Config: broker.DefaultConfig()}
}

// errUnknownKey names a server.properties key ringlog does not support.
var errUnknownKey = errors.New("unknown config key")

// applyFlush sets the default flush settings for a policy name.
func (s *settings) applyFlush(policy string) error {
	p, err := segment.ParseFlushPolicy(policy)
	if err != nil {
		return err
	}
	switch p {
	case segment.FlushAlways:
		s.Topic.Log.FlushMessages, s.Topic.Log.FlushMs = 1, math.MaxInt64
	case segment.FlushInterval:
		s.Topic.Log.FlushMessages, s.Topic.Log.FlushMs = math.MaxInt64, 1000
	case segment.FlushNever:
		s.Topic.Log.FlushMessages, s.Topic.Log.FlushMs = math.MaxInt64, math.MaxInt64
	}
	s.Topic.Log.Flush = p
	return nil
}

// loadProperties applies a Kafka server.properties file.
func (s *settings) loadProperties(r io.Reader) error {
	kv := map[string]string{}
	var order []string
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' || t[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return fmt.Errorf("line %d: want key=value, got %q", line, t)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, dup := kv[k]; !dup {
			order = append(order, k)
		}
		kv[k] = v
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// Retention in hours and minutes are overridden by finer units, as in
	// Kafka, whatever their order in the file.
	for _, k := range []string{"log.retention.hours", "log.retention.minutes", "log.retention.ms", "log.roll.hours", "log.roll.ms"} {
		if v, ok := kv[k]; ok {
			if err := s.set(k, v); err != nil {
				return err
			}
		}
	}
	listeners := map[string]string{}
	for _, k := range order {
		switch k {
		case "log.retention.hours", "log.retention.minutes", "log.retention.ms", "log.roll.hours", "log.roll.ms":
			continue
		}
		if isListenerKey(k) {
			listeners[k] = kv[k]
			continue
		}
		if err := s.set(k, kv[k]); err != nil {
			return err
		}
	}
	return s.buildListeners(listeners)
}

func (s *settings) set(k, v string) error {
	num := func(lo, hi int64) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%s=%s: want an integer in [%d, %d]", k, v, lo, hi)
		}
		return n, nil
	}
	// Topic defaults share the engine's parser under the topic name.
	topicKey := map[string]string{
		"log.retention.bytes":                 "retention.bytes",
		"log.segment.bytes":                   "segment.bytes",
		"log.index.size.max.bytes":            "segment.index.bytes",
		"log.index.interval.bytes":            "index.interval.bytes",
		"message.max.bytes":                   "max.message.bytes",
		"log.flush.interval.messages":         "flush.messages",
		"log.flush.interval.ms":               "flush.ms",
		"log.cleanup.policy":                  "cleanup.policy",
		"min.insync.replicas":                 "min.insync.replicas",
		"log.message.timestamp.type":          "message.timestamp.type",
		"log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
		"log.message.timestamp.after.max.ms":  "message.timestamp.after.max.ms",
		"log.retention.ms":                    "retention.ms",
		"log.roll.ms":                         "segment.ms",
		"compression.type":                    "compression.type",
		"log.cleaner.delete.retention.ms":     "delete.retention.ms",
		"log.cleaner.min.cleanable.ratio":     "min.cleanable.dirty.ratio",
		"log.cleaner.min.compaction.lag.ms":   "min.compaction.lag.ms",
		"log.cleaner.max.compaction.lag.ms":   "max.compaction.lag.ms",
	}
	if tk, ok := topicKey[k]; ok {
		c, err := engine.ParseTopicConfig(s.Topic, map[string]string{tk: v})
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		s.Topic = c
		return nil
	}
	var err error
	var n int64
	switch k {
	case "log.dirs", "log.dir":
		err = s.setLogDirs(v)
	case "node.id", "broker.id":
		n, err = num(0, math.MaxInt32)
		s.NodeID = int32(n)
	case "broker.rack":
		s.Rack = v
	case "cluster.id":
		s.ClusterID = v
	case "num.partitions":
		n, err = num(1, 10000)
		s.NumPartitions = int32(n)
	case "auto.create.topics.enable":
		s.AutoCreateTopics, err = strconv.ParseBool(v)
	case "num.io.threads":
		n, err = num(1, 1024)
		s.Shards = int(n)
	case "num.network.threads":
		n, err = num(1, 1024)
		s.NetworkLoops = int(n)
	case "socket.request.max.bytes":
		n, err = num(1024, math.MaxInt32)
		s.MaxFrameBytes = int32(n)
	case "log.retention.check.interval.ms":
		n, err = num(1, math.MaxInt64)
		s.RetentionCheckInterval = time.Duration(n) * time.Millisecond
	case "producer.id.expiration.ms":
		n, err = num(1, math.MaxInt64)
		s.ProducerIDExpiration = time.Duration(n) * time.Millisecond
	case "log.retention.hours", "log.retention.minutes":
		n, err = num(-1, math.MaxInt32)
		if err == nil {
			unit := int64(3600_000)
			if k == "log.retention.minutes" {
				unit = 60_000
			}
			if n > 0 {
				n *= unit
			}
			s.Topic.Log.RetentionMs = n
		}
	case "log.roll.hours":
		n, err = num(1, math.MaxInt32)
		s.Topic.Log.SegmentMs = n * 3600_000
	case "log.cleaner.enable":
		var on bool
		on, err = strconv.ParseBool(v)
		s.Cleaner.Disabled = !on
	case "log.cleaner.threads":
		// One cleaner goroutine per broker; more would only contend for
		// the same two cores and the same disk.
		if v != "1" {
			return fmt.Errorf("%s=%s: only 1 cleaner thread is supported", k, v)
		}
	case "log.cleaner.backoff.ms":
		n, err = num(1, math.MaxInt32)
		s.Cleaner.Backoff = time.Duration(n) * time.Millisecond
	case "log.cleaner.dedupe.buffer.size":
		n, err = num(1<<20, math.MaxInt64)
		s.Cleaner.DedupeBufferSize = n
	case "log.cleaner.io.max.bytes.per.second":
		var f float64
		f, err = strconv.ParseFloat(v, 64)
		if err == nil && f < 0 {
			err = fmt.Errorf("negative rate %v", f)
		}
		s.Cleaner.IOMaxBytesPerSecond = f
	case "offsets.topic.num.partitions":
		n, err = num(1, 1000)
		s.Groups.OffsetsTopicPartitions = int32(n)
	case "offsets.topic.replication.factor":
		n, err = num(1, math.MaxInt16)
		s.Groups.OffsetsTopicReplicationFactor = int16(n)
	case "offsets.topic.segment.bytes":
		n, err = num(1<<20, math.MaxInt32)
		s.Groups.OffsetsTopicSegmentBytes = n
	case "transaction.state.log.num.partitions":
		n, err = num(1, 1000)
		s.Txns.Partitions = int32(n)
	case "transaction.state.log.replication.factor":
		n, err = num(1, math.MaxInt16)
		s.Txns.ReplicationFactor = int16(n)
	case "transaction.state.log.min.isr":
		n, err = num(1, math.MaxInt16)
		s.Txns.MinISR = int(n)
	case "transaction.state.log.segment.bytes":
		n, err = num(1<<20, math.MaxInt32)
		s.Txns.SegmentBytes = n
	case "transaction.max.timeout.ms":
		n, err = num(1, math.MaxInt32)
		s.Txns.MaxTimeout = time.Duration(n) * time.Millisecond
	case "transactional.id.expiration.ms":
		n, err = num(1, math.MaxInt32)
		s.Txns.IDExpiration = time.Duration(n) * time.Millisecond
	case "transaction.abort.timed.out.transaction.cleanup.interval.ms":
		n, err = num(1, math.MaxInt32)
		s.Txns.AbortTimedOutInterval = time.Duration(n) * time.Millisecond
	case "transaction.remove.expired.transaction.cleanup.interval.ms":
		n, err = num(1, math.MaxInt32)
		s.Txns.RemoveExpiredInterval = time.Duration(n) * time.Millisecond
	case "group.min.session.timeout.ms":
		n, err = num(1, math.MaxInt32)
		s.Groups.MinSessionTimeout = time.Duration(n) * time.Millisecond
	case "group.max.session.timeout.ms":
		n, err = num(1, math.MaxInt32)
		s.Groups.MaxSessionTimeout = time.Duration(n) * time.Millisecond
	case "group.initial.rebalance.delay.ms":
		n, err = num(0, math.MaxInt32)
		s.Groups.InitialRebalanceDelay = time.Duration(n) * time.Millisecond
	case "group.consumer.heartbeat.interval.ms":
		n, err = num(1, math.MaxInt32)
		s.Groups.ConsumerHeartbeatInterval = time.Duration(n) * time.Millisecond
	case "group.consumer.session.timeout.ms":
		n, err = num(1, math.MaxInt32)
		s.Groups.ConsumerSessionTimeout = time.Duration(n) * time.Millisecond
	case "group.max.size":
		n, err = num(1, math.MaxInt32)
		s.Groups.MaxSize = int(n)
	case "offsets.retention.minutes":
		n, err = num(1, math.MaxInt32)
		s.Groups.OffsetsRetention = time.Duration(n) * time.Minute
	case "offsets.retention.check.interval.ms":
		n, err = num(1, math.MaxInt32)
		s.Groups.OffsetsRetentionCheckInterval = time.Duration(n) * time.Millisecond
	case "offset.metadata.max.bytes":
		n, err = num(0, math.MaxInt32)
		s.Groups.OffsetMetadataMaxBytes = int(n)
	case "ringlog.group.member.metadata.max.bytes":
		n, err = num(1024, 1<<30)
		s.Groups.MemberMetadataMaxBytes = int(n)
	case "ringlog.group.metadata.max.bytes":
		n, err = num(1024, 1<<30)
		s.Groups.GroupMetadataMaxBytes = int(n)
	case "ringlog.io":
		s.IO, err = ioring.ParseMode(v)
	case "ringlog.writes":
		s.Writes, err = engine.ParseWrites(v)
	case "ringlog.tail.cache.bytes":
		n, err = num(0, math.MaxInt64)
		s.TailCacheBytes = n
	case "controller.quorum.voters":
		s.Cluster.Voters = v
	case "controller.quorum.bootstrap.servers":
		s.Cluster.BootstrapServers = v
	case "process.roles":
		s.Roles, err = broker.ParseRoles(v)
	case "replica.lag.time.max.ms":
		n, err = num(1, math.MaxInt32)
		s.Cluster.LagTimeMax = time.Duration(n) * time.Millisecond
	case "broker.session.timeout.ms":
		n, err = num(1, math.MaxInt32)
		s.Cluster.SessionTimeout = time.Duration(n) * time.Millisecond
	case "unclean.recovery.timeout.ms":
		n, err = num(1, math.MaxInt32)
		s.Cluster.UncleanRecoveryTimeout = time.Duration(n) * time.Millisecond
	case "broker.heartbeat.interval.ms":
		n, err = num(1, math.MaxInt32)
		s.Cluster.HeartbeatInterval = time.Duration(n) * time.Millisecond
	case "default.replication.factor":
		n, err = num(1, math.MaxInt16)
		s.Cluster.ReplicationFactor = int16(n)
	case "ringlog.max.partitions":
		// No Kafka equivalent (KIP-578 was not adopted): the most
		// partitions the broker holds; -1 for no bound.
		n, err = num(-1, math.MaxInt32)
		if err == nil && n == 0 {
			err = fmt.Errorf("%s=0: want a positive bound, or -1 for none", k)
		}
		s.MaxPartitions = int(n)
	case "fetch.max.bytes":
		n, err = num(1024, math.MaxInt32)
		s.FetchMaxBytes = int32(n)
	case "replica.fetch.response.max.bytes":
		n, err = num(1024, math.MaxInt32)
		s.ReplicaFetchMaxBytes = int32(n)
	case "max.incremental.fetch.session.cache.slots":
		// 0 turns fetch sessions off (KIP-227), as in Kafka.
		n, err = num(0, math.MaxInt32)
		s.FetchSessionSlots = int(n)
		if n == 0 {
			s.FetchSessionSlots = -1
		}
	case "min.incremental.fetch.session.eviction.ms":
		n, err = num(0, math.MaxInt32)
		s.FetchSessionEviction = time.Duration(n) * time.Millisecond
	case "quota.window.num":
		n, err = num(2, 1000)
		s.QuotaWindowNum = int(n)
	case "quota.window.size.seconds":
		n, err = num(1, 3600)
		s.QuotaWindow = time.Duration(n) * time.Second
	case "controller.quota.window.num":
		n, err = num(1, 1000)
		s.ControllerQuotaWindowNum = int(n)
	case "controller.quota.window.size.seconds":
		n, err = num(1, 3600)
		s.ControllerQuotaWindow = time.Duration(n) * time.Second
	case "max.connection.creation.rate":
		// Kafka's default, Int.MaxValue, is no rate at all.
		n, err = num(1, math.MaxInt32)
		if n < math.MaxInt32 {
			s.MaxConnectionCreationRate = float64(n)
		}
	case "max.connections":
		n, err = num(1, math.MaxInt32)
		s.Connections.MaxConnections = int(n)
	case "max.connections.per.ip":
		n, err = num(1, math.MaxInt32)
		s.Connections.MaxPerIP = int(n)
	case "max.connections.per.ip.overrides":
		s.Connections.PerIPOverrides, err = perIPOverrides(v)
	case "connections.max.idle.ms":
		n, err = num(-1, math.MaxInt64/int64(time.Millisecond))
		s.Connections.IdleMax = time.Duration(n) * time.Millisecond
		if n == 0 {
			err = errors.New("0: want a count of milliseconds, or -1 for never")
		}
	case "queued.max.request.bytes":
		n, err = num(-1, math.MaxInt64)
		s.Connections.QueuedRequestBytes = n
	case "super.users":
		s.SuperUsers, err = superUsers(v)
	case "authorizer.class.name":
		// Any class turns ringlog's authorizer on (Kafka's
		// StandardAuthorizer semantics); empty leaves it off.
		s.Authorizer = strings.TrimSpace(v) != ""
	case "allow.everyone.if.no.acl.found":
		s.AllowEveryoneIfNoACL, err = strconv.ParseBool(v)
	case "ringlog.replica.fetch.slots":
		n, err = num(1, 32)
		s.Cluster.FetchSlots = int(n)
	default:
		return fmt.Errorf("%w %q: ringlog does not support it (remove it from the file)", errUnknownKey, k)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// loadPropertiesFile applies the file at path.
func (s *settings) loadPropertiesFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := s.loadProperties(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// perIPOverrides reads max.connections.per.ip.overrides: "ip:count,..."
// (an IPv6 address in brackets).
func perIPOverrides(v string) (map[string]int, error) {
	m := map[string]int{}
	for _, e := range splitList(v) {
		i := strings.LastIndex(e, ":")
		if i <= 0 {
			return nil, fmt.Errorf("%q: want ip:count", e)
		}
		host := strings.Trim(e[:i], "[]")
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		n, err := strconv.Atoi(e[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want a count >= 0", e)
		}
		m[ip.String()] = n
	}
	return m, nil
}

// setLogDirs takes log.dirs (or -data-dir): a comma-separated list whose
// first directory also holds the broker's metadata.
func (s *settings) setLogDirs(v string) error {
	var dirs []string
	for _, d := range strings.Split(v, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return fmt.Errorf("log.dirs=%q: no directory", v)
	}
	s.DataDir, s.LogDirs = dirs[0], dirs[1:]
	return nil
}
