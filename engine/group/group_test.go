package group

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/ioring"
	"ringlog/segment/batch"
)

// The coordinator over a real engine (files, shards, io_uring where the
// machine has it), driven through its API without a network.

// openCoordinator opens an engine without a replication layer in dir, so
// that every partition leads itself alone in its ISR, and runs a
// coordinator on it as the broker does: it starts with the partition count
// of __consumer_offsets when the topic exists; otherwise the topic is
// created with the coordinator's partitions and configs, as the controller
// creates it at the first FindCoordinator (engine.CreateTopicWithID is how
// a broker applies it; the replication factor, capped by the live brokers,
// is 1); and it is elected for every partition at the leader epoch the
// engine reports, as replication/node reports a leadership. It does not
// wait for the replays (waitLoaded). Both close when the test ends.
func openCoordinator(t *testing.T, dir string, cfg Config) (*engine.Core, *Coordinator) {
	t.Helper()
	e, err := engine.OpenCore(engine.Config{Dir: dir, Shards: 2, IO: ioring.ModeAuto})
	mustOK(t, err)
	t.Cleanup(func() { e.Close() })
	info, exists := e.Topic(OffsetsTopic)
	if exists {
		cfg.OffsetsTopicPartitions = info.Partitions
	}
	c := startCoordinator(t, e, cfg)
	t.Cleanup(c.Close)
	if !exists {
		createOffsetsTopic(t, e, c)
	}
	for i := range c.Partitions() {
		st, err := e.State(engine.TP{Topic: OffsetsTopic, Partition: i})
		mustOK(t, err)
		c.Elected(i, st.LeaderEpoch)
	}
	return e, c
}

// createOffsetsTopic creates __consumer_offsets as the controller has a
// broker create it: the coordinator's partition count and configs, an id
// of the controller's.
func createOffsetsTopic(t *testing.T, e *engine.Core, c *Coordinator) {
	t.Helper()
	var id [16]byte
	rand.Read(id[:])
	_, err := e.CreateTopicWithID(OffsetsTopic, id, c.Partitions(), c.TopicConfigs())
	mustOK(t, err)
}

func startCoordinator(t *testing.T, e *engine.Core, cfg Config) *Coordinator {
	t.Helper()
	if cfg.OffsetsTopicPartitions == 0 {
		cfg.OffsetsTopicPartitions = 3
	}
	c, err := Start(e, cfg)
	mustOK(t, err)
	return c
}

func waitLoaded(t *testing.T, c *Coordinator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
}

// call runs an API method and waits for its answer.
func call[Resp any](t *testing.T, fn func(reply func(Resp))) Resp {
	t.Helper()
	got := make(chan Resp, 1)
	fn(func(r Resp) { got <- r })
	select {
	case r := <-got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		panic("unreachable")
	}
}

func joinRequest(groupID, memberID string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3 // no member id round (KIP-394 is v4)
	req.Group, req.MemberID, req.ProtocolType = groupID, memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	return req
}

