package group

import (
	"maps"
	"slices"
)

// The parts of a consumer group's state machine that look beyond one
// member: what the group subscribes to, what the subscriptions resolve to
// in the engine's topics, and the target assignment computed from them.

// refreshSubscriptions recomputes the subscribed topics' metadata when a
// subscription changed (*bump set) or the engine's topics changed since
// it was last computed, and bumps the epoch (sets *bump) when it differs
// from what the group last wrote.
func (cg *cgroup) refreshSubscriptions(env *cgEnv, bump *bool) []record {
	version := env.topics.TopicsVersion()
	if !*bump && cg.subKnown && version == cg.subVersion {
		return nil
	}
	meta := map[string]topicMeta{}
	for _, name := range cg.subscribedNames(env, version) {
		if info, ok := env.topics.Topic(name); ok {
			meta[name] = topicMeta{id: info.ID, partitions: info.Partitions}
		}
	}
	cg.subVersion, cg.subKnown = version, true
	if maps.Equal(meta, cg.subMeta) {
		return nil
	}
	cg.subMeta = meta
	*bump = true
	return []record{{key: consumerKey(consumerPartitionMetadata, cg.id), value: partitionMetadataValue(meta)}}
}

// subscribedNames are the topic names any member subscribes to, by name
// or by regular expression, sorted.
func (cg *cgroup) subscribedNames(env *cgEnv, version uint64) []string {
	set := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.meta.topics {
			set[t] = true
		}
		if m.meta.regex != nil {
			for _, t := range cg.resolve(env, version, *m.meta.regex) {
				set[t] = true
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// seenRegex is a regular expression's resolution by a member's heartbeat.
type seenRegex struct {
	names   []string
	version uint64
}

// resolve is the topics a regular expression matches, cached until the
// topics change. With an authorizer they are the topics the member whose
// heartbeat resolved it may DESCRIBE, as in Kafka 4 (KAFKA-18813): a
// member may not learn of a topic it may not see through its assignment.
// That resolution holds for every member subscribing to the regex until
// a heartbeat finds the topics changed, Kafka's own rule; timers (a
// member's session expiring) use the last one rather than match the
// topics with nobody's permission.
func (cg *cgroup) resolve(env *cgEnv, version uint64, re string) []string {
	if env.cfg.Authorizing {
		return cg.resolveAuthorized(env, version, re)
	}
	return cg.match(env, version, re)
}

func (cg *cgroup) resolveAuthorized(env *cgEnv, version uint64, re string) []string {
	s, ok := cg.seen[re]
	if ok && (s.version == version || !env.heartbeat) {
		return s.names
	}
	if !env.heartbeat {
		// Not resolved by a heartbeat since the coordinator loaded the
		// group: no topics until a member's heartbeat resolves it.
		return nil
	}
	var names []string
	for _, t := range cg.match(env, version, re) {
		if env.describable == nil || env.describable(t) {
			names = append(names, t)
		}
	}
	if cg.seen == nil {
		cg.seen = map[string]seenRegex{}
	}
	for old := range cg.seen {
		if !cg.subscribesRegex(old) {
			delete(cg.seen, old)
		}
	}
	cg.seen[re] = seenRegex{names: names, version: version}
	return names
}

// subscribesRegex reports whether a member subscribes to re.
func (cg *cgroup) subscribesRegex(re string) bool {
	for _, m := range cg.members {
		if m.meta.regex != nil && *m.meta.regex == re {
			return true
		}
	}
	return false
}

// match is the topics a regular expression matches, cached until the
// topics change.
func (cg *cgroup) match(env *cgEnv, version uint64, re string) []string {
	if cg.regexVersion != version {
		clear(cg.regexes)
		cg.regexVersion = version
	}
	if names, ok := cg.regexes[re]; ok {
		return names
	}
	var names []string
	if rx, err := env.regexes.compile(re); err == nil {
		for _, t := range env.topics.Topics() {
			if rx.MatchString(t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	cg.regexes[re] = names
	return names
}

// memberTopics are the ids of the existing topics m subscribes to.
func (cg *cgroup) memberTopics(env *cgEnv, m *cmember) [][16]byte {
	var ids [][16]byte
	add := func(name string) {
		if t, ok := cg.subMeta[name]; ok && !slices.Contains(ids, t.id) {
			ids = append(ids, t.id)
		}
	}
	for _, t := range m.meta.topics {
		add(t)
	}
	if m.meta.regex != nil {
		for _, t := range cg.resolve(env, cg.subVersion, *m.meta.regex) {
			add(t)
		}
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return compareTP(tpKey{id: a}, tpKey{id: b}) })
	return ids
}

// subscribedTo reports whether a member subscribes to topic (offsets of
// such topics neither expire nor may be deleted, KIP-496). A regex counts
// with every topic it matches, whoever may see them: protecting offsets
// needs no authorization, and an authorized resolution may not exist yet
// after a restart (resolveAuthorized).
func (cg *cgroup) subscribedTo(env *cgEnv, topic string) bool {
	for _, m := range cg.members {
		if slices.Contains(m.meta.topics, topic) {
			return true
		}
		if m.meta.regex != nil && slices.Contains(cg.match(env, env.topics.TopicsVersion(), *m.meta.regex), topic) {
			return true
		}
	}
	return false
}

// assignorName is the assignor the group uses: the one most members ask
// for (ties to the name first in order), else the configured default.
func (cg *cgroup) assignorName(cfg *Config) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.meta.assignor != nil {
			votes[*m.meta.assignor]++
		}
	}
	best, n := "", 0
	for name, v := range votes {
		if v > n || (v == n && name < best) {
			best, n = name, v
		}
	}
	if best == "" || assignorFor(best) == nil {
		return cfg.ConsumerAssignors[0]
	}
	return best
}

// computeTarget computes the target assignment at the group epoch and
// returns the records of what changed (the members whose target moved,
// then the assignment epoch).
func (cg *cgroup) computeTarget(env *cgEnv) []record {
	topics := make(map[[16]byte]int32, len(cg.subMeta))
	for _, t := range cg.subMeta {
		topics[t.id] = t.partitions
	}
	ids := slices.Sorted(maps.Keys(cg.members))
	in := make([]assignMember, 0, len(ids))
	for _, id := range ids {
		m := cg.members[id]
		in = append(in, assignMember{id: id, instanceID: m.meta.instanceID, topics: cg.memberTopics(env, m), current: cg.target[id]})
	}
	out := assignorFor(cg.assignorName(env.cfg))(in, topics)
	var recs []record
	for _, id := range ids {
		a := out[id]
		if a == nil {
			a = assignment{}
		}
		if old, ok := cg.target[id]; ok && old.equal(a) {
			continue
		}
		cg.target[id] = a
		recs = append(recs, record{key: consumerMemberKey(consumerTargetMemberKey, cg.id, id), value: targetMemberValue(a)})
	}
	cg.assignmentEpoch = cg.epoch
	return append(recs, record{key: consumerKey(consumerTargetMetadataKey, cg.id), value: int32Value(cg.assignmentEpoch)})
}

// tombstones are the records that delete the group (its members must be
// gone): the target assignment epoch, the subscription metadata and the
// group epoch, last, as Kafka orders them.
func (cg *cgroup) tombstones() []record {
	var recs []record
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		recs = append(recs, memberTombstones(cg.id, id)...)
	}
	return append(recs,
		record{key: consumerKey(consumerTargetMetadataKey, cg.id)},
		record{key: consumerKey(consumerPartitionMetadata, cg.id)},
		record{key: consumerKey(consumerGroupMetadataKey, cg.id)})
}
