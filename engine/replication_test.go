package engine

import (
	"errors"
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

func openReplicated(t testing.TB, dir string, mode ioring.Mode, onAppended func(TP, int64)) *Core {
	t.Helper()
	if onAppended == nil {
		// A replication layer that only gives roles (the test's calls).
		onAppended = func(TP, int64) {}
	}
	e, err := OpenCore(Config{Dir: dir, Shards: 2, IO: mode, OnAppended: onAppended})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func appendReplicaSync(e *Core, tp TP, records []byte) (int64, error) {
	type res struct {
		leo int64
		err error
	}
	ch := make(chan res, 1)
	e.AppendReplica(tp, records, func(leo int64, err error) { ch <- res{leo, err} })
	r := <-ch
	return r.leo, r.err
}

// regionBytes copies what a read returned and releases it.
func regionBytes(t testing.TB, res ReadResult) []byte {
	t.Helper()
	defer res.Release()
	buf := make([]byte, res.Bytes)
	n := 0
	for _, rg := range res.Regions {
		if err := rg.ReadAt(buf[n : n+int(rg.Len)]); err != nil {
			t.Fatal(err)
		}
		n += int(rg.Len)
	}
	return buf
}

// replicate copies tp from leader to follower as a fetcher does: from the
// follower's LEO, at most maxBytes per fetch (so fetches end inside a
// batch), the follower's high watermark following the leader's.
func replicate(t testing.TB, leader, follower *Core, tp TP, maxBytes int64) {
	t.Helper()
	for range 10000 {
		fst, err := follower.State(tp)
		if err != nil {
			t.Fatal(err)
		}
		lst, err := leader.State(tp)
		if err != nil {
			t.Fatal(err)
		}
		if fst.LEO >= lst.LEO {
			if err := follower.SetHW(tp, lst.HW); err != nil {
				t.Fatal(err)
			}
			return
		}
		res, err := leader.ReadReplica(tp, fst.LEO, maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		leo, err := appendReplicaSync(follower, tp, regionBytes(t, res))
		if err != nil {
			t.Fatalf("append replica at %d: %v", fst.LEO, err)
		}
		if leo <= fst.LEO {
			t.Fatalf("replica append from %d left the LEO at %d", fst.LEO, leo)
		}
	}
	t.Fatal("replication does not converge")
}

// logHeaders lists every batch of tp up to its LEO.
func logHeaders(t testing.TB, e *Core, tp TP) []batch.Header {
	t.Helper()
	st, err := e.State(tp)
	if err != nil {
		t.Fatal(err)
	}
	var out []batch.Header
	for off := st.LogStartOffset; off < st.LEO; {
		res, err := e.ReadReplica(tp, off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		it := batch.Split(regionBytes(t, res))
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

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// replicaBatch is a batch as a leader stores it: at base, stamped epoch.
func replicaBatch(t testing.TB, n int, base int64, epoch int32, pid int64, seq int32) []byte {
	t.Helper()
	b := mkBatch(t, n, "r", 1, pid, 0, seq)
	mustOK(t, batch.SetBaseOffset(b, base))
	mustOK(t, batch.SetPartitionLeaderEpoch(b, epoch))
	return b
}

func TestRolesGateAppends(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			e := openReplicated(t, t.TempDir(), mode, nil)
			defer e.Close()
			if _, err := e.CreateTopic("r", 1, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			tp := TP{"r", 0}
			if st, _ := e.State(tp); st.Role != RoleNone {
				t.Fatalf("new partition of a replicated engine: %+v", st)
			}
			// No role: neither kind of append.
			if _, err := appendSync(e, tp, mkBatch(t, 1, "x", 1, -1, 0, 0)); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("append without a role: %v", err)
			}
			if _, err := appendReplicaSync(e, tp, replicaBatch(t, 1, 0, 0, -1, 0)); !errors.Is(err, ErrNotFollower) {
				t.Fatalf("replica append without a role: %v", err)
			}

			mustOK(t, e.BecomeLeader(tp, 3))
			r, err := appendSync(e, tp, mkBatch(t, 4, "x", 1, -1, 0, 0))
			if err != nil || r.BaseOffset != 0 {
				t.Fatalf("leader append: %+v %v", r, err)
			}
			if hs := logHeaders(t, e, tp); len(hs) != 1 || hs[0].PartitionLeaderEpoch != 3 {
				t.Fatalf("batch not stamped with the leader's epoch: %+v", hs)
			}
			p, _ := e.partition(tp)
			if eps := p.log().Epochs(); !slices.Equal(eps, []segment.EpochEntry{{Epoch: 3, StartOffset: 0}}) {
				t.Fatalf("epochs %v", eps)
			}
			st, _ := e.State(tp)
			if st.Role != RoleLeader || st.LeaderEpoch != 3 || st.LEO != 4 || st.HW != 0 {
				t.Fatalf("leader state: %+v (an append must not move the HW)", st)
			}
			if _, err := appendReplicaSync(e, tp, replicaBatch(t, 1, 4, 3, -1, 0)); !errors.Is(err, ErrNotFollower) {
				t.Fatalf("replica append to a leader: %v", err)
			}
			// Re-elected with a new epoch: it starts at the LEO.
			mustOK(t, e.BecomeLeader(tp, 5))
			mustOK(t, e.BecomeLeader(tp, 5)) // the same again is no change
			appendSync(e, tp, mkBatch(t, 1, "y", 1, -1, 0, 0))
			if eps := p.log().Epochs(); !slices.Equal(eps, []segment.EpochEntry{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 4}}) {
				t.Fatalf("epochs after re-election: %v", eps)
			}

			if err := e.BecomeFollower(tp, 4); !errors.Is(err, ErrStaleEpoch) {
				t.Fatalf("stale epoch: %v", err)
			}
			if err := e.BecomeLeader(tp, -1); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("negative epoch: %v", err)
			}
			if st, _ := e.State(tp); st.Role != RoleLeader || st.LeaderEpoch != 5 {
				t.Fatalf("a refused role change changed the state: %+v", st)
			}
			mustOK(t, e.BecomeFollower(tp, 6))
			if _, err := appendSync(e, tp, mkBatch(t, 1, "x", 1, -1, 0, 0)); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("append to a follower: %v", err)
			}
			if st, _ := e.State(tp); st.Role != RoleFollower || st.LeaderEpoch != 6 || st.LEO != 5 {
				t.Fatalf("follower state: %+v", st)
			}
			// A batch of a newer leader teaches the log epoch 8: a role
			// change at 7 is stale even though the role's epoch is 6.
			if _, err := appendReplicaSync(e, tp, replicaBatch(t, 1, 5, 8, -1, 0)); err != nil {
				t.Fatal(err)
			}
			if err := e.BecomeLeader(tp, 7); !errors.Is(err, ErrStaleEpoch) {
				t.Fatalf("epoch below the log's latest: %v", err)
			}
			if err := e.BecomeLeader(TP{"r", 9}, 9); !errors.Is(err, ErrUnknownTopicOrPartition) {
				t.Fatalf("unknown partition: %v", err)
			}
		})
	}
}

