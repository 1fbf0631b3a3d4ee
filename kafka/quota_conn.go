package kafka

import (
	"net/netip"
	"sync"
	"time"

	"ringlog/netpoll"
)

// Connection creation rates (KIP-612), as Kafka's ConnectionQuotas
// applies them at accept:
//
//   - max.connection.creation.rate, for the whole broker: every connection
//     accepted counts, and when the rate goes over, the acceptor waits
//     until it is back within it (at most one quota window) before it
//     goes on; the connections behind wait in the kernel's backlog. The
//     inter-broker listener is exempt when there are others (Kafka's
//     protected listener).
//   - connection_creation_rate, a client quota of the ip entity (an
//     address's own, else the default ip entity's): a connection that
//     takes its address over it is not served, and is closed after the
//     throttle time (at most one window), and counts in neither rate.
//
// Both rates are Kafka's Rate over quota.window.num windows of
// quota.window.size.seconds, like the client quotas.

// connQuotas is the broker's connection rates, shared by its listeners.
type connQuotas struct {
	q          *quotas
	img        func() *quotaIndex // nil: the image holds no quota
	brokerRate float64            // max.connection.creation.rate; 0: none

	mu     sync.Mutex
	broker *quotaSensor
	ips    map[netip.Addr]*quotaSensor
}

// connLimiter is one listener's view: protected skips the broker rate.
type connLimiter struct {
	c         *connQuotas
	protected bool
}

// ConnLimiters returns netpoll ConnLimiters for the broker's listeners
// that share brokerRate (max.connection.creation.rate; 0 or less: none)
// and the IP quotas of the metadata image: the first for the listeners
// the broker rate applies to, the second for the inter-broker listener
// when there are others (exempt from it, as in Kafka).
func (s *Server) ConnLimiters(brokerRate float64) (netpoll.ConnLimiter, netpoll.ConnLimiter) {
	c := &connQuotas{q: s.quotas, brokerRate: max(brokerRate, 0), ips: map[netip.Addr]*quotaSensor{}}
	c.img = func() *quotaIndex {
		img := s.cfg.Node.Image()
		if !img.HasQuotas() {
			return nil
		}
		return s.quotas.indexOf(img)
	}
	return &connLimiter{c: c}, &connLimiter{c: c, protected: true}
}

// Pace records the connection against the broker's rate and returns how
// long the acceptor waits (Kafka's waitForConnectionSlot).
func (l *connLimiter) Pace() time.Duration {
	c := l.c
	if l.protected || c.brokerRate <= 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broker == nil {
		c.broker = c.q.newQuotaSensor()
	}
	return min(c.broker.record(netpoll.Now(), 1, c.brokerRate), c.q.window)
}

// Throttle records the connection against its address's rate, and when
// that goes over, takes it back from both rates and returns how long to
// hold the connection before closing it (Kafka's
// recordIpConnectionMaybeThrottle).
func (l *connLimiter) Throttle(ip netip.Addr) time.Duration {
	c := l.c
	x := c.img()
	if x == nil {
		return 0
	}
	rate, ok := x.ipRates[ip]
	if !ok {
		rate = x.ipDefault
	}
	if rate <= 0 {
		return 0
	}
	now := netpoll.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.ips[ip]
	if s == nil {
		if len(c.ips) >= quotaSensorsMax {
			clear(c.ips) // addresses that came once start afresh
		}
		s = c.q.newQuotaSensor()
		c.ips[ip] = s
	}
	d := min(s.record(now, 1, rate), c.q.window)
	if d <= 0 {
		return 0
	}
	s.unrecord(now, 1)
	if c.broker != nil && !l.protected {
		c.broker.unrecord(now, 1)
	}
	return d
}
