package replication

import (
	"slices"
	"testing"
)

// The deterministic scenarios: three replicas on real segment logs,
// driven message by message. Each runs under the package's truncation and,
// where it shows why the rule exists, under the historical rule it
// replaced, which must break the promise on the same schedule.

func (c *cluster) wantLEOs(t *testing.T, leos ...int64) {
	t.Helper()
	for i, want := range leos {
		if got := c.b[i].log.LEO(); got != want {
			t.Fatalf("broker %d LEO %d, want %d", i, got, want)
		}
	}
}

func (c *cluster) wantHW(t *testing.T, id int32, hw int64) {
	t.Helper()
	if got := c.b[id].leader.HW(); got != hw {
		t.Fatalf("leader %d HW %d, want %d", id, got, hw)
	}
}

func wantOffsets(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	var want []int64
	for o := from; o <= to; o++ {
		want = append(want, o)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumers see offsets %v, want %v", got, want)
	}
}

// finish heals everything, lets the protocol run, and checks the promise.
func (c *cluster) finish(t *testing.T) {
	t.Helper()
	if !c.settle() {
		t.Fatalf("the cluster did not settle: controller %+v", c.ctl)
	}
	c.checkFinal()
	c.ok()
}

// The walkthrough of the issue on real logs: LEO and HW per replica,
// what consumers see, and followers learning the HW from responses.
func TestWalkthroughOnSegmentLogs(t *testing.T) {
	c := newCluster(t, 3, testConfig(), kafkaPolicy)
	c.produce(0, 1, false)
	c.produce(0, 1, false)
	c.catchUp(1)
	c.catchUp(2)
	c.fetch(1, 0) // follower 1 learns HW 2
	c.wantLEOs(t, 2, 2, 2)
	c.wantHW(t, 0, 2)
	if c.b[1].hw != 2 || c.b[2].hw != 2 {
		t.Fatalf("follower HWs %d %d", c.b[1].hw, c.b[2].hw)
	}

	// The leader takes two records: LEO 4, HW 2, consumers see 0-1.
	c.produce(0, 1, false)
	c.produce(0, 1, false)
	c.wantLEOs(t, 4, 2, 2)
	c.wantHW(t, 0, 2)
	wantOffsets(t, c.offsets(0, c.b[0].leader.HW()), 0, 1)

	// Follower 1 copies both records, follower 2 one.
	c.fetch(1, 1<<20)
	c.fetch(2, 1) // room for one batch
	c.wantLEOs(t, 4, 4, 3)
	// The leader learns their LEOs from their next fetches: 4, 4, 3, HW 3,
	// consumers see 0-2. Follower 1 asked first and still has HW 2.
	c.fetch(1, 0)
	c.fetch(2, 0)
	c.wantHW(t, 0, 3)
	if leo, _ := c.b[0].leader.FollowerLEO(2); leo != 3 {
		t.Fatalf("leader sees follower 2 at %d", leo)
	}
	wantOffsets(t, c.offsets(0, c.b[0].leader.HW()), 0, 2)
	if c.b[1].hw != 2 || c.b[2].hw != 3 {
		t.Fatalf("follower HWs %d %d, want 2 3", c.b[1].hw, c.b[2].hw)
	}

	// All copy: HW 4, consumers see 0-3, and the next responses tell the
	// followers.
	c.fetch(2, 1<<20)
	c.fetch(2, 0)
	c.wantLEOs(t, 4, 4, 4)
	c.wantHW(t, 0, 4)
	wantOffsets(t, c.offsets(0, c.b[0].leader.HW()), 0, 3)
	c.fetch(1, 0)
	if c.b[1].hw != 4 || c.b[2].hw != 4 {
		t.Fatalf("follower HWs %d %d, want 4 4", c.b[1].hw, c.b[2].hw)
	}
	c.finish(t)
}

