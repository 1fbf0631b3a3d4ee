package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringlog/replication/controller"
)

// Controller mutation quotas (KIP-599): CreateTopics, CreatePartitions and
// DeleteTopics take one credit per partition created or deleted from a
// token bucket per client (the quota's entity, by KIP-55's precedence as
// for the other client quotas), refilled at controller_mutation_rate per
// second up to a burst of the rate times controller.quota.window.num
// windows of controller.quota.window.size.seconds (Kafka's TokenBucket).
// The quota is exhausted while the credits are below zero.
//
// A request of a version that knows THROTTLING_QUOTA_EXCEEDED
// (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) is strict:
// a topic is refused with it while the bucket is exhausted, and taken
// otherwise whatever its partitions, so one mutation may take the bucket
// below zero (Kafka's StrictControllerMutationQuota checks before it
// records; a topic larger than the burst could never be made otherwise).
// The refused topic's throttle is how long the bucket needs to get back
// to zero. Older versions are permissive: every topic is taken, and the
// answer is throttled as long as the bucket is below zero. The answer's
// throttle_time_ms is the last throttle found, less the time since
// (Kafka's AbstractControllerMutationQuota.throttleTime), and the
// connection is muted for it.

// Defaults of controller.quota.window.num and
// controller.quota.window.size.seconds.
const (
	ControllerQuotaWindowNumDefault  = 11
	ControllerQuotaWindowSizeDefault = time.Second
)

// tokenBucket is one client's credits: tokens at last (netpoll's clock).
type tokenBucket struct {
	tokens float64
	last   int64
}

// refill adds the credits earned since last, up to burst. A new bucket
// (last 0) starts full, as Kafka's does (its first refill spans the time
// since the epoch).
func (b *tokenBucket) refill(now int64, rate, burst float64) {
	if b.last == 0 {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+rate*time.Duration(now-b.last).Seconds())
	}
	b.last = now
}

// mutationQuota is one request's controller mutation quota.
type mutationQuota struct {
	q      *quotas
	key    string // the bucket's entity; "" when no quota applies
	rate   float64
	burst  float64
	strict bool

	throttle time.Duration // the last throttle found
	at       int64         // when it was found
}

// newMutationQuota finds the controller mutation quota of the request's
// client; strictSince is the API's first version that may be refused
// with THROTTLING_QUOTA_EXCEEDED.
func (s *Server) newMutationQuota(cx *reqCtx, strictSince int16) *mutationQuota {
	m := &mutationQuota{q: s.quotas, strict: cx.version >= strictSince}
	img := s.cfg.Node.Image()
	if !s.quotas.sets(img, quotaMutation) {
		return m
	}
	user := quotaUser(anonymous)
	if cx.session != nil {
		user = quotaUser(cx.session.Principal())
	}
	rate, entity, ok := resolveQuota(img, controller.QuotaControllerMutationRate, user, cx.clientID)
	if !ok {
		return m
	}
	m.key, m.rate = entity, rate
	m.burst = rate * float64(s.cfg.ControllerQuotaWindowNum) * s.cfg.ControllerQuotaWindow.Seconds()
	return m
}

// errThrottled is a topic refused over the quota.
var errThrottled = refuse(kerr.ThrottlingQuotaExceeded, "%s", kerr.ThrottlingQuotaExceeded.Message)

// take takes n partitions' worth of credits, or (strict, and the bucket
// exhausted) refuses with THROTTLING_QUOTA_EXCEEDED and takes none.
func (m *mutationQuota) take(n int) error {
	if m.key == "" {
		return nil
	}
	t := now()
	m.q.mu.Lock()
	defer m.q.mu.Unlock()
	b := m.q.buckets[m.key]
	if b == nil {
		if len(m.q.buckets) >= quotaSensorsMax {
			for k := range m.q.buckets { // a forgotten client starts afresh
				delete(m.q.buckets, k)
				break
			}
		}
		b = &tokenBucket{}
		m.q.buckets[m.key] = b
	}
	b.refill(t, m.rate, m.burst)
	if m.strict && b.tokens < 0 {
		m.found(b.tokens, t)
		return errThrottled
	}
	b.tokens = min(m.burst, b.tokens-float64(n))
	if !m.strict && b.tokens < 0 {
		m.found(b.tokens, t)
	}
	return nil
}

// found keeps the throttle a bucket at tokens calls for: the time its
// refill takes to bring it back to zero (Kafka's
// ControllerMutationQuotaManager.throttleTimeMs).
func (m *mutationQuota) found(tokens float64, t int64) {
	m.throttle = time.Duration(-tokens / m.rate * float64(time.Second)).Round(time.Millisecond)
	m.at = t
}

// give puts back the credits of a mutation the controller refused after
// they were taken: the checks it makes come before the quota's in
// Kafka's controller, so a refused topic takes none there.
func (m *mutationQuota) give(n int) {
	if m.key == "" {
		return
	}
	m.q.mu.Lock()
	defer m.q.mu.Unlock()
	if b := m.q.buckets[m.key]; b != nil {
		b.tokens = min(m.burst, b.tokens+float64(n))
	}
}

// throttleTime is the last throttle found, less the time since; the
// request's connection is muted for it.
func (m *mutationQuota) throttleTime(cx *reqCtx) time.Duration {
	if m.throttle <= 0 {
		return 0
	}
	d := m.throttle - time.Duration(now()-m.at)
	if d < time.Millisecond {
		return 0
	}
	if cx.c != nil {
		cx.c.Mute(d)
	}
	return d
}
