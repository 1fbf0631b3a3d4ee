package controller

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func brokersN(n int, racks ...string) []Broker {
	var bs []Broker
	for i := range n {
		b := Broker{ID: int32(i + 1)}
		if len(racks) > 0 {
			b.Rack = racks[i%len(racks)]
		}
		bs = append(bs, b)
	}
	return bs
}

func checkAssignment(t *testing.T, as [][]int32, n, rf int) {
	t.Helper()
	if len(as) != n {
		t.Fatalf("%d partitions, want %d", len(as), n)
	}
	for i, a := range as {
		if len(a) != rf || hasDuplicates(a) {
			t.Fatalf("partition %d: replicas %v", i, a)
		}
	}
}

func TestPlacementBalanced(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		const nb, n, rf = 5, 50, 3
		as, err := assignReplicas(brokersN(nb), n, rf, 0, rng)
		if err != nil {
			t.Fatal(err)
		}
		checkAssignment(t, as, n, rf)
		leaders := map[int32]int{}
		replicas := map[int32]int{}
		for _, a := range as {
			leaders[a[0]]++
			for _, r := range a {
				replicas[r]++
			}
		}
		// n is a multiple of nb: leaders and replicas are exactly even.
		for id := int32(1); id <= nb; id++ {
			if leaders[id] != n/nb || replicas[id] != n*rf/nb {
				t.Fatalf("seed %d: broker %d leads %d and holds %d replicas, want %d and %d",
					seed, id, leaders[id], replicas[id], n/nb, n*rf/nb)
			}
		}
	}
}

func TestPlacementRandomStart(t *testing.T) {
	// Over many topics of one partition, every broker gets to lead.
	rng := rand.New(rand.NewPCG(7, 7))
	led := map[int32]bool{}
	for range 100 {
		as, err := assignReplicas(brokersN(3), 1, 1, 0, rng)
		if err != nil {
			t.Fatal(err)
		}
		led[as[0][0]] = true
	}
	if len(led) != 3 {
		t.Fatalf("only brokers %v led a topic", led)
	}
}

func TestPlacementRackAware(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		bs := brokersN(6, "r1", "r2", "r3") // 1,4 on r1; 2,5 on r2; 3,6 on r3
		rack := map[int32]string{}
		for _, b := range bs {
			rack[b.ID] = b.Rack
		}
		as, err := assignReplicas(bs, 12, 3, 0, rng)
		if err != nil {
			t.Fatal(err)
		}
		checkAssignment(t, as, 12, 3)
		leaders := map[int32]int{}
		for i, a := range as {
			racks := map[string]bool{}
			for _, r := range a {
				racks[rack[r]] = true
			}
			if len(racks) != 3 {
				t.Fatalf("seed %d partition %d: replicas %v on racks %v", seed, i, a, racks)
			}
			leaders[a[0]]++
		}
		for _, b := range bs {
			if leaders[b.ID] != 2 {
				t.Fatalf("seed %d: broker %d leads %d of 12", seed, b.ID, leaders[b.ID])
			}
		}
	}
	// More replicas than racks: each rack first, then any broker.
	as, err := assignReplicas(brokersN(4, "a", "b"), 8, 3, 0, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	checkAssignment(t, as, 8, 3)
	for i, a := range as {
		if (a[0]%2 == a[1]%2) || slices.Contains(a[2:], a[0]) {
			t.Fatalf("partition %d: %v does not alternate racks", i, a)
		}
	}
}

func TestPlacementErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	if _, err := assignReplicas(brokersN(2), 1, 3, 0, rng); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf > brokers: %v", err)
	}
	if _, err := assignReplicas(brokersN(2), 1, 0, 0, rng); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf 0: %v", err)
	}
	if _, err := assignReplicas(nil, 1, 1, 0, rng); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("no brokers: %v", err)
	}
	if _, err := assignReplicas(brokersN(2), maxPartitions, 1, 1, rng); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("too many partitions: %v", err)
	}
	// Growing a topic continues the round robin.
	as, err := assignReplicas(brokersN(3), 3, 2, 3, rng)
	if err != nil {
		t.Fatal(err)
	}
	checkAssignment(t, as, 3, 2)
}
