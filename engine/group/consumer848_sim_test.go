package group

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupSimulation drives a group with simulated clients that
// follow the protocol as a client library does (they take partitions when
// told, revoke them some time later, lose answers, die, come back) in a
// random schedule replayable from its seed, while topics grow and appear.
// What is checked is KIP-848's promise: no partition is ever owned by two
// live clients at once (a dead client keeps what it owned until the
// coordinator fences it), and once the churn stops, every partition ends
// up owned and every member stable.
func TestConsumerGroupSimulation(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed) })
	}
}

type simClient struct {
	id     string
	epoch  int32
	owned  assignment // what the client consumes
	told   assignment // the last assignment it was given
	dead   bool
	full   bool // its next heartbeat carries everything (after an error)
	joined bool
}

func simulate(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 848))
	h := newHarness(t)
	h.cfg.ConsumerSessionTimeout = 3 * time.Second
	h.topics.set("a", int32(1+r.IntN(8)))
	h.topics.set("b", int32(1+r.IntN(8)))
	assignor := []string{"uniform", "range"}[r.IntN(2)]
	var clients []*simClient
	next := 0
	newClient := func() *simClient {
		next++
		c := &simClient{id: fmt.Sprintf("c%d", next), owned: assignment{}}
		clients = append(clients, c)
		return c
	}
	for range 3 {
		newClient()
	}

	heartbeat := func(c *simClient, lose bool) {
		var req *kmsg.ConsumerGroupHeartbeatRequest
		if !c.joined {
			req = joinReq(c.id, "a", "b", "c")
			req.ServerAssignor = &assignor
		} else {
			owned := c.owned.clone()
			if !c.full && r.IntN(3) == 0 {
				owned = nil // a keepalive
			}
			req = beat(c.id, c.epoch, owned)
			if c.full {
				req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 5000, []string{"a", "b", "c"}
			}
		}
		resp := h.do(req)
		if lose {
			c.full = true // the client retries with everything
			return
		}
		switch kerr.ErrorForCode(resp.ErrorCode) {
		case nil:
		case kerr.FencedMemberEpoch, kerr.UnknownMemberID:
			// Give up everything and join again (a new id after
			// UNKNOWN_MEMBER_ID).
			c.owned, c.told, c.joined, c.full = assignment{}, nil, false, false
			if resp.ErrorCode == kerr.UnknownMemberID.Code {
				next++
				c.id = fmt.Sprintf("c%d", next)
			}
			return
		default:
			t.Fatalf("seed %d: %s: %v", seed, c.id, kerr.ErrorForCode(resp.ErrorCode))
		}
		c.joined, c.full, c.epoch = true, false, resp.MemberEpoch
		if a := respAssignment(resp); a != nil {
			c.told = a
			// New partitions are taken at once; revoked ones are given up
			// later (the client commits first), by revoke.
			for id, ps := range a {
				for _, p := range ps {
					c.owned.add(id, p)
				}
			}
		}
	}
	revoke := func(c *simClient) {
		if c.told == nil {
			return
		}
		kept := assignment{}
		for id, ps := range c.owned {
			for _, p := range ps {
				if c.told.has(id, p) {
					kept.add(id, p)
				}
			}
		}
		c.owned = kept
	}
	check := func(step int) {
		t.Helper()
		seen := map[tpKey]string{}
		for _, c := range clients {
			if c.dead && h.cg.members[c.id] == nil {
				continue // fenced: it no longer counts
			}
			for id, ps := range c.owned {
				for _, p := range ps {
					if o, dup := seen[tpKey{id, p}]; dup {
						t.Fatalf("seed %d step %d: partition %x/%d owned by %s and %s", seed, step, id[:2], p, o, c.id)
					}
					seen[tpKey{id, p}] = c.id
				}
			}
		}
	}

	const steps = 400
	for step := range steps {
		c := clients[r.IntN(len(clients))]
		switch x := r.IntN(100); {
		case c.dead:
		case x < 55:
			heartbeat(c, r.IntN(15) == 0)
		case x < 80:
			revoke(c)
		case x < 83:
			if c.joined {
				h.do(beat(c.id, leaveEpoch, nil))
			}
			c.owned, c.dead = assignment{}, true
			newClient()
		case x < 86:
			c.dead = true // it stops heartbeating, owning what it owned
			newClient()
		case x < 89:
			name := []string{"a", "b", "c"}[r.IntN(3)]
			n := int32(1 + r.IntN(3))
			if info, ok := h.topics.Topic(name); ok {
				n += info.Partitions
			}
			h.topics.set(name, n)
		default:
			// Time passes: sessions of the silent end.
			h.now = h.now.Add(time.Duration(r.IntN(800)) * time.Millisecond)
		}
		// The coordinator's timers.
		for _, m := range h.cg.members {
			if recs := h.cg.expire(h.env(), m); recs != nil {
				h.written = append(h.written, recs...)
			} else if recs := h.cg.rebalanceExpired(h.env(), m); recs != nil {
				h.written = append(h.written, recs...)
			}
		}
		checkGroup(t, h.cg)
		check(step)
	}

	// The churn stops: the live clients heartbeat and revoke until the
	// group is stable; every partition is then owned by exactly one.
	h.now = h.now.Add(time.Minute)
	for _, m := range h.cg.members {
		h.cg.expire(h.env(), m)
	}
	for round := range 50 {
		for _, c := range clients {
			if !c.dead {
				revoke(c)
				heartbeat(c, false)
				c.full = true
			}
		}
		check(steps + round)
		if h.cg.state() == "Stable" {
			break
		}
	}
	if s := h.cg.state(); s != "Stable" {
		t.Fatalf("seed %d: the group did not settle: %s", seed, s)
	}
	total := 0
	for _, info := range h.topics.topics {
		total += int(info.Partitions)
	}
	owned := 0
	for _, c := range clients {
		if !c.dead {
			owned += c.owned.count()
		}
	}
	if owned != total {
		t.Fatalf("seed %d: %d partitions owned of %d", seed, owned, total)
	}
}
