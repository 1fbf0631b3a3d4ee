package replication

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

// simSeed replays one schedule with a trace of every step:
// go test ./replication -run TestRandomized -sim.seed N -v
var simSeed = flag.Int64("sim.seed", -1, "replay one seed of the randomized simulation, with a trace")

const (
	simSeeds = 40
	simSteps = 400
)

// simulate runs a seeded schedule of produces (acks=1 and acks=all),
// fetches, truncation steps, ISR checks, controller answers, metadata
// deliveries, crashes, restarts, isolations of a broker from the
// controller (a zombie leader keeps serving followers that have not heard),
// and leadership moves, over three replicas with unclean election off; then
// heals everything, lets the protocol settle, and checks the promise on the
// final ISR. The cluster's violation says what broke, if anything.
func simulate(t testing.TB, seed uint64, steps int, pol policy, trace bool) *cluster {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg := testConfig()
	cfg.MinISR = 1 + int(seed%2)
	c := newCluster(t, 3, cfg, pol)
	logf := func(format string, args ...any) {
		if trace {
			t.Logf("%8v "+format, append([]any{c.now.Sub(t0)}, args...)...)
		}
	}
	leaders := func() []int32 {
		var out []int32
		for _, b := range c.b {
			if b.up() && b.leader != nil {
				out = append(out, b.id)
			}
		}
		return out
	}
	pick := func(f func(b *broker) bool) (int32, bool) {
		var ids []int32
		for _, b := range c.b {
			if f(b) {
				ids = append(ids, b.id)
			}
		}
		if len(ids) == 0 {
			return -1, false
		}
		return ids[rng.IntN(len(ids))], true
	}
	for range steps {
		if c.violation != nil {
			break
		}
		c.tick(ms(rng.IntN(20)))
		id := int32(rng.IntN(len(c.b)))
		switch x := rng.IntN(100); {
		case x < 28:
			if ls := leaders(); len(ls) > 0 {
				l, acksAll := ls[rng.IntN(len(ls))], rng.IntN(2) == 0
				ok := c.produce(l, 1+rng.IntN(3), acksAll)
				logf("produce on %d acks=all %v: %v (LEO %d)", l, acksAll, ok, c.b[l].log.LEO())
			}
		case x < 50:
			maxBytes := int64(1 << 20)
			if rng.IntN(3) > 0 {
				maxBytes = 1 // one batch
			}
			if c.fetch(id, maxBytes) {
				logf("fetch by %d: LEO %d HW %d", id, c.b[id].log.LEO(), c.b[id].hw)
			}
		case x < 58:
			if c.truncateStep(id) {
				logf("truncation step of %d: LEO %d, done %v", id, c.b[id].log.LEO(), !c.b[id].truncating)
			}
		case x < 64:
			c.isrCheck(id)
		case x < 70:
			if n := len(c.alters); n > 0 {
				i := rng.IntN(n)
				logf("controller answers %d: %+v", c.alters[i].from, c.alters[i].change)
				c.processAlter(i)
			}
		case x < 83:
			c.deliver(id)
		case x < 85:
			if id, ok := pick(func(b *broker) bool { return b.up() }); ok {
				c.crash(id)
				logf("crash %d: controller %+v", id, c.ctl)
			}
		case x < 89:
			if id, ok := pick(func(b *broker) bool { return !b.up() }); ok {
				c.restart(id)
				logf("restart %d: controller %+v", id, c.ctl)
			}
		case x < 90:
			if id, ok := pick(func(b *broker) bool { return b.up() && !b.isolated }); ok {
				c.isolate(id)
				logf("isolate %d: controller %+v", id, c.ctl)
			}
		case x < 93:
			if id, ok := pick(func(b *broker) bool { return b.isolated }); ok {
				c.heal(id)
				logf("heal %d: controller %+v", id, c.ctl)
			}
		case x < 99:
			// A quick leadership move, heard at once by the new leader
			// only: the others learn of it when their metadata arrives.
			if to := c.ctl.isr[rng.IntN(len(c.ctl.isr))]; c.moveLeader(to) {
				c.deliver(to)
				logf("move leadership to %d: controller %+v", to, c.ctl)
			}
		default:
			c.tick(ms(50 + rng.IntN(150)))
		}
	}
	if c.violation == nil {
		if !c.settle() {
			c.violate("did not settle: controller %+v", c.ctl)
		} else {
			c.checkFinal()
		}
	}
	logf("end: exposed %d, stats %+v, violation %v", c.maxExposed, c.stats, c.violation)
	return c
}

// The invariant under random faults: every offset below an HW ever
// exposed survives, with the same content, on every replica of the final
// ISR, and so does every acknowledged acks=all batch; the final logs are
// identical. Fixed seeds; a failure names its seed for -sim.seed.
func TestRandomizedFaultsKeepExposedOffsets(t *testing.T) {
	if *simSeed >= 0 {
		c := simulate(t, uint64(*simSeed), simSteps, kafkaPolicy, true)
		c.ok()
		return
	}
	type counts struct{ elections, truncated, walkBacks, divergences, acked, exposed int }
	// Seeds run in parallel (the logs' fsyncs dominate); each writes its
	// own slot.
	per := make([]counts, simSeeds)
	t.Run("seeds", func(t *testing.T) {
		for seed := range uint64(simSeeds) {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				c := simulate(t, seed, simSteps, kafkaPolicy, false)
				if c.violation != nil {
					t.Fatalf("seed %d: %v (replay with -sim.seed %d -v)", seed, c.violation, seed)
				}
				per[seed] = counts{c.stats.elections, c.stats.truncated, c.stats.walkBacks, c.stats.divergences, c.stats.acked, int(c.maxExposed)}
			})
		}
	})
	var total counts
	for _, p := range per {
		total.elections += p.elections
		total.truncated += p.truncated
		total.walkBacks += p.walkBacks
		total.divergences += p.divergences
		total.acked += p.acked
		total.exposed += p.exposed
	}
	t.Logf("%d schedules: %+v", simSeeds, total)
	// Schedules that never elect, truncate or commit would prove nothing.
	if total.elections < simSeeds*3 || total.truncated == 0 || total.walkBacks == 0 || total.acked == 0 || total.exposed < simSeeds*20 {
		t.Fatalf("the schedules exercise too little: %+v", total)
	}
}

// The same schedules find the flaw of each historical truncation rule: the
// checks are strong enough to fail.
func TestRandomizedSimulationCatchesLegacyTruncation(t *testing.T) {
	for _, pol := range []policy{hwPolicy, kip101Policy} {
		t.Run(pol.name, func(t *testing.T) {
			for seed := range uint64(simSeeds) {
				if c := simulate(t, seed, simSteps, pol, false); c.violation != nil {
					t.Logf("seed %d: %v", seed, c.violation)
					return
				}
			}
			t.Fatal(fmt.Sprintf("no schedule broke the promise under %s truncation", pol.name))
		})
	}
}
