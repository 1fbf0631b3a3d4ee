package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsDriver drives the NATS JetStream peer with nats.go, mapping the Kafka
// workload onto JetStream's model: a partition is a stream of its own (one
// file-backed, single-replica log each, as a Kafka partition is), a record
// is a message published to that stream's subject, acks=1 and acks=all are
// both JetStream's publish acknowledgement (one replica: the same thing),
// and acks=0 is a plain core NATS publish that the stream still stores.
// Consumers read with ordered consumers (no acknowledgements, flow
// controlled), the nearest thing to a Kafka fetch.
type natsDriver struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

// natsSettings is the client configuration as the report states it.
const natsSettings = "nats.go: asynchronous JetStream publish with up to 4096 acks pending per producer " +
	"(a plain publish for acks=0), records spread over the partitions' streams in turn; " +
	"ordered consumers; one connection per producer and per consumer"

const natsMaxPending = 4096

func newNatsDriver(url string) (*natsDriver, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsDriver{url: url, nc: nc, js: js}, nil
}

func (d *natsDriver) close() { d.nc.Close() }

func natsStream(topic string, p int) string  { return fmt.Sprintf("%s-%d", topic, p) }
func natsSubject(topic string, p int) string { return fmt.Sprintf("%s.%d", topic, p) }

func (d *natsDriver) createTopic(ctx context.Context, topic string, partitions int) error {
	for p := range partitions {
		_, err := d.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: natsStream(topic, p), Subjects: []string{natsSubject(topic, p)},
			Storage: jetstream.FileStorage, Replicas: 1, Retention: jetstream.LimitsPolicy,
		})
		if err != nil {
			return fmt.Errorf("create stream %s: %w", natsStream(topic, p), err)
		}
	}
	return nil
}

func (d *natsDriver) deleteTopic(ctx context.Context, topic string, partitions int) error {
	var errs []error
	for p := range partitions {
		errs = append(errs, d.js.DeleteStream(ctx, natsStream(topic, p)))
	}
	return errors.Join(errs...)
}

func (d *natsDriver) stored(ctx context.Context, topic string, partitions int) (int64, error) {
	var n int64
	for p := range partitions {
		st, err := d.js.Stream(ctx, natsStream(topic, p))
		if err != nil {
			return n, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return n, err
		}
		n += int64(info.State.Msgs)
	}
	return n, nil
}

