package replication

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"ringlog/engine/acks"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// This file is a deterministic cluster of one partition for the
// simulations: brokers whose logs are real segment logs, a model of the
// controller, and the protocol's messages (Fetch, OffsetForLeaderEpoch,
// AlterPartition, metadata) as method calls that the tests order. Every
// decision is taken by the production code: this package's (the leader's
// HW and ISR, truncation, the controller's election) and the engine's
// acks=all rule (engine/acks), called where the broker calls them; the
// cluster only carries bytes and checks the promise: no offset below an HW
// the leader ever exposed, and no acknowledged acks=all batch, is lost or
// changed on a replica the controller could elect.

// policy is how followers truncate after a leader change. kafkaPolicy is the
// package's; the others are the historical rules the simulations must be
// able to tell apart from it.
type policy struct {
	name  string
	start func(entries []segment.EpochEntry, leo, hw int64) Truncation
	step  func(entries []segment.EpochEntry, leo, hw int64, asked int32, ans EpochEndOffset) (Truncation, error)
	// fetchCheck makes the leader check the follower's last fetched epoch
	// on each fetch (truncation on fetch, Fetch v12+).
	fetchCheck bool
}

var (
	kafkaPolicy = policy{name: "KIP-101+KIP-279", start: StartTruncation, step: TruncationStep, fetchCheck: true}
	// kip101Policy truncates to the leader's end offset for the follower's
	// latest epoch, without walking back through epochs (before KIP-279).
	kip101Policy = policy{name: "KIP-101 only", start: StartTruncation,
		step: func(_ []segment.EpochEntry, leo, hw int64, _ int32, ans EpochEndOffset) (Truncation, error) {
			if ans.EndOffset < 0 {
				return Truncation{TruncateTo: min(hw, leo), Done: true}, nil
			}
			return Truncation{TruncateTo: min(ans.EndOffset, leo), Done: true}, nil
		}}
	// hwPolicy truncates to the follower's HW (before KIP-101).
	hwPolicy = policy{name: "HW", start: func(_ []segment.EpochEntry, leo, hw int64) Truncation {
		return Truncation{TruncateTo: min(hw, leo), Done: true}
	}}
	// noPolicy never truncates.
	noPolicy = policy{name: "none", start: func(_ []segment.EpochEntry, leo, _ int64) Truncation {
		return Truncation{TruncateTo: leo, Done: true}
	}}
)

// broker is one replica: its log and what it believes from the metadata
// it has received.
type broker struct {
	id  int32
	dir string
	log *segment.Log // nil while down
	// isolated brokers are cut off from the controller (no metadata, no
	// AlterPartition) but still talk to other brokers: a zombie leader.
	isolated bool
	// leaderID and leaderEpoch are the broker's view (-1: unknown).
	leaderID    int32
	leaderEpoch int32
	leader      *Leader // set while this broker leads
	// acks are the acks=all produces appended here and waiting for the
	// HW, as the engine keeps them per partition.
	acks       acks.Queue[ackedBatch]
	truncating bool
	ask        int32 // the epoch to ask about next while truncating
	hw         int64 // a follower's HW (its checkpoint survives restarts)
	asks       int   // OffsetForLeaderEpoch requests sent
}

func (b *broker) up() bool { return b.log != nil }

// ctrlState is the controller's record of the partition.
type ctrlState struct {
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int32
	fenced         []bool // by broker id
}

func (s ctrlState) clone() ctrlState {
	s.isr = slices.Clone(s.isr)
	s.fenced = slices.Clone(s.fenced)
	return s
}

type alterReq struct {
	from   int32
	change ISRChange
}

// ackedBatch is a batch whose acks=all produce was acknowledged.
type ackedBatch struct {
	base  int64
	bytes []byte
}

type cluster struct {
	t        testing.TB
	cfg      Config
	pol      policy
	unclean  bool
	now      time.Time
	replicas []int32
	b        []*broker
	ctl      ctrlState
	alters   []alterReq
	// exposed is the log below maxExposed, the highest HW any leader
	// exposed: the committed prefix nothing may change.
	exposed    []byte
	maxExposed int64
	acked      []ackedBatch
	seq        int
	violation  error
	stats      struct{ elections, truncated, walkBacks, divergences, acked int }
}

