package controller

import (
	"reflect"
	"testing"
	"time"
)

// TestQuorumProgressCaughtUp: a report is caught up when it reaches the
// commit index the leader had at the node's previous report (Kafka's rule
// for lastCaughtUpTimestamp), and the first report only sets the mark.
func TestQuorumProgressCaughtUp(t *testing.T) {
	var q quorumProgress
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		index, commit uint64
		caughtUp      time.Time
	}{
		{5, 10, time.Time{}}, // first report: nothing to compare with
		{10, 20, at(1)},      // reached 10, the commit at the report before
		{15, 30, at(1)},      // behind 20
		{30, 30, at(3)},      // reached 30
	}
	for i, s := range steps {
		q.report(7, "h:1", false, s.index, s.commit, at(i))
		p, ok := q.get(7)
		if !ok || p.lastIndex != s.index || !p.lastFetch.Equal(at(i)) || !p.lastCaughtUp.Equal(s.caughtUp) {
			t.Fatalf("step %d: %+v, want caught up at %v", i, p, s.caughtUp)
		}
	}
	q.forget(7)
	if _, ok := q.get(7); ok || len(q.ids()) != 0 {
		t.Fatal("forget kept the node")
	}
}

func TestQuorumInfoEncoding(t *testing.T) {
	now := time.UnixMilli(time.Now().UnixMilli())
	in := QuorumInfo{LeaderID: 2, Epoch: 7, HighWatermark: 1234,
		Voters:    []QuorumReplica{{ID: 1, Addr: "a:1", LogEndOffset: 1230, LastFetch: now, LastCaughtUp: now}, {ID: 2, Addr: "b:2", LogEndOffset: 1234, LastFetch: now, LastCaughtUp: now}},
		Observers: []QuorumReplica{{ID: 4, Addr: "c:3", LogEndOffset: -1}}}
	out, err := decodeQuorumInfo(encodeQuorumInfo(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("%+v %v, want %+v", out, err, in)
	}
	if _, err := decodeQuorumInfo(encodeQuorumInfo(in)[:20]); err == nil {
		t.Fatal("a truncated answer decoded")
	}
}

func FuzzDecodeQuorumInfo(f *testing.F) {
	f.Add(encodeQuorumInfo(QuorumInfo{LeaderID: 1, Voters: []QuorumReplica{{ID: 1, Addr: "a:1"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q QuorumInfo
		var err error
		if n := allocated(func() { q, err = decodeQuorumInfo(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			return
		}
		again, err := decodeQuorumInfo(encodeQuorumInfo(q))
		if err != nil || !reflect.DeepEqual(q, again) {
			t.Fatalf("decode-encode-decode: %+v, %v; first %+v", again, err, q)
		}
	})
}
