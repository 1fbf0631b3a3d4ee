package fetcher_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// follower is a Handler that keeps each partition's copy in memory, the
// way a follower's log would, and records every way the stream breaks its
// promises: a partition handed over twice before its done, batches that
// are cut, out of order, overlapping or leaving a gap.
type follower struct {
	t testing.TB
	// doneDelay, when set, calls done from another goroutine after the
	// delay (an append on the partition's shard); otherwise done is called
	// inside Records.
	doneDelay time.Duration
	async     bool

	mu         sync.Mutex
	logs       map[engine.TP]*flog
	violations []string
	paused     map[engine.TP]error
	truncates  []truncateCall
	oors       []oorCall
	hwCalls    []hwCall
	// onTruncate and onOutOfRange decide the fetch offset; the defaults
	// truncate to the leader's end offset and restart at its log start.
	onTruncate   func(tp engine.TP, epoch int32, end int64) int64
	onOutOfRange func(tp engine.TP, logStart, hw int64) int64
	changed      chan struct{}
}

type flog struct {
	data    []byte
	next    int64 // LEO of the copy
	records int64
	batches int
	busy    bool
	hw      int64
	calls   int // Records calls
}

type truncateCall struct {
	tp         engine.TP
	epoch      int32
	end        int64
	beforeData bool // no Records for tp had been seen yet
}

type hwCall struct {
	tp           engine.TP
	hw, logStart int64
}

type oorCall struct {
	tp           engine.TP
	logStart, hw int64
}

func newFollower(t testing.TB) *follower {
	return &follower{t: t, logs: make(map[engine.TP]*flog), paused: make(map[engine.TP]error), changed: make(chan struct{}, 1)}
}

func (f *follower) logLocked(tp engine.TP) *flog {
	l := f.logs[tp]
	if l == nil {
		l = &flog{hw: -1}
		f.logs[tp] = l
	}
	return l
}

// reset starts a partition's copy afresh at leo (an empty log whose LEO is
// leo, as after a truncation or with data the test does not keep).
func (f *follower) reset(tp engine.TP, leo int64) {
	f.mu.Lock()
	f.logs[tp] = &flog{next: leo, hw: -1}
	f.mu.Unlock()
}

func (f *follower) violate(format string, args ...any) {
	f.violations = append(f.violations, fmt.Sprintf(format, args...))
}

func (f *follower) Records(tp engine.TP, data []byte, hw, logStart int64, done func(int64, error)) {
	f.mu.Lock()
	l := f.logLocked(tp)
	if l.busy {
		f.violate("%v: Records while a previous call is not done", tp)
	}
	l.busy = true
	l.calls++
	l.hw = hw
	bs, err := parseBatches(data)
	if err != nil {
		f.violate("%v: %v", tp, err)
	}
	for _, b := range bs {
		if b.base != l.next {
			f.violate("%v: batch at %d, copy ends at %d", tp, b.base, l.next)
		}
		l.next = b.last + 1
		l.records += int64(b.count)
		l.batches++
	}
	next := l.next
	f.mu.Unlock()
	f.finish(tp, data, func() { done(next, nil) })
}

