package fetcher_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// BenchmarkCopy copies 16 partitions from ringlog's broker with one or
// several slots, fetching 256 KiB per partition (a follower catching up)
// or 16 KiB (closer to a caught-up follower, whose rounds are small), into a follower that appends like a shard: appends queue
// to 2 "shard" goroutines, each of which writes its queue to a file per
// partition in one round, commits the round, and calls the dones (group
// commit). The commit is nothing ("write"), a 2 ms wait standing for a
// device's sync latency without its noise ("commit2ms"), or an fsync of
// each file written ("fsync"). Reported: records/s and MB/s copied.
//
//	go test -run XXX -bench Copy -benchtime 3x ./replication/fetcher
func BenchmarkCopy(b *testing.B) {
	const (
		parts   = 16
		records = 20000 // per partition
		size    = 100
	)
	br := startBroker(b)
	id := br.createTopic("bench", parts)
	var all []int32
	for p := range int32(parts) {
		all = append(all, p)
	}
	produce(b, producer(b, br.Addr), "bench", all, records, size, 500)

	for _, pbytes := range []int32{256 << 10, 16 << 10} {
		for _, commit := range []string{"write", "commit2ms", "fsync"} {
			for _, slots := range []int{1, 2, 4, 8} {
				name := fmt.Sprintf("fetch=%dKiB/%s/slots=%d", pbytes>>10, commit, slots)
				b.Run(name, func(b *testing.B) { copyBench(b, br.Addr, id, parts, records, pbytes, commit, slots) })
			}
		}
	}
}

func copyBench(b *testing.B, addr string, id [16]byte, parts int, records int64, pbytes int32, commit string, slots int) {
	var bytes, fetches, peak int64
	start := time.Now()
	for range b.N {
		sh := newShards(b, 2, commit)
		s, err := fetcher.New(fetcher.Config{Addr: addr, ReplicaID: -1, Slots: slots, PartitionBytesMax: pbytes}, sh)
		if err != nil {
			b.Fatal(err)
		}
		for p := range int32(parts) {
			s.Add(fetcher.Partition{TP: engine.TP{Topic: "bench", Partition: p}, TopicID: id, LeaderEpoch: -1})
		}
		sh.wait(parts, records)
		st := s.Stats()
		bytes += st.RecordBytes
		fetches += st.Fetches
		peak = max(peak, st.InFlightPeak)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.Close(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		sh.close()
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(int64(parts)*records*int64(b.N))/el, "records/s")
	b.ReportMetric(float64(bytes)/el/1e6, "MB/s")
	b.ReportMetric(float64(fetches)/float64(b.N), "fetches/op")
	b.ReportMetric(float64(peak), "inflight-peak")
}

// shards is a bench follower: Records queues the append to the shard of
// the partition; a shard goroutine takes everything queued, writes each
// partition's bytes to its file, commits, and calls the dones: a group
// commit per round, as engine's shards do.
type shards struct {
	b      testing.TB
	commit string
	qs     []chan job
	wg     sync.WaitGroup

	mu   sync.Mutex
	leo  map[engine.TP]int64
	cond *sync.Cond
}

type job struct {
	tp   engine.TP
	data []byte
	done func(int64, error)
}

func newShards(b testing.TB, n int, commit string) *shards {
	sh := &shards{b: b, commit: commit, leo: make(map[engine.TP]int64)}
	sh.cond = sync.NewCond(&sh.mu)
	dir := b.TempDir()
	for i := range n {
		q := make(chan job, 1024)
		sh.qs = append(sh.qs, q)
		sh.wg.Add(1)
		go sh.run(q, filepath.Join(dir, fmt.Sprint(i)))
	}
	return sh
}

func (sh *shards) run(q chan job, dir string) {
	defer sh.wg.Done()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		sh.b.Error(err)
		return
	}
	files := map[engine.TP]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for j := range q {
		round := []job{j}
	more:
		for {
			select {
			case j, ok := <-q:
				if !ok {
					break more
				}
				round = append(round, j)
			default:
				break more
			}
		}
		written := map[*os.File]bool{}
		for _, j := range round {
			f := files[j.tp]
			if f == nil {
				var err error
				f, err = os.Create(filepath.Join(dir, fmt.Sprint(j.tp.Partition)))
				if err != nil {
					sh.b.Error(err)
					return
				}
				files[j.tp] = f
			}
			if _, err := f.Write(j.data); err != nil {
				sh.b.Error(err)
				return
			}
			written[f] = true
		}
		switch sh.commit {
		case "commit2ms":
			time.Sleep(2 * time.Millisecond)
		case "fsync":
			for f := range written {
				if err := f.Sync(); err != nil {
					sh.b.Error(err)
					return
				}
			}
		}
		for _, j := range round {
			next := lastOffset(j.data) + 1
			sh.mu.Lock()
			sh.leo[j.tp] = next
			sh.cond.Broadcast()
			sh.mu.Unlock()
			j.done(next, nil)
		}
	}
}

func (sh *shards) Records(tp engine.TP, data []byte, _, _ int64, done func(int64, error)) {
	sh.qs[int(tp.Partition)%len(sh.qs)] <- job{tp: tp, data: data, done: done}
}
func (sh *shards) Truncate(engine.TP, int32, int64, func(int64, error)) {
	sh.b.Error("unexpected Truncate")
}
func (sh *shards) OutOfRange(engine.TP, int64, int64, func(int64, error)) {
	sh.b.Error("unexpected OutOfRange")
}
func (sh *shards) HighWatermark(engine.TP, int64, int64) {}
func (sh *shards) Paused(tp engine.TP, err error)        { sh.b.Errorf("%v paused: %v", tp, err) }

func (sh *shards) wait(parts int, end int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for {
		n := 0
		for _, leo := range sh.leo {
			if leo >= end {
				n++
			}
		}
		if n == parts {
			return
		}
		sh.cond.Wait()
	}
}

func (sh *shards) close() {
	for _, q := range sh.qs {
		close(q)
	}
	sh.wg.Wait()
}

// lastOffset is the last offset of whole batches.
func lastOffset(data []byte) int64 {
	last := int64(-1)
	for off := 0; off+61 <= len(data); {
		base := int64(binary.BigEndian.Uint64(data[off:]))
		last = base + int64(int32(binary.BigEndian.Uint32(data[off+23:])))
		off += int(binary.BigEndian.Uint32(data[off+8:])) + 12
	}
	return last
}

// BenchmarkSessionRequestBytes: the mean Fetch request of a stream of
// 1,000 partitions from ringlog's broker, with fetch sessions (KIP-227)
// and without (a leader keeping none), idle and with a trickle of 40
// records, and the process's CPU per second while idle (leader and
// follower together; the Go runtime's count, without kernel time). One
// run per invocation (it creates 2,000 partitions):
//
//	go test -run '^$' -bench SessionRequestBytes -benchtime 1x ./replication/fetcher
func BenchmarkSessionRequestBytes(b *testing.B) {
	with, without := sessionRequestBytes(b, 1000, 40, 3*time.Second)
	b.ReportMetric(with.idle, "idle-B/req-sessions")
	b.ReportMetric(without.idle, "idle-B/req-sessionless")
	b.ReportMetric(with.trickle, "trickle-B/req-sessions")
	b.ReportMetric(without.trickle, "trickle-B/req-sessionless")
	b.ReportMetric(with.idleCPU, "idle-cpu-s/s-sessions")
	b.ReportMetric(without.idleCPU, "idle-cpu-s/s-sessionless")
}
