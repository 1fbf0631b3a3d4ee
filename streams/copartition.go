package streams

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// copartGroup is the two sides of a join: the topics feeding one side
// and those feeding the other must have one partition count, so that
// partition p of each holds the same keys and task p sees both (Kafka's
// co-partitioning requirement).
type copartGroup struct {
	join  string
	sides [2]*node
}

func copartition(b *Builder, join string, l, r *node) {
	b.copart = append(b.copart, copartGroup{join: join, sides: [2]*node{l, r}})
}

// sourcesOf returns the sources upstream of n, repartition sources
// included (the graph is cut there).
func sourcesOf(n *node) []*node {
	seen := map[*node]bool{}
	var out []*node
	var walk func(*node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.kind == kindSource {
			out = append(out, n)
			return
		}
		for _, p := range n.parents {
			walk(p)
		}
	}
	walk(n)
	return out
}

// copartitionJoins checks each join's sides against the cluster, before
// the subtopologies are sized: every input topic of the two sides must
// have the same partition count, or Start fails naming the join and the
// topics of each side. A repartition topic feeding a join gets that
// count whatever the subtopology writing it has, as Kafka's
// CopartitionedTopicsEnforcer sizes it; it returns those counts by
// repartition suffix.
func (a *App) copartitionJoins(parts map[string]int32) (map[string]int32, error) {
	forced := map[string]int32{}
	var errs []error
	for _, g := range a.topo.copart {
		counts := map[string]int32{}
		var desc [2][]string
		var internal []string
		for i, side := range g.sides {
			for _, src := range sourcesOf(side) {
				if src.internal != "" {
					internal = append(internal, src.internal)
					desc[i] = append(desc[i], a.internalTopic(src.internal)+" (repartition)")
					continue
				}
				for _, t := range a.sourceTopics[src] {
					counts[t] = parts[t]
					desc[i] = append(desc[i], fmt.Sprintf("%s=%d", t, parts[t]))
				}
			}
			sort.Strings(desc[i])
		}
		n, mismatch := int32(-1), false
		for _, c := range counts {
			if n >= 0 && c != n {
				mismatch = true
			}
			n = max(n, c)
		}
		if mismatch {
			errs = append(errs, fmt.Errorf("%w: join %s: its two sides must read topics with the same number of partitions; left side: %s; right side: %s",
				ErrCopartition, g.join, strings.Join(desc[0], ", "), strings.Join(desc[1], ", ")))
			continue
		}
		if n <= 0 {
			continue // repartition topics only: sized by their writers, checked with their subtopology
		}
		for _, s := range internal {
			if f, ok := forced[s]; ok && f != n {
				errs = append(errs, fmt.Errorf("%w: join %s: repartition topic %s feeds joins over %d and %d partitions", ErrCopartition, g.join, a.internalTopic(s), f, n))
			}
			forced[s] = n
		}
	}
	return forced, errors.Join(errs...)
}
