package kafka

import (
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/rate"
	"ringlog/netpoll"
	"ringlog/replication/controller"
)

// Client quotas (KIP-13, KIP-55, KIP-219): the byte rates the quorum's
// client quotas set (AlterClientQuotas) are measured per client over
// quota.window.num windows of quota.window.size.seconds, as Kafka's
// ClientQuotaManager does. A request that takes a client past its quota
// is answered with throttle_time_ms, and its connection is muted for that
// long (netpoll's Conn.Mute): the client's next requests wait in its
// socket, the answers already owed still go out in order.
//
// Which quota applies to a client is Kafka's precedence (KIP-55): the
// first of (user, client id), (user, default client id), (user),
// (default user, client id), (default user, default client id), (default
// user), (client id), (default client id) that sets the key. The clients
// it covers share one measurement: the named parts of that entity with
// the client's user and client id put in for the defaults (a default
// user's quota is measured per user).

// quotaKind is what a quota measures.
type quotaKind uint8

const (
	quotaProduce  quotaKind = iota // producer_byte_rate: bytes of records produced
	quotaFetch                     // consumer_byte_rate: bytes of records fetched
	quotaRequest                   // request_percentage: request time, in percent of a second (KIP-124)
	quotaMutation                  // controller_mutation_rate: partitions created or deleted (KIP-599; quota_mutation.go)
	quotaKinds
)

var quotaKeys = [quotaKinds]string{
	controller.QuotaProducerByteRate, controller.QuotaConsumerByteRate,
	controller.QuotaRequestPercentage, controller.QuotaControllerMutationRate,
}

func (k quotaKind) key() string { return quotaKeys[k] }

// Defaults of quota.window.num and quota.window.size.seconds.
const (
	QuotaWindowNumDefault  = 11
	QuotaWindowSizeDefault = time.Second
)

// quotaSensorsMax bounds the measurements kept: clients that vanish leave
// theirs behind (evictLocked).
const quotaSensorsMax = 100000

// quotas holds the measurements.
type quotas struct {
	num    int
	window time.Duration

	mu      sync.Mutex
	sensors map[quotaSensorKey]*quotaSensor
	buckets map[string]*tokenBucket // controller_mutation_rate's (quota_mutation.go)

	index atomic.Pointer[quotaIndex] // what the last image looked at sets (indexOf)
}

type quotaSensorKey struct {
	kind   quotaKind
	entity string // the measured entity, controller.QuotaEntity.Key's form
}

// quotaSensor is one measurement: its value per window, in a ring indexed by
// the window's number since netpoll's epoch.
type quotaSensor struct {
	windows *rate.Windows
}

func newQuotas(num int, window time.Duration) *quotas {
	if num < 2 {
		num = QuotaWindowNumDefault
	}
	if window <= 0 {
		window = QuotaWindowSizeDefault
	}
	return &quotas{num: num, window: window, sensors: map[quotaSensorKey]*quotaSensor{}, buckets: map[string]*tokenBucket{}}
}

// quotaIndex is what an image's quotas set, found once per image: which
// keys some entity sets (a request no quota of its kind can apply to is
// not measured, and costs no entity lookup), and the IP connection rates
// (quota_conn.go).
type quotaIndex struct {
	img       *controller.Image
	keys      [quotaKinds]bool
	ipRates   map[netip.Addr]float64 // connection_creation_rate by IP
	ipDefault float64                // the default IP entity's; 0: none
}

// indexOf returns img's index, building it when img is not the image
// the last one was built from (images change with every metadata
// change; building costs one pass over the quotas).
func (q *quotas) indexOf(img *controller.Image) *quotaIndex {
	if x := q.index.Load(); x != nil && x.img == img {
		return x
	}
	// Two requests meeting a new image may both build its index: the
	// same one, and the last stored wins.
	x := &quotaIndex{img: img}
	for _, qt := range img.Quotas() {
		for k := range quotaKinds {
			if _, ok := qt.Values[k.key()]; ok {
				x.keys[k] = true
			}
		}
		rate, ok := qt.Values[controller.QuotaConnectionCreationRate]
		if !ok || len(qt.Entity) != 1 || qt.Entity[0].Type != controller.QuotaIP {
			continue
		}
		if n := qt.Entity[0].Name; n == nil {
			x.ipDefault = rate
		} else if ip, err := netip.ParseAddr(*n); err == nil {
			if x.ipRates == nil {
				x.ipRates = map[netip.Addr]float64{}
			}
			x.ipRates[ip.Unmap()] = rate
		}
	}
	q.index.Store(x)
	return x
}

// sets reports whether some quota of img has kind's key.
func (q *quotas) sets(img *controller.Image, kind quotaKind) bool {
	return img.HasQuotas() && q.indexOf(img).keys[kind]
}

// record adds value (bytes, or request time in percent-seconds) to the
// measurement of the client's quota of kind and returns how long the
// client must be throttled (0: within its quota, or no quota applies).
// Without a quota of kind in the image it returns at once; with one,
// finding the client's quota builds entity keys (allocations).
func (q *quotas) record(img *controller.Image, kind quotaKind, user, clientID string, value float64) time.Duration {
	if !q.sets(img, kind) {
		return 0
	}
	bound, entity, ok := resolveQuota(img, kind.key(), user, clientID)
	if !ok {
		return 0
	}
	now := netpoll.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	k := quotaSensorKey{kind, entity}
	s := q.sensors[k]
	if s == nil {
		if len(q.sensors) >= quotaSensorsMax {
			q.evictLocked()
		}
		s = q.newQuotaSensor()
		q.sensors[k] = s
	}
	d := s.record(now, value, bound)
	if kind == quotaRequest {
		// ClientRequestQuotaManager's maxThrottleTimeMs: one window.
		return min(d, q.window)
	}
	return d
}