// finish copies data into tp's log, marks tp free and calls done, now or
// later. The bytes are read only then, as an engine writes them only then:
// a stream that let the frame under data go before done would show as a
// copy that differs from the leader's log.
func (f *follower) finish(tp engine.TP, data []byte, done func()) {
	release := func() {
		f.mu.Lock()
		l := f.logLocked(tp)
		l.data = append(l.data, data...)
		l.busy = false
		f.mu.Unlock()
		done()
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
	if f.async || f.doneDelay > 0 {
		go func() {
			time.Sleep(f.doneDelay)
			release()
		}()
		return
	}
	release()
}

func (f *follower) Truncate(tp engine.TP, epoch int32, end int64, done func(int64, error)) {
	f.mu.Lock()
	l := f.logLocked(tp)
	if l.busy {
		f.violate("%v: Truncate while a previous call is not done", tp)
	}
	l.busy = true
	f.truncates = append(f.truncates, truncateCall{tp: tp, epoch: epoch, end: end, beforeData: l.calls == 0})
	to := end
	if f.onTruncate != nil {
		to = f.onTruncate(tp, epoch, end)
	}
	if to < l.next {
		// Cut the in-memory copy back (only whole batches are kept).
		l.data, l.next = cutAt(l.data, to)
	}
	next := l.next
	f.mu.Unlock()
	f.finish(tp, nil, func() { done(next, nil) })
}

func (f *follower) OutOfRange(tp engine.TP, logStart, hw int64, done func(int64, error)) {
	f.mu.Lock()
	l := f.logLocked(tp)
	if l.busy {
		f.violate("%v: OutOfRange while a previous call is not done", tp)
	}
	l.busy = true
	f.oors = append(f.oors, oorCall{tp: tp, logStart: logStart, hw: hw})
	to := logStart
	if f.onOutOfRange != nil {
		to = f.onOutOfRange(tp, logStart, hw)
	}
	// Truncate fully and start at the leader's log start.
	l.data, l.next = nil, to
	f.mu.Unlock()
	f.finish(tp, nil, func() { done(to, nil) })
}

func (f *follower) HighWatermark(tp engine.TP, hw, logStart int64) {
	f.mu.Lock()
	f.logLocked(tp).hw = hw
	f.hwCalls = append(f.hwCalls, hwCall{tp: tp, hw: hw, logStart: logStart})
	f.mu.Unlock()
}

func (f *follower) Paused(tp engine.TP, err error) {
	f.mu.Lock()
	f.paused[tp] = err
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// check fails the test on any violation recorded so far.
func (f *follower) check() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		f.t.Error(v)
	}
	if len(f.violations) > 0 {
		f.t.FailNow()
	}
}

// waitFor waits until cond holds (checked under the lock) or fails.
func (f *follower) waitFor(what string, timeout time.Duration, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-f.changed:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitLEO waits until every tp's copy reaches leo, its last records copied.
func (f *follower) waitLEO(leo int64, timeout time.Duration, tps ...engine.TP) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("copies to reach %d", leo), timeout, func() bool {
		for _, tp := range tps {
			if l := f.logLocked(tp); l.next < leo || l.busy {
				return false
			}
		}
		return true
	})
}

func (f *follower) copyOf(tp engine.TP) flog {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := *f.logLocked(tp)
	l.data = append([]byte(nil), l.data...)
	return l
}

// batch is a RecordBatch header as the test reads it (independently of the
// package's own parser).
type batch struct {
	base, last int64
	count      int32
	epoch      int32
	size       int
}

// parseBatches requires data to be whole v2 batches.
func parseBatches(data []byte) ([]batch, error) {
	var out []batch
	for off := 0; off < len(data); {
		if len(data)-off < 61 {
			return out, fmt.Errorf("cut batch header at byte %d of %d", off, len(data))
		}
		n := int(binary.BigEndian.Uint32(data[off+8:])) + 12
		if n > len(data)-off {
			return out, fmt.Errorf("cut batch at byte %d: %d bytes, %d left", off, n, len(data)-off)
		}
		if data[off+16] != 2 {
			return out, fmt.Errorf("magic %d at byte %d", data[off+16], off)
		}
		base := int64(binary.BigEndian.Uint64(data[off:]))
		out = append(out, batch{
			base:  base,
			last:  base + int64(int32(binary.BigEndian.Uint32(data[off+23:]))),
			count: int32(binary.BigEndian.Uint32(data[off+57:])),
			epoch: int32(binary.BigEndian.Uint32(data[off+12:])),
			size:  n,
		})
		off += n
	}
	return out, nil
}

// cutAt keeps the batches of data that end at or before offset to.
func cutAt(data []byte, to int64) ([]byte, int64) {
	bs, _ := parseBatches(data)
	keep, next := 0, int64(0)
	for _, b := range bs {
		if b.last >= to {
			break
		}
		keep += b.size
		next = b.last + 1
	}
	if keep == 0 {
		return nil, to
	}
	return data[:keep], next
}

// --- leaders ---

// newKfake starts a one-broker kfake cluster with topic t of n partitions.
func newKfake(t testing.TB, topic string, n int32) (*kfake.Cluster, [16]byte) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(n, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.TopicInfo(topic).TopicID
}

// testBroker is ringlog's own broker on 127.0.0.1, started with
// broker.Start as the binary starts it (engine, its one-voter quorum,
// replication, groups, protocol, network).
type testBroker struct {
	t      testing.TB
	Addr   string
	dir    string
	Engine *engine.Engine
	b      *broker.Broker
}

func startBroker(t testing.TB) *testBroker {
	t.Helper()
	b := &testBroker{t: t, dir: t.TempDir()}
	b.start()
	t.Cleanup(b.Stop)
	return b
}

