package kafka

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	fsasl "github.com/twmb/franz-go/pkg/sasl"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/engine/txn"
	"ringlog/replication/node"
)

// MarkerSender is the transaction coordinator's MarkerWriter (Kafka's
// TransactionMarkerChannelManager): it writes the markers of a transaction
// to the leader of each partition, as the metadata this broker applied
// names them. Partitions this broker leads are written through the engine
// directly; the others go to their leaders in one WriteTxnMarkers request
// per broker, over the inter-broker listener with this broker's client
// side of it (TLS and SASL as the listener needs), through a franz-go
// client per peer.
type MarkerSender struct {
	cfg MarkerSenderConfig
	// ctx ends at Close: round trips in flight end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	peers   map[int32]*markerPeer
	closed  bool
	pending sync.WaitGroup
}

// MarkerSenderConfig is what a MarkerSender needs.
type MarkerSenderConfig struct {
	Engine *engine.Core
	Node   *node.Node
	// Groups settles pending transactional offset commits when a marker
	// lands on a partition of __consumer_offsets this broker leads.
	Groups *group.Coordinator
	// TLS, or TLSFor per host (which wins), is the client side of a TLS
	// inter-broker listener; SASL its mechanism when it authenticates.
	TLS    *tls.Config
	TLSFor func(host string) *tls.Config
	SASL   fsasl.Mechanism
	// Timeout bounds one WriteTxnMarkers round trip (the markers are sent
	// again after it); 30 s, Kafka's request.timeout.ms.
	Timeout time.Duration
	Logger  *slog.Logger
}

type markerPeer struct {
	addr string
	cl   *kgo.Client
}

// NewMarkerSender returns a sender; Close closes its clients.
func NewMarkerSender(cfg MarkerSenderConfig) *MarkerSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &MarkerSender{cfg: cfg, peers: map[int32]*markerPeer{}, ctx: ctx, cancel: cancel}
}

// Close ends the round trips in flight (their markers are sent again by
// the partition's next coordinator, from its log), waits for the rounds and
// closes the peers' clients.
func (ms *MarkerSender) Close() {
	ms.mu.Lock()
	ms.closed = true
	ms.mu.Unlock()
	ms.cancel()
	ms.pending.Wait()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for id, p := range ms.peers {
		p.cl.Close()
		delete(ms.peers, id)
	}
}

// WriteMarkers implements txn.MarkerWriter: it returns at once, and done
// is called from a goroutine of the sender's once every partition was
// answered.
func (ms *MarkerSender) WriteMarkers(m txn.Marker, tps []engine.TP, done func(retry []engine.TP, fenced bool)) {
	ms.mu.Lock()
	if ms.closed {
		ms.mu.Unlock()
		go done(tps, false)
		return
	}
	ms.pending.Add(1)
	ms.mu.Unlock()
	go func() {
		defer ms.pending.Done()
		retry, fenced := ms.write(m, tps)
		done(retry, fenced)
	}()
}