// TestProducerAppendQueuedBeforeRoleChange: appends already in the shard's
// inbox when BecomeFollower arrives are judged by the new role.
func TestProducerAppendQueuedBeforeRoleChange(t *testing.T) {
	e := openReplicated(t, t.TempDir(), ioring.ModeAuto, nil)
	defer e.Close()
	e.CreateTopic("q", 1, -1, nil, false)
	tp := TP{"q", 0}
	mustOK(t, e.BecomeLeader(tp, 1))
	p, _ := e.partition(tp)
	// Hold the shard so that the appends and the role change queue up
	// behind it, in that order.
	held, release := make(chan struct{}), make(chan struct{})
	mustOK(t, e.OnShard(tp, func() {
		close(held)
		<-release
	}))
	<-held
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		e.Append(tp, mkBatch(t, 1, "x", 1, -1, 0, 0), AppendOptions{}, func(_ AppendResult, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	roleErr := make(chan error, 1)
	go func() { roleErr <- e.BecomeFollower(tp, 2) }()
	// The role change is behind the appends once the inbox holds four
	// requests (the cleaner may add its own).
	for len(p.shard.inbox) < 4 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	mustOK(t, <-roleErr)
	wg.Wait()
	// The appends were taken in the round before the call ran: written
	// while the partition still led.
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d queued before the role change: %v", i, err)
		}
	}
	if _, err := appendSync(e, tp, mkBatch(t, 1, "x", 1, -1, 0, 0)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append after the role change: %v", err)
	}
	// Appends queued on the shard after a role change (AppendOnShard from
	// a call that follows it) are refused by the shard itself.
	got := make(chan error, 1)
	mustOK(t, e.OnShard(tp, func() {
		p.role.Store(int32(RoleLeader)) // as if the caller's check passed just before...
		r := e.newAppend(tp, mkBatch(t, 1, "x", 1, -1, 0, 0), AppendOptions{}, func(_ AppendResult, err error) { got <- err })
		p.role.Store(int32(RoleFollower)) // ...and the role changed on the shard
		p.shard.enqueue(r)
	}))
	if err := <-got; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append admitted by the caller, refused by the shard: %v", err)
	}
}

// TestNoReplicationLayer: an engine without a replication layer (no
// OnAppended) is its own, of one replica: its partitions lead from the
// moment they open, and every append, acks=all included, is committed
// (the high watermark at the LEO) before it is answered.
func TestNoReplicationLayer(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	e.CreateTopic("s", 1, -1, nil, false)
	tp := TP{"s", 0}
	if st, _ := e.State(tp); st.Role != RoleLeader || st.LeaderEpoch != 0 {
		t.Fatalf("state of a new partition: %+v", st)
	}
	for _, all := range []bool{false, true} {
		done := make(chan error, 1)
		var res AppendResult
		e.Append(tp, mkBatch(t, 2, "v", time.Now().UnixMilli(), -1, -1, -1), AppendOptions{RequireISR: all}, func(r AppendResult, err error) { res = r; done <- err })
		if err := <-done; err != nil {
			t.Fatalf("acks=all %v: %v", all, err)
		}
		if st, _ := e.State(tp); st.HW != st.LEO || st.HW != res.BaseOffset+2 {
			t.Fatalf("acks=all %v: answered with the high watermark at %d, LEO %d, batch at %d", all, st.HW, st.LEO, res.BaseOffset)
		}
	}
	e.Close()
	e = openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	if st, _ := e.State(tp); st.Role != RoleLeader || st.HW != 4 || st.LEO != 4 {
		t.Fatalf("state after a restart: %+v", st)
	}
}

