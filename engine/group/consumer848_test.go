package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// A KIP-848 consumer group's state machine driven request by request, with
// no shard, socket or timer: time and topics are the test's.

// testTopics is the engine's topics as the groups see them.
type testTopics struct {
	version uint64
	topics  map[string]engine.TopicInfo
}

func newTestTopics() *testTopics {
	return &testTopics{version: 1, topics: map[string]engine.TopicInfo{}}
}

func (tt *testTopics) TopicsVersion() uint64 { return tt.version }
func (tt *testTopics) Topic(name string) (engine.TopicInfo, bool) {
	t, ok := tt.topics[name]
	return t, ok
}
func (tt *testTopics) Topics() []engine.TopicInfo { return slices.Collect(maps.Values(tt.topics)) }

// set creates, grows (same id) or deletes (0 partitions) a topic.
func (tt *testTopics) set(name string, partitions int32) [16]byte {
	tt.version++
	if partitions == 0 {
		delete(tt.topics, name)
		return [16]byte{}
	}
	t, ok := tt.topics[name]
	if !ok {
		t = engine.TopicInfo{Name: name, ID: [16]byte{byte(tt.version), 'T'}}
	}
	t.Partitions = partitions
	tt.topics[name] = t
	return t.ID
}

type harness struct {
	t       *testing.T
	cg      *cgroup
	cfg     Config
	topics  *testTopics
	now     time.Time
	written []record
	regexes regexCache
}

func newHarness(t *testing.T) *harness {
	cfg := DefaultConfig()
	cfg.ConsumerSessionTimeout, cfg.ConsumerHeartbeatInterval = 10*time.Second, time.Second
	return &harness{t: t, cg: newCgroup("g"), cfg: cfg, topics: newTestTopics(), now: time.Unix(1_700_000_000, 0)}
}

func (h *harness) env() *cgEnv {
	return &cgEnv{now: h.now, topics: h.topics, cfg: &h.cfg, regexes: &h.regexes}
}

// do sends a heartbeat as the coordinator would (checked, then run) and
// checks the group's invariants after it.
func (h *harness) do(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if e := validateHeartbeat(req, &h.cfg); e != nil {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.ErrorCode, r.ErrorMessage = e.err.Code, &e.msg
		return r
	}
	resp, recs := h.cg.heartbeat(h.env(), Client{ID: "client", Host: "/127.0.0.1"}, req)
	h.written = append(h.written, recs...)
	h.cg.dirty = nil
	checkGroup(h.t, h.cg)
	return resp
}

// checkGroup asserts the invariants of the group's state: every partition
// a member holds is in owners under that member, and no partition is held
// by two members.
func checkGroup(t testing.TB, cg *cgroup) {
	t.Helper()
	holders := map[tpKey]string{}
	for id, m := range cg.members {
		for _, a := range []assignment{m.cur.assigned, m.cur.revoking} {
			for tid, ps := range a {
				for _, p := range ps {
					tp := tpKey{tid, p}
					if o, ok := holders[tp]; ok && o != id {
						t.Fatalf("partition %x/%d held by %s and %s", tid[:2], p, o, id)
					}
					holders[tp] = id
					if cg.owners[tp] != id {
						t.Fatalf("partition %x/%d held by %s, owners say %q", tid[:2], p, id, cg.owners[tp])
					}
				}
			}
		}
	}
	if len(holders) != len(cg.owners) {
		t.Fatalf("owners has %d partitions, members hold %d", len(cg.owners), len(holders))
	}
}

func joinReq(member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", member, 0
	req.RebalanceTimeoutMillis = 5000
	req.SubscribedTopicNames = topics
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

// beat is a heartbeat at epoch reporting owned (nil: a keepalive that
// reports nothing).
func beat(member string, epoch int32, owned assignment) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", member, epoch
	if owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, id := range owned.topicIDs() {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: owned[id]})
		}
	}
	return req
}

