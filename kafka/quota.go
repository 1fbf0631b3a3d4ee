package kafka

import (
	"strings"
	"sync"
	"time"

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
	quotaProduce quotaKind = iota // producer_byte_rate: bytes of records produced
	quotaFetch                    // consumer_byte_rate: bytes of records fetched
)

func (k quotaKind) key() string {
	if k == quotaFetch {
		return controller.QuotaConsumerByteRate
	}
	return controller.QuotaProducerByteRate
}

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
}

type quotaSensorKey struct {
	kind   quotaKind
	entity string // the measured entity, controller.QuotaEntity.Key's form
}

// quotaSensor is one measurement: bytes per window, in a ring indexed by
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
	return &quotas{num: num, window: window, sensors: map[quotaSensorKey]*quotaSensor{}}
}

// record adds bytes to the measurement of the client's quota of kind and
// returns how long the client must be throttled (0: within its quota,
// or no quota applies). Without any quota in the image it returns at once;
// with one, finding the client's quota builds entity keys (allocations).
func (q *quotas) record(img *controller.Image, kind quotaKind, user, clientID string, bytes int64) time.Duration {
	if !img.HasQuotas() {
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
		s = &quotaSensor{windows: rate.New(q.num, q.window)}
		q.sensors[k] = s
	}
	s.windows.Record(now, float64(bytes))
	// The rate over the windows still in the ring, over at least all
	// but one window's length (Kafka's Rate.windowSize): a first burst
	// is measured over the whole span, not over the moment it took.
	r, elapsed := s.windows.Rate(now, time.Duration(q.num-1)*q.window)
	// Kafka's ClientQuotaManager.throttleTime: long enough that the rate
	// over the span falls back to the bound, at most the whole span.
	d := s.windows.ThrottleTime(r, bound, elapsed)
	if d < time.Millisecond {
		return 0 // throttle_time_ms cannot say less
	}
	return d
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
	d := s.quotas.record(s.cfg.Node.Image(), kind, user, cx.clientID, bytes)
	if d > 0 && cx.c != nil {
		cx.c.Mute(d)
	}
	return d
}
