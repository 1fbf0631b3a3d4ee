package group

import (
	"testing"
	"time"

	"ringlog/engine"
	"ringlog/segment/batch"
)

// FuzzReplay feeds arbitrary keys and values to the replay of
// __consumer_offsets, which reads what is on disk (and what a client may
// have produced to the topic): it must never panic, and a record it
// accepts must replay again to the same state.
func FuzzReplay(f *testing.F) {
	tp := engine.TP{Topic: "t", Partition: 1}
	name := "range"
	g := &group{id: "g", protocolType: "consumer", generation: 3, leader: "m", protocol: &name, stateMs: 5,
		members: []*member{{id: "m", instanceID: &name, protocols: []protocol{{name: "range", metadata: []byte("s")}}}}}
	for _, r := range []record{
		{key: offsetKey("g", tp), value: offsetValue(committed{offset: 1, leaderEpoch: 2, metadata: "m", expireMs: -1})},
		{key: offsetKey("g", tp), value: offsetValue(committed{offset: 1, expireMs: 7})},
		{key: offsetKey("g", tp)},
		{key: groupKey("g"), value: groupValue(g, map[string][]byte{"m": []byte("a")})},
		{key: groupKey("g")},
		{key: []byte{0, 3}, value: []byte{1}},
	} {
		f.Add(r.key, r.value, r.value == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		st := newLoadState()
		if err := st.apply(key, value); err != nil {
			return
		}
		// Through a real batch, as the log holds it.
		b, err := buildBatches([]record{{key: key, value: value}}, time.Unix(1, 0))
		if err != nil {
			return
		}
		again := newLoadState()
		it := batch.Split(b)
		for it.Next() {
			if err := replayBatch(it.Batch(), again); err != nil {
				t.Fatal(err)
			}
		}
		if again.bad != 0 || len(again.offsets) != len(st.offsets) || len(again.groups) != len(st.groups) {
			t.Fatalf("replay through a batch differs: %d bad, %d/%d groups of offsets, %d/%d groups",
				again.bad, len(again.offsets), len(st.offsets), len(again.groups), len(st.groups))
		}
	})
}
