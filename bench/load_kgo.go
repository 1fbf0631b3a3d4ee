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
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaDriver drives a Kafka peer with franz-go's kgo, with its defaults
// except where a workload says otherwise (acks, compression) and where the
// defaults would not be those of a typical producer: without idempotence
// (acks 0 and 1) kgo allows one produce request in flight per broker; the
// Java client and librdkafka allow 5 and more, so 5 it is.
type kafkaDriver struct {
	seeds []string
	adm   *kadm.Client
	cl    *kgo.Client
	// rf and configs are those of every topic the driver creates; a
	// cluster's topics are replicated (see clusterTopicConfigs).
	rf      int16
	configs map[string]*string
	// opts are given to every client besides the seeds: how to connect
	// (TLS and SASL for the SASL_SSL peer), and the hook that counts
	// requests.
	opts []kgo.Opt
	// requests counts the requests every client of the driver wrote to
	// the peer: the requests of a run when the broker counts none itself.
	requests atomic.Int64
}

// OnBrokerWrite counts a request written (kgo.HookBrokerWrite).
func (d *kafkaDriver) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		d.requests.Add(1)
	}
}

// newKafkaDriver connects to seeds with opts (see kafkaDriver.opts).
func newKafkaDriver(seeds []string, rf int16, configs map[string]*string, opts ...kgo.Opt) (*kafkaDriver, error) {
	// The admin client caches metadata for MetadataMinAge (5 s by
	// default), also when asked for a topic that it does not know yet: a
	// topic just created would stay unknown to it for that long.
	d := &kafkaDriver{seeds: seeds, rf: rf, configs: configs}
	d.opts = append(append([]kgo.Opt{}, opts...), kgo.WithHooks(d))
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100 * time.Millisecond)}, d.opts...)...)
	if err != nil {
		return nil, err
	}
	d.cl, d.adm = cl, kadm.NewClient(cl)
	return d, nil
}

// kgoSettings is the client configuration as the report states it.
const kgoSettings = "franz-go kgo: linger 10 ms in closed-loop runs and 0 in open-loop (latency) runs, " +
	"up to 50000 records and 32 MiB buffered per producer (the Java client's buffer.memory); " +
	"5 produce requests in flight without idempotence (kgo's default is 1), idempotent with acks=all; " +
	"default partitioner (sticky, switching partition every 64 KiB); one client per producer and per consumer"

func (d *kafkaDriver) close() { d.cl.Close() }

func (d *kafkaDriver) createTopic(ctx context.Context, topic string, partitions int) error {
	resp, err := d.adm.CreateTopic(ctx, int32(partitions), d.rf, d.configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if d.rf > 1 {
		// A run starts once every partition has its leader and every
		// replica in sync, so that it does not measure the cluster
		// settling (or fail acks=all for want of in-sync replicas).
		return d.waitISR(ctx, topic, int(d.rf), topicReadyTimeout)
	}
	return nil
}

const topicReadyTimeout = 30 * time.Second

// waitISR waits until every broker's metadata gives every partition of
// topic a leader and n in-sync replicas. Every broker is asked, not one:
// brokers apply the controller's changes independently, and a producer
// that learns of the topic from a broker not there yet waits for its next
// metadata refresh (kgo's MetadataMinAge, 5 s) before sending anything.
func (d *kafkaDriver) waitISR(ctx context.Context, topic string, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer yet"
	for {
		ok, why := d.topicReadyEverywhere(ctx, topic, n)
		if ok {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: not every partition has a leader and %d in-sync replicas on every broker after %v (%s)",
				topic, n, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicReadyEverywhere asks every broker for topic's metadata; it says
// whether all of them give every partition a leader and n in-sync
// replicas, or what is missing.
func (d *kafkaDriver) topicReadyEverywhere(ctx context.Context, topic string, n int) (bool, string) {
	bm, err := d.adm.BrokerMetadata(ctx)
	if err != nil {
		return false, err.Error()
	}
	if len(bm.Brokers) < n {
		return false, fmt.Sprintf("%d brokers", len(bm.Brokers))
	}
	for _, b := range bm.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, d.cl.Broker(int(b.NodeID)))
		if err != nil {
			return false, fmt.Sprintf("broker %d: %v", b.NodeID, err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) == 0 {
			return false, fmt.Sprintf("broker %d does not know the topic yet", b.NodeID)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) < n {
				return false, fmt.Sprintf("broker %d: partition %d has leader %d and ISR %v", b.NodeID, p.Partition, p.Leader, p.ISR)
			}
		}
	}
	return true, ""
}

// leaders returns the node id leading each partition of topic.
func (d *kafkaDriver) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	td, err := d.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := td[topic].Err; err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	m := map[int32]int32{}
	for _, p := range td[topic].Partitions {
		m[p.Partition] = p.Leader
	}
	return m, nil
}

// waitBrokers waits until the metadata lists n brokers.
func (d *kafkaDriver) waitBrokers(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		// A request of our own: kadm's BrokerMetadata answers from the
		// client's last metadata, which may predate the last registration.
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, d.cl)
		got := 0
		if err == nil {
			got = len(resp.Brokers)
		}
		if got == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d brokers in the metadata after %v, want %d (%v)", got, timeout, n, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
	if s.txn > 0 {
		return d.produceTxn(ctx, s)
	}
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
				kgo.SeedBrokers(d.seeds...), kgo.DefaultProduceTopic(s.topic),
				kgo.RequiredAcks(kgoAcks(s.acks)), kgo.ProducerBatchCompression(kgoCodec(s.compression)),
				// A record not delivered by the end of the run's bound
				// fails instead of being retried forever.
				kgo.RecordDeliveryTimeout(s.duration + 30*time.Second),
				// The client's buffer is bounded in bytes as the Java
				// client's is (buffer.memory, 32 MiB): kgo's default bound of
				// 50000 records would hold 800 MiB of 16 KiB values per
				// producer, and the suite would measure its own GC.
				kgo.MaxBufferedBytes(s.bufferBytes()),
			}
			opts = append(opts, d.opts...)
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

