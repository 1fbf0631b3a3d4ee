package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"ringlog/ioring"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// mkBatch builds a producer batch of n records; pid < 0 means not
// idempotent.
func mkBatch(t testing.TB, n int, value string, ts int64, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: fmt.Appendf(nil, "%s-%d", value, i)}
	}
	if pid < 0 {
		epoch, seq = -1, -1
	}
	h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts + int64(n-1), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openEngine(t testing.TB, dir string, mode ioring.Mode) *Core {
	t.Helper()
	e, err := OpenCore(Config{Dir: dir, Shards: 2, IO: mode})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func modes() []ioring.Mode { return []ioring.Mode{ioring.ModeAuto, ioring.ModePortable} }

// appendSync appends and waits.
func appendSync(e *Core, tp TP, records []byte) (AppendResult, error) {
	type res struct {
		r   AppendResult
		err error
	}
	ch := make(chan res, 1)
	e.Append(tp, records, AppendOptions{}, func(r AppendResult, err error) { ch <- res{r, err} })
	r := <-ch
	return r.r, r.err
}

func readAll(t testing.TB, e *Core, tp TP) []batch.Header {
	t.Helper()
	st, err := e.State(tp)
	if err != nil {
		t.Fatal(err)
	}
	var out []batch.Header
	for off := st.LogStartOffset; off < st.HW; {
		res, err := e.Read(tp, off, 1<<20, true, ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, res.Bytes)
		n := 0
		for _, rg := range res.Regions {
			if err := rg.ReadAt(buf[n : n+int(rg.Len)]); err != nil {
				t.Fatal(err)
			}
			n += int(rg.Len)
		}
		res.Release()
		it := batch.Split(buf)
		for it.Next() {
			h, err := batch.Validate(it.Batch(), batch.Stored)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, h)
			off = h.NextOffset()
		}
	}
	return out
}

func TestProduceConsumeManyPartitions(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, mode)
			if _, err := e.CreateTopic("events", 8, 1, nil, false); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errc := make(chan error, 8*200)
			for pt := range int32(8) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						done := make(chan struct{})
						e.Append(TP{"events", pt}, mkBatch(t, 5, fmt.Sprintf("p%d-%d", pt, i), 1000, -1, 0, 0), AppendOptions{}, func(r AppendResult, err error) {
							if err == nil && r.BaseOffset != int64(i*5) {
								err = fmt.Errorf("partition %d batch %d at offset %d", pt, i, r.BaseOffset)
							}
							if err != nil {
								errc <- err
							}
							close(done)
						})
						<-done
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			for pt := range int32(8) {
				hs := readAll(t, e, TP{"events", pt})
				if len(hs) != 200 || hs[199].LastOffset() != 999 {
					t.Fatalf("partition %d: %d batches", pt, len(hs))
				}
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			// Everything survives a restart, which skips recovery.
			e = openEngine(t, dir, mode)
			defer e.Close()
			for pt := range int32(8) {
				if st, _ := e.State(TP{"events", pt}); st.HW != 1000 || st.LEO != 1000 {
					t.Fatalf("after restart partition %d: %+v", pt, st)
				}
			}
		})
	}
}

