package segment

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringlog/ioring"
)

// TestReadersDuringWrites runs readers on other goroutines while the owner
// appends, rolls, enforces retention and deletes records. Every batch a
// reader gets must be valid and in offset order; run with -race.
func TestReadersDuringWrites(t *testing.T) {
	forEachIO(t, func(t *testing.T, x ioring.IO) {
		cfg := smallConfig()
		cfg.RetentionBytes = 256 << 10
		l := openLog(t, t.TempDir(), cfg, Options{IO: x})
		defer l.Close()
		var stop atomic.Bool
		var reads atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					start, leo := l.LogStartOffset(), l.LEO()
					if leo == start {
						continue
					}
					off := start + int64(r)*(leo-start)/3
					b, err := l.ReadBatches(off, 32<<10, leo)
					if errors.Is(err, ErrOutOfRange) {
						continue // retention moved the start meanwhile
					}
					if err != nil {
						errc <- err
						return
					}
					hs := splitBatchesErr(b)
					if hs != nil {
						errc <- hs
						return
					}
					if _, _, err := l.OffsetForTimestamp(int64(off), leo); err != nil && !errors.Is(err, ErrNotFound) {
						errc <- err
						return
					}
					reads.Add(1)
				}
			}()
		}
		deadline := time.Now().Add(2 * time.Second)
		for i := 0; time.Now().Before(deadline) || reads.Load() < 100; i++ {
			if _, err := l.Append([][]byte{mkBatch(t, 4, 200, int64(i*4), i)}, AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if i%50 == 0 {
				if _, err := l.EnforceRetention(l.LEO()); err != nil {
					t.Fatal(err)
				}
			}
			if i%333 == 0 {
				if _, err := l.DeleteRecordsBefore(l.LEO() - 100); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
		}
		stop.Store(true)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		if l.Size() > cfg.RetentionBytes+cfg.SegmentBytes {
			t.Fatalf("retention did not keep up: %d bytes", l.Size())
		}
	})
}