func respAssignment(r *kmsg.ConsumerGroupHeartbeatResponse) assignment {
	if r.Assignment == nil {
		return nil
	}
	a := assignment{}
	for _, t := range r.Assignment.Topics {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a
}

func wantErr(t *testing.T, what string, r *kmsg.ConsumerGroupHeartbeatResponse, want *kerr.Error) {
	t.Helper()
	if got := kerr.ErrorForCode(r.ErrorCode); got != want && !(want == nil && got == nil) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// TestConsumerGroupIncremental: a second member joins; the first gives up
// half before the second gets them, and nobody else's partitions move.
func TestConsumerGroupIncremental(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("t", 6)

	a := h.do(joinReq("a", "t"))
	wantErr(t, "join a", a, nil)
	if a.MemberEpoch != 1 || !respAssignment(a).equal(asg(t1, 0, 1, 2, 3, 4, 5)) || *a.MemberID != "a" {
		t.Fatalf("first member: epoch %d, %v", a.MemberEpoch, respAssignment(a))
	}
	if h.cg.state() != "Stable" {
		t.Fatalf("state %s", h.cg.state())
	}

	b := h.do(joinReq("b", "t"))
	// b is at the new epoch with nothing yet: a holds its partitions.
	if b.MemberEpoch != 2 || respAssignment(b).count() != 0 || h.cg.members["b"].cur.state != memberUnreleased {
		t.Fatalf("second member: epoch %d, %v, %s", b.MemberEpoch, respAssignment(b), h.cg.members["b"].cur.state)
	}
	if h.cg.state() != "Reconciling" {
		t.Fatalf("state %s", h.cg.state())
	}
	bTarget := h.cg.target["b"]
	if bTarget.count() != 3 {
		t.Fatalf("b's target: %v", bTarget)
	}

	// a learns what it keeps; it stays at epoch 1 until it revoked.
	r := h.do(beat("a", 1, nil))
	aKeeps := respAssignment(r)
	if r.MemberEpoch != 1 || aKeeps.count() != 3 || h.cg.members["a"].cur.state != memberUnrevoked {
		t.Fatalf("a revoking: epoch %d, %v", r.MemberEpoch, aKeeps)
	}
	// b asks again: still nothing, a has not revoked.
	if r := h.do(beat("b", 2, assignment{})); respAssignment(r) != nil || r.MemberEpoch != 2 {
		t.Fatalf("b before a revoked: %+v", r)
	}
	// a reports it still owns everything: no progress.
	if r := h.do(beat("a", 1, asg(t1, 0, 1, 2, 3, 4, 5))); r.MemberEpoch != 1 {
		t.Fatalf("a moved on without revoking: %d", r.MemberEpoch)
	}
	// a revoked: epoch 2.
	if r := h.do(beat("a", 1, aKeeps)); r.MemberEpoch != 2 || h.cg.members["a"].cur.state != memberStable {
		t.Fatalf("a after revoking: %+v", r)
	}
	// b gets its partitions.
	r = h.do(beat("b", 2, assignment{}))
	if !respAssignment(r).equal(bTarget) || h.cg.members["b"].cur.state != memberStable || h.cg.state() != "Stable" {
		t.Fatalf("b after a revoked: %v", respAssignment(r))
	}

	// a leaves: the group epoch moves; b gets everything at its next
	// heartbeat, at once (the partitions are free).
	// The answer names no next heartbeat (0), as Kafka's.
	if r := h.do(beat("a", leaveEpoch, nil)); r.ErrorCode != 0 || r.MemberEpoch != leaveEpoch || r.HeartbeatIntervalMillis != 0 {
		t.Fatalf("leave: %+v", r)
	}
	if h.cg.epoch != 3 || h.cg.state() != "Assigning" {
		t.Fatalf("after a left: epoch %d, %s", h.cg.epoch, h.cg.state())
	}
	r = h.do(beat("b", 2, bTarget))
	if r.MemberEpoch != 3 || respAssignment(r).count() != 6 {
		t.Fatalf("b alone: %+v %v", r, respAssignment(r))
	}

	// The last member leaves: the group is empty at a new epoch, whose
	// (empty) target assignment is computed at once, as in Kafka.
	h.do(beat("b", leaveEpoch, nil))
	if h.cg.epoch != 4 || h.cg.assignmentEpoch != 4 || h.cg.state() != "Empty" {
		t.Fatalf("after the last left: epoch %d, assignment epoch %d, %s", h.cg.epoch, h.cg.assignmentEpoch, h.cg.state())
	}
}

// TestConsumerGroupHeartbeatErrors: the codes of KIP-848's heartbeat.
func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("t", 4)
	h.cfg.ConsumerMaxSize = 3

	// Malformed requests (INVALID_REQUEST, with Kafka's messages).
	for _, c := range []struct {
		what string
		edit func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"empty group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = " " }, kerr.InvalidRequest},
		{"v1 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = kmsg.StringPtr("") }, kerr.InvalidRequest},
		{"empty rack", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = kmsg.StringPtr("") }, kerr.InvalidRequest},
		{"no rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"negative rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -5 }, kerr.InvalidRequest},
		{"owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: t1, Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"null owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }, kerr.InvalidRequest},
		{"no subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"static leave, unknown member", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = leaveStaticEpoch }, kerr.UnknownMemberID},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = kmsg.StringPtr("sticky") }, kerr.UnsupportedAssignor},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, kmsg.StringPtr("t(")
		}, kerr.InvalidRegularExpression},
	} {
		req := joinReq("x", "t")
		c.edit(req)
		r := h.do(req)
		wantErr(t, c.what, r, c.want)
		if r.ErrorMessage == nil || *r.ErrorMessage == "" {
			t.Errorf("%s: no error message", c.what)
		}
	}
	if len(h.cg.members) != 0 || len(h.written) != 0 {
		t.Fatalf("refused requests changed the group: %d members, %d records", len(h.cg.members), len(h.written))
	}
	// v0 lets the coordinator choose the member id on a join, not after.
	v0 := joinReq("", "t")
	v0.Version = 0
	if e := validateHeartbeat(v0, &h.cfg); e != nil {
		t.Fatalf("v0 join without member id: %v", e.msg)
	}
	v0.MemberEpoch = 1
	if e := validateHeartbeat(v0, &h.cfg); e == nil || e.err != kerr.InvalidRequest {
		t.Fatal("v0 heartbeat without member id accepted")
	}

	a := h.do(joinReq("a", "t"))
	wantErr(t, "a dynamic member leaving for a while", h.do(beat("a", leaveStaticEpoch, nil)), kerr.InvalidRequest)
	wantErr(t, "unknown member", h.do(beat("nobody", 1, nil)), kerr.UnknownMemberID)
	wantErr(t, "leave, unknown member", h.do(beat("nobody", leaveEpoch, nil)), kerr.UnknownMemberID)
	wantErr(t, "epoch from the future", h.do(beat("a", a.MemberEpoch+1, nil)), kerr.FencedMemberEpoch)

	// The previous epoch is accepted from a member that owns no more than
	// its assignment (the answer that moved it on was lost)...
	h.do(joinReq("b", "t"))
	r := h.do(beat("a", 1, nil)) // a keeps 2 and revokes 2
	keeps := respAssignment(r)
	r = h.do(beat("a", 1, keeps))
	if r.MemberEpoch != 2 {
		t.Fatalf("a: %+v", r)
	}
	wantErr(t, "previous epoch, owning its assignment", h.do(beat("a", 1, keeps)), nil)
	// ... but not from one that owns more, nor one that does not say.
	wantErr(t, "previous epoch, owning more", h.do(beat("a", 1, asg(t1, 0, 1, 2, 3))), kerr.FencedMemberEpoch)
	wantErr(t, "previous epoch, keepalive", h.do(beat("a", 1, nil)), kerr.FencedMemberEpoch)

	// group.consumer.max.size: a third member fits, a fourth does not;
	// members already in may always come back.
	wantErr(t, "third member", h.do(joinReq("c", "t")), nil)
	wantErr(t, "fourth member", h.do(joinReq("d", "t")), kerr.GroupMaxSizeReached)
	wantErr(t, "member rejoining a full group", h.do(joinReq("c", "t")), nil)

	// a moves on to epoch 3; epoch 1 is now neither its epoch nor the one
	// before.
	r = h.do(beat("a", 2, nil))
	r = h.do(beat("a", 2, respAssignment(r)))
	if r.MemberEpoch != 3 {
		t.Fatalf("a: %+v", r)
	}
	wantErr(t, "epoch from the past", h.do(beat("a", 1, assignment{})), kerr.FencedMemberEpoch)

	// A fenced member rejoins with its id and epoch 0, owning nothing: it
	// starts over (KIP-848), and what it held is released.
	r = h.do(joinReq("a", "t"))
	if r.ErrorCode != 0 || r.MemberEpoch != h.cg.assignmentEpoch {
		t.Fatalf("rejoin: %+v", r)
	}
}