// One leader change: the old leader's uncommitted suffix, and a follower's
// partial copy of it, give way to what the new leader wrote at the same
// offsets. Without truncation the logs stay divergent.
func TestDivergentSuffixAfterOneLeaderChange(t *testing.T) {
	run := func(t *testing.T, pol policy) *cluster {
		c := newCluster(t, 3, testConfig(), pol)
		c.produce(0, 2, false) // offsets 0-1, committed
		c.catchUp(1)
		c.catchUp(2)
		c.wantHW(t, 0, 2)
		c.produce(0, 2, false) // 2-3
		c.produce(0, 2, false) // 4-5
		c.fetch(2, 1)          // broker 2 copies 2-3
		c.wantLEOs(t, 6, 2, 4)

		c.crash(0) // broker 1 is elected, at epoch 1
		c.deliverAll()
		if c.b[1].leader == nil || c.b[1].leaderEpoch != 1 {
			t.Fatalf("broker 1 not leading: %+v", c.ctl)
		}
		c.produce(1, 2, false) // 2-3 again, other records, epoch 1
		for c.b[2].truncating {
			c.truncateStep(2)
		}
		c.restart(0)
		c.deliverAll()
		for c.b[0].truncating {
			c.truncateStep(0)
		}
		return c
	}

	c := run(t, kafkaPolicy)
	// Both cut back to the common prefix, and no further.
	c.wantLEOs(t, 2, 4, 2)
	if c.b[0].asks != 1 || c.b[2].asks != 1 {
		t.Fatalf("OffsetForLeaderEpoch requests: %d and %d, want one each", c.b[0].asks, c.b[2].asks)
	}
	c.catchUp(0)
	c.catchUp(2)
	c.finish(t)

	t.Run("without truncation", func(t *testing.T) {
		c := run(t, noPolicy)
		c.settle()
		c.checkFinal()
		if c.violation == nil {
			t.Fatal("divergent logs went unnoticed")
		}
		t.Log(c.violation)
	})
}

// KIP-101's first scenario in KRaft terms: a follower whose HW lags the
// leader's truncates to it when it becomes a follower of a new epoch, and
// is elected before it copies the data back. Exposed offset 1 is lost with
// the pre-KIP-101 rule, kept with the epoch rule.
func TestHWTruncationLosesExposedData(t *testing.T) {
	run := func(t *testing.T, pol policy) *cluster {
		c := newCluster(t, 3, testConfig(), pol)
		c.produce(0, 1, false)
		c.catchUp(1)
		c.catchUp(2)
		c.fetch(1, 0)
		c.produce(0, 1, false) // offset 1
		c.fetch(1, 1<<20)
		c.fetch(2, 1<<20)
		c.fetch(1, 0) // the leader hears 2 from broker 1 first: HW stays 1 in its answer
		c.fetch(2, 0) // HW 2, exposed
		c.wantHW(t, 0, 2)
		if c.b[1].hw != 1 || c.b[2].hw != 2 {
			t.Fatalf("follower HWs %d %d, want 1 2", c.b[1].hw, c.b[2].hw)
		}
		// A controlled move to broker 2; broker 1 follows the new epoch.
		c.moveLeader(2)
		c.deliverAll()
		for c.b[1].truncating {
			c.truncateStep(1)
		}
		// Brokers 0 and 2 fail before broker 1 fetches: it is elected.
		c.crash(0)
		c.crash(2)
		c.deliverAll()
		if c.b[1].leader == nil {
			t.Fatalf("broker 1 not elected: %+v", c.ctl)
		}
		return c
	}
	c := run(t, kafkaPolicy)
	c.ok()
	if got := c.b[1].log.LEO(); got != 2 {
		t.Fatalf("broker 1 leads with LEO %d, want 2", got)
	}
	c.finish(t)

	t.Run("truncation to the HW", func(t *testing.T) {
		c := run(t, hwPolicy)
		if c.violation == nil {
			t.Fatal("the lost exposed offset went unnoticed")
		}
		t.Log(c.violation)
	})
}