func TestSetHWBoundsReadsAndWakes(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			e := openReplicated(t, t.TempDir(), mode, nil)
			defer e.Close()
			e.CreateTopic("h", 1, -1, nil, false)
			tp := TP{"h", 0}
			mustOK(t, e.BecomeLeader(tp, 1))
			for range 4 {
				if _, err := appendSync(e, tp, mkBatch(t, 5, "x", 1, -1, 0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			w := e.NewWaiter([]TP{tp})
			defer w.Stop()
			woken := func() bool {
				select {
				case <-w.C:
					return true
				case <-time.After(20 * time.Millisecond):
					return false
				}
			}
			if woken() {
				t.Fatal("woken by appends that did not move the HW")
			}
			// Consumers see nothing above the HW; followers see the LEO.
			if res, err := e.Read(tp, 0, 1<<20, true, ReadUncommitted); err != nil || res.Bytes != 0 {
				t.Fatalf("read above the HW: %v", err)
			} else {
				res.Release()
			}
			if hs := logHeaders(t, e, tp); len(hs) != 4 {
				t.Fatalf("ReadReplica: %d batches", len(hs))
			}
			mustOK(t, e.SetHW(tp, 10))
			if !woken() {
				t.Fatal("SetHW did not wake the waiter")
			}
			if hs := readAll(t, e, tp); len(hs) != 2 || hs[1].NextOffset() != 10 {
				t.Fatalf("consumer read below HW 10: %+v", hs)
			}
			if off, _, _, _ := e.ListOffset(tp, LatestTimestamp, ReadUncommitted); off != 10 {
				t.Fatalf("latest offset %d, want the HW", off)
			}
			if _, err := e.DeleteRecords(tp, 15); !errors.Is(err, segment.ErrOutOfRange) {
				t.Fatalf("delete records above the HW: %v", err)
			}
			// Backwards is no change, and wakes nobody.
			mustOK(t, e.SetHW(tp, 5))
			if st, _ := e.State(tp); st.HW != 10 {
				t.Fatalf("HW went back to %d", st.HW)
			}
			if woken() {
				t.Fatal("woken by a SetHW that moved nothing")
			}
			// Never past the LEO.
			mustOK(t, e.SetHW(tp, 1000))
			if st, _ := e.State(tp); st.HW != 20 {
				t.Fatalf("HW %d past the LEO 20", st.HW)
			}
			if !woken() {
				t.Fatal("not woken by the HW reaching the LEO")
			}
		})
	}
}

func TestOnAppendedReportsLEO(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			type call struct {
				tp  TP
				leo int64
			}
			var mu sync.Mutex
			var calls []call
			e := openReplicated(t, t.TempDir(), mode, func(tp TP, leo int64) {
				mu.Lock()
				calls = append(calls, call{tp, leo})
				mu.Unlock()
			})
			defer e.Close()
			e.CreateTopic("o", 2, -1, nil, false)
			lead, follow := TP{"o", 0}, TP{"o", 1}
			mustOK(t, e.BecomeLeader(lead, 1))
			mustOK(t, e.BecomeFollower(follow, 1))
			appendSync(e, lead, mkBatch(t, 3, "x", 1, -1, 0, 0))
			appendSync(e, lead, mkBatch(t, 2, "x", 1, -1, 0, 0))
			if leo, err := appendReplicaSync(e, follow, slices.Concat(replicaBatch(t, 4, 0, 1, -1, 0), replicaBatch(t, 1, 4, 1, -1, 0))); err != nil || leo != 5 {
				t.Fatalf("replica append: LEO %d, %v", leo, err)
			}
			// Refused appends report nothing.
			appendSync(e, follow, mkBatch(t, 1, "x", 1, -1, 0, 0))
			appendReplicaSync(e, follow, replicaBatch(t, 1, 9, 1, -1, 0))
			mu.Lock()
			defer mu.Unlock()
			want := []call{{lead, 3}, {lead, 5}, {follow, 5}}
			if !slices.Equal(calls, want) {
				t.Fatalf("OnAppended calls %v, want %v", calls, want)
			}
		})
	}
}

// TestAcksAllWaitsForHW: on a replicated engine acks=all is answered when
// the high watermark covers the batch, not when it is written.
func TestAcksAllWaitsForHW(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			e := openReplicated(t, t.TempDir(), mode, nil)
			defer e.Close()
			e.CreateTopic("a", 1, -1, map[string]string{"min.insync.replicas": "2"}, false)
			tp := TP{"a", 0}
			mustOK(t, e.BecomeLeader(tp, 1))
			type res struct {
				r   AppendResult
				err error
			}
			all := func(records []byte) chan res {
				ch := make(chan res, 1)
				e.Append(tp, records, AppendOptions{RequireISR: true}, func(r AppendResult, err error) { ch <- res{r, err} })
				return ch
			}
			// A leader starts alone in its ISR.
			if r := <-all(mkBatch(t, 1, "x", 1, -1, 0, 0)); !errors.Is(r.err, ErrNotEnoughReplicas) {
				t.Fatalf("acks=all with 1 in sync, min 2: %v", r.err)
			}
			mustOK(t, e.SetISR(tp, 2, 3))
			pid := int64(42)
			first := all(mkBatch(t, 3, "a", 1, pid, 0, 0))  // 0..2
			second := all(mkBatch(t, 2, "b", 1, pid, 0, 3)) // 3..4
			if r, err := appendSync(e, tp, mkBatch(t, 1, "acks1", 1, -1, 0, 0)); err != nil || r.BaseOffset != 5 {
				t.Fatalf("acks=1 is answered once written: %+v %v", r, err)
			}
			select {
			case r := <-first:
				t.Fatalf("acks=all answered before the HW moved: %+v", r)
			default:
			}
			// A retry of the first batch waits as the first does.
			retry := all(mkBatch(t, 3, "a", 1, pid, 0, 0))
			mustOK(t, e.SetHW(tp, 3))
			for _, ch := range []chan res{first, retry} {
				select {
				case r := <-ch:
					if r.err != nil || r.r.BaseOffset != 0 {
						t.Fatalf("acks=all after HW 3: %+v", r)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("acks=all not answered once the HW covered it")
				}
			}
			select {
			case r := <-second:
				t.Fatalf("acks=all of 3..4 answered at HW 3: %+v", r)
			case <-time.After(20 * time.Millisecond):
			}
			// Losing the leadership fails what still waits.
			mustOK(t, e.BecomeFollower(tp, 2))
			if r := <-second; !errors.Is(r.err, ErrNotLeader) {
				t.Fatalf("waiting acks=all after a role change: %+v", r)
			}
		})
	}
}