// TestConsumerGroupStatic: static membership as KIP-848 has it.
func TestConsumerGroupStatic(t *testing.T) {
	h := newHarness(t)
	h.topics.set("t", 4)
	static := func(member, instance string) *kmsg.ConsumerGroupHeartbeatRequest {
		r := joinReq(member, "t")
		r.InstanceID = kmsg.StringPtr(instance)
		return r
	}
	r := h.do(static("s1", "i"))
	h.do(joinReq("d", "t"))
	r = h.do(beat("s1", r.MemberEpoch, nil))
	keeps := respAssignment(r)
	r = h.do(beat("s1", r.MemberEpoch, keeps))
	if respAssignment(r) != nil && !respAssignment(r).equal(keeps) {
		t.Fatalf("s1: %v", respAssignment(r))
	}
	h.do(beat("d", h.cg.members["d"].cur.epoch, assignment{}))
	if h.cg.state() != "Stable" {
		t.Fatalf("state %s", h.cg.state())
	}
	epoch := h.cg.epoch

	// Another instance with the same id while s1 is there: refused.
	wantErr(t, "instance id in use", h.do(static("s2", "i")), kerr.UnreleasedInstanceID)
	// A heartbeat naming the instance with another member id is fenced;
	// one naming an unknown instance is unknown.
	fenced := beat("s2", 1, nil)
	fenced.InstanceID = kmsg.StringPtr("i")
	wantErr(t, "fenced instance", h.do(fenced), kerr.FencedInstanceID)
	unknown := beat("s1", 1, nil)
	unknown.InstanceID = kmsg.StringPtr("j")
	wantErr(t, "unknown instance", h.do(unknown), kerr.UnknownMemberID)

	// s1 leaves for a while (-2): it stays, its partitions are kept for
	// it, the group epoch does not move.
	leave := beat("s1", h.cg.members["s1"].cur.epoch, nil)
	leave.MemberEpoch, leave.InstanceID = leaveStaticEpoch, kmsg.StringPtr("i")
	if r := h.do(leave); r.ErrorCode != 0 || r.MemberEpoch != leaveStaticEpoch {
		t.Fatalf("static leave: %+v", r)
	}
	if h.cg.epoch != epoch || h.cg.members["s1"] == nil {
		t.Fatal("a static member leaving for a while changed the group")
	}
	// d is not given s1's partitions meanwhile.
	if r := h.do(beat("d", h.cg.members["d"].cur.epoch, nil)); respAssignment(r) != nil {
		t.Fatalf("d got %v while s1 was away", respAssignment(r))
	}

	// The new instance takes its place: same partitions at once, no
	// rebalance.
	r = h.do(static("s2", "i"))
	if r.ErrorCode != 0 || !respAssignment(r).equal(keeps) || h.cg.epoch != epoch || h.cg.members["s1"] != nil {
		t.Fatalf("new instance: %+v %v, epoch %d (was %d)", r, respAssignment(r), h.cg.epoch, epoch)
	}
	// The old member id is gone.
	wantErr(t, "old member id", h.do(beat("s1", 1, nil)), kerr.UnknownMemberID)

	// A static member leaving for good (-1) is removed.
	bye := beat("s2", r.MemberEpoch, nil)
	bye.MemberEpoch, bye.InstanceID = leaveEpoch, kmsg.StringPtr("i")
	wantErr(t, "static leave for good", h.do(bye), nil)
	if h.cg.members["s2"] != nil || h.cg.static["i"] != "" || h.cg.epoch != epoch+1 {
		t.Fatal("static member not removed")
	}
}