func (b *testBroker) start() {
	t := b.t
	cfg := broker.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Shards = "127.0.0.1:0", b.dir, 2
	if b.Addr != "" {
		cfg.Listen = b.Addr // a restart keeps the port
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var br *broker.Broker
	var err error
	for i := 0; ; i++ {
		br, err = broker.Start(ctx, cfg)
		if err == nil || i == 50 || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		// The old listener's port may linger briefly, or the free port
		// picked was taken before the broker bound it.
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	b.b, b.Addr, b.Engine = br, br.Addr(), br.Engine()
}

func (b *testBroker) Stop() {
	if b.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.b.Close(ctx); err != nil {
		b.t.Errorf("close broker: %v", err)
	}
	b.b, b.Engine = nil, nil
}

func (b *testBroker) Restart() {
	b.Stop()
	b.start()
}

// createTopic creates topic with n partitions and returns its id.
func (b *testBroker) createTopic(topic string, n int32) [16]byte {
	b.t.Helper()
	cl := newClient(b.t, b.Addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		b.t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		b.t.Fatalf("create %s: error %d", topic, code)
	}
	for _, ti := range b.Engine.Topics() {
		if ti.Name == topic {
			return ti.ID
		}
	}
	b.t.Fatalf("topic %s not in the engine", topic)
	return [16]byte{}
}

// --- clients ---

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records of size bytes to each partition, in batches of
// up to batchRecords records (so that the log has many batches).
func produce(t testing.TB, cl *kgo.Client, topic string, parts []int32, n, size, batchRecords int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	val := make([]byte, size)
	for sent := 0; sent < n; sent += batchRecords {
		var rs []*kgo.Record
		for _, p := range parts {
			for i := sent; i < min(n, sent+batchRecords); i++ {
				v := append([]byte(nil), val...)
				binary.BigEndian.PutUint64(v, uint64(i))
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: v})
			}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func producer(t testing.TB, addr string) *kgo.Client {
	return newClient(t, addr,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DisableIdempotentWrite(), // kfake and ringlog both take it; fewer moving parts
	)
}

// leaderLog reads a partition's log from the leader with plain consumer
// fetches through kgo, up to end, as whole batches.
func leaderLog(t testing.TB, addr, topic string, id [16]byte, part int32, end int64) []byte {
	t.Helper()
	cl := newClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	brokers := cl.DiscoveredBrokers()
	if len(brokers) == 0 {
		t.Fatal("no broker discovered")
	}
	br := brokers[0]
	var out []byte
	for off := int64(0); off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 4 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id // kgo picks the version
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = part, off, 4<<20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("leader fetch %s/%d@%d: error %d", topic, part, off, p.ErrorCode)
		}
		bs, _ := parseBatches(p.RecordBatches) // a cut tail is dropped
		if len(bs) == 0 {
			t.Fatalf("leader fetch %s/%d@%d: no whole batch", topic, part, off)
		}
		for _, b := range bs {
			out = append(out, p.RecordBatches[:b.size]...)
			p.RecordBatches = p.RecordBatches[b.size:]
			off = b.last + 1
		}
	}
	return out
}

// boundary returns the base offset of the leader's batch holding offset
// near: kgo splits a produce into batches as it likes (with linger 0 the
// first record often goes alone), and a follower's fetch offset is always a
// batch boundary of the leader's log.
func boundary(t testing.TB, addr, topic string, id [16]byte, part int32, end, near int64) int64 {
	t.Helper()
	bs, err := parseBatches(leaderLog(t, addr, topic, id, part, end))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.base <= near && near <= b.last {
			return b.base
		}
	}
	t.Fatalf("no batch holds offset %d", near)
	return 0
}

// newStream starts a stream and closes it at the end of the test.
func newStream(t testing.TB, cfg fetcher.Config, h fetcher.Handler) *fetcher.Stream {
	t.Helper()
	s, err := fetcher.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close stream: %v", err)
		}
	})
	return s
}

// waitStats waits until cond holds for the stream's stats, or fails.
func waitStats(t testing.TB, s *fetcher.Stream, what string, cond func(fetcher.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for st := s.Stats(); !cond(st); st = s.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tps(topic string, n int32) []engine.TP {
	out := make([]engine.TP, n)
	for i := range out {
		out[i] = engine.TP{Topic: topic, Partition: int32(i)}
	}
	return out
}