func logConfig() segment.Config {
	c := segment.DefaultConfig()
	// Small segments, so that truncations cross segment boundaries.
	c.SegmentBytes = 2048
	c.SegmentIndexBytes = 4096
	c.IndexIntervalBytes = 256
	return c
}

// newCluster starts n brokers on empty logs, broker 0 leading at epoch 0
// with every broker in the ISR, metadata delivered everywhere.
func newCluster(t testing.TB, n int, cfg Config, pol policy) *cluster {
	t.Helper()
	c := &cluster{t: t, cfg: cfg, pol: pol, now: t0}
	root := t.TempDir()
	for i := range n {
		id := int32(i)
		b := &broker{id: id, dir: filepath.Join(root, fmt.Sprint(i)), leaderID: -1, leaderEpoch: -1}
		c.b = append(c.b, b)
		c.replicas = append(c.replicas, id)
		c.open(b)
	}
	t.Cleanup(func() {
		for _, b := range c.b {
			if b.up() {
				b.log.Close()
			}
		}
	})
	c.ctl = ctrlState{leader: 0, isr: slices.Clone(c.replicas), fenced: make([]bool, n)}
	c.deliverAll()
	return c
}

func (c *cluster) open(b *broker) {
	l, err := segment.Open(b.dir, logConfig(), segment.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	b.log = l
	b.hw = min(b.hw, l.LEO())
}

// violate records the first broken promise; scripted tests stop on it with
// ok, random ones report it with the seed.
func (c *cluster) violate(format string, args ...any) {
	if c.violation == nil {
		c.violation = fmt.Errorf("at %v: %s", c.now.Sub(t0), fmt.Sprintf(format, args...))
	}
}

func (c *cluster) ok() {
	c.t.Helper()
	if c.violation != nil {
		c.t.Fatal(c.violation)
	}
}

func (c *cluster) tick(d time.Duration) { c.now = c.now.Add(d) }

// readAll returns b's whole batches below upper.
func (c *cluster) readAll(b *broker, upper int64) []byte {
	data, err := b.log.ReadBatches(b.log.LogStartOffset(), 1<<40, upper)
	if err != nil {
		c.t.Fatal(err)
	}
	return data
}

func split(t testing.TB, data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			t.Fatalf("bad batch in a read: %v", err)
		}
		out = append(out, data[:h.Size()])
		data = data[h.Size():]
	}
	return out
}

// mkBatch builds a producer batch of n records whose content no other
// batch of the run has.
func (c *cluster) mkBatch(n int) []byte {
	c.seq++
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "k%d", c.seq), Value: fmt.Appendf(nil, "batch %d record %d", c.seq, i)}
	}
	ts := c.now.UnixMilli()
	h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// --- the controller ---

func (c *cluster) live(id int32) bool { return !c.ctl.fenced[id] }

// elect replaces a leader that is gone (or nobody) as the controller does
// (ElectLeader); when force is false and nobody can be elected, nothing
// changes. A change of leader, to nobody included, bumps both epochs.
func (c *cluster) elect(force bool) {
	e, ok := ElectLeader(c.replicas, c.ctl.isr, c.live, c.unclean)
	if !ok && !force {
		return
	}
	c.ctl.leader, c.ctl.isr = e.Leader, e.ISR
	c.ctl.leaderEpoch++
	c.ctl.partitionEpoch++
}

// fence is the controller losing a broker's heartbeats: it leaves the ISR
// (FencedISR), and if it led, a new leader is elected from the ISR.
func (c *cluster) fence(id int32) {
	c.ctl.fenced[id] = true
	if isr := FencedISR(c.ctl.isr, id); !slices.Equal(isr, c.ctl.isr) {
		c.ctl.isr = isr
		c.ctl.partitionEpoch++
	}
	if c.ctl.leader == id {
		c.elect(true)
	}
}

func (c *cluster) unfence(id int32) {
	c.ctl.fenced[id] = false
	if c.ctl.leader < 0 {
		c.elect(false)
	}
}

