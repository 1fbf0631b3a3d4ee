package segment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"ringlog/ioring"
)

// BenchmarkAppend measures append throughput in rounds of 64 KiB (one
// submission each: one writev, plus one linked fdatasync under the policy
// always), made of 1 KiB or 64 KiB batches, on both I/O paths. Compare its
// MB/s with scripts/bench-disk.sh's fio figures from the same run.
func BenchmarkAppend(b *testing.B) {
	const round = 64 << 10
	for _, kind := range []string{"uring", "uring-ring", "portable"} {
		for _, batchSize := range []int{1 << 10, 64 << 10} {
			for _, policy := range []FlushPolicy{FlushNever, FlushAlways} {
				name := fmt.Sprintf("%s/batch=%dKiB/flush=%s", kind, batchSize>>10, policy)
				b.Run(name, func(b *testing.B) {
					x := ioKinds(b)[kind]
					cfg := DefaultConfig()
					cfg.Flush = policy
					cfg.RetentionBytes = 2 << 30
					cfg.SegmentBytes = 256 << 20
					cfg.MaxMessageBytes = math.MaxInt32
					l := openLog(b, b.TempDir(), cfg, Options{IO: x})
					defer l.Close()
					// A batch of n records whose encoded size is batchSize.
					now := time.Now().UnixMilli()
					one := mkBatch(b, 1, 0, now, 0)
					payload := batchSize - len(one) - 3
					if batchSize > 1<<10 {
						payload -= 2
					}
					tmpl := mkBatch(b, 1, payload, now, 0)
					batches := make([][]byte, round/batchSize)
					for i := range batches {
						batches[i] = append([]byte(nil), tmpl...)
					}
					b.SetBytes(int64(len(tmpl) * len(batches)))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := l.Append(batches, AppendOptions{}); err != nil {
							b.Fatal(err)
						}
						if i%4096 == 4095 {
							if _, err := l.EnforceRetention(l.LEO()); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}

var (
	bigOnce sync.Once
	bigLog  *Log
)

// BenchmarkOffsetLookup1GiB looks up random offsets in a 1 GiB segment of
// 1 KiB batches: "index" is the mmap'd offset index alone (offset to the
// position of a nearby batch), "read" is what a fetch does (index, then the
// batch headers up to the one holding the offset, then the region).
func BenchmarkOffsetLookup1GiB(b *testing.B) {
	bigOnce.Do(func() {
		cfg := DefaultConfig()
		cfg.SegmentBytes = math.MaxInt32
		dir := filepath.Join(b.TempDir(), "big")
		l := openLog(b, dir, cfg, Options{})
		tmpl := mkBatch(b, 1, 1024-len(mkBatch(b, 1, 0, 1, 0))-3, 1, 0)
		batches := make([][]byte, 256)
		for i := range batches {
			batches[i] = append([]byte(nil), tmpl...)
		}
		for l.Size() < 1<<30-int64(len(tmpl)*len(batches)) {
			if _, err := l.Append(batches, AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if l.Segments() != 1 {
			b.Fatalf("%d segments", l.Segments())
		}
		bigLog = l
	})
	l := bigLog
	leo := l.LEO()
	r := rand.New(rand.NewPCG(1, 1))
	offsets := make([]int64, 4096)
	for i := range offsets {
		offsets[i] = r.Int64N(leo)
	}
	b.Run("index", func(b *testing.B) {
		s := l.active
		for i := 0; i < b.N; i++ {
			s.offsets.lookup(offsets[i%len(offsets)])
		}
	})
	b.Run("read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			res, err := l.Read(offsets[i%len(offsets)], 1<<20, leo, true)
			if err != nil {
				b.Fatal(err)
			}
			res.Release()
		}
	})
	b.Run("read-tail", func(b *testing.B) {
		// Consumers that keep up read near the LEO, where the page cache
		// and the header window are warm.
		for i := 0; i < b.N; i++ {
			res, err := l.Read(leo-1-int64(i%64), 1<<20, leo, true)
			if err != nil {
				b.Fatal(err)
			}
			res.Release()
		}
	})
}

// BenchmarkAppendRound is a shard's round: 16 partition logs sharing one IO,
// each taking 4 batches of 1 KiB, all written with one submission (group
// commit) and completed together. Under flush always each log's write is
// linked to its own fdatasync; io_uring runs the 16 chains concurrently,
// the portable path one after the other.
func BenchmarkAppendRound(b *testing.B) {
	const logs, perLog = 16, 4
	for _, kind := range []string{"uring", "uring-ring", "portable"} {
		for _, policy := range []FlushPolicy{FlushNever, FlushAlways} {
			b.Run(fmt.Sprintf("%s/flush=%s", kind, policy), func(b *testing.B) {
				x := ioKinds(b)[kind]
				cfg := DefaultConfig()
				cfg.Flush = policy
				cfg.SegmentBytes = 64 << 20
				cfg.RetentionBytes = 128 << 20
				dir := b.TempDir()
				// Current timestamps: time-based retention must not empty the
				// logs in the middle of the measurement.
				now := time.Now().UnixMilli()
				tmpl := mkBatch(b, 1, 1024-len(mkBatch(b, 1, 0, now, 0))-3, now, 0)
				ls := make([]*Log, logs)
				batches := make([][][]byte, logs)
				for i := range ls {
					ls[i] = openLog(b, filepath.Join(dir, fmt.Sprint(i)), cfg, Options{IO: x})
					defer ls[i].Close()
					for range perLog {
						batches[i] = append(batches[i], append([]byte(nil), tmpl...))
					}
				}
				b.SetBytes(int64(logs * perLog * len(tmpl)))
				var ops []*ioring.Op
				var out []*ioring.Op
				b.ResetTimer()
				for n := 0; n < b.N; n++ {
					ops = ops[:0]
					for i, l := range ls {
						t, err := l.Prepare(batches[i], AppendOptions{})
						if err != nil {
							b.Fatal(err)
						}
						ops = append(ops, t.Ops...)
					}
					if err := x.Submit(ops...); err != nil {
						b.Fatal(err)
					}
					for pending := 0; pending < logs; {
						var err error
						out, err = x.Wait(out[:0], 1, -1)
						if err != nil {
							b.Fatal(err)
						}
						for _, op := range out {
							if t, done := Complete(op); done && t.Kind == TaskAppend {
								if t.Err != nil {
									b.Fatal(t.Err)
								}
								pending++
							}
						}
					}
					if n%1024 == 1023 {
						for _, l := range ls {
							l.EnforceRetention(l.LEO())
						}
					}
				}
			})
		}
	}
}
