package segment

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"ringlog/segment/batch"
)

// BenchmarkClean measures the cleaner's throughput: MB/s of log cleaned (the
// size of the segments a clean goes through), for a log of 32 MiB of
// 100-byte values under 100,000 keys written about twice each, in batches
// of 50 records. Each iteration cleans a fresh copy of the same log; the
// copy is not timed. The clean includes both passes (offset map, rewrite)
// and the fsyncs of the cleaned segments.
//
//	go test -run '^$' -bench BenchmarkClean -benchtime 5x ./segment
func BenchmarkClean(b *testing.B) {
	for _, c := range []batch.Codec{batch.None, batch.Zstd} {
		b.Run(c.String(), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 8 << 20
			cfg.Cleanup = CleanupCompact
			template := filepath.Join(b.TempDir(), "template")
			l := openLog(b, template, cfg, Options{})
			r := rand.New(rand.NewPCG(1, 2))
			for l.Size() < 32<<20 {
				recs := make([]batch.Record, 50)
				for i := range recs {
					v := make([]byte, 100)
					for j := range v {
						v[j] = byte('a' + r.IntN(8))
					}
					recs[i] = batch.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%06d", r.IntN(100_000)), Value: v}
				}
				h := batch.Header{LastOffsetDelta: 49, BaseTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
				bb, err := batch.Build(nil, h, c, recs)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Append([][]byte{bb}, AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			forceRoll(b, l)
			size := l.Size()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			var cleaned, written, records int64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
				copyDir(b, template, dir)
				l := openLog(b, dir, cfg, Options{})
				b.StartTimer()
				st, err := l.CleanNow(l.LEO(), CleanOptions{})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				cleaned, written, records = st.BytesCleaned, st.BytesWritten, st.RecordsRead
				l.Close()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/float64(cleaned), "out/in")
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
