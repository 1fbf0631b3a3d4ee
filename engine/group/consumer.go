package group

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// KIP-848 consumer groups ("The Next Generation of the Consumer Rebalance
// Protocol"): members heartbeat with ConsumerGroupHeartbeat, the
// coordinator assigns the partitions itself and hands each member its
// part incrementally. This file is the group's state machine; it is pure
// (time and topics come in through cgEnv, records and the answer go out),
// so that tests can drive it step by step. consumer_coord.go runs it on
// the shards, with timers and writes.
//
// Three epochs order everything ("Group Epoch", "Assignment Epoch",
// "Member Epoch" in the KIP):
//   - the group epoch moves when what the assignment depends on changes: a
//     member joins or leaves, a subscription changes, a subscribed topic
//     is created, deleted or grows;
//   - the assignment epoch is the group epoch the target assignment was
//     computed at; when the group epoch passes it, the next heartbeat
//     computes a new target;
//   - a member's epoch is where its own reconciliation stands: it reaches
//     the assignment epoch once it revoked what the target takes from it.

const (
	// leaveEpoch and leaveStaticEpoch are the member epochs of a leave
	// request (-1), and of a static member leaving for a while (-2).
	leaveEpoch       = -1
	leaveStaticEpoch = -2
)

// cgEnv is what the state machine needs from outside: the time, the
// engine's topics, the configuration.
type cgEnv struct {
	now    time.Time
	topics topicSource
	cfg    *Config
	// regexes compiles subscribed regular expressions, once each; the
	// heartbeat's path filled it before the shard runs (regex.go).
	regexes *regexCache
	// heartbeat is set on a member's heartbeat, whose principal may
	// DESCRIBE the topics describable says (nil: everything, no
	// authorizer). Timers and offset expiry run without one.
	heartbeat   bool
	describable func(topic string) bool
}

// topicSource is the part of *engine.Core the groups read topics from.
type topicSource interface {
	TopicsVersion() uint64
	Topic(name string) (engine.TopicInfo, bool)
	Topics() []engine.TopicInfo
}

// cmember is a member of a consumer group.
type cmember struct {
	id   string
	meta memberMetadata    // its subscription (ConsumerGroupMemberMetadata)
	cur  currentAssignment // its reconciliation (ConsumerGroupCurrentMemberAssignment)

	// sessionAt is when the member is removed unless it heartbeats;
	// rebalanceAt (zero: none) when it is fenced unless it revoked what it
	// must revoke at epoch rebalanceEpoch.
	sessionAt      time.Time
	rebalanceAt    time.Time
	rebalanceEpoch int32

	// lost is set when a write of the group failed (lostWrite): the log
	// may not have what memory says of the member, which must join again.
	lost bool

	// The timers' state, kept by consumer_coord.go.
	sessTimer, rebTimer     *time.Timer
	sessTimerAt, rebTimerAt time.Time
	sessSeq, rebSeq         uint64
}

func (m *cmember) rebalanceTimeout() time.Duration {
	return time.Duration(max(m.meta.rebalanceTimeoutMs, 0)) * time.Millisecond
}

// cgroup is a consumer group's state. It lives in the group of its id
// (group.consumer), which also holds the committed offsets.
type cgroup struct {
	id              string
	epoch           int32 // the group epoch
	assignmentEpoch int32 // the target assignment epoch
	members         map[string]*cmember
	static          map[string]string // instance id -> member id
	target          map[string]assignment

	// owners maps every partition some member holds (assigned, or pending
	// its revocation) to that member: a partition is given to a member
	// only once it has no owner (Kafka's partition epochs).
	owners map[tpKey]string

	// subMeta are the subscribed topics as last written
	// (ConsumerGroupPartitionMetadata), computed at topics version
	// subVersion; subKnown is false until computed once after a load.
	subMeta    map[string]topicMeta
	subVersion uint64
	subKnown   bool

	// regexes caches what each subscribed regular expression matches, at
	// topics version regexVersion.
	regexes      map[string][]string
	regexVersion uint64
	// seen is, with an authorizer (Config.Authorizing), what each regular
	// expression resolved to on the last heartbeat that resolved it,
	// filtered by that member's DESCRIBE permission, at topics version
	// version; timers use it as it is, however old.
	seen map[string]seenRegex

	// dirty are the members whose timers must be looked at after an
	// operation (consumer_coord.go drains it).
	dirty []*cmember
}

func newCgroup(id string) *cgroup {
	return &cgroup{id: id, members: map[string]*cmember{}, static: map[string]string{},
		target: map[string]assignment{}, owners: map[tpKey]string{}, subMeta: map[string]topicMeta{},
		regexes: map[string][]string{}}
}

