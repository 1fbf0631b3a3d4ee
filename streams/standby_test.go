package streams

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStandbyReplicas: two at-least-once instances of a word count with
// NumStandbyReplicas 1. Each stateful task runs on one and is a standby
// on the other, whose copy of the store (not queryable there) becomes
// equal to the active one once the input is processed. The survivor's
// standbys are then stopped, more lines counted, and the instance owning
// half of the tasks closed: the survivor takes them over with a restore
// that reads only the changelog records its standbys had not applied,
// and the counts go on to equal the reference.
func TestStandbyReplicas(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) { standbyTakeover(t, addr, AtLeastOnce) })
}

// TestStandbyReplicasExactlyOnce: the same with exactly once (standbys
// read the changelogs read_committed, transaction markers included in
// their checkpoints), the instance given up killed rather than closed.
func TestStandbyReplicasExactlyOnce(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) { standbyTakeover(t, addr, ExactlyOnce) })
}

func standbyTakeover(t *testing.T, addr string, g Guarantee) {
	createTopic(t, addr, "lines", 4, nil)
	createTopic(t, addr, "counts-out", 4, nil)
	n := 600
	if testing.Short() {
		n = 200
	}
	iso := kgo.ReadUncommitted()
	if g == ExactlyOnce {
		iso = kgo.ReadCommitted()
	}
	prod := newClient(t, addr)
	cfg := Config{ApplicationID: "sb", Brokers: []string{addr}, Guarantee: g, NumStandbyReplicas: 1}
	cfg.StateDir, cfg.InstanceID = t.TempDir(), "a"
	a := startApp(t, wordCount("lines", "counts-out"), cfg)
	// b joins once a runs every task, so that the sticky balancer leaves
	// each instance two tasks with a store (joining together, one could
	// get all four).
	deadline := time.Now().Add(20 * time.Second)
	for len(a.Stats().Tasks) != 8 {
		if time.Now().After(deadline) {
			t.Fatalf("a alone runs %+v, want 8 tasks", a.Stats().Tasks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cfg.StateDir, cfg.InstanceID = t.TempDir(), "b"
	b := startApp(t, wordCount("lines", "counts-out"), cfg)

	// Each instance runs 4 tasks, 2 of them with a store, and holds the
	// other instance's 2 stateful tasks as standbys.
	deadline = time.Now().Add(30 * time.Second)
	for !standbysMirror(a, b) {
		if time.Now().After(deadline) {
			t.Fatalf("standbys not placed: a %+v, b %+v", a.Stats(), b.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}

	ls, ref := lines(6, n)
	produceLines(t, prod, "lines", ls)
	checkFinal(t, readCounts(t, addr, "counts-out", ref, iso, 20*time.Second), ref)
	// Standbys are not queryable: each key is local to one instance.
	checkStore(t, ref, a, b)

	// Every standby store becomes the active one's.
	deadline = time.Now().Add(20 * time.Second)
	for {
		diff := standbyDiff(t, a, b) + standbyDiff(t, b, a)
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby stores differ from the active ones: %s", diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range a.Stats().Standbys {
		if s.Applied == 0 || s.Lag != 0 {
			t.Errorf("a's standby %+v: want records applied, no lag", s)
		}
	}

	// b's stateful tasks, and how long their changelogs are.
	var moved []string
	for _, x := range b.Stats().Tasks {
		if strings.HasPrefix(x.Task, "1_") {
			moved = append(moved, x.Task)
		}
	}
	ends, err := kadm.NewClient(newClient(t, addr)).ListEndOffsets(context.Background(), "sb-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	var changelog int64
	for _, id := range moved {
		var p int32
		fmt.Sscanf(id, "1_%d", &p)
		lo, _ := ends.Lookup("sb-counts-changelog", p)
		changelog += lo.Offset
	}
	if changelog < 40 {
		t.Fatalf("b's changelog partitions hold %d records: too few to tell a restore from none", changelog)
	}
	// a's standbys applied every record of those changelogs (under
	// exactly once, all but the transaction markers), as its Prometheus
	// collector reports too.
	var applied int64
	for _, s := range a.Stats().Standbys {
		applied += s.Applied
	}
	if g == AtLeastOnce && applied != changelog || g == ExactlyOnce && (applied == 0 || applied >= changelog) {
		t.Errorf("a's standbys applied %d records of changelogs of %d", applied, changelog)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var metric float64
	lagSeen := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "ringlog_streams_standby_applied_records_total":
				metric += m.GetCounter().GetValue()
			case "ringlog_streams_standby_lag_records":
				lagSeen++
			}
		}
	}
	if int64(metric) != applied || lagSeen != 2 {
		t.Errorf("standby metrics: %v records applied (Stats: %d), %d lag gauges (want 2)", metric, applied, lagSeen)
	}

	// The standbys fall behind: a's standby client stops fetching b's
	// changelog partitions, and b counts more lines. The takeover must
	// restore exactly what they lack, from where they stopped.
	var parts []int32
	for _, id := range moved {
		var p int32
		fmt.Sscanf(id, "1_%d", &p)
		parts = append(parts, p)
	}
	a.standby.mu.Lock()
	a.standby.cl.PauseFetchPartitions(map[string][]int32{"sb-counts-changelog": parts})
	a.standby.mu.Unlock()
	ls3, ref3 := lines(8, n/4)
	produceLines(t, prod, "lines", ls3)
	addRef(ref, ref3)
	checkFinal(t, readCounts(t, addr, "counts-out", ref, iso, 20*time.Second), ref)

	if g == ExactlyOnce {
		b.kill()
	} else if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What b's changelog partitions gained since the standbys stopped.
	ends, err = kadm.NewClient(newClient(t, addr)).ListEndOffsets(context.Background(), "sb-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	var delta int64 = -changelog
	for _, p := range parts {
		lo, _ := ends.Lookup("sb-counts-changelog", p)
		delta += lo.Offset
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(a.Stats().Tasks) != 8 || len(a.Stats().Standbys) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a did not take b's tasks over: %+v", a.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ls2, ref2 := lines(7, n/2)
	produceLines(t, prod, "lines", ls2)
	addRef(ref, ref2)
	checkFinal(t, readCounts(t, addr, "counts-out", ref, iso, 30*time.Second), ref)
	checkStore(t, ref, a)
	var restored int64
	for _, x := range a.Stats().Tasks {
		for _, id := range moved {
			if x.Task == id {
				restored += x.Restored
			}
		}
	}
	// Without the standbys, the restore reads the changelogs whole.
	// Exactly once, the records past the standbys' position include
	// transaction markers, which are not restored.
	if g == AtLeastOnce && restored != delta || g == ExactlyOnce && (restored == 0 || restored >= delta) {
		t.Errorf("a restored %d records of b's tasks %v, whose changelogs hold %d, %d of them past the standbys: want those only", restored, moved, changelog+delta, delta)
	}
	t.Logf("takeover of %v restored %d of %d changelog records (%d past the standbys)", moved, restored, changelog+delta, delta)
}

// standbysMirror says whether a and b each run 4 tasks, every task once,
// and each holds as standbys exactly the other's stateful tasks.
func standbysMirror(a, b *App) bool {
	sa, sb := a.Stats(), b.Stats()
	if len(sa.Tasks) != 4 || len(sb.Tasks) != 4 {
		return false
	}
	stateful := func(ts []TaskStats) []string {
		var out []string
		for _, x := range ts {
			if strings.HasPrefix(x.Task, "1_") {
				out = append(out, x.Task)
			}
		}
		return out
	}
	names := func(ss []StandbyStats) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Task)
		}
		return out
	}
	return fmt.Sprint(stateful(sa.Tasks)) == fmt.Sprint(names(sb.Standbys)) &&
		fmt.Sprint(stateful(sb.Tasks)) == fmt.Sprint(names(sa.Standbys)) && len(sa.Standbys) == 2
}

// standbyDiff compares the committed store "counts" of each of active's
// stateful tasks with standby's standby copy of it.
func standbyDiff(t *testing.T, active, standby *App) string {
	t.Helper()
	dump := func(db *stateDB) map[string]string {
		m := map[string]string{}
		if err := rangeStore(db.db, "counts", func(k, v []byte) bool {
			m[string(k)] = string(v)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var diffs []string
	active.tasksMu.RLock()
	defer active.tasksMu.RUnlock()
	standby.standby.mu.Lock()
	defer standby.standby.mu.Unlock()
	for id, at := range active.tasks {
		if !active.stateful(id) {
			continue
		}
		st := standby.standby.tasks[id]
		if st == nil {
			diffs = append(diffs, id.String()+" has no standby")
			continue
		}
		want, got := dump(at.db), dump(st.db)
		if len(want) == 0 {
			diffs = append(diffs, id.String()+" is empty")
		}
		if fmt.Sprint(want) != fmt.Sprint(got) {
			diffs = append(diffs, fmt.Sprintf("%s: active %d keys, standby %d", id, len(want), len(got)))
		}
	}
	return strings.Join(diffs, "; ")
}

// memberMeta is a member's subscription as taskBalancer writes it:
// owned partitions and the standby tasks held.
func memberMeta(id string, topics []string, owned map[string][]int32, held ...taskID) kmsg.JoinGroupResponseMember {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = topics
	meta.Generation = 1
	for t, ps := range owned {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = t, ps
		meta.OwnedPartitions = append(meta.OwnedPartitions, o)
	}
	if len(held) > 0 {
		meta.UserData = appendTaskList(nil, held)
	}
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.ProtocolMetadata = id, meta.AppendTo(nil)
	return m
}

// balance runs the task balancer over members as the group's leader
// would, and reads each member's assignment back as the member does:
// its active tasks and its standby tasks.
func balance(t *testing.T, a *App, members []kmsg.JoinGroupResponseMember, topics map[string]int32) (active, standby map[string][]taskID) {
	t.Helper()
	bal := &taskBalancer{app: a}
	cb, err := kgo.NewConsumerBalancer(bal, members)
	if err != nil {
		t.Fatal(err)
	}
	active, standby = map[string][]taskID{}, map[string][]taskID{}
	for _, sa := range bal.Balance(cb, topics).IntoSyncAssignment() {
		parts, err := bal.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[taskID]bool{}
		for topic, ps := range parts {
			for _, p := range ps {
				id := taskID{a.topicSub[topic], p}
				if !seen[id] {
					seen[id] = true
					active[sa.MemberID] = append(active[sa.MemberID], id)
				}
			}
		}
		a.assignMu.Lock()
		standby[sa.MemberID] = a.standbyWant
		a.assignMu.Unlock()
	}
	return active, standby
}

// TestStandbyAssignor: the balancer gives each stateful task (the
// count's subtopology) N standbys on members other than the one running
// it, spread evenly, carried in the assignment's UserData; a task whose
// owner left goes to the member holding it as a standby (even when
// another member is as lightly loaded and first in line), and a member
// keeps the standbys it holds.
func TestStandbyAssignor(t *testing.T) {
	topo := wordCount("lines", "out")
	if len(topo.subs) != 2 || len(topo.subs[0].stores) != 0 || len(topo.subs[1].stores) != 1 {
		t.Fatalf("word count's subtopologies: %+v", topo.subs)
	}
	topics := map[string]int32{"lines": 6, "rep": 6}
	subs := []string{"lines", "rep"}
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprint("replicas=", n), func(t *testing.T) {
			a, err := New(topo, Config{ApplicationID: "x", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), NumStandbyReplicas: n})
			if err != nil {
				t.Fatal(err)
			}
			a.topicSub = map[string]int{"lines": 0, "rep": 1}
			members := []kmsg.JoinGroupResponseMember{memberMeta("m1", subs, nil), memberMeta("m2", subs, nil), memberMeta("m3", subs, nil)}
			active, standby := balance(t, a, members, topics)
			want := min(n, len(members)-1)
			holders := map[taskID]int{}
			for m, ids := range standby {
				if l := len(ids); l < 6*want/3 || l > (6*want+2)/3 {
					t.Errorf("%s holds %d standbys %v, want an even share of %d", m, l, ids, 6*want)
				}
				for _, id := range ids {
					if id.sub != 1 {
						t.Errorf("%s: standby of stateless task %s", m, id)
					}
					if containsTask(active[m], id) {
						t.Errorf("%s: task %s both active and standby", m, id)
					}
					holders[id]++
				}
			}
			for p := int32(0); p < 6; p++ {
				if got := holders[taskID{1, p}]; got != want {
					t.Errorf("task 1_%d has %d standbys, want %d", p, got, want)
				}
			}
		})
	}

	t.Run("moved task goes to its standby", func(t *testing.T) {
		a, err := New(topo, Config{ApplicationID: "x", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), NumStandbyReplicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		a.topicSub = map[string]int{"lines": 0, "rep": 1}
		topics := map[string]int32{"lines": 4, "rep": 4}
		// m1 ran 1_0 and 1_1 and left; m3 holds 1_0 as a standby, m2
		// holds 1_1. Both survivors run 3 tasks: by load alone 1_0
		// would go to m2, first in line.
		m2 := memberMeta("m2", subs, map[string][]int32{"lines": {0, 1, 2}}, taskID{1, 1}, taskID{1, 3})
		m3 := memberMeta("m3", subs, map[string][]int32{"lines": {3}, "rep": {2, 3}}, taskID{1, 0})
		active, standby := balance(t, a, []kmsg.JoinGroupResponseMember{m2, m3}, topics)
		if !containsTask(active["m3"], taskID{1, 0}) || !containsTask(active["m2"], taskID{1, 1}) {
			t.Errorf("moved tasks did not go to their standby holders: active %v", active)
		}
		if len(active["m2"]) != 4 || len(active["m3"]) != 4 {
			t.Errorf("unbalanced: active %v", active)
		}
		for m, ids := range standby {
			for _, id := range ids {
				if containsTask(active[m], id) {
					t.Errorf("%s: task %s both active and standby (active %v, standby %v)", m, id, active, standby)
				}
			}
		}
		// m2 keeps its standby of 1_3 (m3 runs it).
		if !containsTask(standby["m2"], taskID{1, 3}) {
			t.Errorf("m2 lost its standby of 1_3: %v", standby)
		}
	})

	t.Run("cooperative move", func(t *testing.T) {
		a, err := New(topo, Config{ApplicationID: "x", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), NumStandbyReplicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		a.topicSub = map[string]int{"lines": 0, "rep": 1}
		topics := map[string]int32{"lines": 2, "rep": 2}
		// m1 runs everything; m2 joins holding 1_1 as a standby. The
		// move of a task is deferred a round (m1 revokes it first), so
		// this round neither member runs it; its standby stays off the
		// member it moves to, which is m2, the holder.
		m1 := memberMeta("m1", subs, map[string][]int32{"lines": {0, 1}, "rep": {0, 1}})
		m2 := memberMeta("m2", subs, nil, taskID{1, 1})
		active, standby := balance(t, a, []kmsg.JoinGroupResponseMember{m1, m2}, topics)
		if len(active["m1"]) != 2 || len(active["m2"]) != 0 {
			t.Fatalf("cooperative round: active %v, want m1 keeping 2 and m2 none yet", active)
		}
		if containsTask(active["m1"], taskID{1, 1}) {
			t.Errorf("m1 kept 1_1, which m2 holds as a standby: active %v", active)
		}
		if containsTask(standby["m2"], taskID{1, 1}) || !containsTask(standby["m1"], taskID{1, 1}) {
			t.Errorf("standby of 1_1 should move to its old owner m1 while m2 takes it: %v", standby)
		}
	})
}

// FuzzDecodeTaskList: the task lists come from other members (their
// subscriptions) and the leader (assignments): the decoder never panics,
// refuses what is malformed with errTaskList, holds no more tasks than
// the bytes carry, and what it reads encodes back to the same bytes.
func FuzzDecodeTaskList(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(appendTaskList(nil, []taskID{{1, 0}, {1, 3}, {2, 7}}))
	f.Add(appendTaskList(nil, nil))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Add(append(appendTaskList(nil, []taskID{{0, 1}}), 0))
	f.Add([]byte{1, 0, 0, 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := decodeTaskList(b)
		if err != nil {
			if !errors.Is(err, errTaskList) {
				t.Fatalf("%x: %v", b, err)
			}
			return
		}
		if len(b) == 0 {
			if len(ids) != 0 {
				t.Fatalf("empty bytes gave %v", ids)
			}
			return
		}
		if cap(ids)*8 > len(b) {
			t.Fatalf("%x: room for %d tasks in %d bytes", b, cap(ids), len(b))
		}
		if out := appendTaskList(nil, ids); !bytes.Equal(out, b) {
			t.Fatalf("%x -> %v -> %x", b, ids, out)
		}
	})
}
