package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"ringlog/internal/fsutil"
)

// topic is a topic's metadata; it is replaced, never changed in place,
// so that readers holding one see a consistent picture.
type topic struct {
	name       string
	id         [16]byte
	partitions []*partition
	overrides  map[string]string
	config     TopicConfig
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Config is the effective configuration; Overrides the values set on
	// the topic itself (the rest are the broker's defaults).
	Config    TopicConfig
	Overrides map[string]string
}

func (t *topic) info() TopicInfo {
	return TopicInfo{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions)), Config: t.config, Overrides: maps.Clone(t.overrides)}
}

// Topics lists the topics, sorted by name.
func (e *Core) Topics() []TopicInfo {
	ts := *e.topics.Load()
	out := make([]TopicInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.info())
	}
	slices.SortFunc(out, func(a, b TopicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Topic describes one topic.
func (e *Core) Topic(name string) (TopicInfo, bool) {
	t := (*e.topics.Load())[name]
	if t == nil {
		return TopicInfo{}, false
	}
	return t.info(), true
}

// TopicsVersion is a number that changes whenever a topic is created,
// deleted, grows partitions or changes its configuration. A service that
// derives state from the topics (the group coordinator's KIP-848 groups
// resolve their subscriptions to topic ids and partition counts) compares
// it with the version it last derived from, which costs one atomic load,
// rather than being called back from inside a topic change.
func (e *Core) TopicsVersion() uint64 { return e.topicsVersion.Load() }

// TopicByID finds a topic by its id (Fetch v13+, Metadata by id).
func (e *Core) TopicByID(id [16]byte) (TopicInfo, bool) {
	for _, t := range *e.topics.Load() {
		if t.id == id {
			return t.info(), true
		}
	}
	return TopicInfo{}, false
}

// ValidateTopicName applies Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func ValidateTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: %q has the character %q", ErrInvalidTopic, name, r)
		}
	}
	return nil
}

