package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/broker"
)

// BenchmarkProduce measures acks=1 produce requests of one 100-byte record
// through a broker with its metrics registered (the request metrics are on
// the path), one at a time and pipelined.
func BenchmarkProduce(b *testing.B) {
	for _, depth := range []int{1, 64} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			br := startBroker(b, brokerOpts{Config: func(cfg *broker.Config) { cfg.Metrics = prometheus.NewRegistry() }})
			createTopic(b, br, "bench", 1, nil)
			cl := br.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("bench"),
				kgo.ProducerLinger(0), kgo.MaxBufferedRecords(depth), kgo.MaxProduceRequestsInflightPerBroker(depth))
			ctx := context.Background()
			value := make([]byte, 100)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			errs := make(chan error, 1)
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
		})
	}
}
