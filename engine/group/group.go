package group

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// groupState is a classic group's state, as Kafka names them (DescribeGroups
// and ListGroups show the names).
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s groupState) String() string { return stateNames[s] }

// newMemberJoinTimeout is how long a new member's first JoinGroup may stay
// parked (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs): a client that
// gave up on a long rebalance and retried would otherwise leave defunct
// members behind until the rebalance timeout.
const newMemberJoinTimeout = 5 * time.Minute

// memberOverhead is what a member costs besides its metadata, counted in
// the group's GroupMetadataMaxBytes budget.
const memberOverhead = 512

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a classic group. A static member replaced by a
// new instance (KIP-345) becomes a new member value with the old one's
// assignment, so that the old value's timers and parked requests are
// recognisably stale.
type member struct {
	id                               string
	instanceID                       *string
	clientID, clientHost             string
	protocolType                     string
	protocols                        []protocol
	rebalanceTimeout, sessionTimeout time.Duration
	assignment                       []byte
	// isNew is set until the member's first JoinGroup completes; a new
	// member's parked join does not protect it from expiry.
	isNew bool

	// Parked requests, answered when the rebalance moves on.
	joinReply func(*kmsg.JoinGroupResponse)
	syncReply func(*kmsg.SyncGroupResponse)

	// Session expiry: deadline moves with every heartbeat; one timer is
	// armed at a time, for timerAt, and re-armed when it fires early.
	deadline time.Time
	timer    *time.Timer
	timerAt  time.Time
	timerSeq uint64
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// size is what m counts against the group's metadata budget.
func (m *member) size() int {
	n := memberOverhead + len(m.assignment)
	for _, p := range m.protocols {
		n += len(p.name) + len(p.metadata)
	}
	return n
}

// matches reports whether m joined with exactly these protocols (a
// follower rejoining with the same metadata needs no rebalance).
func (m *member) matches(protocols []protocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i := range protocols {
		if protocols[i].name != m.protocols[i].name || !bytes.Equal(protocols[i].metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// group is a classic consumer group (or a "simple" group that only commits
// offsets, with no protocol type). Owned by its partition's shard.
type group struct {
	p            *partition
	id           string
	state        groupState
	stateMs      int64 // when the state last changed (KIP-211's currentStateTimestamp)
	protocolType string
	protocol     *string // the protocol of the current generation
	generation   int32
	leader       string

	members []*member // in join order: leader elections pick the oldest
	byID    map[string]*member
	static  map[string]string // group.instance.id -> member id (KIP-345)
	// pending are members given an id with MEMBER_ID_REQUIRED (KIP-394)
	// that have not joined with it yet.
	pending map[string]*time.Timer
	// pendingSync are the members of the generation that have not sent
	// SyncGroup yet; the rebalance timeout removes them.
	pendingSync map[string]bool

	// newMemberAdded extends the initial rebalance delay while members
	// keep arriving (Kafka's InitialDelayedJoin); initialDelay is set
	// while that delay runs, during which the join never completes early.
	newMemberAdded bool
	initialDelay   bool
	joinTimer      *time.Timer
	joinSeq        uint64
	syncTimer      *time.Timer
	syncSeq        uint64

	// subscribed are the topics the members of a "consumer" group
	// subscribe to, from their protocol metadata; nil when unknown. It
	// decides which offsets of a stable group may expire (KIP-496).
	subscribed map[string]bool

	offsets        map[engine.TP]committed
	pendingCommits map[engine.TP]int // commits being written, per partition (and transactional ones pending)
	// txnPending are the transactional offsets not settled yet, by
	// producer id (txn_offsets.go).
	txnPending map[int64]*txnPending

	// consumer is set when the group is a KIP-848 consumer group (type
	// "consumer", consumer.go): its members, epochs and assignments live
	// there, and the classic fields above stay as an empty group's.
	consumer *cgroup
}

func (p *partition) newGroup(id string) *group {
	g := &group{p: p, id: id, generation: 0, stateMs: time.Now().UnixMilli(),
		byID: map[string]*member{}, static: map[string]string{}, pending: map[string]*time.Timer{},
		offsets: map[engine.TP]committed{}, pendingCommits: map[engine.TP]int{}}
	p.groups[id] = g
	return g
}

// live reports whether g is still the group of its name on a serving
// partition: a deleted group's callbacks and timers must do nothing.
func (g *group) live() bool {
	return g.state != stateDead && g.p.state == partLoaded && g.p.groups[g.id] == g
}

func (g *group) transition(s groupState) {
	g.state = s
	g.stateMs = time.Now().UnixMilli()
}

// forgetIfUnused drops a group that a refused request created: Kafka
// keeps such an empty group until the next expiry run; dropping it at
// once keeps ListGroups free of groups that never existed.
func (g *group) forgetIfUnused() {
	if g.consumer == nil && g.state == stateEmpty && g.generation == 0 && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && len(g.pendingCommits) == 0 && g.p.groups[g.id] == g {
		g.state = stateDead
		delete(g.p.groups, g.id)
	}
}

func (g *group) isLeader(id string) bool { return id != "" && g.leader == id }

func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members = append(g.members, m)
	g.byID[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// remove takes m out of the group, with its timers; a new leader is the
// oldest member left (Kafka takes any).
func (g *group) remove(m *member) {
	if g.byID[m.id] != m {
		return
	}
	delete(g.byID, m.id)
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, m.id)
	g.stopMemberTimer(m)
	if g.leader == m.id {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.members[0].id
		}
	}
}

// replace puts a new instance of a static member in old's place (KIP-345):
// same assignment and position, a new member id; old's parked requests are
// fenced.
func (g *group) replace(old *member, newID string) *member {
	m := &member{id: newID, instanceID: old.instanceID, clientID: old.clientID, clientHost: old.clientHost,
		protocolType: old.protocolType, protocols: old.protocols, rebalanceTimeout: old.rebalanceTimeout,
		sessionTimeout: old.sessionTimeout, assignment: old.assignment, isNew: old.isNew}
	if old.joinReply != nil {
		reply := old.joinReply
		old.joinReply = nil
		reply(joinError(old.id, kerr.FencedInstanceID.Code))
	}
	if old.syncReply != nil {
		reply := old.syncReply
		old.syncReply = nil
		reply(syncError(kerr.FencedInstanceID.Code))
	}
	g.stopMemberTimer(old)
	for i, x := range g.members {
		if x == old {
			g.members[i] = m
		}
	}
	delete(g.byID, old.id)
	g.byID[m.id] = m
	g.static[*m.instanceID] = m.id
	if g.leader == old.id {
		g.leader = m.id
	}
	if g.pendingSync[old.id] {
		delete(g.pendingSync, old.id)
		g.pendingSync[m.id] = true
	}
	return m
}

// allJoined: every member has a JoinGroup parked and no member id handed
// out is still expected (Kafka's hasAllMembersJoined).
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinReply == nil {
			return false
		}
	}
	return true
}

func (g *group) joinedCount() int {
	n := 0
	for _, m := range g.members {
		if m.joinReply != nil {
			n++
		}
	}
	return n
}

// rebalanceTimeout is the longest rebalance timeout of the members: the
// rebalance waits that long for everyone to rejoin.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supports reports whether a member with these protocols may join: an
// empty group takes any non-empty protocol type and list; otherwise the
// type must be the group's and one protocol must be supported by every
// member already there.
func (g *group) supports(protocolType string, protocols []protocol) bool {
	if g.state == stateEmpty && len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supportedByAll(p.name) {
			return true
		}
	}
	return false
}

