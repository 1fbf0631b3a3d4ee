package streams

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// globalRunner keeps the global stores of an instance: bootstrapped to
// their topics' ends at Start (before any task runs, as Kafka's global
// stream thread), then kept up to date by a goroutine of its own. The
// source topic is the changelog: nothing is written back.
type globalRunner struct {
	db       *stateDB
	cl       *kgo.Client
	restored atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}
}

func (a *App) startGlobal(ctx context.Context) (*globalRunner, error) {
	dir := filepath.Join(a.cfg.StateDir, a.cfg.ApplicationID, "global")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := openStateDB(dir)
	if err != nil {
		return nil, err
	}
	g := &globalRunner{db: db, done: make(chan struct{})}
	var topics []string
	for _, gd := range a.topo.globals {
		topics = append(topics, gd.topic)
	}
	ends, err := a.endOffsets(ctx, topics...)
	if err != nil {
		db.close()
		return nil, fmt.Errorf("streams: global end offsets: %w", err)
	}
	var ranges []restoreRange
	from := map[string]map[int32]kgo.Offset{}
	store := map[string]string{}
	for _, gd := range a.topo.globals {
		store[gd.topic] = gd.store.name
		from[gd.topic] = map[int32]kgo.Offset{}
		for _, lo := range ends[gd.topic] {
			if lo.Err != nil {
				db.close()
				return nil, fmt.Errorf("streams: end offset of %s/%d: %w", gd.topic, lo.Partition, lo.Err)
			}
			r, err := rangeFrom(db, "global", gd.store.name, gd.topic, lo.Partition, lo.Offset)
			if err != nil {
				db.close()
				return nil, err
			}
			if r.from < r.end {
				ranges = append(ranges, r)
			}
			from[gd.topic][lo.Partition] = kgo.NewOffset().At(max(r.from, r.end))
		}
	}
	if len(ranges) > 0 {
		if err := a.restoreRanges(ctx, db, ranges, &g.restored); err != nil {
			db.close()
			return nil, err
		}
	}
	g.cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(a.isolation()), kgo.FetchMaxWait(500 * time.Millisecond)}, a.cfg.ClientOpts...)...)
	if err != nil {
		db.close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.run(runCtx, a, store)
	return g, nil
}

func (g *globalRunner) run(ctx context.Context, a *App, store map[string]string) {
	defer close(g.done)
	for {
		fetches := g.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			a.log.Warn("streams: global fetch", "topic", t, "partition", p, "err", err)
		})
		b := g.db.db.NewBatch()
		var err error
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			s := store[p.Topic]
			for _, r := range p.Records {
				if r.Value == nil {
					err = firstErr(err, b.Delete(dataKey(s, r.Key), nil))
				} else {
					err = firstErr(err, b.Set(dataKey(s, r.Key), r.Value, nil))
				}
			}
			err = firstErr(err, putCheckpoint(b, s, p.Partition, p.Records[len(p.Records)-1].Offset+1))
		})
		if err == nil {
			err = b.Commit(pebble.NoSync)
		}
		if err != nil {
			a.log.Error("streams: global store", "err", err)
			return
		}
	}
}

func (g *globalRunner) close() {
	g.cancel()
	g.cl.Close()
	<-g.done
	_ = g.db.close()
}