func commitRequest(groupID string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 7
	req.Group = groupID
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchRequest(groupID string, requireStable bool) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group, req.RequireStable = groupID, requireStable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestPartitionFor: Kafka's mapping of a group to a partition, Java's
// String.hashCode included (UTF-16 units, Utils.abs of MIN_VALUE is 0).
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		id   string
		n    int32
		want int32
	}{
		{"", 50, 0},
		{"hello", 50, 99162322 % 50},
		{"Aa", 50, 2112 % 50},
		{"BB", 50, 2112 % 50},
		{"polygenelubricants", 50, 0}, // hashCode is Integer.MIN_VALUE
		{"\U0001F600", 50, (0xD83D*31 + 0xDE00) % 50},
		{"group-1", 1, 0},
	} {
		if got := PartitionFor(c.id, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}

// TestRecordsReplay: the records written for commits, groups and their
// tombstones replay to the last value of each key.
func TestRecordsReplay(t *testing.T) {
	tp := engine.TP{Topic: "t", Partition: 2}
	g := &group{id: "g", protocolType: "consumer", generation: 7, leader: "m1", stateMs: 1234}
	name := "range"
	g.protocol = &name
	g.members = []*member{{id: "m1", clientID: "c", clientHost: "/127.0.0.1", sessionTimeout: 10 * time.Second,
		rebalanceTimeout: time.Minute, protocols: []protocol{{name: "range", metadata: []byte("sub")}}}}
	recs := []record{
		{key: offsetKey("g", tp), value: offsetValue(committed{offset: 1, leaderEpoch: 4, metadata: "a", commitMs: 10, expireMs: -1})},
		{key: offsetKey("g", tp), value: offsetValue(committed{offset: 2, leaderEpoch: -1, metadata: "b", commitMs: 11, expireMs: 99})},
		{key: offsetKey("h", tp), value: offsetValue(committed{offset: 3, expireMs: -1})},
		{key: offsetKey("h", tp)},
		{key: groupKey("g"), value: groupValue(g, map[string][]byte{"m1": []byte("assigned")})},
		{key: groupKey("dead"), value: groupValue(g, nil)},
		{key: groupKey("dead")},
		{key: []byte{0, 9, 1, 2}, value: []byte("a future record type: ignored")},
		{key: []byte{0}, value: []byte("garbage: skipped")},
	}
	b, err := buildBatches(recs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st := newLoadState()
	it := batch.Split(b)
	for it.Next() {
		if err := replayBatch(it.Batch(), st); err != nil {
			t.Fatal(err)
		}
	}
	if st.bad != 1 {
		t.Errorf("%d bad records, want 1", st.bad)
	}
	if c := st.offsets["g"][tp]; c != (committed{offset: 2, leaderEpoch: -1, metadata: "b", commitMs: 11, expireMs: 99, seq: 2}) {
		t.Errorf("g's offset: %+v", c)
	}
	if _, ok := st.offsets["h"]; ok || st.groups["dead"] != nil {
		t.Errorf("tombstones not applied: %v %v", st.offsets, st.groups)
	}
	v := st.groups["g"]
	if v == nil || v.Generation != 7 || *v.Protocol != "range" || *v.Leader != "m1" || v.CurrentStateTimestamp != 1234 ||
		len(v.Members) != 1 || string(v.Members[0].Assignment) != "assigned" || string(v.Members[0].Subscription) != "sub" ||
		v.Members[0].SessionTimeoutMillis != 10000 || v.Members[0].RebalanceTimeoutMillis != 60000 {
		t.Errorf("group g: %+v", v)
	}
	// A batch is cut well below max.message.bytes.
	many := make([]record, 5000)
	for i := range many {
		many[i] = record{key: offsetKey("g", engine.TP{Topic: "a-fairly-long-topic-name", Partition: int32(i)})}
	}
	b, err = buildBatches(many, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it := batch.Split(b); it.Next(); n++ {
		if len(it.Batch()) > batchTarget+64<<10 {
			t.Fatalf("batch of %d bytes", len(it.Batch()))
		}
	}
	if n < 2 {
		t.Fatalf("%d batches for 5000 tombstones", n)
	}
}

// TestExpiredOffsets: offsets.retention.minutes as Kafka applies it
// (KIP-211, KIP-496).
func TestExpiredOffsets(t *testing.T) {
	a0, a1, b0 := engine.TP{Topic: "a", Partition: 0}, engine.TP{Topic: "a", Partition: 1}, engine.TP{Topic: "b", Partition: 0}
	offsets := func() map[engine.TP]committed {
		return map[engine.TP]committed{
			a0: {offset: 1, commitMs: 100, expireMs: -1},
			a1: {offset: 1, commitMs: 900, expireMs: -1},
			b0: {offset: 1, commitMs: 100, expireMs: 2000}, // v2-v4 explicit retention
		}
	}
	const retention = 500
	for _, c := range []struct {
		name  string
		g     group
		now   int64
		want  []engine.TP
		notes string
	}{
		{name: "empty consumer group, not empty long enough", now: 1000,
			g: group{protocolType: "consumer", state: stateEmpty, stateMs: 800}, want: nil},
		{name: "empty consumer group, empty for the retention", now: 1300,
			g: group{protocolType: "consumer", state: stateEmpty, stateMs: 800}, want: []engine.TP{a0, a1}},
		{name: "empty group written before KIP-211: commit times", now: 1000,
			g: group{protocolType: "consumer", state: stateEmpty, stateMs: -1}, want: []engine.TP{a0}},
		{name: "explicit expiry", now: 2000,
			g: group{protocolType: "consumer", state: stateEmpty, stateMs: 1900}, want: []engine.TP{b0}},
		{name: "stable group keeps subscribed topics", now: 1500,
			g: group{protocolType: "consumer", state: stateStable, subscribed: map[string]bool{"a": true}}, want: nil},
		{name: "stable group, unsubscribed topic", now: 2500,
			g: group{protocolType: "consumer", state: stateStable, subscribed: map[string]bool{"b": true}}, want: []engine.TP{a0, a1}},
		{name: "stable group, unknown subscriptions", now: 5000,
			g: group{protocolType: "consumer", state: stateStable}, want: nil},
		{name: "rebalancing group", now: 5000,
			g: group{protocolType: "consumer", state: statePreparingRebalance, subscribed: map[string]bool{}}, want: nil},
		{name: "simple group: commit times", now: 1000,
			g: group{state: stateEmpty, stateMs: 999}, want: []engine.TP{a0}},
		{name: "commits being written never expire", now: 5000,
			g: group{state: stateEmpty, pendingCommits: map[engine.TP]int{a0: 1}}, want: []engine.TP{a1, b0}},
	} {
		g := c.g
		g.offsets = offsets()
		got := g.expiredOffsets(c.now, retention)
		slices.SortFunc(got, func(x, y engine.TP) int {
			if x.Topic != y.Topic {
				if x.Topic < y.Topic {
					return -1
				}
				return 1
			}
			return int(x.Partition - y.Partition)
		})
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: expired %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSelectProtocol: each member votes for its first protocol that all
// support; ties go to the leader's preference.
func TestSelectProtocol(t *testing.T) {
	m := func(id string, names ...string) *member {
		x := &member{id: id}
		for _, n := range names {
			x.protocols = append(x.protocols, protocol{name: n})
		}
		return x
	}
	for _, c := range []struct {
		members []*member
		want    string
	}{
		{[]*member{m("a", "range")}, "range"},
		{[]*member{m("a", "sticky", "range"), m("b", "range", "sticky"), m("c", "range", "sticky")}, "range"},
		{[]*member{m("a", "sticky", "range"), m("b", "range", "sticky")}, "sticky"},
		{[]*member{m("a", "x", "range"), m("b", "range")}, "range"},
	} {
		g := &group{byID: map[string]*member{}}
		for _, x := range c.members {
			g.members = append(g.members, x)
			g.byID[x.id] = x
		}
		g.leader = c.members[0].id
		if got := g.selectProtocol(); got != c.want {
			t.Errorf("members %v: %s, want %s", c.members, got, c.want)
		}
	}
}

// TestCoordinatorLoading: while a partition replays, its groups answer
// COORDINATOR_LOAD_IN_PROGRESS (heartbeats succeed blindly, as in Kafka);
// once replayed, requests proceed. After Close, NOT_COORDINATOR, and a
// parked join is answered so.
func TestCoordinatorLoading(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 8)
	beforeInstall = func(int32) { held <- struct{}{}; <-release }
	defer func() { beforeInstall = nil }()
	e, c := openCoordinator(t, t.TempDir(), Config{OffsetsTopicPartitions: 1})
	<-held
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	r := call(t, func(reply func(*kmsg.JoinGroupResponse)) { c.JoinGroup(Client{}, joinRequest("g", ""), reply) })
	if r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g", "m"
	if h := call(t, func(reply func(*kmsg.HeartbeatResponse)) { c.Heartbeat(hb, reply) }); h.ErrorCode != 0 {
		t.Fatalf("heartbeat while loading: %v", kerr.ErrorForCode(h.ErrorCode))
	}
	l := call(t, func(reply func(*kmsg.ListGroupsResponse)) { c.ListGroups(kmsg.NewPtrListGroupsRequest(), reply) })
	if l.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %v", kerr.ErrorForCode(l.ErrorCode))
	}
	close(release)
	waitLoaded(t, c)

	r = call(t, func(reply func(*kmsg.JoinGroupResponse)) { c.JoinGroup(Client{ID: "c"}, joinRequest("g", ""), reply) })
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("join once loaded: %+v", r)
	}
	// A second member's join parks (the first must rejoin); Close
	// answers it.
	parked := make(chan *kmsg.JoinGroupResponse, 1)
	c.JoinGroup(Client{ID: "c"}, joinRequest("g", ""), func(r *kmsg.JoinGroupResponse) { parked <- r })
	select {
	case r := <-parked:
		t.Fatalf("second join answered at once: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	c.Close()
	if r := <-parked; r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join at close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r = call(t, func(reply func(*kmsg.JoinGroupResponse)) { c.JoinGroup(Client{}, joinRequest("g", ""), reply) })
	if r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join after close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	var nilCoordinator *Coordinator
	r = call(t, func(reply func(*kmsg.JoinGroupResponse)) {
		nilCoordinator.JoinGroup(Client{}, joinRequest("g", ""), reply)
	})
	if r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join without a coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestRequireStable: a commit being written is UNSTABLE_OFFSET_COMMIT to a
// fetch that requires stable offsets (KIP-447), and invisible to others.
func TestRequireStable(t *testing.T) {
	e, c := openCoordinator(t, t.TempDir(), Config{})
	waitLoaded(t, c)
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	if r := call(t, func(reply func(*kmsg.OffsetCommitResponse)) { c.OffsetCommit(commitRequest("g", 5), reply) }); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// Hold a commit "in flight" on the group's shard.
	p := c.partitionOf("g")
	tp := engine.TP{Topic: "t", Partition: 0}
	onShard := func(fn func()) {
		done := make(chan struct{})
		if err := e.OnShard(p.tp, func() { fn(); close(done) }); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	onShard(func() { p.groups["g"].pendingCommits[tp]++ })
	stable := call(t, func(reply func(*kmsg.OffsetFetchResponse)) { c.OffsetFetch(fetchRequest("g", true), reply) })
	if code := stable.Topics[0].Partitions[0].ErrorCode; code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable with a commit in flight: %v", kerr.ErrorForCode(code))
	}
	plain := call(t, func(reply func(*kmsg.OffsetFetchResponse)) { c.OffsetFetch(fetchRequest("g", false), reply) })
	if p := plain.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 5 {
		t.Fatalf("plain fetch with a commit in flight: %+v", p)
	}
	onShard(func() { p.groups["g"].pendingCommits[tp]-- })
	stable = call(t, func(reply func(*kmsg.OffsetFetchResponse)) { c.OffsetFetch(fetchRequest("g", true), reply) })
	if p := stable.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 5 {
		t.Fatalf("require_stable once written: %+v", p)
	}
}

// TestReplaySkipsForeignRecords: records that are not the coordinator's
// (a client produced to __consumer_offsets) are skipped on replay; the
// partition's groups load.
func TestReplaySkipsForeignRecords(t *testing.T) {
	dir := t.TempDir()
	e, c := openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	waitLoaded(t, c)
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	call(t, func(reply func(*kmsg.OffsetCommitResponse)) { c.OffsetCommit(commitRequest("g", 42), reply) })
	junk, err := buildBatches([]record{{key: []byte("not a key"), value: []byte("x")}, {key: offsetKey("g", engine.TP{Topic: "t"}), value: []byte{0, 3, 1}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	e.Append(engine.TP{Topic: OffsetsTopic, Partition: 0}, junk, engine.AppendOptions{}, func(_ engine.AppendResult, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Close()

	_, c = openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	waitLoaded(t, c)
	f := call(t, func(reply func(*kmsg.OffsetFetchResponse)) { c.OffsetFetch(fetchRequest("g", false), reply) })
	if p := f.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 42 {
		t.Fatalf("offset after replaying junk: %+v", p)
	}
}