// openAloneInISR opens a replicated engine whose OnAppended moves the high
// watermark to the LEO at once, as the replication layer does for a
// leader alone in its ISR, with topic's one partition led here. The
// engine closes with the test.
func openAloneInISR(t *testing.T, topic string) (*Core, TP) {
	t.Helper()
	var e *Core
	ready := make(chan struct{})
	e = openReplicated(t, t.TempDir(), ioring.ModeAuto, func(tp TP, leo int64) {
		<-ready
		if err := e.SetHW(tp, leo); err != nil {
			t.Error(err)
		}
	})
	close(ready)
	t.Cleanup(func() { e.Close() })
	e.CreateTopic(topic, 1, -1, nil, false)
	tp := TP{topic, 0}
	mustOK(t, e.BecomeLeader(tp, 0))
	return e, tp
}

// TestAcksAllWithOnAppendedSetHW: a leader alone in its ISR moves its HW
// from OnAppended, and acks=all is answered in the same round.
func TestAcksAllWithOnAppendedSetHW(t *testing.T) {
	e, tp := openAloneInISR(t, "s")
	for i := range 20 {
		done := make(chan error, 1)
		e.Append(tp, mkBatch(t, 2, "x", 1, -1, 0, 0), AppendOptions{RequireISR: true}, func(r AppendResult, err error) {
			if err == nil && r.BaseOffset != int64(2*i) {
				err = errors.New("wrong offset")
			}
			done <- err
		})
		select {
		case err := <-done:
			mustOK(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("acks=all not answered")
		}
	}
	if st, _ := e.State(tp); st.HW != 40 {
		t.Fatalf("HW %d", st.HW)
	}
}

// TestAcks1SeesItsHW: OnAppended runs before an acks=1 append is
// answered, so a leader alone in its ISR has moved its high watermark
// past the batch when its producer hears back (ListOffsets latest right
// after the produce finds the records, as on Kafka).
func TestAcks1SeesItsHW(t *testing.T) {
	e, tp := openAloneInISR(t, "one")
	for i := range 50 {
		type answer struct {
			base, hw int64
			err      error
		}
		ch := make(chan answer, 1)
		e.Append(tp, mkBatch(t, 2, "x", 1, -1, 0, 0), AppendOptions{}, func(r AppendResult, err error) {
			st, _ := e.State(tp) // what the producer's next request would find
			ch <- answer{r.BaseOffset, st.HW, err}
		})
		a := <-ch
		mustOK(t, a.err)
		if a.base != int64(2*i) || a.hw != a.base+2 {
			t.Fatalf("append %d answered at base %d with HW %d", i, a.base, a.hw)
		}
	}
}

func TestAcksAllFailOnTruncateAndDelete(t *testing.T) {
	e := openReplicated(t, t.TempDir(), ioring.ModeAuto, nil)
	defer e.Close()
	e.CreateTopic("d", 1, -1, nil, false)
	tp := TP{"d", 0}
	mustOK(t, e.BecomeLeader(tp, 1))
	ch := make(chan error, 2)
	e.Append(tp, mkBatch(t, 2, "x", 1, -1, 0, 0), AppendOptions{RequireISR: true}, func(_ AppendResult, err error) { ch <- err })
	e.Append(tp, mkBatch(t, 2, "x", 1, -1, 0, 0), AppendOptions{RequireISR: true}, func(_ AppendResult, err error) { ch <- err })
	for {
		if st, _ := e.State(tp); st.LEO == 4 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mustOK(t, e.Truncate(tp, 2))
	if err := <-ch; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("acks=all of a truncated batch: %v", err)
	}
	mustOK(t, e.DeleteTopic("d"))
	if err := <-ch; !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("acks=all of a deleted partition: %v", err)
	}
}