// moveLeader is a controlled election (preferred leader, or a leader's
// controlled shutdown) to ISR member to.
func (c *cluster) moveLeader(to int32) bool {
	if !slices.Contains(c.ctl.isr, to) || c.ctl.fenced[to] || c.ctl.leader == to {
		return false
	}
	c.ctl.leader = to
	c.ctl.leaderEpoch++
	c.ctl.partitionEpoch++
	return true
}

// processAlter handles the i-th AlterPartition request in flight and
// delivers the answer, as KRaft's controller does.
func (c *cluster) processAlter(i int) {
	req := c.alters[i]
	c.alters = slices.Delete(c.alters, i, i+1)
	ch := req.change
	b := c.b[req.from]
	answer := func(f func(l *Leader)) {
		if b.up() && !b.isolated && b.leader != nil && b.leader.LeaderEpoch() == ch.LeaderEpoch {
			f(b.leader)
		}
	}
	if req.from != c.ctl.leader || ch.LeaderEpoch != c.ctl.leaderEpoch || ch.PartitionEpoch != c.ctl.partitionEpoch {
		// FENCED_LEADER_EPOCH or INVALID_UPDATE_VERSION: the change stays
		// pending until metadata brings the controller's newer state.
		return
	}
	for _, id := range ch.ISR {
		if c.ctl.fenced[id] && !slices.Contains(c.ctl.isr, id) {
			// INELIGIBLE_REPLICA: nothing applied.
			answer(func(l *Leader) {
				if err := l.ISRRejected(ch); err != nil && !errors.Is(err, ErrStale) {
					c.t.Fatal(err)
				}
			})
			return
		}
	}
	c.ctl.isr = slices.Clone(ch.ISR)
	c.ctl.partitionEpoch++
	st := PartitionState{LeaderEpoch: c.ctl.leaderEpoch, PartitionEpoch: c.ctl.partitionEpoch, ISR: slices.Clone(c.ctl.isr)}
	answer(func(l *Leader) {
		moved, err := l.ISRCommitted(ch, st, c.now)
		if err != nil && !errors.Is(err, ErrStale) {
			c.t.Fatal(err)
		}
		if moved {
			c.onHW(b)
		}
	})
}

// --- metadata and roles ---

func (c *cluster) deliverAll() {
	for _, b := range c.b {
		c.deliver(b.id)
	}
}

// deliver brings the controller's current state to broker id.
func (c *cluster) deliver(id int32) {
	b := c.b[id]
	if !b.up() || b.isolated {
		return
	}
	st := c.ctl.clone()
	if st.leaderEpoch > b.leaderEpoch {
		c.resign(b)
		b.leaderEpoch, b.leaderID = st.leaderEpoch, st.leader
		b.truncating = false
		if st.leader != id {
			// engine.BecomeFollower (for no leader too): the waiting
			// produces are answered NOT_LEADER_OR_FOLLOWER, not acked. A
			// leader elected again keeps them (engine.BecomeLeader).
			b.acks.Fail(-1)
		}
		switch {
		case st.leader == id:
			c.becomeLeader(b, st)
		case st.leader >= 0:
			c.applyTruncation(b, c.pol.start(b.log.Epochs(), b.log.LEO(), b.hw))
		}
		return
	}
	if b.leader != nil && st.leaderEpoch == b.leaderEpoch {
		for _, f := range c.replicas {
			if f != id {
				b.leader.SetFenced(f, st.fenced[f])
			}
		}
		moved, err := b.leader.UpdateISR(PartitionState{LeaderEpoch: st.leaderEpoch, PartitionEpoch: st.partitionEpoch, ISR: st.isr}, c.now)
		if err != nil && !errors.Is(err, ErrStale) {
			c.t.Fatal(err)
		}
		if moved {
			c.onHW(b)
		}
	}
}

func (c *cluster) resign(b *broker) {
	if b.leader == nil {
		return
	}
	b.hw = b.leader.HW()
	b.leader = nil
}

