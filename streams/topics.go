package streams

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// resolve checks the topology against the cluster before anything runs:
// source topics exist (patterns are matched now, and again as topics
// are created and deleted: patterns.go), no topic is read by two
// sources, the sources of a subtopology with stores are co-partitioned;
// it then sizes and creates the internal topics (repartition topics with
// the partitions of the subtopology writing them, as Kafka's
// RepartitionTopics does, and a foreign-key join's topics with those of
// the subtopology reading them, as Kafka co-partitions them with the
// table read there; changelogs compacted, one partition per task).
func (a *App) resolve(ctx context.Context) error {
	td, err := a.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("streams: list topics: %w", err)
	}
	if err := td.Error(); err != nil {
		return fmt.Errorf("streams: list topics: %w", err)
	}
	parts := map[string]int32{}
	for name, d := range td {
		parts[name] = int32(len(d.Partitions))
	}
	internal := map[string]bool{}
	writer := map[string]int{} // repartition suffix -> subtopology writing it
	readerSized := map[string]bool{}
	a.partitioned = map[string]bool{}
	for _, n := range a.topo.nodes {
		if n.sinkInternal != "" {
			writer[n.sinkInternal] = n.sub
			internal[a.internalTopic(n.sinkInternal)] = true
			if n.sinkPartitioned {
				a.partitioned[a.internalTopic(n.sinkInternal)] = true
			}
		}
		if n.kind == kindSource && n.readerSized {
			readerSized[n.internal] = true
		}
	}
	a.changelogs = map[string]bool{}
	for name, s := range a.topo.stores {
		if s.global == nil {
			a.changelogs[a.changelogTopic(name)] = true
			internal[a.changelogTopic(name)] = true
		}
	}
	for _, g := range a.topo.globals {
		if _, ok := parts[g.topic]; !ok {
			return fmt.Errorf("%w: %q (global table %s)", ErrMissingTopic, g.topic, g.store.name)
		}
	}

	a.internalTopics = internal
	a.sourceTopics = map[*node][]string{}
	a.topicSub = map[string]int{}
	var errs []error
	for _, sub := range a.topo.subs {
		for _, src := range sub.sources {
			var topics []string
			switch {
			case src.internal != "":
				topics = []string{a.internalTopic(src.internal)}
			case src.pattern != nil:
				// Matched again as topics come and go (patterns.go).
				for name := range parts {
					if a.patternMatches(src, name) {
						topics = append(topics, name)
					}
				}
				sort.Strings(topics)
			default:
				for _, t := range src.topics {
					if _, ok := parts[t]; !ok {
						errs = append(errs, fmt.Errorf("%w: %q (source %s)", ErrMissingTopic, t, src.name))
						continue
					}
					topics = append(topics, t)
				}
			}
			for _, t := range topics {
				if prev, dup := a.topicSub[t]; dup {
					errs = append(errs, fmt.Errorf("%w: topic %q is read by two sources (subtopologies %d and %d)", ErrTopology, t, prev, sub.id))
				}
				a.topicSub[t] = sub.id
			}
			a.sourceTopics[src] = topics
		}
	}
	// Sinks write to topics that must exist: kgo does not ask the broker
	// to create them, so a missing one fails every record sent to it,
	// found by the first commit (exactly once: the transaction aborted
	// over and over) rather than here.
	for _, n := range a.topo.nodes {
		if n.kind == kindSink && n.sinkTopic != "" {
			if _, ok := parts[n.sinkTopic]; !ok {
				errs = append(errs, fmt.Errorf("%w: %q (sink %s)", ErrMissingTopic, n.sinkTopic, n.name))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	// The two sides of each join must be co-partitioned; a repartition
	// topic feeding a join takes the count of the join's other topics.
	forced, err := a.copartitionJoins(parts)
	if err != nil {
		return err
	}

	// Size the subtopologies: a repartition topic has the partitions of
	// the subtopology writing it, known once that one is sized.
	a.taskCount = map[int]int32{}
	repart := map[string]int32{}
	for suffix, n := range forced {
		repart[suffix] = n
	}
	for range a.topo.subs {
		for _, sub := range a.topo.subs {
			if _, done := a.taskCount[sub.id]; done {
				continue
			}
			counts, ready := map[string]int32{}, true
			var fromMax []string // reader-sized topics: they take the count of the others
			for _, src := range sub.sources {
				for _, t := range a.sourceTopics[src] {
					if _, f := forced[src.internal]; readerSized[src.internal] && !f {
						fromMax = append(fromMax, src.internal)
						continue
					}
					if src.internal != "" {
						n, ok := repart[src.internal]
						if !ok {
							ready = false
						}
						counts[t] = n
					} else {
						counts[t] = parts[t]
					}
				}
			}
			if !ready {
				continue
			}
			var max int32
			for _, n := range counts {
				if n > max {
					max = n
				}
			}
			for _, suffix := range fromMax {
				repart[suffix] = max
				counts[a.internalTopic(suffix)] = max
			}
			if len(sub.stores) > 0 {
				for t, n := range counts {
					if n != max {
						errs = append(errs, fmt.Errorf("%w: subtopology %d keeps state (%s) but its source topics have different partition counts: %s", ErrCopartition, sub.id, sub.stores[0].name, describeCounts(counts)))
						_ = t
						break
					}
				}
			}
			a.taskCount[sub.id] = max
			for suffix, w := range writer {
				if _, f := forced[suffix]; w == sub.id && !f && !readerSized[suffix] {
					repart[suffix] = max
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	// Kept for the subtopologies sized after Start (patterns.go).
	a.repartWriter, a.joinSized = writer, map[string]int32{}
	for suffix := range readerSized {
		a.joinSized[suffix] = repart[suffix]
	}
	for suffix := range forced {
		a.joinSized[suffix] = repart[suffix]
	}

	// Create the internal topics, or check the existing ones' sizes.
	type want = internalWant
	wants := map[string]want{}
	purgeable := map[string]bool{}
	for suffix, n := range repart {
		wants[a.internalTopic(suffix)] = want{n, false}
		if _, read := a.topicSub[a.internalTopic(suffix)]; read {
			purgeable[a.internalTopic(suffix)] = true
		}
	}
	if len(purgeable) > 0 {
		a.purge = newRepartitionPurger(purgeable, a.cfg.RepartitionPurgeInterval)
	}
	for _, sub := range a.topo.subs {
		for _, s := range sub.stores {
			wants[a.changelogTopic(s.name)] = want{a.taskCount[sub.id], true}
		}
	}
	return errors.Join(append(errs, a.createInternalTopics(ctx, wants, parts))...)
}

// internalWant is an internal topic to create: its partitions, and
// whether it is a changelog (compacted) or a repartition topic.
type internalWant struct {
	partitions int32
	compact    bool
}

// createInternalTopics creates the topics of wants that parts (the
// cluster's topics, as listed) does not hold, and checks the partition
// counts of those it holds. One created meanwhile by another instance is
// taken as it is.
func (a *App) createInternalTopics(ctx context.Context, wants map[string]internalWant, parts map[string]int32) error {
	rf := a.cfg.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	var errs []error
	for name, w := range wants {
		if have, ok := parts[name]; ok {
			if have != w.partitions {
				errs = append(errs, fmt.Errorf("%w: internal topic %q has %d partitions, the topology needs %d", ErrCopartition, name, have, w.partitions))
			}
			continue
		}
		if w.partitions == 0 {
			continue
		}
		configs := repartitionConfigs()
		if w.compact {
			policy := "compact"
			configs = map[string]*string{"cleanup.policy": &policy}
		}
		resp, err := a.adm.CreateTopic(ctx, w.partitions, rf, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("streams: create internal topic %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func describeCounts(counts map[string]int32) string {
	var s []string
	for t, n := range counts {
		s = append(s, fmt.Sprintf("%s=%d", t, n))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}