// CreateTopic creates a topic with partitions partitions (-1: the broker's
// num.partitions) and config overrides. replication is -1 or the number of
// replicas; a single node has one. With validateOnly nothing is created.
// It is the embedding API's creation, held to Config.MaxPartitions here;
// a broker's topics come through its cluster's controller, which holds
// them to it (CreateTopicWithID and CreatePartitions apply its decisions).
func (e *Core) CreateTopic(name string, partitions int32, replication int16, overrides map[string]string, validateOnly bool) (TopicInfo, error) {
	if e.closed.Load() {
		return TopicInfo{}, ErrClosed
	}
	if err := ValidateTopicName(name); err != nil {
		return TopicInfo{}, err
	}
	if partitions == -1 {
		partitions = e.cfg.NumPartitions
	}
	if partitions <= 0 || partitions > maxPartitions {
		return TopicInfo{}, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	if replication != -1 && replication != 1 {
		return TopicInfo{}, fmt.Errorf("%w: %d, this cluster has 1 broker", ErrInvalidReplication, replication)
	}
	cfg, err := ParseTopicConfig(e.cfg.Topic, overrides)
	if err != nil {
		return TopicInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ts := *e.topics.Load()
	if _, ok := ts[name]; ok {
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if err := e.checkPartitionCapLocked(int(partitions)); err != nil {
		return TopicInfo{}, err
	}
	var id [16]byte
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // a version 4 UUID, as Kafka's
	id[8] = id[8]&0x3f | 0x80
	return e.createTopicLocked(name, id, partitions, overrides, cfg, validateOnly)
}

// CreateTopicWithID creates a topic with the id and partition count the
// cluster's controller chose, and config overrides. Every partition of the
// topic is hosted by this broker, replica or not: the replication layer
// gives each the role this broker has in it (a partition with no role takes
// no appends), so that becoming a replica later is a role change rather
// than a new log. partitions -1 is the broker's num.partitions.
//
// It is idempotent: when the topic exists with the same id, it is returned
// as it is, grown to partitions when it has fewer (its configuration is
// left alone; AlterTopicConfig changes it). When a topic of that name has
// another id (a former topic of the name, deleted and created again while
// this broker was away), or another topic has this id, the error is
// ErrTopicIDMismatch: the caller deletes the stale topic first.
func (e *Core) CreateTopicWithID(name string, id [16]byte, partitions int32, overrides map[string]string) (TopicInfo, error) {
	if e.closed.Load() {
		return TopicInfo{}, ErrClosed
	}
	if err := ValidateTopicName(name); err != nil {
		return TopicInfo{}, err
	}
	if id == ([16]byte{}) {
		// Kafka's zero UUID means "no id".
		return TopicInfo{}, fmt.Errorf("%w: topic %s with the zero topic id", ErrInvalidRequest, name)
	}
	if partitions == -1 {
		partitions = e.cfg.NumPartitions
	}
	if partitions <= 0 || partitions > maxPartitions {
		return TopicInfo{}, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	// The controller accepted these overrides (see loadTopicConfig).
	cfg, err := loadTopicConfig(e.cfg.Topic, overrides)
	if err != nil {
		return TopicInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ts := *e.topics.Load()
	if t, ok := ts[name]; ok {
		if t.id != id {
			return TopicInfo{}, fmt.Errorf("%w: topic %s has id %x, asked for %x", ErrTopicIDMismatch, name, t.id, id)
		}
		if have := int32(len(t.partitions)); have < partitions {
			if err := e.growLocked(t, partitions); err != nil {
				return TopicInfo{}, err
			}
		}
		return (*e.topics.Load())[name].info(), nil
	}
	for _, t := range ts {
		if t.id == id {
			return TopicInfo{}, fmt.Errorf("%w: id %x belongs to topic %s, asked for %s", ErrTopicIDMismatch, id, t.name, name)
		}
	}
	return e.createTopicLocked(name, id, partitions, overrides, cfg, false)
}

// createTopicLocked creates a topic whose name is not taken. Called with
// e.mu held.
func (e *Core) createTopicLocked(name string, id [16]byte, partitions int32, overrides map[string]string, cfg TopicConfig, validateOnly bool) (TopicInfo, error) {
	ts := *e.topics.Load()
	// Kafka refuses names that differ only by '.' versus '_': they collide
	// in metric names.
	norm := strings.ReplaceAll(name, ".", "_")
	for other := range ts {
		if strings.ReplaceAll(other, ".", "_") == norm {
			return TopicInfo{}, fmt.Errorf("%w: %q collides with existing topic %q", ErrInvalidTopic, name, other)
		}
	}
	t := &topic{name: name, id: id, overrides: maps.Clone(overrides), config: cfg}
	if t.overrides == nil {
		t.overrides = map[string]string{}
	}
	if validateOnly {
		info := t.info()
		info.Partitions = partitions
		return info, nil
	}
	if err := e.openPartitions(t, 0, partitions, true); err != nil {
		return TopicInfo{}, err
	}
	if err := e.publishTopic(t); err != nil {
		return TopicInfo{}, err
	}
	return t.info(), nil
}

// maxPartitions bounds the partitions of one topic: every partition holds
// files and mappings.
const maxPartitions = 10000

// openPartitions creates (fresh) or opens partitions [from, to) of t on
// their shards, in parallel across shards.
func (e *Core) openPartitions(t *topic, from, to int32, fresh bool) error {
	calls := make([]shardCall, 0, to-from)
	for i := from; i < to; i++ {
		tp := TP{t.name, i}
		name := fmt.Sprintf("%s-%d", t.name, i)
		// The directory is picked here, under e.mu (or at start), so that
		// the partitions of one creation spread over the directories.
		d, dirErr := e.placeDir(name, fresh, t.partitions[from:])
		if dirErr != nil && fresh {
			return dirErr
		}
		p := &partition{tp: tp, topic: t}
		p.ldir.Store(d)
		if d != nil {
			p.dir = filepath.Join(d.path, name)
		} else {
			p.dir = filepath.Join(e.cfg.Dir, name) // offline: named for the logs only
		}
		if fresh {
			if err := e.clearLeftovers(name, d, strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
				return fmt.Errorf("%w: %w", ErrStorage, err)
			}
		}
		p.leaderEpoch.Store(0)
		e.resetISR(p)
		p.acksMin.Store(math.MaxInt64)
		t.partitions = append(t.partitions, p)
		s := e.shardFor(tp)
		p.shard = s
		if dirErr != nil {
			// Its directory may be the one offline: hosted offline, like a
			// log that does not open, and never created empty elsewhere.
			calls = append(calls, s.start(func() error { s.keepOffline(p, dirErr); return nil }))
			continue
		}
		calls = append(calls, s.start(func() error { return s.openPartition(p, fresh) }))
	}
	var errs []error
	for _, c := range calls {
		errs = append(errs, c.wait())
	}
	if err := errors.Join(errs...); err != nil {
		// Close what did open; the files stay for an operator to inspect.
		// A shard that stopped meanwhile closed its partitions itself.
		for _, p := range t.partitions[from:] {
			if p.log() != nil {
				_ = p.shard.post(func() {
					if err := p.shard.closePartition(p); err != nil {
						e.log.Error("close partition after a failed open", "partition", p.dir, "err", err)
					}
				})
			}
		}
		t.partitions = t.partitions[:from]
		return err
	}
	return nil
}

// publishTopic installs t (new or replaced) and persists the topic list.
// Called with e.mu held.
func (e *Core) publishTopic(t *topic) error {
	ts := maps.Clone(*e.topics.Load())
	ts[t.name] = t
	if err := e.saveTopics(ts); err != nil {
		return err
	}
	e.topics.Store(&ts)
	e.topicsVersion.Add(1)
	e.rebuildPartitionMap(ts)
	return nil
}

func (e *Core) rebuildPartitionMap(ts map[string]*topic) {
	parts := make(map[TP]*partition)
	for _, t := range ts {
		for _, p := range t.partitions {
			parts[p.tp] = p
		}
	}
	e.parts.Store(&parts)
}

// DeleteTopic removes a topic and its data. Its partition folders are
// renamed out of the way first (Kafka's topic-N.<id>-delete), so a crash
// midway finishes the deletion at the next start.
func (e *Core) DeleteTopic(name string) error {
	if e.closed.Load() {
		return ErrClosed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ts := maps.Clone(*e.topics.Load())
	t := ts[name]
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	delete(ts, name)
	if err := e.saveTopics(ts); err != nil {
		return err
	}
	e.topics.Store(&ts)
	e.topicsVersion.Add(1)
	e.rebuildPartitionMap(ts)
	var errs []error
	for _, p := range t.partitions {
		p.deleted.Store(true)
		errs = append(errs, p.shard.do(func() error { return p.shard.deletePartition(p) }))
	}
	if e.hwCkpt != nil {
		// Without the deleted partitions at once: a topic created again
		// under the name must not inherit their high watermarks at the
		// next start.
		errs = append(errs, e.hwCkpt.write())
	}
	return errors.Join(errs...)
}

// CreatePartitions grows a topic to total partitions.
func (e *Core) CreatePartitions(name string, total int32, validateOnly bool) error {
	if e.closed.Load() {
		return ErrClosed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t := (*e.topics.Load())[name]
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	have := int32(len(t.partitions))
	if total <= have {
		return fmt.Errorf("%w: topic %s has %d partitions, asked for %d (partitions can only be added)", ErrInvalidPartitions, name, have, total)
	}
	if total > maxPartitions {
		return fmt.Errorf("%w: %d", ErrInvalidPartitions, total)
	}
	if validateOnly {
		return nil
	}
	return e.growLocked(t, total)
}

// growLocked adds partitions to t up to total. Called with e.mu held.
func (e *Core) growLocked(t *topic, total int32) error {
	nt := &topic{name: t.name, id: t.id, overrides: t.overrides, config: t.config, partitions: slices.Clone(t.partitions)}
	if err := e.openPartitions(nt, int32(len(t.partitions)), total, true); err != nil {
		return err
	}
	for _, p := range nt.partitions {
		p.topic = nt
	}
	return e.publishTopic(nt)
}

// AlterTopicConfig replaces the topic's overrides with the cluster's (the
// replication layer applies what the controller accepted, which is why a
// value below a floor added since still applies; see loadTopicConfig).
func (e *Core) AlterTopicConfig(name string, overrides map[string]string, validateOnly bool) error {
	return e.changeConfig(name, validateOnly, loadTopicConfig, func(map[string]string, TopicConfig) (map[string]string, error) {
		return maps.Clone(overrides), nil
	})
}

// IncrementalAlterTopicConfig applies ops to the topic's overrides
// (IncrementalAlterConfigs), with Kafka's minimums for every value of the
// result, as Kafka checks it.
func (e *Core) IncrementalAlterTopicConfig(name string, ops []ConfigOp, validateOnly bool) error {
	return e.changeConfig(name, validateOnly, ParseTopicConfig, func(cur map[string]string, base TopicConfig) (map[string]string, error) {
		return applyOps(cur, base, ops)
	})
}

func (e *Core) changeConfig(name string, validateOnly bool, parse func(TopicConfig, map[string]string) (TopicConfig, error),
	change func(map[string]string, TopicConfig) (map[string]string, error)) error {
	if e.closed.Load() {
		return ErrClosed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t := (*e.topics.Load())[name]
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	overrides, err := change(t.overrides, e.cfg.Topic)
	if err != nil {
		return err
	}
	if overrides == nil {
		overrides = map[string]string{}
	}
	cfg, err := parse(e.cfg.Topic, overrides)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	nt := &topic{name: t.name, id: t.id, overrides: overrides, config: cfg, partitions: t.partitions}
	if err := e.publishTopic(nt); err != nil {
		return err
	}
	var errs []error
	for _, p := range nt.partitions {
		errs = append(errs, p.shard.do(func() error {
			p.topic = nt
			if p.offlineErr() != nil {
				return nil // the log takes the config when it opens again
			}
			return p.log().SetConfig(cfg.Log)
		}))
	}
	return errors.Join(errs...)
}

// topics.json holds the topic list of a single-node broker (the cluster's
// controller will hold it in its quorum).
const (
	topicsFile   = "topics.json"
	deleteSuffix = "-delete"
)

type topicRecord struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

func (e *Core) saveTopics(ts map[string]*topic) error {
	recs := make([]topicRecord, 0, len(ts))
	for _, t := range ts {
		recs = append(recs, topicRecord{Name: t.name, ID: hex.EncodeToString(t.id[:]), Partitions: int32(len(t.partitions)), Configs: t.overrides})
	}
	slices.SortFunc(recs, func(a, b topicRecord) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.MarshalIndent(map[string]any{"version": 1, "topics": recs}, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(e.cfg.Dir, topicsFile, append(b, '\n')); err != nil {
		return fmt.Errorf("%w: save %s: %w", ErrStorage, topicsFile, err)
	}
	return nil
}

// loadTopics reads topics.json and opens every partition.
func (e *Core) loadTopics() error {
	b, err := os.ReadFile(filepath.Join(e.cfg.Dir, topicsFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var doc struct {
		Version int           `json:"version"`
		Topics  []topicRecord `json:"topics"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Version != 1 {
		return fmt.Errorf("engine: %s: unreadable (%v, version %d)", topicsFile, err, doc.Version)
	}
	ts := map[string]*topic{}
	for _, r := range doc.Topics {
		if err := ValidateTopicName(r.Name); err != nil {
			return fmt.Errorf("engine: %s: %w", topicsFile, err)
		}
		if r.Partitions <= 0 || r.Partitions > maxPartitions {
			return fmt.Errorf("engine: %s: topic %s with %d partitions", topicsFile, r.Name, r.Partitions)
		}
		cfg, err := loadTopicConfig(e.cfg.Topic, r.Configs)
		if err != nil {
			return fmt.Errorf("engine: %s: topic %s: %w", topicsFile, r.Name, err)
		}
		t := &topic{name: r.Name, overrides: r.Configs, config: cfg}
		if t.overrides == nil {
			t.overrides = map[string]string{}
		}
		if err := decodeID(r.ID, &t.id); err != nil {
			return fmt.Errorf("engine: %s: topic %s: %w", topicsFile, r.Name, err)
		}
		if err := e.openPartitions(t, 0, r.Partitions, false); err != nil {
			return err
		}
		ts[t.name] = t
	}
	e.topics.Store(&ts)
	e.topicsVersion.Add(1)
	e.rebuildPartitionMap(ts)
	return nil
}

func decodeID(s string, id *[16]byte) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return fmt.Errorf("bad topic id %q", s)
	}
	copy(id[:], b)
	return nil
}
