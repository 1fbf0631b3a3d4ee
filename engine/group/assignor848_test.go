package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The server-side assignors of KIP-848, without any group around them.

func tid(n byte) [16]byte { return [16]byte{n} }

func members(n int, topics ...[16]byte) []assignMember {
	ms := make([]assignMember, n)
	for i := range ms {
		ms[i] = assignMember{id: fmt.Sprintf("m%02d", i), topics: slices.Clone(topics), current: assignment{}}
	}
	return ms
}

// withTargets gives each member its assignment from a previous run.
func withTargets(ms []assignMember, prev map[string]assignment) []assignMember {
	for i := range ms {
		if a, ok := prev[ms[i].id]; ok {
			ms[i].current = a
		}
	}
	return ms
}

// checkComplete fails unless every partition of every subscribed topic is
// assigned exactly once, to a member subscribed to its topic.
func checkComplete(t *testing.T, ms []assignMember, topics map[[16]byte]int32, out map[string]assignment) {
	t.Helper()
	seen := map[tpKey]string{}
	subscribed := map[[16]byte]bool{}
	for _, m := range ms {
		for _, id := range m.topics {
			subscribed[id] = true
		}
		for id, ps := range out[m.id] {
			if !slices.Contains(m.topics, id) {
				t.Fatalf("%s got topic %x it does not subscribe to", m.id, id[0])
			}
			for _, p := range ps {
				if p < 0 || p >= topics[id] {
					t.Fatalf("%s got partition %d of a %d-partition topic", m.id, p, topics[id])
				}
				if o, dup := seen[tpKey{id, p}]; dup {
					t.Fatalf("partition %x/%d given to %s and %s", id[0], p, o, m.id)
				}
				seen[tpKey{id, p}] = m.id
			}
		}
	}
	for id, n := range topics {
		if !subscribed[id] {
			continue
		}
		for p := range n {
			if _, ok := seen[tpKey{id, p}]; !ok {
				t.Fatalf("partition %x/%d not assigned: %v", id[0], p, out)
			}
		}
	}
}

func counts(out map[string]assignment) (lo, hi int) {
	lo = 1 << 30
	for _, a := range out {
		lo, hi = min(lo, a.count()), max(hi, a.count())
	}
	return lo, hi
}

// moved counts the partitions whose owner changed between two results.
func moved(before, after map[string]assignment) int {
	owner := map[tpKey]string{}
	for m, a := range before {
		for id, ps := range a {
			for _, p := range ps {
				owner[tpKey{id, p}] = m
			}
		}
	}
	n := 0
	for m, a := range after {
		for id, ps := range a {
			for _, p := range ps {
				if o, ok := owner[tpKey{id, p}]; ok && o != m {
					n++
				}
			}
		}
	}
	return n
}

func TestAssignUniformBalances(t *testing.T) {
	for _, c := range []struct {
		members int
		topics  []int32
	}{{1, []int32{3}}, {3, []int32{12}}, {3, []int32{10}}, {4, []int32{1}}, {5, []int32{7, 3, 11}}, {16, []int32{100, 1}}} {
		topics := map[[16]byte]int32{}
		var ids [][16]byte
		for i, n := range c.topics {
			topics[tid(byte(i+1))] = n
			ids = append(ids, tid(byte(i+1)))
		}
		ms := members(c.members, ids...)
		out := assignUniform(ms, topics)
		checkComplete(t, ms, topics, out)
		if lo, hi := counts(out); hi-lo > 1 {
			t.Errorf("%d members, topics %v: counts from %d to %d", c.members, c.topics, lo, hi)
		}
		// Deterministic: the same input gives the same output, whatever
		// the order of the members.
		rev := slices.Clone(ms)
		slices.Reverse(rev)
		if again := assignUniform(rev, topics); !equalTargets(out, again) {
			t.Errorf("not deterministic: %v then %v", out, again)
		}
	}
}