func (g *group) supportedByAll(name string) bool {
	for _, m := range g.members {
		if !hasProtocol(m.protocols, name) {
			return false
		}
	}
	return true
}

func hasProtocol(ps []protocol, name string) bool {
	for _, p := range ps {
		if p.name == name {
			return true
		}
	}
	return false
}

// selectProtocol picks the generation's protocol as Kafka does: among the
// protocols every member supports, each member votes for the first in its
// own order of preference, and the most votes win (ties go to the
// leader's preference, where Kafka's pick is arbitrary).
func (g *group) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supportedByAll(p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	order := g.members[0].protocols
	if l := g.byID[g.leader]; l != nil {
		order = l.protocols
	}
	for _, p := range order {
		if v, ok := votes[p.name]; ok && v > bestVotes {
			best, bestVotes = p.name, v
		}
	}
	return best
}

// electJoinedLeader makes sure the leader is a member that rejoined: when
// the leader did not, any member that did takes over. False when nobody
// rejoined.
func (g *group) electJoinedLeader() bool {
	if l := g.byID[g.leader]; l != nil && l.joinReply != nil {
		return true
	}
	for _, m := range g.members {
		if m.joinReply != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// checkMember validates a request's member id and group.instance.id
// (Kafka's validateCurrentMember): an instance id mapped to another member
// id is a fenced zombie (FENCED_INSTANCE_ID, KIP-345); an unknown instance
// id or member id is UNKNOWN_MEMBER_ID.
func (g *group) checkMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case cur != memberID:
			return kerr.FencedInstanceID.Code
		}
	}
	if g.byID[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// metadataBytes is what the group's members hold, for the budget; member
// ids handed out and not used yet count too, or a flood of v4 joins that
// never come back would grow the group without bound for their session.
func (g *group) metadataBytes() int {
	n := len(g.pending) * memberOverhead
	for _, m := range g.members {
		n += m.size()
	}
	return n
}

// computeSubscribed reads the consumer protocol's subscriptions (KIP-429
// metadata, any version) of the generation's protocol; any member whose
// metadata does not parse makes the set unknown, as in Kafka.
func (g *group) computeSubscribed() {
	g.subscribed = nil
	if g.protocolType != "consumer" || g.protocol == nil {
		return
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(*g.protocol)); err != nil {
			return
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	g.subscribed = topics
}

// subscribedTo reports whether the group consumes topic; when the
// subscriptions are unknown it assumes so, which keeps offsets.
func (g *group) subscribedTo(topic string) bool {
	if g.subscribed == nil {
		return true
	}
	return g.subscribed[topic]
}

// newMemberID is Kafka's form: the client id (or the group.instance.id of
// a static member) and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return prefix + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// touch expects the member's next heartbeat within d (Kafka's
// completeAndScheduleNextHeartbeatExpiration).
func (g *group) touch(m *member, d time.Duration) {
	at := time.Now().Add(d)
	m.deadline = at
	if m.timer != nil && !m.timerAt.After(at) {
		// The armed timer fires first and re-arms for the new deadline.
		return
	}
	g.armMemberTimer(m, d)
}

func (g *group) armMemberTimer(m *member, d time.Duration) {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.timerSeq++
	seq := m.timerSeq
	m.timerAt = time.Now().Add(d)
	m.timer = g.p.after(d, func() { g.memberTimerFired(m, seq) })
}

func (g *group) stopMemberTimer(m *member) {
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	m.timerSeq++
}

// memberTimerFired expires a member whose session ended (Kafka's
// onExpireHeartbeat): unless a heartbeat moved the deadline, or the member
// waits in a rebalance (then the rebalance timeout governs it; a new
// member is not protected by its parked join).
func (g *group) memberTimerFired(m *member, seq uint64) {
	if m.timerSeq != seq || !g.live() || g.byID[m.id] != m {
		return
	}
	m.timer = nil
	if now := time.Now(); now.Before(m.deadline) {
		g.armMemberTimer(m, m.deadline.Sub(now))
		return
	}
	if !m.isNew && (m.joinReply != nil || m.syncReply != nil) {
		return
	}
	g.p.c.log.Debug("group member session expired", "group", g.id, "member", m.id, "generation", g.generation)
	g.removeMemberAndUpdate(m)
}

// removeMemberAndUpdate takes m out (left, expired or fenced) and moves the
// rebalance on: a stable group rebalances, a rebalancing one may now have
// everyone it waits for. m's parked requests are answered
// UNKNOWN_MEMBER_ID: the member is gone (Kafka answers the join and lets
// a parked sync time out; answering it too keeps no request hanging).
func (g *group) removeMemberAndUpdate(m *member) {
	if m.joinReply != nil {
		reply := m.joinReply
		m.joinReply = nil
		reply(joinError(m.id, kerr.UnknownMemberID.Code))
	}
	if m.syncReply != nil {
		reply := m.syncReply
		m.syncReply = nil
		reply(syncError(kerr.UnknownMemberID.Code))
	}
	g.remove(m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance()
	case statePreparingRebalance:
		g.tryCompleteJoin()
	}
}

// shutdown answers parked requests NOT_COORDINATOR and stops every timer
// (the coordinator is closing).
func (g *group) shutdown() {
	for _, m := range g.members {
		if m.joinReply != nil {
			reply := m.joinReply
			m.joinReply = nil
			reply(joinError(m.id, kerr.NotCoordinator.Code))
		}
		if m.syncReply != nil {
			reply := m.syncReply
			m.syncReply = nil
			reply(syncError(kerr.NotCoordinator.Code))
		}
		g.stopMemberTimer(m)
	}
	g.stopTimers()
	if g.consumer != nil {
		g.consumer.stopTimers()
	}
	g.state = stateDead
}

func (g *group) stopTimers() {
	for id, t := range g.pending {
		t.Stop()
		delete(g.pending, id)
	}
	g.joinSeq++
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.syncSeq++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
}

func joinError(memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode, r.MemberID, r.Generation = code, memberID, -1
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}