func TestIdempotentProducer(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	e.CreateTopic("idem", 1, -1, nil, false)
	tp := TP{"idem", 0}
	pid, err := e.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	must := func(r AppendResult, err error) AppendResult {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r0 := must(appendSync(e, tp, mkBatch(t, 3, "a", 1, pid, 0, 0)))
	must(appendSync(e, tp, mkBatch(t, 2, "b", 1, pid, 0, 3)))
	// A retry of the first batch: same offset, nothing written, and, as
	// Kafka answers, the original batch's max timestamp (1+2) as the log
	// append time.
	if r := must(appendSync(e, tp, mkBatch(t, 3, "a", 1, pid, 0, 0))); !r.Duplicate || r.BaseOffset != r0.BaseOffset || r.LogAppendTime != 3 {
		t.Fatalf("retry: %+v", r)
	}
	if _, err := appendSync(e, tp, mkBatch(t, 1, "gap", 1, pid, 0, 9)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	// A new epoch starts over at 0; the old epoch is fenced.
	must(appendSync(e, tp, mkBatch(t, 1, "c", 1, pid, 1, 0)))
	if _, err := appendSync(e, tp, mkBatch(t, 1, "old", 1, pid, 0, 5)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	if _, err := appendSync(e, tp, mkBatch(t, 1, "new", 1, pid, 2, 4)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	if st, _ := e.State(tp); st.LEO != 6 {
		t.Fatalf("LEO %d, want 6", st.LEO)
	}
	e.Close()
	// The state survives a clean restart (snapshot) ...
	e = openEngine(t, dir, ioring.ModeAuto)
	if r := must(appendSync(e, tp, mkBatch(t, 1, "c", 1, pid, 1, 0))); !r.Duplicate || r.BaseOffset != 5 {
		t.Fatalf("retry after restart: %+v", r)
	}
	e.Close()
	// ... and one without a snapshot (rebuilt from the log).
	os.Remove(filepath.Join(dir, "idem-0", snapshotFile))
	e = openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	if r := must(appendSync(e, tp, mkBatch(t, 1, "c", 1, pid, 1, 0))); !r.Duplicate || r.BaseOffset != 5 {
		t.Fatalf("retry after rebuild: %+v", r)
	}
	if _, err := appendSync(e, tp, mkBatch(t, 1, "old", 1, pid, 0, 5)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch after rebuild: %v", err)
	}
	// Producer ids are never handed out twice, across restarts.
	pid2, _ := e.AllocateProducerID()
	if pid2 <= pid {
		t.Fatalf("producer id %d after %d", pid2, pid)
	}
}

func TestRequestsInOneRoundSeeEachOther(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("r", 1, -1, nil, false)
	tp := TP{"r", 0}
	// Queue many requests of one producer before the shard can run a round:
	// the later ones must pass the sequence check against the earlier ones.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []int64
	for i := range 50 {
		wg.Add(1)
		e.Append(tp, mkBatch(t, 2, "x", 1, 7, 0, int32(2*i)), AppendOptions{}, func(r AppendResult, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got = append(got, r.BaseOffset)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(got)
	for i, o := range got {
		if o != int64(2*i) {
			t.Fatalf("offsets %v", got)
		}
	}
}

func TestAppendErrors(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("t", 1, -1, map[string]string{"max.message.bytes": "500", "min.insync.replicas": "2"}, false)
	tp := TP{"t", 0}
	if _, err := appendSync(e, TP{"nope", 0}, mkBatch(t, 1, "x", 1, -1, 0, 0)); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := appendSync(e, TP{"t", 1}, mkBatch(t, 1, "x", 1, -1, 0, 0)); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, err := appendSync(e, tp, mkBatch(t, 100, "big", 1, -1, 0, 0)); !errors.Is(err, segment.ErrBatchTooBig) {
		t.Fatalf("too big: %v", err)
	}
	bad := mkBatch(t, 1, "x", 1, -1, 0, 0)
	bad[len(bad)-1] ^= 1
	if _, err := appendSync(e, tp, bad); !errors.Is(err, segment.ErrInvalidBatch) {
		t.Fatalf("bad crc: %v", err)
	}
	if _, err := appendSync(e, tp, []byte{1, 2, 3}); !errors.Is(err, segment.ErrInvalidBatch) {
		t.Fatalf("garbage: %v", err)
	}
	future := mkBatch(t, 1, "x", time.Now().Add(2*time.Hour).UnixMilli(), -1, 0, 0)
	if _, err := appendSync(e, tp, future); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("future timestamp: %v", err)
	}
	if st, _ := e.State(tp); st.LEO != 0 {
		t.Fatalf("rejected appends wrote: LEO %d", st.LEO)
	}
}

// TestAppendMinInsyncAboveReplicas: on an engine without replication every
// partition is its only replica, and min.insync.replicas is capped at the
// replica count as Kafka 4 caps it: a topic with min.insync.replicas 2
// takes acks=all appends (it refused them all with NOT_ENOUGH_REPLICAS,
// which internal/difftest found against Kafka).
func TestAppendMinInsyncAboveReplicas(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("t", 1, -1, map[string]string{"min.insync.replicas": "2"}, false)
	done := make(chan error, 1)
	e.Append(TP{"t", 0}, mkBatch(t, 1, "x", 1, -1, 0, 0), AppendOptions{RequireISR: true}, func(_ AppendResult, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("acks=all with min.insync.replicas 2 on one replica: %v", err)
	}
}

func TestWaiterWakesOnAppend(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("w", 2, -1, nil, false)
	w := e.NewWaiter([]TP{{"w", 0}, {"w", 1}, {"absent", 0}})
	defer w.Stop()
	select {
	case <-w.C:
		t.Fatal("woken before any append")
	case <-time.After(20 * time.Millisecond):
	}
	go appendSync(e, TP{"w", 1}, mkBatch(t, 1, "x", 1, -1, 0, 0))
	select {
	case <-w.C:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by an append")
	}
}

func TestTopicAdmin(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	for _, c := range []struct {
		name  string
		parts int32
		rf    int16
		cfg   map[string]string
		want  error
	}{
		{"", 1, 1, nil, ErrInvalidTopic},
		{"bad/name", 1, 1, nil, ErrInvalidTopic},
		{"..", 1, 1, nil, ErrInvalidTopic},
		{"ok", 0, 1, nil, ErrInvalidPartitions},
		{"ok", 1, 3, nil, ErrInvalidReplication},
		{"ok", 1, 1, map[string]string{"retention.ms": "soon"}, ErrInvalidConfig},
		{"ok", 1, 1, map[string]string{"no.such.config": "1"}, ErrInvalidConfig},
	} {
		if _, err := e.CreateTopic(c.name, c.parts, c.rf, c.cfg, false); !errors.Is(err, c.want) {
			t.Fatalf("CreateTopic(%q, %d, %d, %v) = %v, want %v", c.name, c.parts, c.rf, c.cfg, err, c.want)
		}
	}
	if _, err := e.CreateTopic("v", 3, 1, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Topic("v"); ok {
		t.Fatal("validate_only created the topic")
	}
	info, err := e.CreateTopic("a.b", -1, -1, map[string]string{"retention.ms": "1000", "flush.messages": "1"}, false)
	if err != nil || info.Partitions != 1 || info.Config.Log.RetentionMs != 1000 || info.Config.Log.Flush != segment.FlushAlways {
		t.Fatalf("create: %+v %v", info, err)
	}
	if _, err := e.CreateTopic("a.b", 1, 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := e.CreateTopic("a_b", 1, 1, nil, false); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("colliding name: %v", err)
	}
	if err := e.CreatePartitions("a.b", 1, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	if err := e.CreatePartitions("a.b", 4, false); err != nil {
		t.Fatal(err)
	}
	appendSync(e, TP{"a.b", 3}, mkBatch(t, 1, "x", 1, -1, 0, 0))
	if err := e.IncrementalAlterTopicConfig("a.b", []ConfigOp{{Name: "retention.ms", Op: 1}, {Name: "segment.bytes", Op: 0, Value: "1048576"}, {Name: "cleanup.policy", Op: 2, Value: "compact"}}, false); err != nil {
		t.Fatal(err)
	}
	info, _ = e.Topic("a.b")
	if info.Config.Log.RetentionMs != DefaultTopicConfig().Log.RetentionMs || info.Config.Log.SegmentBytes != 1<<20 || info.Config.CleanupPolicy != "compact,delete" {
		t.Fatalf("after incremental alter: %+v", info.Config)
	}
	if err := e.IncrementalAlterTopicConfig("a.b", []ConfigOp{{Name: "retention.ms", Op: 2, Value: "5"}}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("append to a non-list: %v", err)
	}
	if err := e.AlterTopicConfig("a.b", map[string]string{"message.timestamp.type": "LogAppendTime"}, false); err != nil {
		t.Fatal(err)
	}
	e.CreateTopic("gone", 2, 1, nil, false)
	appendSync(e, TP{"gone", 0}, mkBatch(t, 1, "x", 1, -1, 0, 0))
	if err := e.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !os.IsNotExist(err) {
		t.Fatalf("partition folder left: %v", err)
	}
	if err := e.DeleteTopic("gone"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("delete twice: %v", err)
	}
	e.Close()
	e = openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	info, ok := e.Topic("a.b")
	if !ok || info.Partitions != 4 || !info.Config.LogAppendTime || len(info.Overrides) != 1 {
		t.Fatalf("after restart: %+v", info)
	}
	if st, _ := e.State(TP{"a.b", 3}); st.LEO != 1 {
		t.Fatalf("data of an added partition lost: %+v", st)
	}
	if _, ok := e.Topic("gone"); ok {
		t.Fatal("deleted topic came back")
	}
	// A topic of a deleted name starts empty.
	e.CreateTopic("gone", 1, 1, nil, false)
	if st, _ := e.State(TP{"gone", 0}); st.LEO != 0 {
		t.Fatalf("recreated topic holds old data: %+v", st)
	}
}

func TestListOffsetsAndDeleteRecords(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("l", 1, -1, nil, false)
	tp := TP{"l", 0}
	for i := range 10 {
		appendSync(e, tp, mkBatch(t, 10, "x", int64(1000*i), -1, 0, 0)) // ts 1000i .. 1000i+9
	}
	check := func(ts, wantOff, wantTs int64) {
		t.Helper()
		off, gotTs, _, err := e.ListOffset(tp, ts, ReadUncommitted)
		if err != nil || off != wantOff || gotTs != wantTs {
			t.Fatalf("ListOffset(%d) = %d %d %v, want %d %d", ts, off, gotTs, err, wantOff, wantTs)
		}
	}
	check(LatestTimestamp, 100, -1)
	check(EarliestTimestamp, 0, -1)
	check(MaxTimestamp, 99, 9009)
	check(3005, 35, 3005)
	check(3500, 40, 4000)
	check(99_999, -1, -1)
	if _, err := e.DeleteRecords(tp, 101); !errors.Is(err, segment.ErrOutOfRange) {
		t.Fatalf("delete past HW: %v", err)
	}
	low, err := e.DeleteRecords(tp, 42)
	if err != nil || low != 42 {
		t.Fatalf("DeleteRecords: %d %v", low, err)
	}
	check(EarliestTimestamp, 42, -1)
	if _, err := e.Read(tp, 41, 100, true, ReadUncommitted); !errors.Is(err, segment.ErrOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if low, _ := e.DeleteRecords(tp, -1); low != 100 {
		t.Fatalf("delete to HW: %d", low)
	}
}

func TestConfigEntries(t *testing.T) {
	cfg, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{"retention.ms": "5", "cleanup.policy": "delete,compact"})
	if err != nil {
		t.Fatal(err)
	}
	ents := cfg.Entries(map[string]string{"retention.ms": "5"})
	found := 0
	for _, en := range ents {
		switch en.Name {
		case "retention.ms":
			if en.Value != "5" || en.Default {
				t.Fatalf("%+v", en)
			}
			found++
		case "cleanup.policy":
			if en.Value != "compact,delete" || !en.Default {
				t.Fatalf("%+v", en)
			}
			found++
		}
	}
	if found != 2 || len(ents) != len(ConfigNames()) {
		t.Fatalf("entries: %v", ents)
	}
	// An override shows as written, as Kafka describes it.
	for _, en := range cfg.Entries(map[string]string{"cleanup.policy": "delete,compact"}) {
		if en.Name == "cleanup.policy" && (en.Value != "delete,compact" || en.Default) {
			t.Fatalf("override as written: %+v", en)
		}
	}
}

func TestSnapshotDecoding(t *testing.T) {
	ps := newProducerState()
	for pid := range int64(20) {
		for i := range 7 {
			ps.update(batch.Header{ProducerID: pid, ProducerEpoch: 3, BaseSequence: int32(i * 2), LastOffsetDelta: 1, MaxTimestamp: 99}, pid*100+int64(i*2), nil, false)
		}
	}
	b := encodeSnapshot(ps.entries, 1234)
	got, off, err := decodeSnapshot(b)
	if err != nil || off != 1234 || len(got.entries) != 20 {
		t.Fatalf("decode: %v %d %d", err, off, len(got.entries))
	}
	for pid, en := range ps.entries {
		if g := got.entries[pid]; g == nil || g.epoch != en.epoch || !slices.Equal(g.batches, en.batches) {
			t.Fatalf("producer %d differs", pid)
		}
	}
	for i := range b {
		c := slices.Clone(b)
		c[i] ^= 0x40
		if _, _, err := decodeSnapshot(c); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("flip at %d accepted", i)
		}
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	ps := newProducerState()
	ps.update(batch.Header{ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0, LastOffsetDelta: 3}, 10, nil, false)
	f.Add(encodeSnapshot(ps.entries, 14))
	f.Add(encodeSnapshot(newProducerState().entries, 0))
	f.Add([]byte("RLPS\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, off, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		ps2, off2, err := decodeSnapshot(encodeSnapshot(ps.entries, off))
		if err != nil || off2 != off || len(ps2.entries) != len(ps.entries) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func TestCompressedRecordsAreChecked(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("z", 1, -1, nil, false)
	// A zstd batch whose records claim one more record than they hold: the
	// CRC is right (the producer computed it), the content is not.
	recs := []batch.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}}
	h := batch.Header{LastOffsetDelta: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(nil, h, batch.Zstd, recs)
	if err != nil {
		t.Fatal(err)
	}
	// Build sets the count from the records; make it lie and re-seal.
	binaryPutCount(b, 3)
	if _, err := appendSync(e, TP{"z", 0}, b); !errors.Is(err, segment.ErrInvalidBatch) || errors.Is(err, batch.ErrCRC) {
		t.Fatalf("corrupt compressed records accepted: %v", err)
	}
	good, _ := batch.Build(nil, batch.Header{LastOffsetDelta: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, batch.Zstd, recs)
	if _, err := appendSync(e, TP{"z", 0}, good); err != nil {
		t.Fatal(err)
	}
}

// binaryPutCount rewrites a batch's record count and its CRC.
func binaryPutCount(b []byte, n int32) {
	b[batch.NumRecordsPos] = byte(n >> 24)
	b[batch.NumRecordsPos+1] = byte(n >> 16)
	b[batch.NumRecordsPos+2] = byte(n >> 8)
	b[batch.NumRecordsPos+3] = byte(n)
	c := batch.Checksum(b)
	b[batch.CRCPos], b[batch.CRCPos+1], b[batch.CRCPos+2], b[batch.CRCPos+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

func TestAppendBatchAcrossShards(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	e.CreateTopic("m", 6, -1, nil, false)
	bad := mkBatch(t, 1, "x", 1, -1, 0, 0)
	bad[len(bad)-1] ^= 1
	var wg sync.WaitGroup
	results := make([]error, 8)
	offsets := make([]int64, 8)
	var items []AppendItem
	for i := range 8 {
		rec := mkBatch(t, 2, fmt.Sprint(i), 1, -1, 0, 0)
		tp := TP{"m", int32(i % 6)}
		switch i {
		case 6:
			tp = TP{"absent", 0}
		case 7:
			rec = bad
		}
		wg.Add(1)
		items = append(items, AppendItem{TP: tp, Records: rec, Done: func(r AppendResult, err error) {
			results[i], offsets[i] = err, r.BaseOffset
			wg.Done()
		}})
	}
	e.AppendBatch(items, AppendOptions{})
	wg.Wait()
	for i := range 6 {
		if results[i] != nil {
			t.Fatalf("item %d: %v", i, results[i])
		}
	}
	if !errors.Is(results[6], ErrUnknownTopicOrPartition) || !errors.Is(results[7], segment.ErrInvalidBatch) {
		t.Fatalf("bad items: %v, %v", results[6], results[7])
	}
	for pt := range int32(6) {
		if st, _ := e.State(TP{"m", pt}); st.LEO != 2 {
			t.Fatalf("partition %d LEO %d", pt, st.LEO)
		}
	}
}