func equalTargets(a, b map[string]assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !v.equal(b[k]) {
			return false
		}
	}
	return true
}

// TestAssignUniformSticky: membership changes move as few partitions as
// possible. A member leaving moves only its own partitions; a member
// joining takes its fair share and nothing else moves.
func TestAssignUniformSticky(t *testing.T) {
	topics := map[[16]byte]int32{tid(1): 12, tid(2): 7}
	ms := members(3, tid(1), tid(2))
	first := assignUniform(ms, topics)

	// m01 leaves: its partitions, and only those, move.
	left := withTargets(slices.Delete(slices.Clone(ms), 1, 2), first)
	second := assignUniform(left, topics)
	checkComplete(t, left, topics, second)
	if n, want := moved(first, second), first["m01"].count(); n != want {
		t.Errorf("a member leaving moved %d partitions, want its %d", n, want)
	}
	for _, m := range left {
		for id, ps := range first[m.id] {
			for _, p := range ps {
				if !second[m.id].has(id, p) {
					t.Errorf("%s lost %x/%d when another member left", m.id, id[0], p)
				}
			}
		}
	}
	if lo, hi := counts(second); hi-lo > 1 {
		t.Errorf("after a leave: counts %d..%d", lo, hi)
	}

	// Two members join: they get floor or ceil of 19/4 each, taken from
	// the two that had 9 and 10; the minimum number of moves.
	joined := withTargets(append(slices.Clone(left), assignMember{id: "m10", topics: [][16]byte{tid(1), tid(2)}}, assignMember{id: "m11", topics: [][16]byte{tid(1), tid(2)}}), second)
	third := assignUniform(joined, topics)
	checkComplete(t, joined, topics, third)
	if lo, hi := counts(third); lo != 4 || hi != 5 {
		t.Errorf("after two joins: counts %d..%d", lo, hi)
	}
	want := third["m10"].count() + third["m11"].count()
	if n := moved(second, third); n != want {
		t.Errorf("two joins moved %d partitions, want %d (just the newcomers' share)", n, want)
	}

	// Nothing changes: nothing moves.
	if fourth := assignUniform(withTargets(joined, third), topics); !equalTargets(third, fourth) {
		t.Errorf("a stable group's assignment changed: %v -> %v", third, fourth)
	}
}

// TestAssignUniformRandom: random groups, random changes; the result is
// always complete and balanced (homogeneous subscriptions), and a member
// never gives and receives in the same change.
func TestAssignUniformRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		topics := map[[16]byte]int32{}
		var ids [][16]byte
		for i := range 1 + r.IntN(4) {
			topics[tid(byte(i+1))] = int32(1 + r.IntN(20))
			ids = append(ids, tid(byte(i+1)))
		}
		ms := members(1+r.IntN(8), ids...)
		prev := assignUniform(ms, topics)
		for step := range 5 {
			switch r.IntN(3) {
			case 0:
				if len(ms) > 1 {
					i := r.IntN(len(ms))
					ms = slices.Delete(ms, i, i+1)
				}
			case 1:
				ms = append(ms, assignMember{id: fmt.Sprintf("n%d-%d", iter, step), topics: slices.Clone(ids)})
			case 2:
				id := ids[r.IntN(len(ids))]
				topics[id] += int32(r.IntN(5))
			}
			ms = withTargets(ms, prev)
			out := assignUniform(ms, topics)
			checkComplete(t, ms, topics, out)
			if lo, hi := counts(out); hi-lo > 1 {
				t.Fatalf("iteration %d: counts %d..%d", iter, lo, hi)
			}
			for _, m := range ms {
				gave, got := false, false
				for id, ps := range prev[m.id] {
					for _, p := range ps {
						gave = gave || !out[m.id].has(id, p)
					}
				}
				for id, ps := range out[m.id] {
					for _, p := range ps {
						got = got || !prev[m.id].has(id, p)
					}
				}
				if gave && got && len(prev[m.id]) > 0 {
					// Allowed only for partitions that disappeared or
					// were never the member's; none do here.
					t.Fatalf("iteration %d: %s both gave and received: %v -> %v", iter, m.id, prev[m.id], out[m.id])
				}
			}
			prev = out
		}
	}
}

