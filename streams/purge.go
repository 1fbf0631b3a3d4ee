package streams

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Repartition topics are the application's own: once their records'
// offsets are committed, nothing will read them again, and Kafka Streams
// deletes them (DeleteRecords up to the committed offsets, every
// repartition.purge.interval.ms) instead of keeping them for the broker's
// retention. Their topics are created with retention.ms -1 (as Kafka
// Streams creates them) and small segments, so that what is purged is
// freed within minutes.

// DefaultRepartitionPurgeInterval is Kafka Streams' default
// repartition.purge.interval.ms.
const DefaultRepartitionPurgeInterval = 30 * time.Second

// purgeTimeout bounds one DeleteRecords round: the next one covers what
// a slow round did not.
const purgeTimeout = 30 * time.Second

// repartitionConfigs are the configs of a repartition topic at creation:
// Kafka Streams' (RepartitionTopicConfig: 10-minute and 50 MiB segments,
// kept until purged).
func repartitionConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{
		"cleanup.policy": s("delete"),
		"retention.ms":   s("-1"),
		"segment.ms":     s("600000"),
		"segment.bytes":  s("52428800"),
	}
}

// repartitionPurger deletes the records of repartition topics below their committed
// offsets. Offsets are noted by the processing goroutine after each
// commit that made them durable; a round runs in a goroutine of its own
// at most every interval, one at a time, so that processing never waits
// for it. A partition whose deletion failed is noted again for the next
// round.
type repartitionPurger struct {
	topics map[string]bool // the repartition topics read by this application
	every  time.Duration

	mu       sync.Mutex
	due      map[string]map[int32]int64 // committed offsets not purged yet
	last     time.Time                  // start of the last round
	stopped  bool
	inFlight bool
	cancel   context.CancelFunc
	running  sync.WaitGroup
}

func newRepartitionPurger(topics map[string]bool, every time.Duration) *repartitionPurger {
	return &repartitionPurger{topics: topics, every: every, due: map[string]map[int32]int64{}, last: time.Now()}
}

// pending is what a commit about to run would commit of the repartition
// topics: kgo's uncommitted offsets, which the commit then sends.
func (p *repartitionPurger) pending(cl *kgo.Client) map[string]map[int32]int64 {
	if p == nil || len(p.topics) == 0 {
		return nil
	}
	var out map[string]map[int32]int64
	for t, ps := range cl.UncommittedOffsets() {
		if !p.topics[t] {
			continue
		}
		for part, eo := range ps {
			if out == nil {
				out = map[string]map[int32]int64{}
			}
			if out[t] == nil {
				out[t] = map[int32]int64{}
			}
			out[t][part] = eo.Offset
		}
	}
	return out
}

// committed notes offsets a commit made durable.
func (p *repartitionPurger) committed(offs map[string]map[int32]int64) {
	if p == nil || len(offs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noteLocked(offs)
}

func (p *repartitionPurger) noteLocked(offs map[string]map[int32]int64) {
	for t, ps := range offs {
		if p.due[t] == nil {
			p.due[t] = map[int32]int64{}
		}
		for part, o := range ps {
			if o > p.due[t][part] {
				p.due[t][part] = o
			}
		}
	}
}

// maybeStart starts a round when one is due: an interval since the last,
// offsets noted, no round running.
func (p *repartitionPurger) maybeStart(adm *kadm.Client, log *slog.Logger) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.inFlight || len(p.due) == 0 || time.Since(p.last) < p.every {
		return
	}
	round := p.due
	p.due = map[string]map[int32]int64{}
	offs := kadm.Offsets{}
	for t, ps := range round {
		for part, o := range ps {
			offs.AddOffset(t, part, o, -1)
		}
	}
	p.last = time.Now()
	p.inFlight = true
	ctx, cancel := context.WithTimeout(context.Background(), purgeTimeout)
	p.cancel = cancel
	p.running.Add(1)
	go func() {
		defer p.running.Done()
		defer cancel()
		resps, err := adm.DeleteRecords(ctx, offs)
		// What did not go (all of it when the request failed) is kept
		// for the next round.
		failed := map[string]map[int32]int64{}
		n, first := 0, err
		for t, ps := range round {
			for part, o := range ps {
				r, ok := resps.Lookup(t, part)
				if err == nil && ok && r.Err == nil {
					continue
				}
				if first = cmp.Or(first, r.Err); first == nil {
					first = fmt.Errorf("no answer for %s/%d", t, part)
				}
				if failed[t] == nil {
					failed[t] = map[int32]int64{}
				}
				failed[t][part] = o
				n++
			}
		}
		if n > 0 && ctx.Err() == nil {
			log.Warn("streams: purging repartition topics", "partitions_failed", n, "err", first)
		}
		p.mu.Lock()
		p.inFlight = false
		p.noteLocked(failed)
		p.mu.Unlock()
	}()
}

// stop cancels a round under way and waits for it, before the admin
// client closes.
func (p *repartitionPurger) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stopped = true
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.running.Wait()
}
