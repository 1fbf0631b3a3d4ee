package replication

import (
	"slices"
	"testing"
)

func TestElectLeader(t *testing.T) {
	replicas := []int32{3, 1, 2}
	up := func(ids ...int32) func(int32) bool { return func(id int32) bool { return slices.Contains(ids, id) } }
	for _, tc := range []struct {
		name    string
		isr     []int32
		live    func(int32) bool
		unclean bool
		want    Election
		ok      bool
	}{
		{"preferred replica first", []int32{1, 2, 3}, up(1, 2, 3), false, Election{Leader: 3, ISR: []int32{1, 2, 3}}, true},
		{"dead preferred replica skipped", []int32{1, 2, 3}, up(1, 2), false, Election{Leader: 1, ISR: []int32{1, 2, 3}}, true},
		{"first live ISR member in replicas order", []int32{2, 1}, up(1, 2, 3), false, Election{Leader: 1, ISR: []int32{2, 1}}, true},
		{"no live ISR member, clean", []int32{2}, up(1, 3), false, Election{Leader: -1, ISR: []int32{2}}, false},
		{"no live ISR member, unclean: the leader is the ISR", []int32{2}, up(1, 3), true, Election{Leader: 3, ISR: []int32{3}, Unclean: true}, true},
		{"unclean not needed", []int32{2}, up(1, 2), true, Election{Leader: 2, ISR: []int32{2}}, true},
		{"nobody live", []int32{2}, up(), true, Election{Leader: -1, ISR: []int32{2}}, false},
		{"ISR member outside the replicas", []int32{7}, up(7), false, Election{Leader: -1, ISR: []int32{7}}, false},
	} {
		isr := slices.Clone(tc.isr)
		got, ok := ElectLeader(replicas, isr, tc.live, tc.unclean)
		if got.Leader != tc.want.Leader || !slices.Equal(got.ISR, tc.want.ISR) || got.Unclean != tc.want.Unclean || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
		if !slices.Equal(isr, tc.isr) {
			t.Errorf("%s: the ISR given was changed to %v", tc.name, isr)
		}
	}
}

func TestFencedISR(t *testing.T) {
	for _, tc := range []struct {
		isr  []int32
		id   int32
		want []int32
	}{
		{[]int32{1, 2, 3}, 2, []int32{1, 3}},
		{[]int32{1, 2, 3}, 4, []int32{1, 2, 3}},
		// The last member stays: it is the only replica known to have
		// every committed record.
		{[]int32{2}, 2, []int32{2}},
		{[]int32{}, 2, []int32{}},
	} {
		isr := slices.Clone(tc.isr)
		if got := FencedISR(isr, tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("FencedISR(%v, %d) = %v, want %v", tc.isr, tc.id, got, tc.want)
		}
		if !slices.Equal(isr, tc.isr) {
			t.Errorf("FencedISR(%v, %d) changed its argument to %v", tc.isr, tc.id, isr)
		}
	}
}
