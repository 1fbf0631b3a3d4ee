package admincli

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func brokersOf(ids ...int32) []PlanBroker {
	var bs []PlanBroker
	for _, id := range ids {
		bs = append(bs, PlanBroker{ID: id})
	}
	return bs
}

// counts is how many replicas and preferred leaderships each broker has
// once plan is applied to current.
func counts(current []Assignment, plan Plan) (load, lead map[int32]int) {
	after := cloneAssignments(current)
	for _, p := range plan.Partitions {
		for i := range after {
			if after[i].Topic == p.Topic && after[i].Partition == p.Partition {
				after[i].Replicas = p.Replicas
			}
		}
	}
	load, lead = make(map[int32]int), make(map[int32]int)
	for _, a := range after {
		for i, r := range a.Replicas {
			load[r]++
			if i == 0 {
				lead[r]++
			}
		}
	}
	return load, lead
}

func spreadOf(m map[int32]int, ids []int32) int {
	lo, hi := 1<<30, 0
	for _, id := range ids {
		lo, hi = min(lo, m[id]), max(hi, m[id])
	}
	return hi - lo
}

func TestPlanMoveOff(t *testing.T) {
	current := []Assignment{
		{Topic: "a", Partition: 0, Replicas: []int32{1, 2}},
		{Topic: "a", Partition: 1, Replicas: []int32{2, 3}},
		{Topic: "a", Partition: 2, Replicas: []int32{3, 1}},
		{Topic: "b", Partition: 0, Replicas: []int32{1}},
	}
	plan, err := PlanMoveOff(brokersOf(1, 2, 3, 4), current, 1)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Version != 1 {
		t.Fatalf("version %d", plan.Version)
	}
	// Only the three partitions on broker 1 move; a/1 stays.
	var moved []string
	for _, p := range plan.Partitions {
		moved = append(moved, fmt.Sprintf("%s/%d=%v", p.Topic, p.Partition, p.Replicas))
		if slices.Contains(p.Replicas, 1) {
			t.Errorf("%s/%d keeps broker 1: %v", p.Topic, p.Partition, p.Replicas)
		}
		if len(p.LogDirs) != len(p.Replicas) || p.LogDirs[0] != "any" {
			t.Errorf("%s/%d log_dirs %v", p.Topic, p.Partition, p.LogDirs)
		}
	}
	// a/0 was led by 1: its next replica (2, which has the data) becomes
	// the preferred leader and the least loaded broker is appended: 4
	// (no replicas) for a/0 and a/2; then 2, 3 and 4 hold two each and
	// b/0 goes to the lowest id.
	want := []string{"a/0=[2 4]", "a/2=[3 4]", "b/0=[2]"}
	if !slices.Equal(moved, want) {
		t.Fatalf("plan %v, want %v", moved, want)
	}
	load, _ := counts(current, plan)
	if load[1] != 0 {
		t.Errorf("broker 1 still has %d replicas", load[1])
	}

	// Broker 1 holds nothing: an empty plan, not an error.
	if p, err := PlanMoveOff(brokersOf(1, 2, 3), []Assignment{{Topic: "a", Partition: 0, Replicas: []int32{2, 3}}}, 1); err != nil || len(p.Partitions) != 0 {
		t.Errorf("nothing to move: %+v, %v", p, err)
	}
	// RF 3 on 3 brokers cannot leave one.
	_, err = PlanMoveOff(brokersOf(1, 2, 3), []Assignment{{Topic: "a", Partition: 0, Replicas: []int32{1, 2, 3}}}, 1)
	if !errors.Is(err, ErrPlan) {
		t.Errorf("RF 3 off 3 brokers: %v, want ErrPlan", err)
	}
}

func TestPlanMoveOffRackAware(t *testing.T) {
	// Off broker 1, t/0 keeps [2 3] (racks r2, r1): 5 is the least loaded
	// but on r2 like 2; 4 is on a rack t/0 does not use yet.
	brokers := []PlanBroker{{1, "r1"}, {2, "r2"}, {3, "r1"}, {4, "r3"}}
	current := []Assignment{
		{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}},
		{Topic: "t", Partition: 1, Replicas: []int32{4, 2}},
		{Topic: "t", Partition: 2, Replicas: []int32{4}},
	}
	brokers = append(brokers, PlanBroker{5, "r2"})
	plan, err := PlanMoveOff(brokers, current, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Partitions) != 1 || !slices.Equal(plan.Partitions[0].Replicas, []int32{2, 3, 4}) {
		t.Fatalf("plan %+v, want t/0 on [2 3 4]", plan.Partitions)
	}
}

