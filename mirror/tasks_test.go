package mirror

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func FuzzDecodeTaskCount(f *testing.F) {
	f.Add(taskCountKey("A->B"), taskCountValue(4))
	f.Add([]byte(`["ringlog-mirror-tasks",{}]`), []byte(`{"tasks":-1}`))
	f.Add(OffsetKey("A", "t", 0), OffsetValue(5))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		flow, n, ok, err := decodeTaskCount(key, value)
		if err != nil || !ok {
			return
		}
		if n < 1 || n > tasksMax {
			t.Fatalf("decoded a task count of %d", n)
		}
		// What decodes re-encodes to what decodes the same.
		f2, n2, ok2, err2 := decodeTaskCount(taskCountKey(flow), taskCountValue(n))
		if err2 != nil || !ok2 || f2 != flow || n2 != n {
			t.Fatalf("%q %d re-decoded as %q %d %v %v", flow, n, f2, n2, ok2, err2)
		}
	})
}

// TestTaskBalancer: the assignor hands out whole tasks (every partition of
// a task to one member), to the members that run the leader's tasks.max
// only, and spreads them over those members.
func TestTaskBalancer(t *testing.T) {
	w := &worker{f: &Flow{SourceAlias: "A", TargetAlias: "B"}, log: slog.New(slog.DiscardHandler)}
	leader := &taskBalancer{w: w, tasks: 4}
	other := &taskBalancer{w: w, tasks: 3}
	join := func(id string, b *taskBalancer) kmsg.JoinGroupResponseMember {
		return kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: b.JoinGroupMetadata([]string{"s", "u"}, nil, 1)}
	}
	members := []kmsg.JoinGroupResponseMember{join("m1", leader), join("m2", leader), join("m3", other)}
	gb, _, err := leader.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"s": 8, "u": 3})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int]string{}
	got := map[string]int{}
	for _, a := range plan.IntoSyncAssignment() {
		parts, err := leader.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		for topic, ps := range parts {
			for _, p := range ps {
				k := taskOf(topic, p, 4)
				if o, ok := owner[k]; ok && o != a.MemberID {
					t.Fatalf("task %d split between %s and %s", k, o, a.MemberID)
				}
				owner[k] = a.MemberID
				got[a.MemberID]++
			}
		}
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil || !bytes.Equal(ma.UserData, []byte{0, 0, 0, 4}) {
			t.Fatalf("%s's assignment carries user data %x (%v), want the leader's tasks.max", a.MemberID, ma.UserData, err)
		}
	}
	if got["m3"] != 0 {
		t.Fatalf("m3 (tasks.max 3) was assigned %d partitions under the leader's 4", got["m3"])
	}
	if got["m1"] == 0 || got["m2"] == 0 || got["m1"]+got["m2"] != 11 {
		t.Fatalf("assigned %v: want all 11 partitions over m1 and m2", got)
	}
}