func TestAppendReplicaKeepsOffsetsAndEpochs(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			ldir, fdir := t.TempDir(), t.TempDir()
			leader := openReplicated(t, ldir, mode, nil)
			defer func() { leader.Close() }()
			follower := openReplicated(t, fdir, mode, nil)
			defer func() { follower.Close() }()
			tp := TP{"c", 0}
			for _, e := range []*Core{leader, follower} {
				if _, err := e.CreateTopic("c", 1, -1, nil, false); err != nil {
					t.Fatal(err)
				}
			}
			mustOK(t, leader.BecomeLeader(tp, 1))
			mustOK(t, follower.BecomeFollower(tp, 1))
			for i := range 30 {
				if _, err := appendSync(leader, tp, mkBatch(t, 1+i%4, "x", int64(i), -1, 0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			mustOK(t, leader.SetHW(tp, 20))
			// 150 bytes per fetch: most fetches end inside a batch.
			replicate(t, leader, follower, tp, 150)
			// Leadership moves to the follower at epoch 2, which writes,
			// and the old leader follows it.
			mustOK(t, leader.BecomeFollower(tp, 2))
			mustOK(t, follower.BecomeLeader(tp, 2))
			for range 5 {
				appendSync(follower, tp, mkBatch(t, 2, "y", 1, -1, 0, 0))
			}
			replicate(t, follower, leader, tp, 1<<20)

			want := logHeaders(t, follower, tp)
			if got := logHeaders(t, leader, tp); !slices.Equal(got, want) {
				t.Fatalf("the logs differ:\n%+v\n%+v", got, want)
			}
			lp, _ := leader.partition(tp)
			fp, _ := follower.partition(tp)
			leo := want[len(want)-1].NextOffset()
			wantEpochs := []segment.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: leo - 10}}
			for _, p := range []*partition{lp, fp} {
				if eps := p.log().Epochs(); !slices.Equal(eps, wantEpochs) {
					t.Fatalf("epochs %v, want %v", eps, wantEpochs)
				}
			}
			if st, _ := leader.State(tp); st.HW != 20 || st.LEO != leo {
				t.Fatalf("follower state %+v", st)
			}

			// Gaps and overlaps write nothing.
			for name, rec := range map[string][]byte{
				"gap":          replicaBatch(t, 1, leo+1, 2, -1, 0),
				"overlap":      replicaBatch(t, 1, leo-1, 2, -1, 0),
				"inner gap":    slices.Concat(replicaBatch(t, 1, leo, 2, -1, 0), replicaBatch(t, 1, leo+2, 2, -1, 0)),
				"inner repeat": slices.Concat(replicaBatch(t, 2, leo, 2, -1, 0), replicaBatch(t, 1, leo+1, 2, -1, 0)),
			} {
				if got, err := appendReplicaSync(leader, tp, rec); !errors.Is(err, ErrUnexpectedOffset) || got != leo {
					t.Fatalf("%s: LEO %d, %v", name, got, err)
				}
			}
			bad := replicaBatch(t, 1, leo, 2, -1, 0)
			bad[len(bad)-1] ^= 1
			if _, err := appendReplicaSync(leader, tp, bad); !errors.Is(err, segment.ErrInvalidBatch) || !errors.Is(err, batch.ErrCRC) {
				t.Fatalf("corrupt replica batch: %v", err)
			}
			if got, err := appendReplicaSync(leader, tp, nil); err != nil || got != leo {
				t.Fatalf("empty fetch: %d %v", got, err)
			}
			if st, _ := leader.State(tp); st.LEO != leo {
				t.Fatalf("refused appends wrote: %+v", st)
			}

			// A clean restart, then one that must recover: the epochs come
			// back either way.
			mustOK(t, leader.Close())
			leader = openReplicated(t, ldir, mode, nil)
			lp, _ = leader.partition(tp)
			if eps := lp.log().Epochs(); !slices.Equal(eps, wantEpochs) {
				t.Fatalf("epochs after a restart: %v", eps)
			}
			if st, _ := leader.State(tp); st.LEO != leo || st.LeaderEpoch != 2 || st.Role != RoleNone {
				t.Fatalf("after a restart: %+v", st)
			}
			mustOK(t, leader.Close())
			dir := filepath.Join(ldir, "c-0")
			mustOK(t, os.Remove(filepath.Join(dir, "clean-shutdown")))
			mustOK(t, os.Remove(filepath.Join(dir, "leader-epoch-checkpoint")))
			leader = openReplicated(t, ldir, mode, nil)
			if _, rec := leader.OpenStats(); rec != 1 {
				t.Fatalf("%d logs recovered", rec)
			}
			lp, _ = leader.partition(tp)
			if eps := lp.log().Epochs(); !slices.Equal(eps, wantEpochs) {
				t.Fatalf("epochs rebuilt by recovery: %v", eps)
			}
			// A torn tail cut by recovery takes epoch 2 with it when it
			// held all of it.
			mustOK(t, leader.Close())
			logFile := filepath.Join(dir, "00000000000000000000.log")
			fi, err := os.Stat(logFile)
			mustOK(t, err)
			var epoch2Bytes int64
			for _, h := range want {
				if h.PartitionLeaderEpoch == 2 {
					epoch2Bytes += int64(h.Size())
				}
			}
			mustOK(t, os.Truncate(logFile, fi.Size()-epoch2Bytes+10))
			mustOK(t, os.Remove(filepath.Join(dir, "clean-shutdown")))
			leader = openReplicated(t, ldir, mode, nil)
			lp, _ = leader.partition(tp)
			if eps := lp.log().Epochs(); !slices.Equal(eps, wantEpochs[:1]) {
				t.Fatalf("epochs after a torn tail: %v", eps)
			}
			if st, _ := leader.State(tp); st.LEO != leo-10 {
				t.Fatalf("LEO after a torn tail: %+v", st)
			}
		})
	}
}

func TestAppendReplicaCompactedGap(t *testing.T) {
	e := openReplicated(t, t.TempDir(), ioring.ModeAuto, nil)
	defer e.Close()
	e.CreateTopic("k", 1, -1, map[string]string{"cleanup.policy": "compact"}, false)
	e.CreateTopic("d", 1, -1, nil, false)
	ctp, dtp := TP{"k", 0}, TP{"d", 0}
	mustOK(t, e.BecomeFollower(ctp, 0))
	mustOK(t, e.BecomeFollower(dtp, 0))
	// A compacted leader log has gaps between batches.
	rec := slices.Concat(replicaBatch(t, 2, 0, 0, -1, 0), replicaBatch(t, 1, 5, 0, -1, 0))
	if leo, err := appendReplicaSync(e, ctp, rec); err != nil || leo != 6 {
		t.Fatalf("compacted gap: %d %v", leo, err)
	}
	if leo, err := appendReplicaSync(e, ctp, replicaBatch(t, 1, 9, 0, -1, 0)); err != nil || leo != 10 {
		t.Fatalf("compacted gap at the LEO: %d %v", leo, err)
	}
	if _, err := appendReplicaSync(e, ctp, replicaBatch(t, 1, 9, 0, -1, 0)); !errors.Is(err, ErrUnexpectedOffset) {
		t.Fatalf("compacted overlap: %v", err)
	}
	if _, err := appendReplicaSync(e, dtp, rec); !errors.Is(err, ErrUnexpectedOffset) {
		t.Fatalf("gap on a delete topic: %v", err)
	}
}