// write sends one round and sorts the answers: written (or the topic is
// gone: nothing to end there), to retry, or fenced.
func (ms *MarkerSender) write(m txn.Marker, tps []engine.TP) (retry []engine.TP, fenced bool) {
	em := engine.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch,
		TransactionVersion: m.TransactionVersion}
	img := ms.cfg.Node.Image()
	self := ms.cfg.Node.NodeID()
	byLeader := map[int32][]engine.TP{}
	var mu sync.Mutex
	codes := map[engine.TP]int16{}
	for _, tp := range tps {
		p, ok := img.Partition(tp.Topic, tp.Partition)
		switch {
		case !ok:
			// Deleted: Kafka's channel manager drops the marker too.
			ms.cfg.Logger.Info("transaction marker for a partition that no longer exists: dropped", "topic", tp.Topic, "partition", tp.Partition, "producer_id", m.ProducerID)
		case p.Leader < 0:
			retry = append(retry, tp)
		default:
			byLeader[p.Leader] = append(byLeader[p.Leader], tp)
		}
	}
	var wg sync.WaitGroup
	for leader, ltps := range byLeader {
		if leader == self {
			wg.Add(len(ltps))
			writeMarkers(ms.cfg.Engine, ms.cfg.Node, ms.cfg.Groups, ltps, em, func(i int, code int16) {
				mu.Lock()
				codes[ltps[i]] = code
				mu.Unlock()
				wg.Done()
			})
			continue
		}
		b, ok := img.Broker(leader)
		if !ok || b.Fenced || b.Addr == "" {
			retry = append(retry, ltps...)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := ms.send(leader, b.Addr, m, ltps)
			mu.Lock()
			for tp, code := range got {
				codes[tp] = code
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for tp, code := range codes {
		switch code {
		case 0:
		case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
			// Kafka's completion handler stops sending for this
			// transaction: a newer producer epoch or coordinator exists.
			fenced = true
		case kerr.UnknownTopicOrPartition.Code:
			if _, ok := ms.cfg.Node.Image().Partition(tp.Topic, tp.Partition); !ok {
				continue // deleted meanwhile
			}
			retry = append(retry, tp)
		default:
			retry = append(retry, tp)
		}
	}
	return retry, fenced
}

// send writes the markers of m for tps to broker id at addr; a failed
// round trip is a retry of every partition.
func (ms *MarkerSender) send(id int32, addr string, m txn.Marker, tps []engine.TP) map[engine.TP]int16 {
	out := make(map[engine.TP]int16, len(tps))
	for _, tp := range tps {
		out[tp] = kerr.NetworkException.Code
	}
	cl, err := ms.peer(id, addr)
	if err != nil {
		ms.cfg.Logger.Warn("transaction markers: no client for the leader", "broker", id, "addr", addr, "err", err)
		return out
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	// v2 (KIP-1228) carries the transaction version; a leader that
	// negotiates v1 checks the marker as transactions v1 do.
	rm.TransactionVersion = int8(m.TransactionVersion)
	for _, tp := range tps {
		if n := len(rm.Topics); n == 0 || rm.Topics[n-1].Topic != tp.Topic {
			rm.Topics = append(rm.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: tp.Topic})
		}
		rt := &rm.Topics[len(rm.Topics)-1]
		rt.Partitions = append(rt.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	ctx, cancel := context.WithTimeout(ms.ctx, ms.cfg.Timeout)
	defer cancel()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return out
	}
	kresp, err := seeds[0].Request(ctx, req)
	if err != nil {
		ms.cfg.Logger.Info("transaction markers: request failed; sent again later", "broker", id, "addr", addr, "err", err)
		return out
	}
	for _, rm := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
		if rm.ProducerID != m.ProducerID {
			continue
		}
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				tp := engine.TP{Topic: rt.Topic, Partition: rp.Partition}
				if _, ok := out[tp]; ok {
					out[tp] = rp.ErrorCode
				}
			}
		}
	}
	return out
}

// peer returns the client for broker id at addr, replacing one made for
// another address (the broker moved).
func (ms *MarkerSender) peer(id int32, addr string) (*kgo.Client, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if p := ms.peers[id]; p != nil {
		if p.addr == addr {
			return p.cl, nil
		}
		p.cl.Close()
		delete(ms.peers, id)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("ringlog-txn-markers"), kgo.RequestRetries(0),
		// The seed is the only broker this client talks to: no metadata
		// is needed, and a short backoff keeps the coordinator's retries
		// its own.
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}
	if ms.cfg.TLS != nil || ms.cfg.TLSFor != nil {
		tlsFor, base := ms.cfg.TLSFor, ms.cfg.TLS
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			h, _, err := net.SplitHostPort(host)
			if err != nil {
				return nil, err
			}
			var tc *tls.Config
			if tlsFor != nil {
				tc = tlsFor(h)
			} else {
				tc = base.Clone()
				if tc.ServerName == "" && !tc.InsecureSkipVerify {
					tc.ServerName = h
				}
			}
			d := &tls.Dialer{Config: tc}
			return d.DialContext(ctx, network, host)
		}))
	}
	if ms.cfg.SASL != nil {
		opts = append(opts, kgo.SASL(ms.cfg.SASL))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ms.peers[id] = &markerPeer{addr: addr, cl: cl}
	return cl, nil
}