// TestConsumerGroupTimeouts: a member whose session ends is removed; one
// that does not revoke within its rebalance timeout is fenced.
func TestConsumerGroupTimeouts(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("t", 4)
	h.do(joinReq("a", "t"))
	h.do(joinReq("b", "t")) // a must revoke 2
	r := h.do(beat("a", 1, nil))
	a := h.cg.members["a"]
	if a.cur.state != memberUnrevoked || a.rebalanceAt != h.now.Add(5*time.Second) || a.rebalanceEpoch != 1 {
		t.Fatalf("a: %s, rebalance at %v", a.cur.state, a.rebalanceAt)
	}
	// Not yet.
	h.now = h.now.Add(4 * time.Second)
	if recs := h.cg.rebalanceExpired(h.env(), a); recs != nil {
		t.Fatal("fenced before its rebalance timeout")
	}
	// b heartbeats on: its session moves; a's too (it heartbeats, but
	// does not revoke).
	h.do(beat("b", 2, assignment{}))
	h.do(beat("a", 1, asg(t1, 0, 1, 2, 3)))
	h.now = h.now.Add(1500 * time.Millisecond)
	epoch := h.cg.epoch
	recs := h.cg.rebalanceExpired(h.env(), a)
	if recs == nil || h.cg.members["a"] != nil || h.cg.epoch != epoch+1 {
		t.Fatalf("a not fenced after its rebalance timeout (%d records)", len(recs))
	}
	checkGroup(t, h.cg)
	_ = r

	// b gets everything; then its session ends.
	r = h.do(beat("b", 2, assignment{}))
	if respAssignment(r).count() != 4 {
		t.Fatalf("b: %v", respAssignment(r))
	}
	b := h.cg.members["b"]
	h.now = h.now.Add(9 * time.Second)
	if h.cg.expire(h.env(), b) != nil {
		t.Fatal("expired within its session")
	}
	h.now = h.now.Add(2 * time.Second)
	if h.cg.expire(h.env(), b) == nil || len(h.cg.members) != 0 || h.cg.state() != "Empty" || len(h.cg.owners) != 0 {
		t.Fatal("b's session did not end")
	}
}

