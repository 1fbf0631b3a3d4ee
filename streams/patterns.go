package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultMetadataMaxAge is how often pattern sources look for topics
// created or deleted after Start when Config.MetadataMaxAge is 0: Kafka's
// metadata.max.age.ms default.
const DefaultMetadataMaxAge = 5 * time.Minute

// Pattern sources keep matching after Start, as Kafka Streams' sources
// built from a Pattern do: a topic created later whose whole name matches
// joins its subtopology, its partition p becoming part of task
// <sub>_p; a matching topic deleted leaves it. A goroutine lists the
// cluster's topics every Config.MetadataMaxAge and hands them to the
// processing goroutine, which learns the new topics (topicSub,
// sourceTopics, the running tasks' sources) before it asks kgo to
// consume them, so that no record of theirs meets a task that does not
// know its topic. The balancer maps a topic through subOf, which matches
// the patterns itself, so a leader that has not listed the topic yet
// still gives its partitions to the tasks of the right subtopology.
//
// Co-partitioning: a subtopology with stores has one partition count for
// good (its changelogs have it, and a key's task is its partition); a new
// topic with another count stops the application with ErrCopartition, as
// Kafka's assignor fails with a TopologyException. A stateless
// subtopology takes any count: its tasks are as many as the largest
// source's partitions, as Kafka sizes them.

// patternSource returns the pattern source whose pattern matches the whole
// of name, and its subtopology; internal topics of the application and
// `__`-prefixed ones never match (resolve's rule at Start).
func (a *App) patternSource(name string) (*node, int, bool) {
	for _, sub := range a.topo.subs {
		for _, src := range sub.sources {
			if a.patternMatches(src, name) {
				return src, sub.id, true
			}
		}
	}
	return nil, 0, false
}

// patternMatches says whether src is a pattern source matching the whole
// of name, an external topic.
func (a *App) patternMatches(src *node, name string) bool {
	if src.pattern == nil || a.internalTopics[name] || strings.HasPrefix(name, "__") {
		return false
	}
	loc := src.pattern.FindStringIndex(name)
	return loc != nil && loc[0] == 0 && loc[1] == len(name)
}

// readers is the number of sources that would read name: those naming it
// and the patterns matching it. More than one is the topology error Start
// reports (a topic read by two sources).
func (a *App) readers(name string) int {
	n := 0
	for _, sub := range a.topo.subs {
		for _, src := range sub.sources {
			if a.patternMatches(src, name) || slices.Contains(src.topics, name) || src.internal != "" && a.internalTopic(src.internal) == name {
				n++
			}
		}
	}
	return n
}

// subOf is the subtopology reading topic, for goroutines other than the
// processing one (the balancer): the topics learned so far, then the
// patterns.
func (a *App) subOf(topic string) (int, bool) {
	a.tasksMu.RLock()
	sub, ok := a.topicSub[topic]
	a.tasksMu.RUnlock()
	if ok {
		return sub, true
	}
	_, sub, ok = a.patternSource(topic)
	return sub, ok
}

// topicList is a listing of the cluster's topics handed to the processing
// goroutine; gone receives the pattern topics deleted since, which the
// watcher stops consuming (PurgeTopicsFromConsuming waits for kgo's
// metadata goroutine, which must not wait for mu).
type topicList struct {
	parts map[string]int32
	gone  chan []string
}

// hasPatterns says whether any source is a pattern.
func (a *App) hasPatterns() bool {
	for _, sub := range a.topo.subs {
		for _, src := range sub.sources {
			if src.pattern != nil {
				return true
			}
		}
	}
	return false
}

// watchPatterns lists the topics every MetadataMaxAge until ctx ends.
func (a *App) watchPatterns(ctx context.Context) {
	tick := time.NewTicker(a.cfg.MetadataMaxAge)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-a.relist:
		}
		parts, err := a.listTopics(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("streams: list topics for pattern sources", "err", err)
			}
			continue
		}
		l := &topicList{parts: parts, gone: make(chan []string, 1)}
		a.assignMu.Lock()
		a.listed = l
		a.wakeLocked()
		a.assignMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case gone := <-l.gone:
			if len(gone) > 0 {
				a.cl.PurgeTopicsFromConsuming(gone...)
			}
		}
	}
}

// patternTopicGone says whether a fetch error is a pattern topic's
// deletion (the broker no longer knows it), and if so asks the watcher to
// list the topics now rather than at its next tick: kgo fetches a deleted
// topic's partitions, failing, until they are purged.
func (a *App) patternTopicGone(topic string, err error) bool {
	if !errors.Is(err, kerr.UnknownTopicID) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return false
	}
	if src, _, ok := a.patternSource(topic); !ok || !slices.Contains(a.sourceTopics[src], topic) {
		return false
	}
	select {
	case a.relist <- struct{}{}:
	default:
	}
	return true
}