func TestPlanSpread(t *testing.T) {
	// Twelve partitions of RF 2 all on brokers 1 and 2, brokers 3 and 4
	// new and empty.
	var current []Assignment
	for p := range int32(12) {
		rs := []int32{1, 2}
		if p%2 == 1 {
			rs = []int32{2, 1}
		}
		current = append(current, Assignment{Topic: "t", Partition: p, Replicas: rs})
	}
	ids := []int32{1, 2, 3, 4}
	plan := PlanSpread(brokersOf(ids...), current)
	load, lead := counts(current, plan)
	for _, id := range ids {
		if load[id] != 6 {
			t.Errorf("broker %d has %d replicas, want 6 (of 24 over 4)", id, load[id])
		}
	}
	if s := spreadOf(lead, ids); s > 1 {
		t.Errorf("preferred leaders %v: spread %d > 1", lead, s)
	}
	// The fewest moves: 12 replicas must land on 3 and 4, and each plan
	// entry moves at most one of a partition's two replicas here.
	moved := 0
	for _, p := range plan.Partitions {
		for _, r := range p.Replicas {
			if r == 3 || r == 4 {
				moved++
			}
		}
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] {
			t.Errorf("t/%d: %v", p.Partition, p.Replicas)
		}
	}
	if moved != 12 {
		t.Errorf("%d replicas moved to the new brokers, want 12", moved)
	}

	// Balanced already: nothing to do.
	if p := PlanSpread(brokersOf(1, 2), []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{1, 2}}, {Topic: "t", Partition: 1, Replicas: []int32{2, 1}}}); len(p.Partitions) != 0 {
		t.Errorf("balanced cluster: plan %+v", p.Partitions)
	}
	// Leaders only: every partition prefers broker 1, replicas balanced.
	var skew []Assignment
	for p := range int32(6) {
		skew = append(skew, Assignment{Topic: "s", Partition: p, Replicas: []int32{1, 2, 3}})
	}
	plan = PlanSpread(brokersOf(1, 2, 3), skew)
	_, lead = counts(skew, plan)
	for _, id := range []int32{1, 2, 3} {
		if lead[id] != 2 {
			t.Errorf("broker %d prefers %d partitions, want 2", id, lead[id])
		}
	}
	for _, p := range plan.Partitions {
		if got := slices.Sorted(slices.Values(p.Replicas)); !slices.Equal(got, []int32{1, 2, 3}) {
			t.Errorf("leader balancing moved data: s/%d %v", p.Partition, p.Replicas)
		}
	}
}

func TestCheckPlan(t *testing.T) {
	current := []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{1}}}
	brokers := brokersOf(1, 2)
	for _, tc := range []struct {
		name string
		plan Plan
		ok   bool
	}{
		{"good", Plan{Version: 1, Partitions: []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{2, 1}}}}, true},
		{"version", Plan{Version: 2, Partitions: []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{2}}}}, false},
		{"empty", Plan{Version: 1}, false},
		{"unknown partition", Plan{Version: 1, Partitions: []Assignment{{Topic: "t", Partition: 1, Replicas: []int32{2}}}}, false},
		{"unknown broker", Plan{Version: 1, Partitions: []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{3}}}}, false},
		{"duplicate broker", Plan{Version: 1, Partitions: []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{2, 2}}}}, false},
		{"no replicas", Plan{Version: 1, Partitions: []Assignment{{Topic: "t", Partition: 0}}}, false},
		{"twice", Plan{Version: 1, Partitions: []Assignment{{Topic: "t", Partition: 0, Replicas: []int32{2}}, {Topic: "t", Partition: 0, Replicas: []int32{1}}}}, false},
	} {
		err := checkPlan(tc.plan, brokers, current)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrPlan)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
