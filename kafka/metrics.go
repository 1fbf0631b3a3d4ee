package kafka

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/netpoll"
)

// Metrics are the protocol layer's Prometheus metrics: requests and their
// latency per API, and Kafka's request-time breakdown (RequestMetrics).
//
// The breakdown follows kafka.network:type=RequestMetrics,request=<API>,
// named as the Prometheus JMX exporter renders those beans
// (kafka_network_requestmetrics_totaltimems{request="Produce"}), but as
// Prometheus histograms in milliseconds rather than the exporter's
// quantile summaries. How each part maps onto ringlog's pipeline is in
// ARCHITECTURE.md ("Request metrics: Kafka's names, ringlog's pipeline").
// Every answered request is observed in all six, with 0 for a part it did
// not have (RemoteTime of a request that never parked, ResponseSendTime
// of an acks=0 produce), as Kafka records them; a fetch is observed under
// request="Fetch" and, as in Kafka, under "FetchConsumer" or
// "FetchFollower" too.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	parts    [partCount]*prometheus.HistogramVec
	// byKey holds each API's label-bound observers, resolved on its first
	// request and reused: observing costs no label lookup nor allocation.
	byKey   [maxAPIKey]atomic.Pointer[apiMetrics]
	byFetch [2]atomic.Pointer[apiMetrics] // FetchConsumer, FetchFollower
	mu      sync.Mutex                    // one resolution at a time
	names   [maxAPIKey]string
}

// The parts of a request's time, in Kafka's order.
const (
	partTotal = iota
	partRequestQueue
	partLocal
	partRemote
	partResponseQueue
	partResponseSend
	partCount
)

// partNames are the JMX exporter's renderings of Kafka's RequestMetrics
// names; partHelps say what each measures in ringlog.
var (
	partNames = [partCount]string{
		"totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems",
	}
	partHelps = [partCount]string{
		"Kafka's RequestMetrics TotalTimeMs: from the request's frame whole in the broker (its last byte read) to its response's last byte handed to the kernel (for acks=0, to the answer). Milliseconds, by request (API).",
		"Kafka's RequestQueueTimeMs: from the frame whole to the handler starting on it (header and body decoding, and for blocking APIs the wait for their goroutine to run). Milliseconds.",
		"Kafka's LocalTimeMs: the handler's own time, the engine's work included (a produce's append round), until the answer is known or the request parks. A call parked inside the transaction or group coordinator (engine/txn, engine/group) is counted here: it is not separated. Milliseconds.",
		"Kafka's RemoteTimeMs: time parked waiting on others, and the answer's making after: an acks=all produce waiting for the in-sync replicas, a fetch's max.wait long poll. 0 for requests that never park; coordinator waits are in LocalTime, not here. Milliseconds.",
		"Kafka's ResponseQueueTimeMs: from the answer ready to the connection's writer starting its write (behind earlier responses of the connection, which go in request order). Milliseconds.",
		"Kafka's ResponseSendTimeMs: from the start of the write of the response's first byte to its last byte handed to the kernel (writev, sendfile, or the ring's sendmsg completion). 0 for acks=0. Milliseconds.",
	}
	// msBuckets cover 20 us to 10 s, doubling (0.02 ms .. 10,486 ms).
	msBuckets = prometheus.ExponentialBuckets(0.02, 2, 20)
)

// apiMetrics are one API's observers.
type apiMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
	parts    [partCount]prometheus.Observer
}

// NewMetrics registers the protocol metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ringlog", Name: "requests_total", Help: "Kafka requests answered, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ringlog", Name: "request_seconds", Help: "Time from a request's arrival (its frame whole) to its answer, by API; observed once the response is written (acks=0: at the answer).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
	}
	reg.MustRegister(m.requests, m.latency)
	for i := range m.parts {
		m.parts[i] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kafka", Subsystem: "network", Name: "requestmetrics_" + partNames[i], Help: partHelps[i],
			Buckets: msBuckets,
		}, []string{"request"})
		reg.MustRegister(m.parts[i])
	}
	for k := range m.names {
		m.names[k] = kmsg.NameForKey(int16(k))
	}
	return m
}

// api returns key's observers, resolving them on first use.
func (m *Metrics) api(key int16) *apiMetrics {
	if am := m.byKey[key].Load(); am != nil {
		return am
	}
	return m.resolve(&m.byKey[key], m.names[key])
}

// fetchAs returns the observers of Kafka's second name for a fetch:
// FetchConsumer, or FetchFollower for a follower's (replica id >= 0).
// Kafka observes a fetch under both Fetch and that name.
func (m *Metrics) fetchAs(follower bool) *apiMetrics {
	i, name := 0, "FetchConsumer"
	if follower {
		i, name = 1, "FetchFollower"
	}
	if am := m.byFetch[i].Load(); am != nil {
		return am
	}
	return m.resolve(&m.byFetch[i], name)
}

// resolve binds name's observers once and stores them in slot.
func (m *Metrics) resolve(slot *atomic.Pointer[apiMetrics], name string) *apiMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if am := slot.Load(); am != nil {
		return am
	}
	am := &apiMetrics{requests: m.requests.WithLabelValues(name), latency: m.latency.WithLabelValues(name)}
	for i := range am.parts {
		am.parts[i] = m.parts[i].WithLabelValues(name)
	}
	slot.Store(am)
	return am
}

// answered observes ringlog_request_seconds: a request answered at
// answeredAt, received at received (Now's clock).
func (m *Metrics) answered(key int16, received, answeredAt int64) {
	m.api(key).latency.Observe(time.Duration(answeredAt - received).Seconds())
}

// requestTimes are a request's moments, in netpoll.Now's clock: from
// netpoll (received, and the response's write) and from the handler.
type requestTimes struct {
	received int64 // the frame whole (netpoll.Conn.FrameTime)
	started  int64 // the handler started
	// parkedAt is when the request began waiting on others, while it
	// waits (0: not waiting); remote sums its earlier waits (ns).
	parkedAt int64
	remote   int64
	answered int64 // the answer ready (netpoll's Timing.Replied, or noReply)
	sendFrom int64 // the response's write started (= answered for acks=0)
	sent     int64 // the response's last byte written (= answered for acks=0)
	// fetch says that the request is a fetch to observe under Kafka's
	// second name too: fetchConsumer or fetchFollower.
	fetch uint8
}

const (
	fetchConsumer = 1 + iota
	fetchFollower
)

// breakdown observes Kafka's six parts of a request's time, which add up
// to the total: the queue, the handler's own time (local), its waits on
// others (remote), the response's queue and its send.
func (m *Metrics) breakdown(key int16, t *requestTimes) {
	remote := t.remote
	if t.parkedAt != 0 { // answered from its wait
		remote += t.answered - t.parkedAt
	}
	var d [partCount]int64
	d[partTotal] = t.sent - t.received
	d[partRequestQueue] = t.started - t.received
	d[partLocal] = t.answered - t.started - remote
	d[partRemote] = remote
	d[partResponseQueue] = t.sendFrom - t.answered
	d[partResponseSend] = t.sent - t.sendFrom
	m.api(key).observe(&d)
	if t.fetch != 0 {
		m.fetchAs(t.fetch == fetchFollower).observe(&d)
	}
}

// observe records one request's parts, in milliseconds.
func (am *apiMetrics) observe(d *[partCount]int64) {
	for i, ns := range d {
		am.parts[i].Observe(float64(max(ns, 0)) / 1e6)
	}
}

// now is netpoll's clock, which the request times share.
func now() int64 { return netpoll.Now() }