// listTopics returns the partition counts of the cluster's topics; a
// topic with an error (one being created has no leader yet, a broker
// failing over) counts 0: it exists, but is learned only from a later
// listing.
func (a *App) listTopics(ctx context.Context, names ...string) (map[string]int32, error) {
	td, err := a.adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("streams: list topics: %w", err)
	}
	parts := map[string]int32{}
	for name, d := range td {
		if d.Err == nil {
			parts[name] = int32(len(d.Partitions))
		} else if !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			parts[name] = 0
		}
	}
	return parts, nil
}

// takeListedLocked applies the watcher's last listing, if any.
func (a *App) takeListedLocked(ctx context.Context) error {
	a.assignMu.Lock()
	l := a.listed
	a.listed = nil
	a.assignMu.Unlock()
	if l == nil {
		return nil
	}
	gone, err := a.learnTopicsLocked(ctx, l.parts, true)
	l.gone <- gone
	return err
}

// learnTopicsLocked adds the topics of parts that a pattern source newly
// matches to their subtopologies and to what kgo consumes; with all, parts
// is every topic of the cluster, and the pattern topics missing from it
// are returned as deleted (no longer sources; topicSub keeps them so that
// their revocation still finds the tasks). A stateful subtopology's new
// topic with another partition count is an ErrCopartition, and nothing of
// that listing is learned.
func (a *App) learnTopicsLocked(ctx context.Context, parts map[string]int32, all bool) ([]string, error) {
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	type learned struct {
		name string
		src  *node
		sub  int
	}
	var added []learned
	// late: the subtopologies whose first topic this listing brings, with
	// internal topics to size by it (lateSizing).
	var late []lateSized
	lateCount := map[int]int32{}
	for _, name := range names {
		src, sub, ok := a.patternSource(name)
		if !ok || parts[name] == 0 || slices.Contains(a.sourceTopics[src], name) {
			continue
		}
		if a.readers(name) > 1 {
			return nil, fmt.Errorf("%w: topic %q now matches the pattern of source %s and is read by another source too", ErrTopology, name, src.name)
		}
		count := a.taskCount[sub]
		if count == 0 {
			c, seen := lateCount[sub]
			if !seen {
				c = parts[name]
				if a.sizesInternalTopics(sub) {
					l, err := a.lateSizing(sub, c)
					if err != nil {
						return nil, fmt.Errorf("topic %q is the first to match the pattern of source %s: %w", name, src.name, err)
					}
					late = append(late, l)
				}
				lateCount[sub] = c
			}
			count = c
		}
		if s := a.topo.subs[sub]; len(s.stores) > 0 && parts[name] != count {
			return nil, fmt.Errorf("%w: topic %q (%d partitions) now matches the pattern of source %s, but subtopology %d keeps state (%s) over %d partitions: %s",
				ErrCopartition, name, parts[name], src.name, sub, s.stores[0].name, count, describeCounts(a.countsOf(sub, name, parts[name])))
		}
		added = append(added, learned{name, src, sub})
	}
	// The internal topics first: the new topics' records are consumed
	// (and produced on to them) once AddConsumeTopics below runs.
	for _, l := range late {
		if err := a.applyLateSizing(ctx, l); err != nil {
			return nil, err
		}
	}
	var gone []string
	a.tasksMu.Lock()
	for _, l := range added {
		a.topicSub[l.name] = l.sub
		a.sourceTopics[l.src] = append(a.sourceTopics[l.src], l.name)
		sort.Strings(a.sourceTopics[l.src])
		a.taskCount[l.sub] = max(a.taskCount[l.sub], parts[l.name])
	}
	if all {
		for src, topics := range a.sourceTopics {
			if src.pattern == nil {
				continue
			}
			keep := topics[:0]
			for _, t := range topics {
				if _, ok := parts[t]; ok {
					keep = append(keep, t)
				} else {
					gone = append(gone, t)
				}
			}
			a.sourceTopics[src] = keep
		}
	}
	a.tasksMu.Unlock()
	if len(added) == 0 {
		sort.Strings(gone)
		if len(gone) > 0 {
			a.log.Info("streams: pattern topics deleted", "topics", gone)
		}
		return gone, nil
	}
	var topics []string
	for _, l := range added {
		// The running tasks of the subtopology read the new topic's
		// partition p as one more source; tasks created later take
		// it from sourceTopics. A topic deleted and created again
		// starts with no partition time, as a new one.
		for id, t := range a.tasks {
			if id.sub == l.sub {
				t.srcs[l.name] = &taskSource{fn: t.instance(l.src).(sourceFn), time: unknownTime, committed: unknownTime}
			}
		}
		topics = append(topics, l.name)
	}
	a.log.Info("streams: pattern topics added", "topics", topics, "deleted", gone)
	a.cl.AddConsumeTopics(topics...)
	sort.Strings(gone)
	return gone, nil
}