func (d *natsDriver) produce(ctx context.Context, s produceSpec) (loadResult, error) {
	if s.compression != "none" {
		return loadResult{}, errors.New("unsupported")
	}
	rec := newRecorder()
	sp := newSpan()
	var acked, unsent atomic.Int64
	var errs firstErr
	total := s.records
	if s.rate > 0 {
		total = openLoopTotal(s)
	}
	subjects := make([]string, s.partitions)
	for p := range subjects {
		subjects[p] = natsSubject(s.topic, p)
	}
	var once sync.Once
	start := s.vals.now()
	var wg sync.WaitGroup
	for k := range s.producers {
		wg.Go(func() {
			nc, err := nats.Connect(d.url)
			if err != nil {
				errs.add(err)
				return
			}
			defer nc.Close()
			onAck := func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
				now := s.vals.now()
				if at, ok := stamp(m.Data); ok {
					rec.record(now - at)
				}
				acked.Add(1)
				sp.end(now)
			}
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(natsMaxPending),
				jetstream.WithPublishAsyncAckHandler(onAck),
				jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { errs.add(err) }))
			if err != nil {
				errs.add(err)
				return
			}
			q := quota(total, s.producers, k)
			stopAt := start + int64(s.duration)
			sch := schedule{start: start, interval: 1e9 / s.rate, n: s.producers, k: k}
			for j := int64(0); j < q; j++ {
				var at int64
				if s.rate > 0 {
					at = sch.due(j)
					if !waitUntil(ctx, s.vals, at) {
						now := s.vals.now()
						for jj := j; jj < q; jj++ {
							if late := now - sch.due(jj); late > 0 {
								rec.record(late)
							}
						}
						unsent.Add(q - j)
						break
					}
				} else {
					at = s.vals.now()
					if at >= stopAt {
						break
					}
				}
				once.Do(func() {
					if s.sending != nil {
						s.sending()
					}
				})
				sp.begin(at)
				subj := subjects[(j*int64(s.producers)+int64(k))%int64(len(subjects))]
				v := s.vals.make(int64(k)<<40|j, s.size, at)
				if s.acks == 0 {
					if err := nc.Publish(subj, v); err != nil {
						errs.add(err)
						break
					}
					// Sent is all acks=0 promises, as for kgo.
					acked.Add(1)
					sp.end(s.vals.now())
					continue
				}
				// The stall wait lets a slow server hold the producer back
				// (as a full kgo buffer does) instead of failing it.
				if _, err := js.PublishAsync(subj, v, jetstream.WithStallWait(s.duration+30*time.Second)); err != nil {
					errs.add(err)
					break
				}
			}
			if s.acks == 0 {
				if err := nc.FlushWithContext(ctx); err != nil {
					errs.add(err)
				}
				return
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				errs.add(fmt.Errorf("%d publishes unacknowledged at the run's bound", js.PublishAsyncPending()))
			}
		})
	}
	wg.Wait()
	n := acked.Load()
	res := loadResult{records: n, bytes: n * int64(s.size), elapsed: sp.elapsed(), lat: merge(rec), unsent: unsent.Load(),
		first: sp.first.Load(), last: sp.last.Load()}
	if s.acks == 0 {
		res.lat = nil // nothing was acknowledged: no latency to show
	}
	if err := errs.get(); err != nil {
		return res, err
	}
	if res.unsent > 0 {
		return res, fmt.Errorf("%d of %d planned records could not be sent within the run's bound", res.unsent, total)
	}
	return res, nil
}

func (d *natsDriver) consume(ctx context.Context, s consumeSpec) (loadResult, error) {
	sp := newSpan()
	sp.begin(s.vals.now())
	t := newTally(s, sp)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := min(s.consumers, s.partitions)
	recs := make([]*recorder, n)
	var errs firstErr
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for c := range n {
		recs[c] = newRecorder()
		wg.Go(func() {
			defer func() { ready <- struct{}{} }()
			nc, err := nats.Connect(d.url)
			if err != nil {
				errs.add(err)
				return
			}
			js, err := jetstream.New(nc)
			if err != nil {
				nc.Close()
				errs.add(err)
				return
			}
			// One iterator per partition, each on a goroutine of its own,
			// all on this consumer's connection.
			for p := c; p < s.partitions; p += n {
				oc, err := js.OrderedConsumer(cctx, natsStream(s.topic, p), jetstream.OrderedConsumerConfig{})
				if err != nil {
					errs.add(err)
					continue
				}
				it, err := oc.Messages(jetstream.PullMaxMessages(1000))
				if err != nil {
					errs.add(err)
					continue
				}
				wg.Go(func() {
					<-cctx.Done()
					it.Stop()
				})
				wg.Go(func() {
					for {
						m, err := it.Next()
						if err != nil {
							if !errors.Is(err, jetstream.ErrMsgIteratorClosed) && cctx.Err() == nil {
								errs.add(err)
							}
							return
						}
						now := s.vals.now()
						if s.latency {
							if at, ok := stamp(m.Data()); ok {
								recs[c].record(now - at)
							}
						}
						t.add(1, now)
					}
				})
			}
			wg.Go(func() {
				<-cctx.Done()
				nc.Close()
			})
		})
	}
	for range n {
		<-ready
	}
	t.watch(ctx)
	cancel()
	wg.Wait()
	res, err := t.result(s.size)
	if s.latency {
		res.lat = merge(recs...)
	}
	if e := errs.get(); e != nil {
		return res, e
	}
	return res, err
}