// newQuotaSensor is a measurement over the quotas' windows.
func (q *quotas) newQuotaSensor() *quotaSensor {
	return &quotaSensor{windows: rate.New(q.num, q.window)}
}

// record adds value to the window of now and returns how long the
// client must wait for the rate over the windows to fall back to bound
// (0: within it), at most the span of the windows.
func (s *quotaSensor) record(now int64, value, bound float64) time.Duration {
	s.windows.Record(now, value)
	// The rate over the windows still in the ring, over at least all
	// but one window's length (Kafka's Rate.windowSize): a first burst
	// is measured over the whole span, not over the moment it took.
	r, elapsed := s.windows.Rate(now, time.Duration(s.windows.Num()-1)*s.windows.Size())
	// Kafka's ClientQuotaManager.throttleTime: long enough that the rate
	// over the span falls back to the bound, at most the whole span.
	d := s.windows.ThrottleTime(r, bound, elapsed)
	if d < time.Millisecond {
		return 0 // throttle_time_ms cannot say less
	}
	return d
}

// unrecord takes value back, in the window of now (a connection
// refused), as Kafka records a negative value.
func (s *quotaSensor) unrecord(now int64, value float64) {
	s.windows.Record(now, -value)
}

// evictLocked drops a tenth of the measurements, the first the map's
// order gives: a client measured again starts afresh, within its quota.
func (q *quotas) evictLocked() {
	n := len(q.sensors) / 10
	for k := range q.sensors {
		if n <= 0 {
			break
		}
		delete(q.sensors, k)
		n--
	}
}

// resolveQuota finds the quota of key that applies to (user, clientID)
// by Kafka's precedence, and the entity its measurement is kept under.
func resolveQuota(img *controller.Image, key, user, clientID string) (bound float64, entity string, ok bool) {
	u, c := &user, &clientID
	type cand struct{ user, client *string } // nil: the part is absent
	var def = new(string)                    // marks a default part
	for _, cd := range [...]cand{
		{u, c}, {u, def}, {u, nil}, {def, c}, {def, def}, {def, nil}, {nil, c}, {nil, def},
	} {
		var ent controller.QuotaEntity
		if cd.client != nil {
			p := controller.QuotaEntityPart{Type: controller.QuotaClientID}
			if cd.client != def {
				p.Name = cd.client
			}
			ent = append(ent, p)
		}
		if cd.user != nil {
			p := controller.QuotaEntityPart{Type: controller.QuotaUser}
			if cd.user != def {
				p.Name = cd.user
			}
			ent = append(ent, p)
		}
		values, found := img.Quota(ent)
		if !found {
			continue
		}
		v, set := values[key]
		if !set {
			continue
		}
		// Measured per named client: the defaults take the client's names.
		for i := range ent {
			if ent[i].Type == controller.QuotaUser {
				ent[i].Name = u
			} else {
				ent[i].Name = c
			}
		}
		return v, ent.Key(), true
	}
	return 0, "", false
}

// quotaUser is the user name quotas know a principal by: its name
// without the "User:" type.
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// throttle records bytes against the request's client's quota of kind
// and, when it is over, mutes the connection and returns for how long
// (the response's throttle_time_ms).
func (s *Server) throttle(cx *reqCtx, kind quotaKind, bytes int64) time.Duration {
	user := quotaUser(anonymous)
	if cx.session != nil {
		user = quotaUser(cx.session.Principal())
	}
	d := s.quotas.record(s.cfg.Node.Image(), kind, user, cx.clientID, float64(bytes))
	if d > 0 && cx.c != nil {
		cx.c.Mute(d)
	}
	return d
}

// requestQuotaExempt reports whether a request is outside the request
// quota, as Kafka exempts them: inter-broker requests (a follower's fetch,
// checked by the fetch itself; WriteTxnMarkers, a CLUSTER_ACTION), and
// the SASL exchange, which Kafka's authenticator answers before a
// request handler sees the connection.
func requestQuotaExempt(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.WriteTxnMarkers, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// throttleRequest records the request's time against the client's
// request_percentage quota (KIP-124) and, when it is over, mutes the
// connection and returns for how long. The request's time is its frame
// whole to now, less its waits on others (ARCHITECTURE.md, "Client
// quotas": the decoding on the network goroutine and the handler's own
// time, as Kafka counts network and request handler thread time), in
// percent of one second: a quota of 100 is one thread's whole time.
func (s *Server) throttleRequest(cx *reqCtx) time.Duration {
	if s.cfg.Node == nil || requestQuotaExempt(cx.key) {
		return 0
	}
	img := s.cfg.Node.Image()
	if !s.quotas.sets(img, quotaRequest) {
		return 0
	}
	t := &cx.times
	end := now()
	local := end - t.received - t.remote
	if t.parkedAt != 0 {
		local -= end - t.parkedAt
	}
	user := quotaUser(anonymous)
	if cx.session != nil {
		user = quotaUser(cx.session.Principal())
	}
	pct := float64(max(local, 0)) * 100 / float64(time.Second)
	d := s.quotas.record(img, quotaRequest, user, cx.clientID, pct)
	if d > 0 && cx.c != nil {
		cx.c.Mute(d)
	}
	return d
}

// parkingTimed reports whether waits on others must be timed even without
// request metrics: a request quota measures a request's time less them.
func (s *Server) parkingTimed() bool {
	return s.cfg.Metrics != nil || (s.cfg.Node != nil && s.quotas.sets(s.cfg.Node.Image(), quotaRequest))
}