// sizesInternalTopics says whether sub's partition count sizes internal
// topics: its changelogs, or the repartition topics it writes. Start
// creates them only for a subtopology with input; one whose patterns
// matched nothing has them created when its first topic appears
// (lateSizing), as Kafka's assignor creates them at the rebalance that
// finds the topic.
func (a *App) sizesInternalTopics(sub int) bool {
	if len(a.topo.subs[sub].stores) > 0 {
		return true
	}
	for _, w := range a.repartWriter {
		if w == sub {
			return true
		}
	}
	return false
}

// countsOf is the partition counts of sub's source topics, with topic n
// added: what an ErrCopartition names.
func (a *App) countsOf(sub int, topic string, n int32) map[string]int32 {
	counts := map[string]int32{topic: n}
	for t, s := range a.topicSub {
		if s == sub {
			counts[t] = a.taskCount[sub]
		}
	}
	return counts
}

// learnAssignedLocked learns the topics of an assignment that this
// instance has not listed yet but a pattern matches (the leader listed
// them first), before any of their records is processed.
func (a *App) learnAssignedLocked(ctx context.Context, assigned map[string][]int32) error {
	var unknown []string
	for topic := range assigned {
		if _, ok := a.topicSub[topic]; ok {
			continue
		}
		if _, _, ok := a.patternSource(topic); ok {
			unknown = append(unknown, topic)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	parts, err := a.listTopics(ctx, unknown...)
	if err != nil {
		return err
	}
	_, err = a.learnTopicsLocked(ctx, parts, false)
	return err
}

// lateSized is what a subtopology's first topic after Start sizes: the
// partition counts of the subtopologies that had none (it, and those
// reading only repartition topics it writes, down the topology), and the
// internal topics to create with them.
type lateSized struct {
	counts map[int]int32
	wants  map[string]internalWant
}

// lateSizing computes what subtopology sub, without input at Start,
// sizes when its first topic has n partitions; it changes nothing. A
// repartition topic it writes that a join sizes was created at Start with
// the join's count; one Start could not size either is refused
// (ErrMissingTopic: a restart sizes it), as is a stateful subtopology
// downstream already sized otherwise (ErrCopartition).
func (a *App) lateSizing(sub int, n int32) (lateSized, error) {
	l := lateSized{counts: map[int]int32{}, wants: map[string]internalWant{}}
	queue := []int{sub}
	l.counts[sub] = n
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, st := range a.topo.subs[s].stores {
			l.wants[a.changelogTopic(st.name)] = internalWant{n, true}
		}
		suffixes := make([]string, 0, len(a.repartWriter))
		for suffix, w := range a.repartWriter {
			if w == s {
				suffixes = append(suffixes, suffix)
			}
		}
		sort.Strings(suffixes)
		for _, suffix := range suffixes {
			topic := a.internalTopic(suffix)
			if c, ok := a.joinSized[suffix]; ok {
				if c == 0 {
					return lateSized{}, fmt.Errorf("%w: subtopology %d had no input at Start and writes %s, which a join sizes and Start could not; start the application again to create it", ErrMissingTopic, s, topic)
				}
				continue // created at Start; its reader sized by it
			}
			l.wants[topic] = internalWant{n, false}
			r, read := a.topicSub[topic]
			if !read {
				continue
			}
			have := a.taskCount[r]
			if c, ok := l.counts[r]; ok {
				have = c
			}
			switch {
			case have == 0:
				l.counts[r] = n
				queue = append(queue, r)
			case have != n && len(a.topo.subs[r].stores) > 0:
				return lateSized{}, fmt.Errorf("%w: repartition topic %s (%d partitions, as subtopology %d's first input) feeds subtopology %d, which keeps state (%s) over %d partitions",
					ErrCopartition, topic, n, sub, r, a.topo.subs[r].stores[0].name, have)
			case have < n:
				l.counts[r] = n // stateless: as many tasks as its largest input
			}
		}
	}
	return l, nil
}

// applyLateSizing creates the internal topics of l and takes its
// partition counts (processing goroutine, mu held).
func (a *App) applyLateSizing(ctx context.Context, l lateSized) error {
	if err := a.createInternalTopics(ctx, l.wants, nil); err != nil {
		return err
	}
	a.tasksMu.Lock()
	for s, n := range l.counts {
		a.taskCount[s] = max(a.taskCount[s], n)
	}
	a.tasksMu.Unlock()
	var names []string
	for name, w := range l.wants {
		names = append(names, name)
		if w.compact {
			continue
		}
		if _, read := a.topicSub[name]; read {
			if a.purge == nil {
				a.purge = newRepartitionPurger(map[string]bool{}, a.cfg.RepartitionPurgeInterval)
			}
			a.purge.topics[name] = true
		}
	}
	sort.Strings(names)
	a.log.Info("streams: internal topics created for a subtopology's first input", "topics", names)
	return nil
}