// TestFollowerBecomesLeaderDeduplicates: the producer state a follower
// learns from replicated batches lets it answer an idempotent retry with
// the original offset once it leads, also after a restart.
func TestFollowerBecomesLeaderDeduplicates(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			leader := openReplicated(t, t.TempDir(), mode, nil)
			defer leader.Close()
			fdir := t.TempDir()
			follower := openReplicated(t, fdir, mode, nil)
			defer func() { follower.Close() }()
			tp := TP{"i", 0}
			leader.CreateTopic("i", 1, -1, nil, false)
			follower.CreateTopic("i", 1, -1, nil, false)
			mustOK(t, leader.BecomeLeader(tp, 1))
			mustOK(t, follower.BecomeFollower(tp, 1))
			pid := int64(7)
			appendSync(leader, tp, mkBatch(t, 1, "other", 1, -1, 0, 0)) // 0
			appendSync(leader, tp, mkBatch(t, 3, "a", 1, pid, 2, 0))    // 1..3
			appendSync(leader, tp, mkBatch(t, 2, "b", 1, pid, 2, 3))    // 4..5
			replicate(t, leader, follower, tp, 1<<20)

			check := func(e *Core) {
				t.Helper()
				r, err := appendSync(e, tp, mkBatch(t, 2, "b", 1, pid, 2, 3))
				if err != nil || !r.Duplicate || r.BaseOffset != 4 {
					t.Fatalf("retry of the last batch: %+v %v", r, err)
				}
				r, err = appendSync(e, tp, mkBatch(t, 3, "a", 1, pid, 2, 0))
				if err != nil || !r.Duplicate || r.BaseOffset != 1 {
					t.Fatalf("retry of the first batch: %+v %v", r, err)
				}
				if _, err := appendSync(e, tp, mkBatch(t, 1, "gap", 1, pid, 2, 9)); !errors.Is(err, ErrOutOfOrderSequence) {
					t.Fatalf("sequence gap: %v", err)
				}
				if _, err := appendSync(e, tp, mkBatch(t, 1, "old", 1, pid, 1, 0)); !errors.Is(err, ErrInvalidProducerEpoch) {
					t.Fatalf("fenced producer epoch: %v", err)
				}
				if st, _ := e.State(tp); st.LEO != 6 {
					t.Fatalf("duplicates written: %+v", st)
				}
			}
			mustOK(t, follower.BecomeLeader(tp, 2))
			check(follower)
			// The state comes back from the snapshot after a clean
			// restart, and from the log without it.
			mustOK(t, follower.Close())
			follower = openReplicated(t, fdir, mode, nil)
			mustOK(t, follower.BecomeLeader(tp, 3))
			check(follower)
			mustOK(t, follower.Close())
			mustOK(t, os.Remove(filepath.Join(fdir, "i-0", snapshotFile)))
			follower = openReplicated(t, fdir, mode, nil)
			mustOK(t, follower.BecomeLeader(tp, 4))
			check(follower)
			if r, err := appendSync(follower, tp, mkBatch(t, 1, "c", 1, pid, 2, 5)); err != nil || r.Duplicate || r.BaseOffset != 6 {
				t.Fatalf("next batch: %+v %v", r, err)
			}
		})
	}
}

func TestTruncateThenReappend(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			e := openReplicated(t, dir, mode, nil)
			defer func() { e.Close() }()
			e.CreateTopic("t", 1, -1, nil, false)
			tp := TP{"t", 0}
			mustOK(t, e.BecomeFollower(tp, 1))
			pid := int64(3)
			// Epoch 1: 0..2 and 3..5; epoch 2: 6..9. One producer.
			rec := slices.Concat(replicaBatch(t, 3, 0, 1, pid, 0), replicaBatch(t, 3, 3, 1, pid, 3), replicaBatch(t, 4, 6, 2, pid, 6))
			if leo, err := appendReplicaSync(e, tp, rec); err != nil || leo != 10 {
				t.Fatalf("%d %v", leo, err)
			}
			mustOK(t, e.SetHW(tp, 8))
			w := e.NewWaiter([]TP{tp})
			defer w.Stop()

			// 5 is inside 3..5, which goes whole.
			mustOK(t, e.Truncate(tp, 5))
			st, _ := e.State(tp)
			if st.LEO != 3 || st.HW != 3 {
				t.Fatalf("after truncating to 5: %+v", st)
			}
			p, _ := e.partition(tp)
			if eps := p.log().Epochs(); !slices.Equal(eps, []segment.EpochEntry{{Epoch: 1, StartOffset: 0}}) {
				t.Fatalf("epochs after truncation: %v", eps)
			}
			select {
			case <-w.C:
				t.Fatal("a truncation woke a waiter")
			case <-time.After(20 * time.Millisecond):
			}
			if res, err := e.Read(tp, 3, 1<<20, true, ReadUncommitted); err != nil || res.Bytes != 0 {
				t.Fatalf("read at the new LEO: %v", err)
			} else {
				res.Release()
			}
			// The snapshot on disk is as of the new LEO: none describing
			// the batches that went can come back at a restart.
			b, err := os.ReadFile(filepath.Join(dir, "t-0", snapshotFile))
			mustOK(t, err)
			if _, off, err := decodeSnapshot(b); err != nil || off != 3 {
				t.Fatalf("snapshot after truncation: offset %d, %v", off, err)
			}
			// A new leader's different batches at 3.
			rec = slices.Concat(replicaBatch(t, 2, 3, 3, -1, 0), replicaBatch(t, 2, 5, 3, -1, 0))
			if leo, err := appendReplicaSync(e, tp, rec); err != nil || leo != 7 {
				t.Fatalf("re-append: %d %v", leo, err)
			}
			if eps := p.log().Epochs(); !slices.Equal(eps, []segment.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 3}}) {
				t.Fatalf("epochs after re-append: %v", eps)
			}
			// The producer state forgot the truncated batches: as leader,
			// sequence 3 is new again, and 0..2 is still a duplicate.
			mustOK(t, e.BecomeLeader(tp, 4))
			if r, err := appendSync(e, tp, mkBatch(t, 3, "a", 1, pid, 0, 0)); err != nil || !r.Duplicate || r.BaseOffset != 0 {
				t.Fatalf("retry of a kept batch: %+v %v", r, err)
			}
			if r, err := appendSync(e, tp, mkBatch(t, 3, "b", 1, pid, 0, 3)); err != nil || r.Duplicate || r.BaseOffset != 7 {
				t.Fatalf("sequence of a truncated batch: %+v %v", r, err)
			}
			mustOK(t, e.Close())
			e = openReplicated(t, dir, mode, nil)
			if hs := logHeaders(t, e, tp); len(hs) != 4 || hs[1].PartitionLeaderEpoch != 3 || hs[3].PartitionLeaderEpoch != 4 || hs[3].BaseOffset != 7 {
				t.Fatalf("log after restart: %+v", hs)
			}
		})
	}
}

