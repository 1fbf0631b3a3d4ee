package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaDriver drives a Kafka peer with franz-go's kgo, with its defaults
// except where a workload says otherwise (acks, compression) and where the
// defaults would not be those of a typical producer: without idempotence
// (acks 0 and 1) kgo allows one produce request in flight per broker; the
// Java client and librdkafka allow 5 and more, so 5 it is.
type kafkaDriver struct {
	addr string
	adm  *kadm.Client
	cl   *kgo.Client
}

func newKafkaDriver(addr string) (*kafkaDriver, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	return &kafkaDriver{addr: addr, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// kgoSettings is the client configuration as the report states it.
const kgoSettings = "franz-go kgo: linger 10 ms in closed-loop runs and 0 in open-loop (latency) runs, " +
	"up to 50000 records and 32 MiB buffered per producer (the Java client's buffer.memory); " +
	"5 produce requests in flight without idempotence (kgo's default is 1), idempotent with acks=all; " +
	"default partitioner (sticky, switching partition every 64 KiB); one client per producer and per consumer"

func (d *kafkaDriver) close() { d.cl.Close() }

func (d *kafkaDriver) createTopic(ctx context.Context, topic string, partitions int) error {
	resp, err := d.adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

func (d *kafkaDriver) deleteTopic(ctx context.Context, topic string, _ int) error {
	resp, err := d.adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}

func (d *kafkaDriver) stored(ctx context.Context, topic string, _ int) (int64, error) {
	offs, err := d.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	var ferr error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && ferr == nil {
			ferr = o.Err
		}
		n += o.Offset
	})
	return n, ferr
}

func kgoAcks(acks int) kgo.Acks {
	switch acks {
	case 0:
		return kgo.NoAck()
	case 1:
		return kgo.LeaderAck()
	}
	return kgo.AllISRAcks()
}

func kgoCodec(c string) kgo.CompressionCodec {
	if c == "zstd" {
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// produce runs s.producers kgo clients, closed loop (as fast as each
// client takes records) or open loop (records due at planned times).
// Latency is from a record's stamp (sent or planned) to its promise.
func (d *kafkaDriver) produce(ctx context.Context, s produceSpec) (loadResult, error) {
	rec := newRecorder()
	sp := newSpan()
	var acked atomic.Int64
	var errs firstErr
	var unsent atomic.Int64
	total := s.records
	if s.rate > 0 {
		total = openLoopTotal(s)
	}
	var once sync.Once
	start := s.vals.now()
	var wg sync.WaitGroup
	for k := range s.producers {
		wg.Go(func() {
			opts := []kgo.Opt{
				kgo.SeedBrokers(d.addr), kgo.DefaultProduceTopic(s.topic),
				kgo.RequiredAcks(kgoAcks(s.acks)), kgo.ProducerBatchCompression(kgoCodec(s.compression)),
				// A record not delivered by the end of the run's bound
				// fails instead of being retried forever.
				kgo.RecordDeliveryTimeout(s.duration + 30*time.Second),
				// The client's buffer is bounded in bytes as the Java
				// client's is (buffer.memory, 32 MiB): kgo's default bound of
				// 50000 records would hold 800 MiB of 16 KiB values per
				// producer, and the suite would measure its own GC.
				kgo.MaxBufferedBytes(32 << 20),
			}
			if s.acks != -1 {
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
			}
			if s.rate > 0 {
				// An open-loop run measures latency: a record must not
				// wait for the client's linger (records still batch while
				// requests are in flight).
				opts = append(opts, kgo.ProducerLinger(0))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				errs.add(err)
				return
			}
			defer cl.Close()
			promise := func(r *kgo.Record, err error) {
				now := s.vals.now()
				if err != nil {
					errs.add(err)
					return
				}
				if at, ok := stamp(r.Value); ok {
					rec.record(now - at)
				}
				acked.Add(1)
				sp.end(now)
			}
			q := quota(total, s.producers, k)
			stopAt := start + int64(s.duration)
			sch := schedule{start: start, interval: 1e9 / s.rate, n: s.producers, k: k}
			for j := int64(0); j < q; j++ {
				var at int64
				if s.rate > 0 {
					at = sch.due(j)
					if !waitUntil(ctx, s.vals, at) {
						// The hard bound ended the run: the records not
						// sent count at the latency they have reached.
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
				cl.Produce(ctx, &kgo.Record{Value: s.vals.make(int64(k)<<40|j, s.size, at)}, promise)
				if ctx.Err() != nil {
					break // the promise and Flush below report it
				}
			}
			if err := cl.Flush(ctx); err != nil {
				errs.add(fmt.Errorf("flush: %w", err))
			}
		})
	}
	wg.Wait()
	n := acked.Load()
	res := loadResult{records: n, bytes: n * int64(s.size), elapsed: sp.elapsed(), lat: merge(rec), unsent: unsent.Load(),
		first: sp.first.Load(), last: sp.last.Load()}
	if err := errs.get(); err != nil {
		return res, err
	}
	if res.unsent > 0 {
		return res, fmt.Errorf("%d of %d planned records could not be sent within the run's bound", res.unsent, total)
	}
	return res, nil
}

// consume runs s.consumers kgo clients, each assigned its partitions
// directly, from offset 0 until the tally is complete.
func (d *kafkaDriver) consume(ctx context.Context, s consumeSpec) (loadResult, error) {
	sp := newSpan()
	sp.begin(s.vals.now())
	t := newTally(s, sp)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := min(s.consumers, s.partitions)
	recs := make([]*recorder, n)
	var errs firstErr
	var bytes atomic.Int64
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for c := range n {
		recs[c] = newRecorder()
		wg.Go(func() {
			parts := map[int32]kgo.Offset{}
			for p := c; p < s.partitions; p += n {
				parts[int32(p)] = kgo.NewOffset().At(0)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: parts}))
			ready <- struct{}{}
			if err != nil {
				errs.add(err)
				return
			}
			defer cl.Close()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				now := s.vals.now()
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.Canceled) {
						errs.add(fmt.Errorf("fetch %s/%d: %w", topic, p, err))
					}
				})
				var got, b int64
				fs.EachRecord(func(r *kgo.Record) {
					got++
					b += int64(len(r.Value))
					if s.latency {
						if at, ok := stamp(r.Value); ok {
							recs[c].record(now - at)
						}
					}
				})
				bytes.Add(b)
				t.add(got, now)
			}
		})
	}
	for range n {
		<-ready
	}
	t.watch(ctx)
	cancel()
	wg.Wait()
	res, err := t.result(0)
	res.bytes = bytes.Load()
	if s.latency {
		res.lat = merge(recs...)
	}
	if e := errs.get(); e != nil {
		return res, e
	}
	return res, err
}