// state is the group's state as DescribeGroups, ListGroups and
// ConsumerGroupDescribe name it.
func (cg *cgroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if !m.cur.reconciledTo(cg.assignmentEpoch) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// hbError is a refused heartbeat: its code and message.
type hbError struct {
	err *kerr.Error
	msg string
}

func refuse(err *kerr.Error, format string, args ...any) *hbError {
	return &hbError{err: err, msg: fmt.Sprintf(format, args...)}
}

// validateHeartbeat checks a ConsumerGroupHeartbeat request on its own,
// as Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid does (the
// messages are Kafka's).
func validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, cfg *Config) *hbError {
	blank := func(s *string) bool { return s != nil && isBlank(*s) }
	if isBlank(req.Group) {
		return refuse(kerr.InvalidRequest, "GroupId can't be empty.")
	}
	// v1 (KIP-1082) has the client choose its member id; v0 has the
	// coordinator choose it on the first heartbeat.
	if (req.Version >= 1 || req.MemberEpoch != 0) && isBlank(req.MemberID) {
		return refuse(kerr.InvalidRequest, "MemberId can't be empty.")
	}
	if blank(req.InstanceID) {
		return refuse(kerr.InvalidRequest, "InstanceId can't be empty.")
	}
	if blank(req.RackID) {
		return refuse(kerr.InvalidRequest, "RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == 0:
		if req.RebalanceTimeoutMillis == -1 {
			return refuse(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return refuse(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		}
		names := len(req.SubscribedTopicNames) > 0
		regex := req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != ""
		if !names && !regex {
			return refuse(kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case req.MemberEpoch < leaveStaticEpoch:
		return refuse(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	// Kafka takes any rebalance timeout; a negative one (other than "no
	// change") would fence every member the moment it has to revoke.
	if req.RebalanceTimeoutMillis < -1 {
		return refuse(kerr.InvalidRequest, "RebalanceTimeoutMs is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(cfg.ConsumerAssignors, *req.ServerAssignor) {
		return refuse(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %v.", *req.ServerAssignor, cfg.ConsumerAssignors)
	}
	size := 0
	for _, t := range req.SubscribedTopicNames {
		size += len(t)
	}
	if req.SubscribedTopicRegex != nil {
		if n := len(*req.SubscribedTopicRegex); n > RegexMaxBytes {
			// Kafka cannot decode such a request at all (regex.go).
			return refuse(kerr.InvalidRequest, "SubscribedTopicRegex of %d bytes is above the limit of %d.", n, RegexMaxBytes)
		}
		size += len(*req.SubscribedTopicRegex)
	}
	if size > cfg.MemberMetadataMaxBytes {
		// The classic path answers oversized metadata the same way.
		return refuse(kerr.MessageTooLarge, "The subscription of %d bytes is above the limit of %d.", size, cfg.MemberMetadataMaxBytes)
	}
	return nil
}

// isBlank is Kafka's "empty" for these fields: nothing but whitespace.
func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' && r != '\f' && r != '\v' {
			return false
		}
	}
	return true
}

// ownedFrom is the owned partitions a heartbeat reports (nil: not
// reported).
func ownedFrom(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) assignment {
	if ts == nil {
		return nil
	}
	a := assignment{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a
}

// heartbeat runs a ConsumerGroupHeartbeat of a member (epoch 0 to join,
// above to heartbeat, -1 or -2 to leave) against the group, and returns
// the answer and the records to write before it is sent. A refused
// request changes nothing and writes nothing.
func (cg *cgroup) heartbeat(env *cgEnv, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, []record) {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.HeartbeatIntervalMillis = int32(env.cfg.ConsumerHeartbeatInterval / time.Millisecond)
	var recs []record
	var e *hbError
	if req.MemberEpoch < 0 {
		recs, e = cg.leave(env, req)
		if e == nil {
			id := req.MemberID
			resp.MemberID, resp.MemberEpoch = &id, req.MemberEpoch
			// A member that left has no next heartbeat: Kafka answers 0.
			resp.HeartbeatIntervalMillis = 0
		}
	} else {
		recs, e = cg.memberHeartbeat(env, cl, req, resp)
	}
	if e != nil {
		resp = kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.ErrorCode = e.err.Code
		msg := e.msg
		resp.ErrorMessage = &msg
		return resp, nil
	}
	return resp, recs
}

func (cg *cgroup) memberHeartbeat(env *cgEnv, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) ([]record, *hbError) {
	owned := ownedFrom(req.Topics)

	// 1. Who is it? Nothing changes until every check passed.
	var m, replaced *cmember
	rejoin := false
	if req.MemberEpoch == 0 {
		if req.InstanceID != nil {
			if oldID, ok := cg.static[*req.InstanceID]; ok {
				old := cg.members[oldID]
				switch {
				case oldID == req.MemberID:
					m, rejoin = old, true
				case old.cur.epoch != leaveStaticEpoch:
					// KIP-848, static membership: a new instance may take
					// the place of one that left with epoch -2 only.
					return nil, refuse(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.",
						req.MemberID, *req.InstanceID, oldID)
				default:
					replaced = old
				}
			}
		}
		if m == nil && replaced == nil {
			if x := cg.members[req.MemberID]; x != nil {
				m, rejoin = x, true
			}
		}
		if m == nil && replaced == nil && len(cg.members) >= env.cfg.ConsumerMaxSize {
			return nil, refuse(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", env.cfg.ConsumerMaxSize)
		}
	} else {
		if req.InstanceID != nil {
			id, ok := cg.static[*req.InstanceID]
			if !ok {
				return nil, refuse(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
			}
			if id != req.MemberID {
				return nil, refuse(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, id)
			}
		}
		if m = cg.members[req.MemberID]; m == nil {
			return nil, refuse(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, cg.id)
		}
		if m.lost {
			return nil, refuse(kerr.FencedMemberEpoch, "The state of member %s could not be written. The member must abandon all its partitions and rejoin.", m.id)
		}
		if e := checkMemberEpoch(m, req.MemberEpoch, owned); e != nil {
			return nil, e
		}
		if m.cur.state == memberUnknown && (owned == nil || len(owned) > 0) {
			return nil, refuse(kerr.FencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
		}
	}

	// 2. The member's subscription after this request.
	var meta memberMetadata
	switch {
	case m != nil:
		meta = m.meta
	case replaced != nil:
		meta = replaced.meta
	}
	meta.clientID, meta.clientHost = cl.ID, cl.Host
	if req.InstanceID != nil {
		meta.instanceID = copyStr(req.InstanceID)
	}
	if req.RackID != nil {
		meta.rackID = copyStr(req.RackID)
	}
	if req.RebalanceTimeoutMillis != -1 {
		meta.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		meta.assignor = copyStr(req.ServerAssignor)
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		meta.topics = slices.Compact(names)
	}
	if req.SubscribedTopicRegex != nil {
		re := *req.SubscribedTopicRegex
		if re == "" {
			meta.regex = nil
		} else {
			meta.regex = &re
		}
	}
	var prev *memberMetadata
	switch {
	case m != nil:
		prev = &m.meta
	case replaced != nil:
		prev = &replaced.meta
	}
	subChanged := prev == nil || !slices.Equal(prev.topics, meta.topics) || !equalPtr(prev.regex, meta.regex)
	if meta.regex != nil && (prev == nil || !equalPtr(prev.regex, meta.regex)) {
		if _, err := env.regexes.compile(*meta.regex); err != nil {
			return nil, refuse(kerr.InvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *meta.regex, err)
		}
	}

	// 3. From here on the request is accepted.
	var recs []record
	var before assignment
	switch {
	case replaced != nil:
		// The new instance takes the old one's place: its subscription,
		// its target assignment and the partitions it holds, under the new
		// member id, at epoch 0 (KIP-848, "Static Membership"). The
		// partitions were kept for it while it was away, so it gets them
		// back at once and the group does not rebalance.
		m = &cmember{id: req.MemberID, cur: currentAssignment{state: replaced.cur.state,
			assigned: replaced.cur.assigned.clone(), revoking: assignment{}, since: maps.Clone(replaced.cur.since)}}
		target := cg.target[replaced.id]
		recs = append(recs, cg.removeMember(replaced)...)
		cg.target[m.id] = target
		recs = append(recs, record{key: consumerMemberKey(consumerTargetMemberKey, cg.id, m.id), value: targetMemberValue(target)})
		cg.addMember(m)
		cg.setCurrent(m, &m.cur)
	case m == nil:
		m = &cmember{id: req.MemberID, cur: currentAssignment{assigned: assignment{}, revoking: assignment{}}}
		cg.addMember(m)
		before = assignment{}
	case rejoin:
		// A known member joining again (after FENCED_MEMBER_EPOCH, or
		// when the answer to its join was lost) has given up all its
		// partitions: a join carries no owned partitions. It starts over
		// at epoch 0; what it held is released. Kafka fences such a join
		// unless it repeats a lost first join; the KIP's rule that a
		// fenced member rejoins with the same id and epoch 0 is what this
		// implements, and it cannot give a partition to two members since
		// the member declared it owns none.
		before = m.cur.assigned
		cg.setCurrent(m, &currentAssignment{assigned: assignment{}, revoking: assignment{}})
	}
	if before == nil {
		before = m.cur.assigned
	}
	if req.InstanceID != nil {
		if m.meta.instanceID != nil && *m.meta.instanceID != *req.InstanceID && cg.static[*m.meta.instanceID] == m.id {
			delete(cg.static, *m.meta.instanceID)
		}
		cg.static[*req.InstanceID] = m.id
	}
	if !equalMeta(&m.meta, &meta) || replaced != nil || prev == nil || m.lost {
		// A member coming back after a failed write has its subscription
		// written again, whatever the log kept.
		m.lost = false
		m.meta = meta
		recs = append(recs, record{key: consumerMemberKey(consumerMemberMetadataKey, cg.id, m.id), value: memberMetadataValue(&meta)})
	}
	oldCur := m.cur
	if rejoin || replaced != nil || prev == nil {
		// A member that (re)starts has its reconciliation written whatever
		// it comes to: no record of it may be left from before.
		oldCur = currentAssignment{epoch: leaveStaticEpoch - 1}
	}

	// 4. The group epoch: bumped when the subscriptions or the subscribed
	// topics changed (the topics are looked at again whenever the engine's
	// topics changed since last time, which is how a topic created,
	// deleted or grown reaches the assignment).
	bump := cg.epoch == 0 || subChanged
	recs = append(recs, cg.refreshSubscriptions(env, &bump)...)
	if bump {
		cg.epoch++
		recs = append(recs, record{key: consumerKey(consumerGroupMetadataKey, cg.id), value: int32Value(cg.epoch)})
	}

	// 5. A new target assignment when the group epoch moved past it.
	if cg.epoch > cg.assignmentEpoch {
		recs = append(recs, cg.computeTarget(env)...)
	}

	// 6. One step of the member's reconciliation.
	if !m.cur.reconciledTo(cg.assignmentEpoch) {
		rc := &reconciler{targetEpoch: cg.assignmentEpoch, target: cg.target[m.id], owned: owned,
			heldByOther: func(id [16]byte, p int32) bool {
				o, ok := cg.owners[tpKey{id, p}]
				return ok && o != m.id
			}}
		next, _ := rc.next(&m.cur)
		if !next.equal(&m.cur) {
			cg.setCurrent(m, next)
		}
	}
	if !m.cur.equal(&oldCur) {
		recs = append(recs, record{key: consumerMemberKey(consumerCurrentAssignmentKy, cg.id, m.id), value: currentAssignmentValue(&m.cur)})
		// The rebalance timeout runs from the member's last change while
		// it has partitions to revoke (Kafka reschedules it then too).
		if m.cur.state == memberUnrevoked {
			m.rebalanceAt, m.rebalanceEpoch = env.now.Add(m.rebalanceTimeout()), m.cur.epoch
		} else {
			m.rebalanceAt = time.Time{}
		}
	}
	m.sessionAt = env.now.Add(env.cfg.ConsumerSessionTimeout)
	cg.dirty = append(cg.dirty, m)

	id := m.id
	resp.MemberID, resp.MemberEpoch = &id, m.cur.epoch
	// The assignment goes in the answer to a full request (a join, or a
	// member resending everything after an error) and whenever it changed.
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMillis != -1 &&
		(req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !before.equal(m.cur.assigned) {
		resp.Assignment = responseAssignment(m.cur.assigned)
	}
	return recs, nil
}

// checkMemberEpoch fences a heartbeat whose epoch is not the member's
// (FENCED_MEMBER_EPOCH: the member must give up its partitions and
// rejoin), except the epoch before it from a member that owns nothing
// beyond its assignment: the answer that moved it on may have been lost.
func checkMemberEpoch(m *cmember, epoch int32, owned assignment) *hbError {
	switch {
	case epoch > m.cur.epoch:
		return refuse(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.cur.epoch)
	case epoch < m.cur.epoch:
		if epoch != m.cur.prevEpoch || !subsetOf(owned, m.cur.assigned) {
			return refuse(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.cur.epoch)
		}
	}
	return nil
}

func subsetOf(owned, of assignment) bool {
	if owned == nil {
		return false
	}
	for id, ps := range owned {
		for _, p := range ps {
			if !of.has(id, p) {
				return false
			}
		}
	}
	return true
}

func responseAssignment(a assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	ra := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	ra.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(a))
	for _, id := range a.topicIDs() {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = id, slices.Clone(a[id])
		ra.Topics = append(ra.Topics, t)
	}
	return &ra
}