func (c *cluster) becomeLeader(b *broker, st ctrlState) {
	leo := b.log.LEO()
	if err := b.log.AssignEpoch(st.leaderEpoch, leo); err != nil {
		c.t.Fatal(err)
	}
	l, err := NewLeader(LeaderState{ID: b.id, LeaderEpoch: st.leaderEpoch, PartitionEpoch: st.partitionEpoch,
		Replicas: c.replicas, ISR: st.isr, LEO: leo, HW: min(b.hw, leo)}, c.cfg, c.now)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, f := range c.replicas {
		if f != b.id {
			l.SetFenced(f, st.fenced[f])
		}
	}
	b.leader = l
	c.stats.elections++
	// The promise at its sharpest: a leader elected from the ISR has every
	// offset any leader exposed, with the same content.
	if !c.unclean {
		if got := c.readAll(b, c.maxExposed); b.log.LEO() < c.maxExposed || !bytes.Equal(got, c.exposed) {
			c.violate("broker %d elected at epoch %d lacks the exposed prefix below %d (its LEO %d)", b.id, st.leaderEpoch, c.maxExposed, b.log.LEO())
		}
	}
	c.onHW(b)
}

// applyTruncation carries out a follower's truncation step.
func (c *cluster) applyTruncation(b *broker, t Truncation) {
	if t.TruncateTo < b.log.LEO() {
		c.stats.truncated++
	}
	if err := b.log.TruncateTo(t.TruncateTo); err != nil {
		c.t.Fatal(err)
	}
	b.acks.Fail(b.log.LEO()) // engine.Truncate
	b.hw = min(b.hw, b.log.LEO())
	b.truncating = !t.Done
	b.ask = t.Ask
}

// leaderOf returns the broker b fetches from, when it answers requests of
// b's leader epoch (otherwise FENCED_LEADER_EPOCH or NOT_LEADER: b waits).
func (c *cluster) leaderOf(b *broker) *broker {
	if !b.up() || b.leader != nil || b.leaderID < 0 {
		return nil
	}
	l := c.b[b.leaderID]
	if !l.up() || l.leader == nil || l.leaderEpoch != b.leaderEpoch {
		return nil
	}
	return l
}

// truncateStep is one OffsetForLeaderEpoch round trip for a truncating
// follower; false when it could not be sent or answered.
func (c *cluster) truncateStep(id int32) bool {
	b := c.b[id]
	l := c.leaderOf(b)
	if l == nil || !b.truncating {
		return false
	}
	b.asks++
	ans := EndOffsetForEpoch(l.log.Epochs(), l.log.LEO(), b.ask)
	if e, o := l.log.EndOffsetForEpoch(b.ask); e != ans.Epoch || o != ans.EndOffset {
		c.violate("EndOffsetForEpoch(%d) = %v, segment says %d %d", b.ask, ans, e, o)
	}
	t, err := c.pol.step(b.log.Epochs(), b.log.LEO(), b.hw, b.ask, ans)
	if err != nil {
		c.violate("truncation step: %v", err)
		return false
	}
	if !t.Done {
		c.stats.walkBacks++
	}
	c.applyTruncation(b, t)
	return true
}

// fetch is one Fetch round trip of follower id, for at most maxBytes;
// false when it could not be sent or answered.
func (c *cluster) fetch(id int32, maxBytes int64) bool {
	b := c.b[id]
	l := c.leaderOf(b)
	if l == nil || b.truncating {
		return false
	}
	off := b.log.LEO()
	if c.pol.fetchCheck && off > b.log.LogStartOffset() {
		if last := b.log.EpochForOffset(off - 1); last >= 0 {
			div, diverging, err := DivergingEpoch(l.log.Epochs(), l.log.LogStartOffset(), l.log.LEO(), off, last)
			if err != nil {
				c.violate("fetch of %d at %d (epoch %d): %v", id, off, last, err)
				return false
			}
			if diverging {
				c.stats.divergences++
				t, err := TruncationStep(b.log.Epochs(), off, b.hw, last, div)
				if err != nil {
					c.violate("truncation on fetch: %v", err)
					return false
				}
				c.applyTruncation(b, t)
				return true
			}
		}
	}
	moved, err := l.leader.FollowerFetch(id, off, c.now)
	if errors.Is(err, ErrOffsetOutOfRange) {
		r := OutOfRange(off, l.log.LogStartOffset(), l.log.LEO())
		c.applyTruncation(b, Truncation{TruncateTo: r.TruncateTo, Done: true})
		return true
	}
	if err != nil {
		c.t.Fatal(err)
	}
	// maxBytes 0 is a response without records (Read would return one
	// batch anyway, KIP-74), so that tests can report a LEO alone.
	var data []byte
	if maxBytes > 0 {
		if data, err = l.log.ReadBatches(off, maxBytes, l.log.LEO()); err != nil {
			c.t.Fatal(err)
		}
	}
	if len(data) > 0 {
		if _, err := b.log.Append(split(c.t, data), segment.AppendOptions{Replica: true}); err != nil {
			// Only a follower whose log diverged from its leader's gets
			// batches it cannot append.
			c.violate("follower %d cannot append the leader's batches at %d: %v", id, off, err)
			return false
		}
	}
	b.hw = FollowerHW(l.leader.HW(), b.log.LogStartOffset(), b.log.LEO())
	if moved {
		c.onHW(l)
	}
	return true
}

