package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/kafka"
)

// fetchConn speaks the Kafka protocol by hand, so that tests can pick the
// version of a request and see the response's exact bytes.
type fetchConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialFetch(t testing.TB, addr string) *fetchConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fetchConn{t: t, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes req with a new correlation id and returns that id.
func (r *fetchConn) send(req kmsg.Request) int32 {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(r.fmt.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

// recv reads one response frame (without its size prefix).
func (r *fetchConn) recv(timeout time.Duration) []byte {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		r.t.Fatalf("read response size: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, frame); err != nil {
		r.t.Fatalf("read response: %v", err)
	}
	return frame
}

// fetchRaw sends a fetch and decodes the answer with kmsg.
func (r *fetchConn) fetchRaw(req *kmsg.FetchRequest, timeout time.Duration) *kmsg.FetchResponse {
	r.t.Helper()
	corr := r.send(req)
	return decodeFetchFrame(r.t, req.Version, corr, r.recv(timeout))
}

func decodeFetchFrame(t testing.TB, version int16, corr int32, frame []byte) *kmsg.FetchResponse {
	t.Helper()
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if version >= 12 {
		if body[0] != 0 {
			t.Fatalf("response header tags: %d", body[0])
		}
		body = body[1:]
	}
	resp := &kmsg.FetchResponse{Version: version}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("v%d: kmsg cannot decode the response: %v", version, err)
	}
	return resp
}

// fetchReq is a fetch request of the given version for one topic.
func fetchReq(version int16, topic string, id [16]byte, parts ...kmsg.FetchRequestTopicPartition) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxBytes = 50 << 20
	if version >= 7 {
		req.SessionEpoch = -1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rt.Partitions = parts
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchPartReq(p int32, offset int64, maxBytes int32) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, maxBytes
	return rp
}

// fetchTestTopic creates topic with the given partitions and produces
// batches of 3 records of 300 bytes into each partition in data: several
// batches, so that limits can cut between and inside them.
func fetchTestTopic(t testing.TB, b *testBroker, topic string, partitions int32, batches map[int32]int) [16]byte {
	t.Helper()
	e2eCreateTopic(t, b, topic, partitions, nil)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for p, n := range batches {
		for i := range n {
			var rs []*kgo.Record
			for j := range 3 {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: e2eValue(p, 3*i+j, 300)})
			}
			// One ProduceSync per three records makes one batch.
			if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	info, ok := b.Engine.Topic(topic)
	if !ok {
		t.Fatalf("topic %s missing", topic)
	}
	return info.ID
}

// expectedFetch builds, with kmsg, the response the broker must send for
// req: Kafka's read rules restated (request order; the response-level limit
// shared; partition limits; the first batch of the first partition with data
// whole, KIP-74), with the records read into memory from the engine's
// regions.
func expectedFetch(t testing.TB, e *engine.Core, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	resp := &kmsg.FetchResponse{Version: req.Version}
	resp.Default()
	limit := int64(req.MaxBytes)
	minOne := true
	iso := engine.Isolation(req.IsolationLevel)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name, known := rt.Topic, true
		if req.Version >= 13 {
			info, ok := e.TopicByID(rt.TopicID)
			name, known = info.Name, ok
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{}
			if req.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			tp := engine.TP{Topic: name, Partition: rp.Partition}
			if !known {
				sp.ErrorCode = kerr.UnknownTopicID.Code
			} else if _, err := e.State(tp); err != nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				res, err := e.Read(tp, rp.FetchOffset, min(int64(rp.PartitionMaxBytes), limit), minOne, iso)
				if err != nil {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code // offsets stay -1
				} else {
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.State.HW, res.State.LSO, res.State.LogStartOffset
					for _, a := range res.Aborted {
						sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
					}
					for _, rg := range res.Regions {
						b := make([]byte, rg.Len)
						if err := rg.ReadAt(b); err != nil {
							t.Fatal(err)
						}
						sp.RecordBatches = append(sp.RecordBatches, b...)
					}
					if res.Bytes > 0 {
						minOne = false
						limit = max(limit-res.Bytes, 0)
					}
					res.Release()
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// TestFetchFramingMatchesKmsg sends fetches of every version and compares
// the hand-framed response, byte for byte, with kmsg's encoding of the same
// logical response (records read into memory). The requests cover both
// isolation levels, the response and partition limits cutting inside
// batches, the KIP-74 first batch, an empty partition, offsets out of
// range, an unknown partition and an unknown topic (by name and by id).
func TestFetchFramingMatchesKmsg(t *testing.T) {
	if v := (&kmsg.FetchRequest{}).MaxVersion(); v != kafka.FetchVersionMax {
		t.Fatalf("kmsg knows Fetch v%d; this broker frames up to v%d: check the new layout in fetch_frame.go, then raise kafka.FetchVersionMax", v, kafka.FetchVersionMax)
	}
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		id := fetchTestTopic(t, b, "frame", 3, map[int32]int{0: 6, 1: 4})
		rc := dialFetch(t, b.Addr)
		shapes := []struct {
			name     string
			maxBytes int32
			parts    []kmsg.FetchRequestTopicPartition
		}{
			{"limits cut inside batches", 3500, []kmsg.FetchRequestTopicPartition{
				fetchPartReq(0, 4, 2000), // from inside the second batch
				fetchPartReq(1, 0, 1<<20),
				fetchPartReq(2, 0, 1<<20), // empty partition
				fetchPartReq(7, 0, 1<<20), // no such partition
			}},
			{"KIP-74 first batch whole", 100, []kmsg.FetchRequestTopicPartition{
				fetchPartReq(2, 0, 10),
				fetchPartReq(0, 0, 10),
				fetchPartReq(1, 0, 10),
			}},
			{"out of range", 1 << 20, []kmsg.FetchRequestTopicPartition{
				fetchPartReq(1, 0, 1<<20),
				fetchPartReq(0, 1000, 1<<20),
				fetchPartReq(2, 1, 1<<20),
				fetchPartReq(1, -5, 1<<20),
			}},
		}
		for v := int16(kafka.FetchVersionMin); v <= kafka.FetchVersionMax; v++ {
			for si, sh := range shapes {
				req := fetchReq(v, "frame", id, sh.parts...)
				req.MaxBytes = sh.maxBytes
				req.IsolationLevel = int8((int(v) + si) % 2)
				other := kmsg.NewFetchRequestTopic()
				other.Topic = "no-such-topic"
				other.TopicID = [16]byte{1, 2, 3}
				other.Partitions = []kmsg.FetchRequestTopicPartition{fetchPartReq(0, 0, 1000)}
				req.Topics = append(req.Topics, other)

				corr := rc.send(req)
				got := rc.recv(10 * time.Second)
				want := kafka.AppendFetchFrame(corr, expectedFetch(t, b.Engine, req))
				if !bytes.Equal(got, want) {
					i := 0
					for i < len(got) && i < len(want) && got[i] == want[i] {
						i++
					}
					t.Fatalf("v%d %s: %d bytes differ from kmsg's %d at byte %d\n got %x\nwant %x",
						v, sh.name, len(got), len(want), i, got[i:min(i+32, len(got))], want[i:min(i+32, len(want))])
				}
				if sh.name == "limits cut inside batches" && len(got) < 3500 {
					t.Fatalf("v%d: %d-byte response: the test data is smaller than the limits it means to cut", v, len(got))
				}
			}
		}
	})
}

// TestFetchErrors covers the answers that do not depend on the log's
// content: fetch sessions (KIP-227), replica fetches, leader epochs
// (KIP-320), unknown topics by name and id, and out-of-range offsets with
// the offsets the client can reset from.
func TestFetchErrors(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	id := fetchTestTopic(t, b, "errs", 2, map[int32]int{0: 2})
	rc := dialFetch(t, b.Addr)
	partErr := func(resp *kmsg.FetchResponse) int16 {
		t.Helper()
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("unexpected response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	for _, v := range []int16{7, 12, 18} {
		// An incremental fetch in a session this broker never gave out.
		req := fetchReq(v, "errs", id, fetchPartReq(0, 0, 1<<20))
		req.SessionID, req.SessionEpoch = 123, 1
		resp := rc.fetchRaw(req, 5*time.Second)
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 || resp.SessionID != 0 {
			t.Fatalf("v%d incremental fetch: error %d, %d topics, session %d", v, resp.ErrorCode, len(resp.Topics), resp.SessionID)
		}
		req.SessionID, req.SessionEpoch = 0, 3
		if resp := rc.fetchRaw(req, 5*time.Second); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d epoch 3 without a session: error %d", v, resp.ErrorCode)
		}
		// Opening a session (epoch 0) or closing one (epoch -1) is a full
		// fetch, whatever session it names; epoch 0 opens one (a session
		// id), -1 does not (0).
		for _, ep := range []int32{0, -1} {
			req.SessionID, req.SessionEpoch = 55, ep
			resp := rc.fetchRaw(req, 5*time.Second)
			if code := partErr(resp); code != 0 || (resp.SessionID != 0) != (ep == 0) || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
				t.Fatalf("v%d session epoch %d: error %d, session %d, %d record bytes", v, ep, code, resp.SessionID, len(resp.Topics[0].Partitions[0].RecordBatches))
			}
		}
	}

	// Replica fetches are refused until replication exists.
	for _, v := range []int16{4, 14, 15, 18} {
		req := fetchReq(v, "errs", id, fetchPartReq(0, 0, 1<<20))
		if v >= 15 {
			req.ReplicaState.ID = 2
		} else {
			req.ReplicaID = 2
		}
		if code := partErr(rc.fetchRaw(req, 5*time.Second)); code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d replica fetch: error %d", v, code)
		}
	}

	// Leader epochs: the partition is at epoch 0.
	for _, c := range []struct {
		epoch int32
		want  int16
	}{{-1, 0}, {0, 0}, {1, kerr.UnknownLeaderEpoch.Code}} {
		rp := fetchPartReq(0, 0, 1<<20)
		rp.CurrentLeaderEpoch = c.epoch
		if code := partErr(rc.fetchRaw(fetchReq(11, "errs", id, rp), 5*time.Second)); code != c.want {
			t.Fatalf("current leader epoch %d: error %d, want %d", c.epoch, code, c.want)
		}
	}

	// Unknown topics: by name up to v12, by id from v13.
	if code := partErr(rc.fetchRaw(fetchReq(12, "nope", [16]byte{}, fetchPartReq(0, 0, 100)), 5*time.Second)); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic name: error %d", code)
	}
	if code := partErr(rc.fetchRaw(fetchReq(13, "", [16]byte{7}, fetchPartReq(0, 0, 100)), 5*time.Second)); code != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: error %d", code)
	}
	if code := partErr(rc.fetchRaw(fetchReq(13, "", id, fetchPartReq(5, 0, 100)), 5*time.Second)); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition of a known id: error %d", code)
	}

	// Out of range, above the end and below the log start: the offsets are
	// -1, as Kafka answers a consumer (it resets with ListOffsets).
	if _, err := b.Engine.DeleteRecords(engine.TP{Topic: "errs", Partition: 0}, 3); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{7, 100, 0, 2} {
		resp := rc.fetchRaw(fetchReq(18, "", id, fetchPartReq(0, off, 100)), 5*time.Second)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 || p.LastStableOffset != -1 || p.LogStartOffset != -1 {
			t.Fatalf("offset %d: error %d, high watermark %d, last stable offset %d, log start %d",
				off, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
		}
	}
	// At the high watermark: nothing yet, not an error.
	resp := rc.fetchRaw(fetchReq(18, "", id, fetchPartReq(0, 6, 100)), 5*time.Second)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 6 {
		t.Fatalf("at the high watermark: error %d, %d bytes, high watermark %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
}

// TestFetchMinBytesWaits checks min_bytes and max_wait_ms: a fetch waits
// while fewer bytes than min_bytes are there, is answered as soon as
// appends bring enough, and is answered with what there is when max_wait_ms
// runs out.
func TestFetchMinBytesWaits(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	id := fetchTestTopic(t, b, "minb", 2, map[int32]int{0: 1})
	rc := dialFetch(t, b.Addr)
	st, _ := b.Engine.State(engine.TP{Topic: "minb", Partition: 0})

	// Enough only after two more batches (one batch is about 1 KB).
	req := fetchReq(18, "", id, fetchPartReq(0, st.HW, 1<<20), fetchPartReq(1, 0, 1<<20))
	req.MinBytes, req.MaxWaitMillis = 1500, 60_000
	corr := rc.send(req)
	waitLongPolls(t, b, 1)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce := func(p int32) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "minb", Partition: p, Value: make([]byte, 1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(1)
	// One batch is not enough: the fetch still waits.
	time.Sleep(50 * time.Millisecond)
	if n := kafka.LongPolls(b.Server); n != 1 {
		t.Fatalf("after one append: %d fetches waiting, want 1", n)
	}
	produce(0)
	resp := decodeFetchFrame(t, 18, corr, rc.recv(30*time.Second))
	var total int
	for _, p := range resp.Topics[0].Partitions {
		total += len(p.RecordBatches)
	}
	if total < 1500 {
		t.Fatalf("answered with %d bytes, min_bytes 1500", total)
	}

	// max_wait_ms runs out: answered with what there is.
	req = fetchReq(18, "", id, fetchPartReq(1, 1, 1<<20))
	req.MinBytes, req.MaxWaitMillis = 1<<20, 200
	start := time.Now()
	resp = rc.fetchRaw(req, 30*time.Second)
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("answered after %v, before max_wait_ms 200 ms, without min_bytes", waited)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("after max_wait_ms: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

func waitLongPolls(t testing.TB, b *testBroker, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for kafka.LongPolls(b.Server) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d fetches waiting, want %d", kafka.LongPolls(b.Server), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestFetchLongPollEnds checks that a long poll ends when its connection
// closes (nothing left behind) and when the broker stops long polls
// (answered at once, not after max_wait_ms).
func TestFetchLongPollEnds(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	id := fetchTestTopic(t, b, "ends", 1, nil)
	req := fetchReq(18, "", id, fetchPartReq(0, 0, 1<<20))
	req.MinBytes, req.MaxWaitMillis = 1, 600_000

	gone := dialFetch(t, b.Addr)
	gone.send(req)
	waitLongPolls(t, b, 1)
	gone.c.Close()
	waitLongPolls(t, b, 0)

	rc := dialFetch(t, b.Addr)
	corr := rc.send(req)
	waitLongPolls(t, b, 1)
	b.Server.StopLongPolls()
	resp := decodeFetchFrame(t, 18, corr, rc.recv(30*time.Second))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("error %d", p.ErrorCode)
	}
	// Later fetches do not wait at all.
	if resp := rc.fetchRaw(req, 30*time.Second); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("fetch after StopLongPolls failed")
	}
	waitLongPolls(t, b, 0)
}

// TestFetchReleasesReads checks that every read's segment pin is released,
// including for responses whose connection dies before they are sent: after
// the topic is deleted, no descriptor of its files may stay open.
func TestFetchReleasesReads(t *testing.T) {
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		const topic = "leakcheck"
		e2eCreateTopic(t, b, topic, 2, nil)
		cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
		e2eProduce(t, cl, topic, 2, 0, 100, 30_000) // 3 MB per partition
		info, _ := b.Engine.Topic(topic)

		// Whole responses, read by the client.
		rc := dialFetch(t, b.Addr)
		for range 3 {
			rc.fetchRaw(fetchReq(18, "", info.ID, fetchPartReq(0, 0, 8<<20), fetchPartReq(1, 0, 8<<20)), 30*time.Second)
		}
		// Responses larger than the socket buffers, their client gone
		// before reading: dropped mid-send.
		for range 4 {
			c := dialFetch(t, b.Addr)
			c.send(fetchReq(18, "", info.ID, fetchPartReq(0, 0, 8<<20), fetchPartReq(1, 0, 8<<20)))
			c.send(fetchReq(18, "", info.ID, fetchPartReq(0, 0, 8<<20)))
			time.Sleep(20 * time.Millisecond)
			c.c.Close()
		}
		// A long poll whose client leaves.
		c := dialFetch(t, b.Addr)
		lp := fetchReq(18, "", info.ID, fetchPartReq(0, 100, 8<<20))
		lp.MinBytes, lp.MaxWaitMillis = 1, 600_000
		c.send(lp)
		waitLongPolls(t, b, 1)
		c.c.Close()
		waitLongPolls(t, b, 0)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := b.admin().DeleteTopics(ctx, topic); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			open := fetchOpenFiles(t, b.dir, topic)
			if len(open) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("files of the deleted topic still open (a fetch read never released): %v", open)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// fetchOpenFiles lists this process's open descriptors on files of topic's
// partitions under dir (Linux /proc).
func fetchOpenFiles(t testing.TB, dir, topic string) []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var open []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.Contains(target, topic+"-") {
			open = append(open, target)
		}
	}
	return open
}

// TestFetchMaxBytesBroker: a consumer asking for 2 GiB gets at most the
// broker's fetch.max.bytes (past the first batch, KIP-74), as Kafka caps
// it: a response too large to frame would close the connection and the
// client would ask again for ever.
func TestFetchMaxBytesBroker(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.FetchMaxBytes = 4000 }})
	id := fetchTestTopic(t, b, "capped", 1, map[int32]int{0: 20})
	rc := dialFetch(t, b.Addr)
	req := fetchReq(18, "", id, fetchPartReq(0, 0, math.MaxInt32))
	req.MaxBytes = math.MaxInt32
	resp := rc.fetchRaw(req, 30*time.Second)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || len(p.RecordBatches) > 4000+2000 {
		t.Fatalf("error %d, %d bytes of records, want at most fetch.max.bytes (4000) and one batch", p.ErrorCode, len(p.RecordBatches))
	}
}