// Two quick leader changes (KIP-279): broker 1 leads epoch 1 and writes
// offset 2 that nobody copies; broker 2, which copied the old leader's
// offset 2, leads epoch 2 without ever following epoch 1. Broker 1 asks
// about epoch 1 and hears epoch 0 ends at 3 on the leader; its own epoch 0
// ends at 2, so it truncates there. KIP-101's rule (the leader's end
// offset) would keep its offset 2 of epoch 1.
func TestTwoQuickLeaderChanges(t *testing.T) {
	run := func(t *testing.T, pol policy) *cluster {
		c := newCluster(t, 3, testConfig(), pol)
		c.produce(0, 1, false)
		c.produce(0, 1, false)
		c.catchUp(1)
		c.catchUp(2)
		c.wantHW(t, 0, 2)
		c.produce(0, 1, false) // offset 2, epoch 0, only broker 2 copies it
		c.fetch(2, 1<<20)
		c.wantLEOs(t, 3, 2, 3)

		c.crash(0) // broker 1 leads epoch 1; broker 2 does not hear of it
		c.deliver(1)
		c.produce(1, 1, false) // offset 2, epoch 1
		c.crash(1)             // broker 2 leads epoch 2
		c.deliver(2)
		if c.b[2].leader == nil || c.b[2].leaderEpoch != 2 {
			t.Fatalf("broker 2 not leading epoch 2: %+v", c.ctl)
		}
		c.produce(2, 1, false) // offset 3, epoch 2

		c.restart(1)
		c.deliver(1)
		for c.b[1].truncating {
			c.truncateStep(1)
		}
		return c
	}

	c := run(t, kafkaPolicy)
	if got := c.b[1].log.LEO(); got != 2 {
		t.Fatalf("broker 1 truncated to %d, want 2", got)
	}
	c.restart(0)
	c.deliverAll()
	c.catchUp(0)
	c.catchUp(1)
	c.finish(t)

	t.Run("KIP-101 alone", func(t *testing.T) {
		c := run(t, kip101Policy)
		if got := c.b[1].log.LEO(); got != 3 {
			t.Fatalf("KIP-101's rule truncated broker 1 to %d; the scenario needs it to keep offset 2", got)
		}
		c.settle()
		c.checkFinal()
		if c.violation == nil {
			t.Fatal("the divergence at offset 2 went unnoticed")
		}
		t.Log(c.violation)
	})
}

// Leadership moves 0 -> 1 -> 2 -> 1 -> 2 faster than the followers learn
// of it: broker 1 ends with epochs 0, 1, 3 and broker 2, the leader, with
// 0, 2, 4. Broker 1 must walk back: asked about epoch 3 the leader answers
// epoch 2, which broker 1 never had, so it drops its epoch 3 and asks
// about epoch 1; the answer (epoch 0, ending at 1) takes it to the common
// prefix. KIP-101's rule stops after the first answer with offset 1 of
// epoch 1 still in the log.
func TestWalkBackThroughEpochsUnknownToTheLeader(t *testing.T) {
	run := func(t *testing.T, pol policy) *cluster {
		c := newCluster(t, 3, testConfig(), pol)
		c.produce(0, 1, false) // offset 0, committed
		c.catchUp(1)
		c.catchUp(2)
		c.wantHW(t, 0, 1)
		for _, step := range []struct{ to, epoch int32 }{{1, 1}, {2, 2}, {1, 3}, {2, 4}} {
			if !c.moveLeader(step.to) {
				t.Fatalf("cannot move the leadership to %d", step.to)
			}
			c.deliver(step.to) // only the new leader hears of it in time
			if c.b[step.to].leader == nil || c.b[step.to].leaderEpoch != step.epoch {
				t.Fatalf("broker %d not leading epoch %d", step.to, step.epoch)
			}
			c.produce(step.to, 1, false)
		}
		wantEpochs := func(id int32, want ...int32) {
			var got []int32
			for _, e := range c.b[id].log.Epochs() {
				got = append(got, e.Epoch)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("broker %d epochs %v, want %v", id, got, want)
			}
		}
		wantEpochs(1, 0, 1, 3)
		wantEpochs(2, 0, 2, 4)
		c.deliver(1)
		for c.b[1].truncating {
			c.truncateStep(1)
		}
		return c
	}

	c := run(t, kafkaPolicy)
	if got, asks := c.b[1].log.LEO(), c.b[1].asks; got != 1 || asks != 2 {
		t.Fatalf("broker 1 truncated to %d after %d requests, want 1 after 2", got, asks)
	}
	c.deliverAll()
	c.catchUp(0)
	c.catchUp(1)
	c.finish(t)

	t.Run("KIP-101 alone", func(t *testing.T) {
		c := run(t, kip101Policy)
		if got := c.b[1].log.LEO(); got != 2 {
			t.Fatalf("KIP-101's rule truncated broker 1 to %d; the scenario needs it to keep offset 1", got)
		}
		c.settle()
		c.checkFinal()
		if c.violation == nil {
			t.Fatal("the divergence at offset 1 went unnoticed")
		}
		t.Log(c.violation)
	})
}

