package fetcher_test

import (
	"bytes"
	"testing"
	"time"

	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// leader is either kfake or ringlog's own broker, for tests that run
// against both.
type leader struct {
	name      string
	addr      string
	replicaID int32 // ringlog refuses a replica fetch from a broker outside the partition's replicas: fetch as a consumer
	topic     string
	topicID   [16]byte
}

func leaders(t *testing.T, topic string, n int32) []func(t *testing.T) leader {
	return []func(t *testing.T) leader{
		func(t *testing.T) leader {
			c, id := newKfake(t, topic, n)
			return leader{name: "kfake", addr: c.ListenAddrs()[0], replicaID: 1, topic: topic, topicID: id}
		},
		func(t *testing.T) leader {
			b := startBroker(t)
			id := b.createTopic(topic, n)
			return leader{name: "ringlog", addr: b.Addr, replicaID: -1, topic: topic, topicID: id}
		},
	}
}

func forLeaders(t *testing.T, topic string, n int32, fn func(t *testing.T, l leader)) {
	for i, start := range leaders(t, topic, n) {
		name := []string{"kfake", "ringlog"}[i]
		t.Run(name, func(t *testing.T) { fn(t, start(t)) })
	}
}

func (l leader) partition(p int32, offset int64) fetcher.Partition {
	return fetcher.Partition{
		TP:          engine.TP{Topic: l.topic, Partition: p},
		TopicID:     l.topicID,
		FetchOffset: offset,
		LeaderEpoch: -1,
	}
}

// TestCopyWhileProducing: a follower copies 3 partitions x 10,000 records
// produced with kgo while the stream runs; the copies equal the leader's
// logs byte for byte.
func TestCopyWhileProducing(t *testing.T) {
	const n = 10000
	for _, version := range []int16{16, 12} {
		t.Run("v"+string(rune('0'+version/10))+string(rune('0'+version%10)), func(t *testing.T) {
			forLeaders(t, "copy", 3, func(t *testing.T, l leader) {
				f := newFollower(t)
				f.doneDelay = 200 * time.Microsecond
				s := newStream(t, fetcher.Config{
					Addr: l.addr, ReplicaID: l.replicaID, Slots: 3, FetchVersionMax: version,
					PartitionBytesMax: 64 << 10, // many fetches, and cut batches
				}, f)
				for p := range int32(3) {
					s.Add(l.partition(p, 0))
				}
				produce(t, producer(t, l.addr), l.topic, []int32{0, 1, 2}, n, 100, 250)
				all := tps(l.topic, 3)
				f.waitLEO(n, 30*time.Second, all...)
				f.check()
				st := s.Stats()
				if st.FetchVersion != version {
					t.Errorf("fetch version %d, want %d", st.FetchVersion, version)
				}
				for _, tp := range all {
					c := f.copyOf(tp)
					if c.records != n {
						t.Errorf("%v: %d records copied, want %d", tp, c.records, n)
					}
					want := leaderLog(t, l.addr, l.topic, l.topicID, tp.Partition, n)
					if !bytes.Equal(c.data, want) {
						t.Errorf("%v: copy (%d bytes, %d batches) differs from the leader's log (%d bytes)", tp, len(c.data), c.batches, len(want))
					}
				}
				t.Logf("%s v%d: %d requests (%d long polls), %d bytes in, peak in flight %d",
					l.name, version, st.Requests, st.LongPolls, st.BytesReceived, st.InFlightPeak)
			})
		})
	}
}