// TestTruncateBelowSnapshot: a truncation below the offset of the producer
// snapshot (taken at a roll) rebuilds the state from the log.
func TestTruncateBelowSnapshot(t *testing.T) {
	e := openReplicated(t, t.TempDir(), ioring.ModeAuto, nil)
	defer e.Close()
	// An index of one entry at most: every append rolls a segment.
	e.CreateTopic("s", 1, -1, map[string]string{"segment.index.bytes": "4"}, false)
	tp := TP{"s", 0}
	mustOK(t, e.BecomeLeader(tp, 1))
	pid := int64(11)
	for i := range 10 {
		if _, err := appendSync(e, tp, mkBatch(t, 1, "x", 1, pid, 0, int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := e.partition(tp)
	if p.log().Segments() < 3 {
		t.Fatalf("%d segments: no roll, no snapshot", p.log().Segments())
	}
	mustOK(t, e.BecomeFollower(tp, 2))
	mustOK(t, e.Truncate(tp, 2))
	mustOK(t, e.BecomeLeader(tp, 3))
	// Offsets 0 and 1 (sequences 0, 1) remain; 2 is new again.
	if r, err := appendSync(e, tp, mkBatch(t, 1, "x", 1, pid, 0, 1)); err != nil || !r.Duplicate || r.BaseOffset != 1 {
		t.Fatalf("retry of sequence 1: %+v %v", r, err)
	}
	if r, err := appendSync(e, tp, mkBatch(t, 1, "x", 1, pid, 0, 2)); err != nil || r.Duplicate || r.BaseOffset != 2 {
		t.Fatalf("sequence 2 after truncation: %+v %v", r, err)
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			e := openReplicated(t, dir, mode, nil)
			defer func() { e.Close() }()
			e.CreateTopic("f", 1, -1, nil, false)
			tp := TP{"f", 0}
			mustOK(t, e.BecomeFollower(tp, 1))
			pid := int64(5)
			if _, err := appendReplicaSync(e, tp, slices.Concat(replicaBatch(t, 3, 0, 1, pid, 0), replicaBatch(t, 3, 3, 1, pid, 3))); err != nil {
				t.Fatal(err)
			}
			mustOK(t, e.SetHW(tp, 6))
			mustOK(t, e.TruncateFullyAndStartAt(tp, 100))
			st, _ := e.State(tp)
			if st.LEO != 100 || st.LogStartOffset != 100 || st.HW != 100 {
				t.Fatalf("after starting at 100: %+v", st)
			}
			p, _ := e.partition(tp)
			if eps := p.log().Epochs(); len(eps) != 0 {
				t.Fatalf("epochs %v", eps)
			}
			if _, err := appendReplicaSync(e, tp, replicaBatch(t, 1, 6, 1, -1, 0)); !errors.Is(err, ErrUnexpectedOffset) {
				t.Fatalf("append at the old LEO: %v", err)
			}
			if leo, err := appendReplicaSync(e, tp, replicaBatch(t, 2, 100, 2, -1, 0)); err != nil || leo != 102 {
				t.Fatalf("append at the new start: %d %v", leo, err)
			}
			// No producer survives.
			mustOK(t, e.BecomeLeader(tp, 3))
			if r, err := appendSync(e, tp, mkBatch(t, 3, "a", 1, pid, 0, 3)); err != nil || r.Duplicate || r.BaseOffset != 102 {
				t.Fatalf("an old sequence: %+v %v", r, err)
			}
			mustOK(t, e.Close())
			e = openReplicated(t, dir, mode, nil)
			if st, _ := e.State(tp); st.LogStartOffset != 100 || st.LEO != 105 {
				t.Fatalf("after restart: %+v", st)
			}
			if eps := logHeaders(t, e, tp); len(eps) != 2 || eps[0].BaseOffset != 100 {
				t.Fatalf("log after restart: %+v", eps)
			}
		})
	}
}

func TestCreateTopicWithID(t *testing.T) {
	dir := t.TempDir()
	e := openReplicated(t, dir, ioring.ModeAuto, nil)
	defer func() { e.Close() }()
	id := [16]byte{1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16}
	cfg := map[string]string{"retention.ms": "1000"}
	info, err := e.CreateTopicWithID("w", id, 3, cfg)
	if err != nil || info.ID != id || info.Partitions != 3 || info.Config.Log.RetentionMs != 1000 {
		t.Fatalf("create: %+v %v", info, err)
	}
	if st, _ := e.State(TP{"w", 2}); st.Role != RoleNone {
		t.Fatalf("a partition of a new topic: %+v", st)
	}
	mustOK(t, e.BecomeLeader(TP{"w", 0}, 1))
	appendSync(e, TP{"w", 0}, mkBatch(t, 2, "x", 1, -1, 0, 0))
	// Again: the same topic, data kept; fewer partitions shrink nothing,
	// more grow it.
	for _, c := range []struct{ ask, want int32 }{{3, 3}, {2, 3}, {5, 5}} {
		again, err := e.CreateTopicWithID("w", id, c.ask, nil)
		if err != nil || again.ID != id || again.Partitions != c.want || again.Config.Log.RetentionMs != 1000 {
			t.Fatalf("create again with %d partitions: %+v %v", c.ask, again, err)
		}
	}
	if st, _ := e.State(TP{"w", 0}); st.LEO != 2 || st.Role != RoleLeader {
		t.Fatalf("an idempotent create touched a partition: %+v", st)
	}
	if _, err := e.State(TP{"w", 4}); err != nil {
		t.Fatalf("grown partition: %v", err)
	}
	other := id
	other[0] = 99
	if _, err := e.CreateTopicWithID("w", other, 5, nil); !errors.Is(err, ErrTopicIDMismatch) {
		t.Fatalf("same name, another id: %v", err)
	}
	if _, err := e.CreateTopicWithID("w2", id, 1, nil); !errors.Is(err, ErrTopicIDMismatch) {
		t.Fatalf("same id, another name: %v", err)
	}
	if _, err := e.CreateTopicWithID("z", [16]byte{}, 1, nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("zero id: %v", err)
	}
	if _, err := e.CreateTopicWithID("bad/name", other, 1, nil); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := e.CreateTopicWithID("w_", other, 0, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("no partitions: %v", err)
	}
	if _, err := e.CreateTopicWithID("n", other, 1, map[string]string{"no.such": "1"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	// The id survives a restart.
	mustOK(t, e.Close())
	e = openReplicated(t, dir, ioring.ModeAuto, nil)
	if info, ok := e.TopicByID(id); !ok || info.Name != "w" || info.Partitions != 5 {
		t.Fatalf("after restart: %+v %v", info, ok)
	}
	// The stale topic deleted, the new one starts empty with its own id.
	mustOK(t, e.DeleteTopic("w"))
	info, err = e.CreateTopicWithID("w", other, 1, nil)
	if err != nil || info.ID != other {
		t.Fatalf("create after delete: %+v %v", info, err)
	}
	if st, _ := e.State(TP{"w", 0}); st.LEO != 0 {
		t.Fatalf("recreated topic holds old data: %+v", st)
	}
	// CreateTopic still makes ids of its own.
	if info, err := e.CreateTopic("gen", 1, -1, nil, false); err != nil || info.ID == ([16]byte{}) || info.ID == id {
		t.Fatalf("CreateTopic: %+v %v", info, err)
	}
}

// TestTruncateAtLEODropsEpochLedWithoutWrites: a broker that led an epoch
// and wrote nothing holds its entry at the LEO; once it follows, a
// truncation to the LEO drops it, and nothing else changes.
func TestTruncateAtLEODropsEpochLedWithoutWrites(t *testing.T) {
	e := openReplicated(t, t.TempDir(), ioring.ModeAuto, nil)
	defer e.Close()
	e.CreateTopic("l", 1, -1, nil, false)
	tp := TP{"l", 0}
	mustOK(t, e.BecomeLeader(tp, 1))
	appendSync(e, tp, mkBatch(t, 2, "x", 1, 9, 0, 0))
	mustOK(t, e.SetHW(tp, 2))
	mustOK(t, e.BecomeLeader(tp, 2))
	p, _ := e.partition(tp)
	if eps := p.log().Epochs(); !slices.Equal(eps, []segment.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 2}}) {
		t.Fatalf("epochs %v", eps)
	}
	mustOK(t, e.BecomeFollower(tp, 3))
	mustOK(t, e.Truncate(tp, 2))
	if eps := p.log().Epochs(); !slices.Equal(eps, []segment.EpochEntry{{Epoch: 1, StartOffset: 0}}) {
		t.Fatalf("epochs after truncating to the LEO: %v", eps)
	}
	if st, _ := e.State(tp); st.LEO != 2 || st.HW != 2 {
		t.Fatalf("state after truncating to the LEO: %+v", st)
	}
	mustOK(t, e.BecomeLeader(tp, 4))
	if r, err := appendSync(e, tp, mkBatch(t, 2, "x", 1, 9, 0, 0)); err != nil || !r.Duplicate {
		t.Fatalf("producer state after truncating to the LEO: %+v %v", r, err)
	}
}

// TestWaiterWakesOnLeaderAppend: a follower's fetch long-polls for what
// its leader writes, committed or not.
func TestWaiterWakesOnLeaderAppend(t *testing.T) {
	e := openReplicated(t, t.TempDir(), ioring.ModeAuto, nil)
	defer e.Close()
	e.CreateTopic("w", 1, -1, nil, false)
	tp := TP{"w", 0}
	mustOK(t, e.BecomeLeader(tp, 1))
	w := e.NewWaiter([]TP{tp})
	defer w.Stop()
	go appendSync(e, tp, mkBatch(t, 1, "x", 1, -1, 0, 0))
	select {
	case <-w.C:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by a leader's append")
	}
	if st, _ := e.State(tp); st.HW != 0 {
		t.Fatalf("the append moved the HW: %+v", st)
	}
}