// produceTxn runs s.producers transactional kgo clients, closed loop:
// each begins a transaction, sends s.txn records, flushes and commits, and
// again, until the run's bound. A record counts once its transaction
// committed; its latency is from handing it to the client to its
// acknowledgement (the commit that follows is the price per transaction,
// seen in records/s).
func (d *kafkaDriver) produceTxn(ctx context.Context, s produceSpec) (loadResult, error) {
	rec := newRecorder()
	sp := newSpan()
	var committed atomic.Int64
	var errs firstErr
	var once sync.Once
	start := s.vals.now()
	stopAt := start + int64(s.duration)
	runID := fmt.Sprintf("%x", start)
	var wg sync.WaitGroup
	for k := range s.producers {
		wg.Go(func() {
			opts := append([]kgo.Opt{
				kgo.SeedBrokers(d.seeds...), kgo.DefaultProduceTopic(s.topic),
				kgo.TransactionalID(fmt.Sprintf("bench-%s-%s-%d", s.topic, runID, k)),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgoCodec(s.compression)),
				kgo.RecordDeliveryTimeout(s.duration + 30*time.Second), kgo.MaxBufferedBytes(s.bufferBytes()),
				// A transaction open longer than this is aborted by the
				// coordinator: a slow peer fails the run instead of
				// hanging it.
				kgo.TransactionTimeout(60 * time.Second),
			}, d.opts...)
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				errs.add(err)
				return
			}
			defer cl.Close()
			promise := func(r *kgo.Record, err error) {
				if err != nil {
					errs.add(err)
					return
				}
				if at, ok := stamp(r.Value); ok {
					rec.record(s.vals.now() - at)
				}
			}
			q := quota(s.records, s.producers, k)
			for j := int64(0); j < q && ctx.Err() == nil; {
				if s.vals.now() >= stopAt {
					break
				}
				if err := cl.BeginTransaction(); err != nil {
					errs.add(fmt.Errorf("begin transaction: %w", err))
					return
				}
				n := min(int64(s.txn), q-j)
				for i := range n {
					at := s.vals.now()
					once.Do(func() {
						if s.sending != nil {
							s.sending()
						}
					})
					sp.begin(at)
					cl.Produce(ctx, &kgo.Record{Value: s.vals.make(int64(k)<<40|(j+i), s.size, at)}, promise)
				}
				j += n
				if err := cl.Flush(ctx); err != nil {
					errs.add(fmt.Errorf("flush: %w", err))
					return
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					errs.add(fmt.Errorf("commit: %w", err))
					return
				}
				committed.Add(n)
				sp.end(s.vals.now())
			}
		})
	}
	wg.Wait()
	n := committed.Load()
	res := loadResult{records: n, bytes: n * int64(s.size), elapsed: sp.elapsed(), lat: merge(rec),
		first: sp.first.Load(), last: sp.last.Load()}
	return res, errs.get()
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
			opts := []kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: parts})}
			if s.readCommitted {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			cl, err := kgo.NewClient(append(opts, d.opts...)...)
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