// produce appends a batch of n records on broker id, which believes it
// leads; false when it does not, or refuses an acks=all produce.
func (c *cluster) produce(id int32, n int, acksAll bool) bool {
	b := c.b[id]
	if !b.up() || b.leader == nil {
		return false
	}
	// The node gives the engine the committed ISR's size (engine.SetISR),
	// which checks it against min.insync.replicas.
	if acksAll && !acks.Enough(int32(len(b.leader.ISR())), int32(c.cfg.MinISR), int32(len(b.leader.Replicas()))) {
		return false
	}
	res, err := b.log.Append([][]byte{c.mkBatch(n)}, segment.AppendOptions{LeaderEpoch: b.leaderEpoch})
	if err != nil {
		c.t.Fatal(err)
	}
	moved, err := b.leader.LeaderAppended(b.log.LEO(), c.now)
	if err != nil {
		c.t.Fatal(err)
	}
	if acksAll {
		stored, err := b.log.ReadBatches(res.BaseOffset, 1<<40, res.LastOffset+1)
		if err != nil {
			c.t.Fatal(err)
		}
		b.acks.Park(res.LastOffset+1, ackedBatch{res.BaseOffset, stored})
	}
	if moved || acksAll {
		c.onHW(b)
	}
	return true
}

// onHW records what leader b exposes, checks it against what was exposed
// before, and answers the acks=all requests it can.
func (c *cluster) onHW(b *broker) {
	hw := b.leader.HW()
	cur := c.readAll(b, hw)
	switch {
	case hw >= c.maxExposed && !bytes.HasPrefix(cur, c.exposed):
		c.violate("leader %d exposes HW %d whose log differs below the exposed %d", b.id, hw, c.maxExposed)
	case hw < c.maxExposed && !bytes.HasPrefix(c.exposed, cur):
		c.violate("leader %d exposes HW %d whose log differs from the exposed prefix", b.id, hw)
	case hw > c.maxExposed:
		c.exposed, c.maxExposed = cur, hw
	}
	// engine.SetHW answers what the HW covers.
	for _, a := range b.acks.Due(hw) {
		c.acked = append(c.acked, a)
		c.stats.acked++
	}
}

// isrCheck is the leader's periodic ISR evaluation.
func (c *cluster) isrCheck(id int32) {
	b := c.b[id]
	if !b.up() || b.leader == nil {
		return
	}
	if b.leader.MaybeIncrementHW(c.now) {
		c.onHW(b)
	}
	ch, ok := b.leader.ShrinkProposal(c.now)
	if !ok {
		ch, ok = b.leader.ExpandProposal()
	}
	if !ok {
		return
	}
	if err := b.leader.ProposalSent(ch); err != nil {
		c.t.Fatal(err)
	}
	if !b.isolated {
		c.alters = append(c.alters, alterReq{from: id, change: ch})
	}
}

// --- faults ---

func (c *cluster) crash(id int32) {
	b := c.b[id]
	if !b.up() {
		return
	}
	c.resign(b)
	b.acks.Fail(-1) // the process is gone, and its produce requests with it
	if err := b.log.Close(); err != nil {
		c.t.Fatal(err)
	}
	b.log, b.truncating, b.isolated = nil, false, false
	c.fence(id)
}

