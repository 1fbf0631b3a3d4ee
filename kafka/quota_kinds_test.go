package kafka_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"ringlog/broker"
)

// setQuota sets one quota key of one entity through AlterClientQuotas.
func setQuota(t *testing.T, adm *kadm.Client, typ, name, key string, value float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: typ, Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: key, Value: value}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%v: %v", r.Entity, r.Err)
		}
	}
}

// TestRequestQuota: a client with a request_percentage quota (KIP-124)
// that keeps its broker busy with Metadata requests is told throttle
// times, another client doing the same is not; and a consumer whose long
// polls wait on an empty topic is not throttled for the waits, only for
// its own time.
func TestRequestQuota(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		c.QuotaWindowNum, c.QuotaWindow = 11, 100*time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := b.admin()
	// 0.2% of a thread: 2 ms of request time per second.
	setQuota(t, adm, "client-id", "rq-slow", "request_percentage", 0.2)
	setQuota(t, adm, "client-id", "rq-poll", "request_percentage", 5)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "rq-empty"); err != nil {
		t.Fatal(err)
	}
	busy := func(client string) (requests int, throttled time.Duration) {
		hooks := &quotaHook{}
		cl := b.client(kgo.ClientID(client), kgo.WithHooks(hooks))
		end := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(end) {
			req := kmsg.NewPtrMetadataRequest()
			if _, err := req.RequestWith(ctx, cl); err != nil {
				t.Fatalf("%s: %v", client, err)
			}
			requests++
		}
		_, throttled = hooks.totals()
		return requests, throttled
	}
	var wg sync.WaitGroup
	var slowN, fastN int
	var slowT, fastT time.Duration
	wg.Go(func() { slowN, slowT = busy("rq-slow") })
	wg.Go(func() { fastN, fastT = busy("rq-fast") })
	// The consumer long-polls an empty topic: its requests wait 200 ms
	// each, 100% of its time, yet its own time is well under 5%.
	var pollT time.Duration
	wg.Go(func() {
		hooks := &quotaHook{}
		cl := b.client(kgo.ClientID("rq-poll"), kgo.WithHooks(hooks), kgo.ConsumeTopics("rq-empty"),
			kgo.FetchMaxWait(200*time.Millisecond))
		pctx, pcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer pcancel()
		for pctx.Err() == nil {
			cl.PollFetches(pctx)
		}
		_, pollT = hooks.totals()
	})
	wg.Wait()
	t.Logf("with a quota of 0.2%%: %d requests, throttled %v; without: %d requests, throttled %v; long polls: throttled %v",
		slowN, slowT, fastN, fastT, pollT)
	if slowT == 0 {
		t.Errorf("the client over its request quota was never throttled (%d requests)", slowN)
	}
	if fastT != 0 {
		t.Errorf("the client without a quota was throttled %v", fastT)
	}
	if pollT != 0 {
		t.Errorf("the consumer's long polls were counted as its request time: throttled %v", pollT)
	}
}