// TestConsumerGroupTopicChanges: topics created, grown and deleted change
// the target assignment at the next heartbeat, names and regexes alike.
func TestConsumerGroupTopicChanges(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("orders", 2)
	r := h.do(joinReq("a", "orders", "later"))
	if respAssignment(r).count() != 2 {
		t.Fatalf("%v", respAssignment(r))
	}
	re := joinReq("b")
	re.SubscribedTopicNames, re.SubscribedTopicRegex = nil, kmsg.StringPtr(".*-events")
	rb := h.do(re)
	if rb.ErrorCode != 0 || respAssignment(rb).count() != 0 {
		t.Fatalf("regex member: %+v", rb)
	}
	epoch := h.cg.epoch

	// A heartbeat with no topic change moves nothing.
	h.do(beat("a", h.cg.members["a"].cur.epoch, nil))
	if h.cg.epoch != epoch {
		t.Fatal("epoch moved with no change")
	}
	// "orders" grows: a gets the new partitions.
	h.topics.set("orders", 3)
	r = h.do(beat("a", h.cg.members["a"].cur.epoch, nil))
	if h.cg.epoch != epoch+1 || !respAssignment(r).equal(asg(t1, 0, 1, 2)) {
		t.Fatalf("after growing: epoch %d, %v", h.cg.epoch, respAssignment(r))
	}
	// A topic matching the regex is created: b gets it.
	ev := h.topics.set("click-events", 2)
	h.topics.set("other", 5) // matches nothing
	r = h.do(beat("b", h.cg.members["b"].cur.epoch, assignment{}))
	if !respAssignment(r).equal(asg(ev, 0, 1)) {
		t.Fatalf("regex after creation: %v", respAssignment(r))
	}
	// "later" is created: a, subscribed by name, gets it.
	lt := h.topics.set("later", 1)
	r = h.do(beat("a", h.cg.members["a"].cur.epoch, nil))
	want := asg(t1, 0, 1, 2)
	want.add(lt, 0)
	if !respAssignment(r).equal(want) {
		t.Fatalf("after creating a subscribed topic: %v", respAssignment(r))
	}
	// "orders" is deleted: a must give it up.
	h.topics.set("orders", 0)
	r = h.do(beat("a", h.cg.members["a"].cur.epoch, nil))
	if a := h.cg.members["a"]; a.cur.state != memberUnrevoked || !a.cur.revoking.equal(asg(t1, 0, 1, 2)) {
		t.Fatalf("after deleting: %s %v", a.cur.state, a.cur.revoking)
	}
	h.do(beat("a", h.cg.members["a"].cur.epoch, asg(lt, 0)))
	if a := h.cg.members["a"]; !a.cur.assigned.equal(asg(lt, 0)) || a.cur.state != memberStable || a.cur.epoch != h.cg.epoch {
		t.Fatalf("after revoking the deleted topic: %s %v", a.cur.state, a.cur.assigned)
	}
	if strings.Contains(fmt.Sprint(h.cg.subMeta), "orders") {
		t.Fatalf("subscription metadata keeps a deleted topic: %v", h.cg.subMeta)
	}
}

