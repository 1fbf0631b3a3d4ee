package controller

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// block is one AllocateProducerIDs answer: ids start..start+length-1.
type block struct {
	broker        int32
	start, length int64
}

// checkBlocks fails unless the blocks are disjoint, each of the block size,
// and together exactly 0..next-1 (none lost, none handed out twice).
func checkBlocks(t *testing.T, blocks []block, next int64) {
	t.Helper()
	s := slices.Clone(blocks)
	slices.SortFunc(s, func(a, b block) int { return int(a.start - b.start) })
	var want int64
	for _, b := range s {
		if b.length != producerIDBlockSize {
			t.Fatalf("block %+v: length %d, want %d", b, b.length, producerIDBlockSize)
		}
		if b.start != want {
			t.Fatalf("block %+v: starts at %d, want %d (overlap or gap)", b, b.start, want)
		}
		want = b.start + b.length
	}
	if want != next {
		t.Fatalf("blocks end at %d, the image's next producer id is %d", want, next)
	}
}

func decodeBlock(t *testing.T, broker int32, res result) block {
	t.Helper()
	d := &decoder{b: res.payload}
	b := block{broker: broker, start: d.i64(), length: int64(d.i32())}
	if err := d.done(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAllocateProducerIDsBlocksNeverOverlap: blocks asked by any broker, in
// any order, tile the id space from 0; failed requests take nothing.
func TestAllocateProducerIDsBlocksNeverOverlap(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var blocks []block
	for range 50 {
		id := int32(1 + rnd.IntN(3))
		res := s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: id, epoch: s.epoch(id)})
		blocks = append(blocks, decodeBlock(t, id, res))
	}
	checkBlocks(t, blocks, s.img.NextProducerID())

	// A stale incarnation and an unknown broker get nothing (s.apply
	// checks that a failed command leaves the state alone).
	old := s.epoch(2)
	s.register(2, "")
	if res := s.apply(&command{typ: cmdAllocateProducerIDs, brokerID: 2, epoch: old}); !errors.Is(res.err, ErrStaleBrokerEpoch) {
		t.Fatalf("old epoch: %v", res.err)
	}
	if res := s.apply(&command{typ: cmdAllocateProducerIDs, brokerID: 9, epoch: 1}); !errors.Is(res.err, ErrBrokerIDNotRegistered) {
		t.Fatalf("unknown broker: %v", res.err)
	}
	// A fenced broker at its current epoch may allocate, as in Kafka (it
	// may still be serving producers while it catches up).
	s.fence(3)
	res := s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: 3, epoch: s.epoch(3)})
	blocks = append(blocks, decodeBlock(t, 3, res))
	checkBlocks(t, blocks, s.img.NextProducerID())
}

// TestAllocateProducerIDsFloor: a floor above the counter moves the block
// (and the counter) up; one below it changes nothing.
func TestAllocateProducerIDsFloor(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	b := decodeBlock(t, 1, s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: s.epoch(1), floor: 12345}))
	if b.start != 12345 || s.img.NextProducerID() != 12345+producerIDBlockSize {
		t.Fatalf("block %+v, next %d with floor 12345", b, s.img.NextProducerID())
	}
	b = decodeBlock(t, 1, s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: s.epoch(1), floor: 7}))
	if b.start != 12345+producerIDBlockSize {
		t.Fatalf("block %+v with a floor below the counter", b)
	}
}

// TestAllocateProducerIDsSurviveSnapshot: the counter is part of the
// snapshot; a node restored from it goes on where the log left off.
func TestAllocateProducerIDsSurviveSnapshot(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	var blocks []block
	for range 3 {
		blocks = append(blocks, decodeBlock(t, 1, s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: s.epoch(1)})))
	}
	img, err := decodeImage(encodeImage(s.img))
	if err != nil {
		t.Fatal(err)
	}
	if img.NextProducerID() != 3*producerIDBlockSize {
		t.Fatalf("restored next producer id %d, want %d", img.NextProducerID(), 3*producerIDBlockSize)
	}
	s.img = img
	blocks = append(blocks, decodeBlock(t, 1, s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: s.epoch(1)})))
	checkBlocks(t, blocks, s.img.NextProducerID())
}