// TestAssignUniformHeterogeneous: members with different subscriptions
// get only their topics, and the members sharing a topic share it evenly.
func TestAssignUniformHeterogeneous(t *testing.T) {
	topics := map[[16]byte]int32{tid(1): 6, tid(2): 6}
	ms := []assignMember{
		{id: "a", topics: [][16]byte{tid(1)}},
		{id: "b", topics: [][16]byte{tid(1), tid(2)}},
		{id: "c", topics: [][16]byte{tid(2)}},
	}
	out := assignUniform(ms, topics)
	checkComplete(t, ms, topics, out)
	for _, m := range []string{"a", "b", "c"} {
		if n := out[m].count(); n != 4 {
			t.Errorf("%s: %d partitions, want 4: %v", m, n, out)
		}
	}
}

// TestAssignRange: Kafka's RangeAssignor semantics.
func TestAssignRange(t *testing.T) {
	s := func(v string) *string { return &v }
	a := func(kv ...any) assignment {
		out := assignment{}
		for i := 0; i < len(kv); i += 2 {
			for _, p := range kv[i+1].([]int32) {
				out.add(kv[i].([16]byte), p)
			}
		}
		return out
	}
	for _, c := range []struct {
		name    string
		members []assignMember
		topics  map[[16]byte]int32
		want    map[string]assignment
	}{
		{
			// The KIP's example: co-partitioned, the first member gets the
			// extra partition of every topic.
			name:    "co-partitioned",
			members: []assignMember{{id: "m1", topics: [][16]byte{tid(1), tid(2)}}, {id: "m0", topics: [][16]byte{tid(1), tid(2)}}},
			topics:  map[[16]byte]int32{tid(1): 3, tid(2): 3},
			want: map[string]assignment{
				"m0": a(tid(1), []int32{0, 1}, tid(2), []int32{0, 1}),
				"m1": a(tid(1), []int32{2}, tid(2), []int32{2}),
			},
		},
		{
			// Static members first, by instance id, then the others by id.
			name: "static first",
			members: []assignMember{{id: "a", topics: [][16]byte{tid(1)}}, {id: "z", instanceID: s("i2"), topics: [][16]byte{tid(1)}},
				{id: "y", instanceID: s("i1"), topics: [][16]byte{tid(1)}}},
			topics: map[[16]byte]int32{tid(1): 7},
			want: map[string]assignment{
				"y": a(tid(1), []int32{0, 1, 2}), "z": a(tid(1), []int32{3, 4}), "a": a(tid(1), []int32{5, 6}),
			},
		},
		{
			// Each topic among its own subscribers.
			name:    "heterogeneous",
			members: []assignMember{{id: "a", topics: [][16]byte{tid(1)}}, {id: "b", topics: [][16]byte{tid(1), tid(2)}}, {id: "c", topics: [][16]byte{tid(2)}}},
			topics:  map[[16]byte]int32{tid(1): 3, tid(2): 2},
			want: map[string]assignment{
				"a": a(tid(1), []int32{0, 1}), "b": a(tid(1), []int32{2}, tid(2), []int32{0}), "c": a(tid(2), []int32{1}),
			},
		},
		{
			// More members than partitions: the last get nothing.
			name:    "more members",
			members: []assignMember{{id: "a", topics: [][16]byte{tid(1)}}, {id: "b", topics: [][16]byte{tid(1)}}, {id: "c", topics: [][16]byte{tid(1)}}},
			topics:  map[[16]byte]int32{tid(1): 2},
			want:    map[string]assignment{"a": a(tid(1), []int32{0}), "b": a(tid(1), []int32{1}), "c": {}},
		},
	} {
		got := assignRange(c.members, c.topics)
		if !equalTargets(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