// TestControllerMutationQuota: KIP-599's controller_mutation_rate. With
// a rate of 1 partition/s and a burst of 2 (2 windows of 1 s), a first
// CreateTopics of 5 partitions goes through unthrottled (a mutation may
// take the bucket below zero once); then, with the bucket 3 credits
// short, the strict versions refuse every topic with
// THROTTLING_QUOTA_EXCEEDED and about 3 s of throttle, CreatePartitions
// v3 and DeleteTopics v5+ likewise, and a Metadata request's automatic
// creation is refused; a CreateTopics v5 (permissive) is taken and
// throttled; another client is not limited.
func TestControllerMutationQuota(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		c.ControllerQuotaWindowNum, c.ControllerQuotaWindow = 2, time.Second
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	setQuota(t, b.admin(), "client-id", "cm", "controller_mutation_rate", 1)
	// A new client (and connection) per request: the broker mutes a
	// throttled connection, and kgo waits out a throttle before its next
	// request; the test looks at the answers only.
	send := func(client string, req kmsg.Request, opts ...kgo.Opt) kmsg.Response {
		t.Helper()
		cl := b.client(append([]kgo.Opt{kgo.ClientID(client)}, opts...)...)
		defer cl.Close()
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	create := func(client string, parts int32, names ...string) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, parts, 1
			req.Topics = append(req.Topics, rt)
		}
		return send(client, req).(*kmsg.CreateTopicsResponse)
	}
	codes := func(resp *kmsg.CreateTopicsResponse) []int16 {
		var out []int16
		for _, rt := range resp.Topics {
			out = append(out, rt.ErrorCode)
		}
		return out
	}
	throttled := int16(kerr.ThrottlingQuotaExceeded.Code)

	first := create("cm", 5, "cm-a")
	if c := codes(first); c[0] != 0 || first.ThrottleMillis != 0 {
		t.Fatalf("first create over the burst: codes %v, throttle %d ms; want it taken, unthrottled", c, first.ThrottleMillis)
	}
	over := create("cm", 1, "cm-b", "cm-c")
	overAt := time.Now()
	if c := codes(over); c[0] != throttled || c[1] != throttled || over.ThrottleMillis < 2000 || over.ThrottleMillis > 3000 {
		t.Errorf("create with the bucket 3 short: codes %v, throttle %d ms; want THROTTLING_QUOTA_EXCEEDED for both, about 3000 ms",
			c, over.ThrottleMillis)
	}
	if ts, err := b.admin().ListTopics(ctx, "cm-b", "cm-c"); err != nil {
		t.Fatal(err)
	} else if ts.Has("cm-b") || ts.Has("cm-c") {
		t.Errorf("refused topics were created: %v", ts.Names())
	}
	other := create("cm-other", 3, "cm-free")
	if c := codes(other); c[0] != 0 || other.ThrottleMillis != 0 {
		t.Errorf("another client: codes %v, throttle %d", c, other.ThrottleMillis)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "cm-a", 6
	cp.Topics = append(cp.Topics, cpt)
	if r := send("cm", cp).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != throttled || r.ThrottleMillis == 0 {
		t.Errorf("CreatePartitions v%d: code %d, throttle %d", r.Version, r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 10000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("cm-a")
	del.Topics, del.TopicNames = append(del.Topics, dt), []string{"cm-a"}
	if r := send("cm", del).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != throttled || r.ThrottleMillis == 0 {
		t.Errorf("DeleteTopics v%d: code %d, throttle %d", r.Version, r.Topics[0].ErrorCode, r.ThrottleMillis)
	}

	// A Metadata request's automatic creation takes the quota strictly:
	// the topic is not made, and is answered as missing.
	md := kmsg.NewPtrMetadataRequest()
	md.AllowAutoTopicCreation = true
	mdt := kmsg.NewMetadataRequestTopic()
	mdt.Topic = kmsg.StringPtr("cm-auto")
	md.Topics = append(md.Topics, mdt)
	if r := send("cm", md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("auto-creation over the quota: code %d, want UNKNOWN_TOPIC_OR_PARTITION", r.Topics[0].ErrorCode)
	}
	if r := send("cm-other", md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != 0 {
		t.Errorf("auto-creation by another client: code %d", r.Topics[0].ErrorCode)
	}

	// CreateTopics v5 (Kafka 2.6) knows no THROTTLING_QUOTA_EXCEEDED:
	// taken, and throttled for the bucket's debt.
	old := kmsg.NewPtrCreateTopicsRequest()
	old.TimeoutMillis = 10000
	ot := kmsg.NewCreateTopicsRequestTopic()
	ot.Topic, ot.NumPartitions, ot.ReplicationFactor = "cm-old", 1, 1
	old.Topics = append(old.Topics, ot)
	// Its throttle is the debt then: the earlier one, less what the rate
	// paid back since (1 partition per second: a loaded machine took 2 s
	// to get here), plus its own partition.
	sent := time.Since(overAt)
	r := send("cm", old, kgo.MaxVersions(kversion.V2_6_0())).(*kmsg.CreateTopicsResponse)
	answered := time.Since(overAt)
	lo := time.Duration(over.ThrottleMillis)*time.Millisecond + time.Second - answered - 500*time.Millisecond
	hi := time.Duration(over.ThrottleMillis)*time.Millisecond + time.Second - sent + 500*time.Millisecond
	if got := time.Duration(r.ThrottleMillis) * time.Millisecond; r.Version != 5 || r.Topics[0].ErrorCode != 0 || got <= 0 || got < lo || got > hi {
		t.Errorf("CreateTopics v%d over the quota: code %d, throttle %v; want it taken, throttled %v to %v",
			r.Version, r.Topics[0].ErrorCode, got, lo, hi)
	}
}

// apiVersionsServed connects to addr, sends an ApiVersions v0 and
// reports whether an answer came back (false: the broker closed the
// connection unanswered).
func apiVersionsServed(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// size | api key 18 | version 0 | correlation id | null client id
	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = append(frame, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff)
	if _, err := c.Write(frame); err != nil {
		return false
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer nor close in 5 s")
		}
		return false
	}
	return true
}

// TestConnectionCreationRate: KIP-612. An ip entity's
// connection_creation_rate quota, set through AlterClientQuotas, closes
// the connections from that address over it unserved; the broker-wide
// max.connection.creation.rate makes the acceptor wait, and serves every
// connection.
func TestConnectionCreationRate(t *testing.T) {
	windows := func(c *broker.Config) { c.QuotaWindowNum, c.QuotaWindow = 11, 100*time.Millisecond }
	t.Run("ip", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, brokerOpts{Config: windows})
		// 10 a second over 11 windows of 100 ms: a burst of about 10.
		setQuota(t, b.admin(), "ip", "127.0.0.1", "connection_creation_rate", 10)
		served, closed := 0, 0
		for range 30 {
			if apiVersionsServed(t, b.Addr) {
				served++
			} else {
				closed++
			}
		}
		t.Logf("30 connections at once against 10/s: %d served, %d closed", served, closed)
		if closed < 10 || served < 5 {
			t.Errorf("%d served, %d closed unserved; want the ones over the rate closed", served, closed)
		}
	})
	t.Run("broker", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
			windows(c)
			c.MaxConnectionCreationRate = 20
		}})
		start := time.Now()
		for i := range 40 {
			if !apiVersionsServed(t, b.Addr) {
				t.Fatalf("connection %d closed unserved: the broker rate delays, never refuses", i)
			}
		}
		took := time.Since(start)
		t.Logf("40 connections against 20/s: %v", took)
		// Past a burst of about 20, the other 20 at 20 a second: about
		// a second at least (a lower bound only: a slow machine may take
		// longer for other reasons).
		if took < 500*time.Millisecond {
			t.Errorf("40 connections served in %v against a rate of 20/s", took)
		}
	})
}