// A broker that led an epoch without writing anything has that epoch in
// its cache at its LEO until a truncation drops it (segment.Log.TruncateTo
// drops entries at and above the new end, as Kafka's truncateTo does).
// The walk takes the next epoch from the answers, not from the cache, so
// it ends; here one request suffices, and the log converges.
func TestWalkEndsWithAnEmptyEpochAtTheLEO(t *testing.T) {
	c := newCluster(t, 3, testConfig(), kafkaPolicy)
	c.produce(0, 1, false)
	c.catchUp(1)
	c.catchUp(2)
	c.moveLeader(2)
	c.deliver(2)
	c.produce(2, 1, false) // offset 1, epoch 1
	c.moveLeader(1)
	c.deliver(1) // broker 1 leads epoch 2 from offset 1 and writes nothing
	c.moveLeader(2)
	c.deliver(2)
	c.produce(2, 1, false) // offset 2, epoch 3
	c.deliver(1)
	for i := 0; c.b[1].truncating; i++ {
		if i == 10 {
			t.Fatal("the walk does not end")
		}
		c.truncateStep(1)
	}
	if got, asks := c.b[1].log.LEO(), c.b[1].asks; got != 1 || asks != 1 {
		t.Fatalf("broker 1 at %d after %d requests, want 1 after 1", got, asks)
	}
	c.deliverAll()
	c.catchUp(0)
	c.catchUp(1)
	c.finish(t)
}

// A follower may join the ISR only once it has everything up to the start
// of the leader's epoch, not merely the HW: a new leader's HW can lag what
// the previous leader exposed. Here broker 1 takes over with LEO 3 and HW
// 1 while offsets up to 2 were exposed; broker 2 is at 2. Adding it at 2
// would make it electable without offset 2.
func TestExpansionWaitsForTheEpochStart(t *testing.T) {
	c := newCluster(t, 3, testConfig(), kafkaPolicy)
	c.produce(0, 1, false)
	c.catchUp(1)
	c.catchUp(2)
	c.fetch(1, 0)
	c.produce(0, 1, false) // offset 1
	c.produce(0, 1, false) // offset 2
	c.fetch(1, 1<<20)
	c.fetch(1, 0) // broker 1 at 3; broker 2 holds the HW at 1
	c.fetch(2, 1) // broker 2 copies offset 1 only
	c.wantHW(t, 0, 1)
	// Broker 2 lags past LagTimeMax and leaves the ISR: the HW jumps to 3
	// on the leader, which broker 1 has not heard.
	c.tick(ms(150))
	c.isrCheck(0)
	c.processAlter(0)
	c.wantHW(t, 0, 3)
	if c.b[1].hw != 1 {
		t.Fatalf("broker 1 HW %d, want 1", c.b[1].hw)
	}

	// Broker 1 takes over at epoch 1 from offset 3 with HW 1, and keeps
	// it there until broker 0, still in the ISR, fetches from it.
	c.moveLeader(1)
	c.deliver(1)
	c.deliver(2)
	l := c.b[1].leader
	if l == nil || l.HW() != 1 || l.EpochStartOffset() != 3 {
		t.Fatalf("broker 1 not leading from 3 with HW 1: %+v", c.ctl)
	}
	for c.b[2].truncating {
		c.truncateStep(2)
	}
	c.fetch(2, 0) // the leader hears 2: above the HW, below the epoch start
	if leo, _ := l.FollowerLEO(2); leo != 2 {
		t.Fatalf("leader sees broker 2 at %d", leo)
	}
	if ch, ok := l.ExpandProposal(); ok {
		t.Fatalf("broker 2 proposed for the ISR at 2: %v", ch)
	}
	c.fetch(2, 1<<20)
	c.fetch(2, 0)
	if ch, ok := l.ExpandProposal(); !ok || !slices.Equal(ch.ISR, []int32{0, 1, 2}) {
		t.Fatalf("broker 2 not proposed at 3: %v %v", ch, ok)
	}
	c.finish(t)
}