func (c *cluster) restart(id int32) {
	b := c.b[id]
	if b.up() {
		return
	}
	c.open(b)
	b.leaderID, b.leaderEpoch = -1, -1
	c.unfence(id)
}

func (c *cluster) isolate(id int32) {
	b := c.b[id]
	if !b.up() || b.isolated {
		return
	}
	b.isolated = true
	c.fence(id)
}

func (c *cluster) heal(id int32) {
	b := c.b[id]
	if !b.up() || !b.isolated {
		return
	}
	b.isolated = false
	c.unfence(id)
}

// --- whole-cluster steps and checks ---

// catchUp runs follower id's truncation and fetches until it has its
// leader's LEO and the leader knows it.
func (c *cluster) catchUp(id int32) {
	for range 100 {
		b := c.b[id]
		if b.truncating {
			if !c.truncateStep(id) {
				c.t.Fatalf("broker %d cannot truncate", id)
			}
			continue
		}
		l := c.leaderOf(b)
		if l == nil {
			c.t.Fatalf("broker %d has no leader to fetch from", id)
		}
		leo, _ := l.leader.FollowerLEO(id)
		if leo == l.log.LEO() && b.log.LEO() == leo {
			return
		}
		c.fetch(id, 1<<20)
	}
	c.t.Fatalf("broker %d did not catch up", id)
}

// settle heals every fault and runs the protocol until every replica is
// in the ISR with the leader's log and HW; false if it does not get there.
func (c *cluster) settle() bool {
	for _, b := range c.b {
		c.heal(b.id)
		c.restart(b.id)
	}
	for range 400 {
		c.deliverAll()
		for len(c.alters) > 0 {
			c.processAlter(0)
		}
		for _, b := range c.b {
			for i := 0; i < 20 && b.truncating; i++ {
				c.truncateStep(b.id)
			}
			c.fetch(b.id, 1<<20)
		}
		if c.ctl.leader >= 0 {
			c.isrCheck(c.ctl.leader)
		}
		c.tick(ms(30))
		if c.settled() {
			return true
		}
	}
	return false
}

func (c *cluster) settled() bool {
	if c.ctl.leader < 0 || len(c.ctl.isr) != len(c.replicas) {
		return false
	}
	lb := c.b[c.ctl.leader]
	if lb.leader == nil || len(lb.leader.ISR()) != len(c.replicas) || lb.leader.HW() != lb.log.LEO() {
		return false
	}
	if _, pending := lb.leader.Pending(); pending {
		return false
	}
	for _, b := range c.b {
		if b != lb && (b.truncating || b.log.LEO() != lb.log.LEO() || b.hw != lb.leader.HW()) {
			return false
		}
	}
	return true
}

// checkFinal checks the promise on the replicas of the controller's ISR:
// identical logs, holding the exposed prefix and every acknowledged batch.
func (c *cluster) checkFinal() {
	var first []byte
	for i, id := range c.ctl.isr {
		b := c.b[id]
		data := c.readAll(b, b.log.LEO())
		if i == 0 {
			first = data
		} else if !bytes.Equal(data, first) {
			c.violate("ISR members %d and %d have different logs", c.ctl.isr[0], id)
		}
		if !bytes.HasPrefix(data, c.exposed) {
			c.violate("broker %d lost or changed offsets below the exposed HW %d", id, c.maxExposed)
		}
		byBase := map[int64][]byte{}
		for _, bt := range split(c.t, data) {
			h, _ := batch.ParseHeader(bt)
			byBase[h.BaseOffset] = bt
		}
		for _, a := range c.acked {
			if !bytes.Equal(byBase[a.base], a.bytes) {
				c.violate("broker %d lost the acknowledged batch at %d", id, a.base)
			}
		}
	}
}

// offsets lists the offsets a consumer reading broker id below upper sees.
func (c *cluster) offsets(id int32, upper int64) []int64 {
	var out []int64
	for _, bt := range split(c.t, c.readAll(c.b[id], upper)) {
		h, _ := batch.ParseHeader(bt)
		for o := h.BaseOffset; o <= h.LastOffset(); o++ {
			out = append(out, o)
		}
	}
	return out
}
