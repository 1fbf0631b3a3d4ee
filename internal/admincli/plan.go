package admincli

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ErrPlan is returned, wrapped, when a reassignment plan cannot be made
// or read: too few brokers for a partition's replication factor, a plan
// naming a broker or partition that does not exist.
var ErrPlan = errors.New("admincli: reassignment plan")

// Assignment is one partition's replica list, as in Kafka's reassignment
// JSON (kafka-reassign-partitions.sh): the first replica is the preferred
// leader.
type Assignment struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// Plan is Kafka's reassignment JSON:
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}
type Plan struct {
	Version    int          `json:"version"`
	Partitions []Assignment `json:"partitions"`
}

// PlanBroker is a broker a plan may place replicas on.
type PlanBroker struct {
	ID   int32
	Rack string // "" when the broker has none
}

// newPlan makes a plan of the assignments, sorted, with Kafka's "any" log
// directory for every replica.
func newPlan(as []Assignment) Plan {
	sortAssignments(as)
	for i := range as {
		as[i].LogDirs = make([]string, len(as[i].Replicas))
		for j := range as[i].LogDirs {
			as[i].LogDirs[j] = "any"
		}
	}
	return Plan{Version: 1, Partitions: orEmpty(as)}
}

func sortAssignments(as []Assignment) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].Topic != as[j].Topic {
			return as[i].Topic < as[j].Topic
		}
		return as[i].Partition < as[j].Partition
	})
}

func cloneAssignments(as []Assignment) []Assignment {
	out := make([]Assignment, len(as))
	for i, a := range as {
		out[i] = Assignment{Topic: a.Topic, Partition: a.Partition, Replicas: slices.Clone(a.Replicas)}
	}
	sortAssignments(out)
	return out
}

// changed keeps the assignments of after that differ from before (same
// order, same partitions).
func changed(before, after []Assignment) []Assignment {
	var out []Assignment
	for i := range after {
		if !slices.Equal(before[i].Replicas, after[i].Replicas) {
			out = append(out, after[i])
		}
	}
	return out
}

// PlanMoveOff moves every replica on broker off to the other brokers: in
// each partition holding it, off is removed and the least loaded broker
// not yet holding the partition (one on a rack the partition does not use
// yet first) is appended. The replicas left keep their order, so the
// preferred leader of a partition led by off becomes its next replica, a
// broker that has the data, rather than the new one.
func PlanMoveOff(brokers []PlanBroker, current []Assignment, off int32) (Plan, error) {
	rack := make(map[int32]string)
	load := make(map[int32]int)
	var candidates []int32
	for _, b := range brokers {
		rack[b.ID] = b.Rack
		if b.ID != off {
			candidates = append(candidates, b.ID)
			load[b.ID] = 0
		}
	}
	slices.Sort(candidates)
	after := cloneAssignments(current)
	for _, a := range after {
		for _, r := range a.Replicas {
			if _, ok := load[r]; ok {
				load[r]++
			}
		}
	}
	for i := range after {
		a := &after[i]
		at := slices.Index(a.Replicas, off)
		if at < 0 {
			continue
		}
		kept := slices.Delete(slices.Clone(a.Replicas), at, at+1)
		next, ok := pickBroker(candidates, kept, rack, load)
		if !ok {
			return Plan{}, fmt.Errorf("%w: %s/%d has %d replicas and only %d brokers other than %d exist",
				ErrPlan, a.Topic, a.Partition, len(a.Replicas), len(candidates), off)
		}
		a.Replicas = append(kept, next)
		load[next]++
	}
	return newPlan(changed(cloneAssignments(current), after)), nil
}

// pickBroker chooses, among candidates not in replicas, the one on a rack
// that replicas do not use (when racks are known), then the least loaded,
// then the lowest id.
func pickBroker(candidates, replicas []int32, rack map[int32]string, load map[int32]int) (int32, bool) {
	used := make(map[string]bool)
	for _, r := range replicas {
		if rk := rack[r]; rk != "" {
			used[rk] = true
		}
	}
	best, found := int32(0), false
	better := func(b int32) bool {
		if !found {
			return true
		}
		nb, nbest := used[rack[b]] && rack[b] != "", used[rack[best]] && rack[best] != ""
		if nb != nbest {
			return !nb
		}
		if load[b] != load[best] {
			return load[b] < load[best]
		}
		return b < best
	}
	for _, b := range candidates {
		if slices.Contains(replicas, b) {
			continue
		}
		if better(b) {
			best, found = b, true
		}
	}
	return best, found
}