// TestSnapshotVersion1HasNoProducerIDs: a snapshot written before
// AllocateProducerIDs existed (the committed seed, byte for byte what
// version 1 wrote) restores with no block handed out, and re-encodes as
// version 2 with the same state.
func TestSnapshotVersion1HasNoProducerIDs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecodeImage", "small-v1"))
	if err != nil {
		t.Fatal(err)
	}
	// The corpus file's second line is []byte("...") in Go syntax.
	lines := strings.SplitN(string(b), "\n", 3)
	q := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
	raw, err := strconv.Unquote(q)
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(snapshotMagic)] != 1 {
		t.Fatalf("small-v1 is version %d", raw[len(snapshotMagic)])
	}
	img, err := decodeImage([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if img.NextProducerID() != 0 {
		t.Fatalf("next producer id %d", img.NextProducerID())
	}
	want := seedImage(t)
	if !slices.Equal(encodeImage(img), encodeImage(want)) {
		t.Fatal("version 1 snapshot decodes to another state than seedImage")
	}
}

// TestAllocateProducerIDsExhausted: past the last whole block of int64 the
// command fails (Kafka's UNKNOWN_SERVER_ERROR) and changes nothing.
func TestAllocateProducerIDsExhausted(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.img.nextProducerID = math.MaxInt64 - producerIDBlockSize
	res := s.ok(&command{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: s.epoch(1)})
	if b := decodeBlock(t, 1, res); b.start != math.MaxInt64-producerIDBlockSize {
		t.Fatalf("last block %+v", b)
	}
	if res := s.apply(&command{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: s.epoch(1)}); !errors.Is(res.err, ErrUnknown) {
		t.Fatalf("past the end: %v", res.err)
	}
	if s.img.NextProducerID() != math.MaxInt64 {
		t.Fatalf("next producer id %d", s.img.NextProducerID())
	}
}

// TestAllocateProducerIDsThreeVoters: every node allocates at once (the
// followers through the forwarding RPC); then the leader crashes, the
// survivors allocate, and the old leader comes back from its snapshot and
// allocates too. No id is ever handed out twice, and every node ends with
// the same counter.
func TestAllocateProducerIDsThreeVoters(t *testing.T) {
	nodes := newCluster(t, 3, func(cfg *Config) { cfg.BrokerSessionTimeout = time.Minute })
	ctx := ctxTimeout(t, 60*time.Second)
	waitLeader(t, nodes, 10*time.Second)
	epochs := map[int32]int64{}
	for _, nd := range nodes {
		e, err := nd.c.RegisterBroker(ctx, BrokerInfo{ID: nd.cfg.NodeID, Addr: fmt.Sprintf("127.0.0.1:%d", 9090+nd.cfg.NodeID)})
		if err != nil {
			t.Fatal(err)
		}
		epochs[nd.cfg.NodeID] = e
	}

	var mu sync.Mutex
	var blocks []block
	allocate := func(nd *testNode, n int) error {
		for range n {
			start, length, err := nd.c.AllocateProducerIDs(ctx, nd.cfg.NodeID, epochs[nd.cfg.NodeID], 0)
			if err != nil {
				return fmt.Errorf("node %d: %w", nd.cfg.NodeID, err)
			}
			// The block is in this node's image when the call returns.
			if next := nd.c.Image().NextProducerID(); next < start+length {
				return fmt.Errorf("node %d: image at %d after block %d+%d", nd.cfg.NodeID, next, start, length)
			}
			mu.Lock()
			blocks = append(blocks, block{nd.cfg.NodeID, start, length})
			mu.Unlock()
		}
		return nil
	}
	concurrently := func(ns []*testNode, workers, n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(ns)*workers)
		for _, nd := range ns {
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- allocate(nd, n)
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	concurrently(nodes, 4, 10)

	// The leader crashes; the others carry on from the replicated counter.
	leader := waitLeader(t, nodes, 10*time.Second)
	if err := leader.c.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	leader.c.transferOnClose = false
	leader.close(t)
	waitLeader(t, nodes, 10*time.Second)
	var alive []*testNode
	for _, nd := range nodes {
		if nd.c != nil {
			alive = append(alive, nd)
		}
	}
	concurrently(alive, 2, 10)

	// Back it comes, restored from its snapshot and the log; it allocates
	// after the others, never from where it stopped.
	leader.open(t)
	concurrently(nodes, 2, 5)

	for _, nd := range nodes {
		if err := nd.c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	next := nodes[0].c.Image().NextProducerID()
	for _, nd := range nodes[1:] {
		if err := nd.c.WaitApplied(ctx, nodes[0].c.Image().Index); err != nil {
			t.Fatal(err)
		}
		if got := nd.c.Image().NextProducerID(); got != next {
			t.Fatalf("node %d: next producer id %d, node 1: %d", nd.cfg.NodeID, got, next)
		}
	}
	// A retry after a lost leadership may skip a block, never repeat one:
	// check disjointness, and allow gaps only as whole blocks.
	slices.SortFunc(blocks, func(a, b block) int { return int(a.start - b.start) })
	for i, b := range blocks {
		if b.length != producerIDBlockSize || b.start%producerIDBlockSize != 0 {
			t.Fatalf("block %+v", b)
		}
		if i > 0 && b.start < blocks[i-1].start+blocks[i-1].length {
			t.Fatalf("blocks %+v and %+v overlap", blocks[i-1], b)
		}
	}
	if last := blocks[len(blocks)-1]; last.start+last.length > next {
		t.Fatalf("block %+v beyond the counter %d", last, next)
	}
	if want := 3*4*10 + 2*2*10 + 3*2*5; len(blocks) != want {
		t.Fatalf("%d blocks, want %d", len(blocks), want)
	}
	t.Logf("%d blocks from 3 voters, counter at %d (%d blocks skipped by retries)",
		len(blocks), next, int(next/producerIDBlockSize)-len(blocks))
}