// TestConsumerGroupAssignorChoice: the group uses the assignor most of its
// members ask for, uniform by default.
func TestConsumerGroupAssignorChoice(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("t", 4)
	if name := h.cg.assignorName(&h.cfg); name != "uniform" {
		t.Fatal(name)
	}
	for _, m := range []string{"b", "a"} {
		req := joinReq(m, "t")
		req.ServerAssignor = kmsg.StringPtr("range")
		h.do(req)
	}
	// Range: a (first by id) gets 0-1 once b... both members' targets.
	if !h.cg.target["a"].equal(asg(t1, 0, 1)) || !h.cg.target["b"].equal(asg(t1, 2, 3)) {
		t.Fatalf("range targets: %v", h.cg.target)
	}
}

// TestConsumerGroupReplay: every record the group wrote, replayed as at a
// broker's start, gives back the same group: epochs, members,
// subscriptions, targets, reconciliation states and partition owners.
func TestConsumerGroupReplay(t *testing.T) {
	h := newHarness(t)
	h.topics.set("t", 5)
	h.topics.set("u", 3)
	static := joinReq("s", "t")
	static.InstanceID, static.RackID = kmsg.StringPtr("inst"), kmsg.StringPtr("rack1")
	h.do(static)
	re := joinReq("r")
	re.SubscribedTopicNames, re.SubscribedTopicRegex = nil, kmsg.StringPtr("[tu]")
	re.ServerAssignor = kmsg.StringPtr("uniform")
	h.do(re)
	h.do(joinReq("gone", "u"))
	h.do(beat("gone", leaveEpoch, nil))
	h.do(beat("s", h.cg.members["s"].cur.epoch, nil)) // s revoking

	st := newLoadState()
	for _, rec := range h.written {
		if err := st.apply(rec.key, rec.value); err != nil {
			t.Fatal(err)
		}
	}
	got := st.consumers["g"].build("g", h.now, &h.cfg, func(m []string) { t.Fatalf("conflict %v", m) })
	want := h.cg
	if got.epoch != want.epoch || got.assignmentEpoch != want.assignmentEpoch || !maps.Equal(got.subMeta, want.subMeta) ||
		!maps.Equal(got.static, want.static) || !maps.Equal(got.owners, want.owners) {
		t.Fatalf("replayed group: epoch %d/%d assignment epoch %d/%d meta %v/%v static %v/%v",
			got.epoch, want.epoch, got.assignmentEpoch, want.assignmentEpoch, got.subMeta, want.subMeta, got.static, want.static)
	}
	if len(got.members) != len(want.members) {
		t.Fatalf("%d members replayed, want %d", len(got.members), len(want.members))
	}
	for id, w := range want.members {
		g := got.members[id]
		if g == nil || !equalMeta(&g.meta, &w.meta) || !g.cur.equal(&w.cur) || !got.target[id].equal(want.target[id]) {
			t.Fatalf("member %s replayed as %+v, want %+v", id, g, w)
		}
	}
	if got.members["s"].rebalanceAt.IsZero() {
		t.Fatal("a member revoking at the restart has no rebalance timeout")
	}

	// Deleting the group leaves nothing after replay.
	for _, id := range slices.Collect(maps.Keys(h.cg.members)) {
		h.cg.removeMember(h.cg.members[id])
		h.written = append(h.written, memberTombstones("g", id)...)
	}
	h.written = append(h.written, h.cg.tombstones()...)
	st = newLoadState()
	for _, rec := range h.written {
		if err := st.apply(rec.key, rec.value); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.consumers) != 0 {
		t.Fatalf("deleted group replayed: %+v", st.consumers)
	}
}

