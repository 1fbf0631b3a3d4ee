package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"ringlog/ioring"
	"ringlog/segment/batch"
)

// mkBatch builds a producer batch of n records with values of size bytes,
// the first record stamped ts and each next one 1 ms later.
func mkBatch(t testing.TB, n, size int, ts int64, seed int) []byte {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(seed + i*13 + j)
		}
		recs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: fmt.Appendf(nil, "k%d-%d", seed, i), Value: v}
	}
	h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts + int64(n-1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ioKinds returns the IO implementations available here, each closed at
// the end of the test.
func ioKinds(t testing.TB) map[string]ioring.IO {
	t.Helper()
	out := map[string]ioring.IO{"portable": ioring.NewPortable()}
	if runtime.GOOS == "linux" {
		// "uring" copies data inline and syncs through the ring (the
		// default); "uring-ring" submits the writes as SQEs too.
		for name, mode := range map[string]ioring.WriteMode{"uring": ioring.WritesInline, "uring-ring": ioring.WritesInRing} {
			u, c, err := ioring.Open(ioring.ModeUring, ioring.Config{Writes: mode})
			if err != nil {
				t.Fatalf("io_uring unavailable on Linux: %v (%v)", err, c)
			}
			out[name] = u
		}
	}
	for _, x := range out {
		t.Cleanup(func() { x.Close() })
	}
	// The same IOs with the logs' appends written with O_DIRECT
	// (Options.DirectWrites): openLog unwraps them. Not uring-ring's: a
	// direct write goes in the ring in either write mode (ioring.Op.Direct).
	for name, x := range maps.Clone(out) {
		if name != "uring-ring" {
			out[name+"-direct"] = directIO{x}
		}
	}
	return out
}

// directIO marks an IO whose logs openLog opens with DirectWrites.
type directIO struct{ ioring.IO }

// withDirect unwraps a directIO into opts.
func withDirect(opts Options) Options {
	if d, ok := opts.IO.(directIO); ok {
		opts.IO, opts.DirectWrites = d.IO, true
	}
	return opts
}

func forEachIO(t *testing.T, fn func(t *testing.T, x ioring.IO)) {
	for name, x := range ioKinds(t) {
		t.Run(name, func(t *testing.T) { fn(t, x) })
	}
}

// clock is a settable clock for logs under test.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *clock                   { return &clock{now: time.UnixMilli(1_700_000_000_000)} }
func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.SegmentIndexBytes = 4096
	c.IndexIntervalBytes = 1024
	return c
}

func openLog(t testing.TB, dir string, cfg Config, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, cfg, withDirect(opts))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// crash abandons a log as a killed process would: no sync, no trim, no
// clean-shutdown marker. The page cache keeps what was written.
func crash(l *Log) {
	l.closed = true
	l.closeFiles()
}

// readAll returns the whole batches from the log start to the LEO.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	b, err := l.ReadBatches(l.LogStartOffset(), 1<<40, l.LEO())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitBatches parses concatenated batches, failing on any invalid one.
func splitBatches(t testing.TB, b []byte) []batch.Header {
	t.Helper()
	hs, err := parseBatches(b)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// parseBatches checks that b is whole valid batches in offset order.
func parseBatches(b []byte) ([]batch.Header, error) {
	var hs []batch.Header
	for len(b) > 0 {
		if len(b) < batch.HeaderSize {
			return hs, fmt.Errorf("%d trailing bytes", len(b))
		}
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return hs, fmt.Errorf("bad header: %v", err)
		}
		if _, err := batch.Validate(b[:h.Size()], batch.Stored); err != nil {
			return hs, fmt.Errorf("read returned an invalid batch at offset %d: %w", h.BaseOffset, err)
		}
		if n := len(hs); n > 0 && h.BaseOffset < hs[n-1].NextOffset() {
			return hs, fmt.Errorf("batch at %d after one ending at %d", h.BaseOffset, hs[n-1].NextOffset())
		}
		hs = append(hs, h)
		b = b[h.Size():]
	}
	return hs, nil
}

func splitBatchesErr(b []byte) error {
	_, err := parseBatches(b)
	return err
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

// indexEntries lists a segment's valid index entries.
func indexEntries(s *segment) (offs [][2]int64, times [][2]int64) {
	for i := range int(s.offsets.count.Load()) {
		o, p := s.offsets.entry(i)
		offs = append(offs, [2]int64{o, p})
	}
	for i := range int(s.times.count.Load()) {
		ts, o := s.times.entry(i)
		times = append(times, [2]int64{ts, o})
	}
	return
}

func sameBytes(t testing.TB, got, want []byte, what string) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d expected", what, len(got), len(want))
	}
}

// stamped returns a copy of b as a producer append writes it: at offset
// base, under leader epoch epoch. The append itself may rewrite b in place
// or a copy of it (Staging), so tests build what they expect with this.
func stamped(t testing.TB, b []byte, base int64, epoch int32) []byte {
	t.Helper()
	c := bytes.Clone(b)
	if err := errors.Join(batch.SetBaseOffset(c, base), batch.SetPartitionLeaderEpoch(c, epoch)); err != nil {
		t.Fatal(err)
	}
	return c
}

// stampedAll is stamped for the batches of one append, the first at base.
func stampedAll(t testing.TB, batches [][]byte, base int64, epoch int32) []byte {
	t.Helper()
	var out []byte
	for _, b := range batches {
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stamped(t, b, base, epoch)...)
		base += int64(h.LastOffsetDelta) + 1
	}
	return out
}