// PlanSpread evens out the brokers' replica counts (to within one of each
// other) and then their preferred leaderships, moving as few replicas as
// it can: each step moves one replica from the most loaded broker to a
// less loaded one that does not hold the partition (keeping its place in
// the replica list), then leaderships are evened by swapping replicas
// within a partition, which moves no data. Replicas on brokers that are not
// in brokers (gone from the cluster) are left where they are: moving them
// off is PlanMoveOff's job.
func PlanSpread(brokers []PlanBroker, current []Assignment) Plan {
	rack := make(map[int32]string)
	load := make(map[int32]int)
	lead := make(map[int32]int)
	var ids []int32
	for _, b := range brokers {
		rack[b.ID] = b.Rack
		load[b.ID], lead[b.ID] = 0, 0
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	after := cloneAssignments(current)
	total := 0
	for _, a := range after {
		for i, r := range a.Replicas {
			if _, ok := load[r]; ok {
				load[r]++
				total++
				if i == 0 {
					lead[r]++
				}
			}
		}
	}
	// byCount orders the brokers by a count, ties by id: the most loaded
	// is last.
	byCount := func(count map[int32]int) []int32 {
		s := slices.Clone(ids)
		sort.SliceStable(s, func(i, j int) bool { return count[s[i]] < count[s[j]] })
		return s
	}
	// Each move lowers the sum of squared loads, so the loop ends; the
	// bound is a second guard.
	for step := 0; step < total*len(ids)+1; step++ {
		if !moveOne(after, byCount(load), load, rack) {
			break
		}
	}
	for step := 0; step < len(after)*len(ids)+1; step++ {
		if !leadOne(after, byCount(lead), lead) {
			break
		}
	}
	return newPlan(changed(cloneAssignments(current), after))
}

// moveOne moves one replica from a broker to one holding at least two
// fewer, if any such move exists; order is the brokers by load.
func moveOne(as []Assignment, order []int32, load map[int32]int, rack map[int32]string) bool {
	for hi := len(order) - 1; hi > 0; hi-- {
		from := order[hi]
		for lo := 0; lo < hi; lo++ {
			to := order[lo]
			if load[from]-load[to] < 2 {
				break
			}
			// A partition where the move keeps the racks distinct first,
			// then any.
			for _, rackAware := range []bool{true, false} {
				for i := range as {
					rs := as[i].Replicas
					at := slices.Index(rs, from)
					if at < 0 || slices.Contains(rs, to) {
						continue
					}
					if rackAware && rack[to] != "" {
						clash := false
						for _, r := range rs {
							clash = clash || (r != from && rack[r] == rack[to])
						}
						if clash {
							continue
						}
					}
					rs[at] = to
					load[from]--
					load[to]++
					return true
				}
			}
		}
	}
	return false
}

// leadOne gives one preferred leadership of a broker to a replica of the
// same partition leading at least two fewer, if any such swap exists.
func leadOne(as []Assignment, order []int32, lead map[int32]int) bool {
	for hi := len(order) - 1; hi > 0; hi-- {
		from := order[hi]
		for lo := 0; lo < hi; lo++ {
			to := order[lo]
			if lead[from]-lead[to] < 2 {
				break
			}
			for i := range as {
				rs := as[i].Replicas
				if len(rs) == 0 || rs[0] != from {
					continue
				}
				if at := slices.Index(rs, to); at > 0 {
					rs[0], rs[at] = rs[at], rs[0]
					lead[from]--
					lead[to]++
					return true
				}
			}
		}
	}
	return false
}

// checkPlan validates a plan read from a file against the cluster: version
// 1, every partition exists, every replica list is non-empty, has no
// duplicate and names only known brokers.
func checkPlan(p Plan, brokers []PlanBroker, current []Assignment) error {
	if p.Version != 1 {
		return fmt.Errorf("%w: version %d, only 1 is known", ErrPlan, p.Version)
	}
	if len(p.Partitions) == 0 {
		return fmt.Errorf("%w: no partitions", ErrPlan)
	}
	known := make(map[int32]bool)
	for _, b := range brokers {
		known[b.ID] = true
	}
	exists := make(map[string]map[int32]bool)
	for _, a := range current {
		if exists[a.Topic] == nil {
			exists[a.Topic] = make(map[int32]bool)
		}
		exists[a.Topic][a.Partition] = true
	}
	seen := make(map[string]map[int32]bool)
	for _, a := range p.Partitions {
		name := fmt.Sprintf("%s/%d", a.Topic, a.Partition)
		if !exists[a.Topic][a.Partition] {
			return fmt.Errorf("%w: %s does not exist", ErrPlan, name)
		}
		if seen[a.Topic][a.Partition] {
			return fmt.Errorf("%w: %s appears twice", ErrPlan, name)
		}
		if seen[a.Topic] == nil {
			seen[a.Topic] = make(map[int32]bool)
		}
		seen[a.Topic][a.Partition] = true
		if len(a.Replicas) == 0 {
			return fmt.Errorf("%w: %s has no replicas", ErrPlan, name)
		}
		for i, r := range a.Replicas {
			if !known[r] {
				return fmt.Errorf("%w: %s names broker %d, which is not in the cluster", ErrPlan, name, r)
			}
			if slices.Contains(a.Replicas[:i], r) {
				return fmt.Errorf("%w: %s names broker %d twice", ErrPlan, name, r)
			}
		}
	}
	return nil
}