// TestConsumerGroupLostWrite: after a write of the group failed, memory is
// ahead of the log. Members keep their partitions (a member may still be
// consuming them) but are fenced at their next heartbeat, and their
// rejoins write everything again.
func TestConsumerGroupLostWrite(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("t", 2)
	ra := h.do(joinReq("a", "t"))
	rb := h.do(joinReq("b", "t"))
	ra = h.do(beat("a", ra.MemberEpoch, nil))
	ra = h.do(beat("a", 1, respAssignment(ra)))
	h.do(beat("b", rb.MemberEpoch, assignment{}))
	if h.cg.state() != "Stable" {
		t.Fatal(h.cg.state())
	}
	epoch := h.cg.epoch
	h.cg.lostWrite()
	wantErr(t, "heartbeat after a lost write", h.do(beat("a", ra.MemberEpoch, nil)), kerr.FencedMemberEpoch)

	// a rejoins (owning nothing, as a fenced member does); b still holds
	// its partition until it comes back.
	h.written = nil
	r := h.do(joinReq("a", "t"))
	if r.ErrorCode != 0 || h.cg.epoch <= epoch || respAssignment(r).count() != 1 {
		t.Fatalf("rejoin after a lost write: %+v %v", r, respAssignment(r))
	}
	types := map[int16]bool{}
	for _, rec := range h.written {
		k, _ := readConsumerKey(rec.key)
		types[k.typ] = true
	}
	for _, typ := range []int16{consumerGroupMetadataKey, consumerPartitionMetadata, consumerMemberMetadataKey, consumerTargetMetadataKey, consumerTargetMemberKey, consumerCurrentAssignmentKy} {
		if !types[typ] {
			t.Errorf("record type %d not written again after the lost write", typ)
		}
	}
	bHeld := h.cg.members["b"].cur.assigned
	if bHeld.count() != 1 || respAssignment(r).has(t1, bHeld[t1][0]) {
		t.Fatalf("a was given b's partition while b may still consume it: a %v, b %v", respAssignment(r), bHeld)
	}
	r = h.do(joinReq("b", "t"))
	if r.ErrorCode != 0 || respAssignment(r).count() != 1 {
		t.Fatalf("b rejoins: %+v", r)
	}
}
