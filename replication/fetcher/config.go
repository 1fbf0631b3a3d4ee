package fetcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"

	"ringlog/engine"
)

// Config configures one Stream. Zero values take the defaults below.
type Config struct {
	// Addr is the leader broker's host:port.
	Addr string
	// ReplicaID is this follower's broker id, sent as the Fetch replica id
	// (ReplicaState.ID from v15, KIP-903) and the OffsetForLeaderEpoch
	// replica id. A leader reads a follower's fetch offset as its LEO.
	// A negative id fetches as a consumer (up to the HW); tests and
	// observers use it. The zero value is broker 0, a valid id.
	ReplicaID int32
	// BrokerEpoch is this broker's registration epoch, sent in
	// ReplicaState.Epoch on v15+ so that the leader can fence a restarted
	// broker's old fetches (KIP-903). -1 when unknown.
	BrokerEpoch int64
	// ClientID names the connection in the leader's logs;
	// "ringlog-replica-<ReplicaID>" when empty.
	ClientID string

	// Slots is the number of Fetch requests that may be in flight on the
	// connection at once; each slot owns a disjoint subset of the
	// partitions. Default 4, at most SlotsMax.
	Slots int
	// WaitMax is the Fetch max_wait_ms of a long poll. Default 500 ms.
	WaitMax time.Duration
	// ResponseBytesMax is the Fetch max_bytes (the response-level limit,
	// KIP-74). Default 10 MiB, Kafka's replica.fetch.response.max.bytes.
	ResponseBytesMax int32
	// PartitionBytesMax is each partition's partition_max_bytes.
	// Default 1 MiB, Kafka's replica.fetch.max.bytes.
	PartitionBytesMax int32
	// FetchVersionMax caps the Fetch version used; the stream uses the
	// highest version both sides support. Default 16, at least 4.
	FetchVersionMax int16
	// FrameBytesMax refuses response frames longer than this.
	// Default 100 MiB.
	FrameBytesMax int
	// IdleRecheck is how long a slot whose last fetch came back empty
	// waits before fetching again while other slots are busy (a long
	// poll cannot be used then; see doc.go). Default 10 ms.
	IdleRecheck time.Duration

	// RetryBackoff is the first delay before a partition that hit a
	// retriable error is fetched again; it doubles up to RetryBackoffMax.
	// Defaults 50 ms and 1 s.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// ReconnectBackoff is the first delay before reconnecting after the
	// connection is lost; it doubles up to ReconnectBackoffMax.
	// Defaults 100 ms and 5 s.
	ReconnectBackoff    time.Duration
	ReconnectBackoffMax time.Duration
	// DialTimeout bounds connecting and the ApiVersions handshake.
	// Default 5 s.
	DialTimeout time.Duration
	// RequestTimeout is how long past max wait a response may take before
	// the connection is declared dead. Default 30 s.
	RequestTimeout time.Duration

	// Dial opens the connection; net.Dialer.DialContext when nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// TLS, when set, runs the connection over TLS: the leader's
	// inter-broker listener is SSL or SASL_SSL. Without a ServerName the
	// leader's certificate must name Addr's host (Kafka's
	// ssl.endpoint.identification.algorithm=https); the configuration's
	// certificate, if any, is presented to a listener that asks for one.
	TLS *tls.Config
	// TLSFor, when set, gives the configuration for one connection to
	// host (Addr's) in place of a clone of TLS, which must be set too: a
	// caller that checks the leader's certificate itself (CAs that change
	// on disk) needs the name dialled, which a VerifyConnection of a
	// shared configuration cannot learn for an IP address (no SNI).
	TLSFor func(host string) *tls.Config
	// Throttle, when set, is the follower's replication throttle
	// (KIP-73): a partition it holds stays out of the fetches while it
	// has not caught up with the leader's high watermark, and the bytes
	// fetched are reported to it.
	Throttle Throttle

	// SASL, when set, authenticates the connection before its first Fetch
	// (SASL_PLAINTEXT, SASL_SSL): SaslHandshake v1 names the mechanism,
	// then SaslAuthenticate carries its messages until it completes.
	// franz-go's client mechanisms (pkg/sasl/plain, pkg/sasl/scram) fit.
	// A refusal is a connection error (ErrAuthentication): the stream
	// reconnects with backoff.
	SASL sasl.Mechanism
}

// Throttle is a follower's replication quota, as Kafka's fetcher threads
// use their ReplicaQuota. Both methods are called with the stream's lock
// held: they must be quick and must not call the stream.
type Throttle interface {
	// Hold returns how long tp stays out of the fetches (0: fetch it):
	// tp is throttled and the follower's rate is over its bound. It is
	// asked only for partitions behind the leader's high watermark.
	Hold(tp engine.TP) time.Duration
	// Record counts the record bytes a fetch brought of tp (throttled
	// or not: the throttle decides what counts), caught up or not.
	Record(tp engine.TP, bytes int)
}

// SlotsMax is the most slots a stream may have. ringlog's broker keeps at
// most 64 requests of a connection in flight; the stream stays well under.
const SlotsMax = 32

const (
	fetchVersionMin = 4 // RecordBatch v2 semantics; ringlog serves v4+
	fetchVersionCap = 16
	// v12 is the last Fetch version that names topics; v13+ uses ids.
	fetchVersionNames = 12
	// OffsetForLeaderEpoch v3 is the first to carry the replica id.
	ofleVersionMin = 3
	ofleVersionMax = 4
	// ApiVersions v3 is flexible and what every current broker serves.
	apiVersionsVersion = 3
	// SaslHandshake v1 has the tokens carried by SaslAuthenticate (v0
	// sends them as bare frames, which only old clients do); SaslAuthenticate
	// v1 is the first to tell the session's lifetime (KIP-368).
	saslHandshakeVersion = 1
	saslAuthVersionMin   = 1
	saslAuthVersionMax   = 2
)

func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		return c, errors.New("fetcher: config: Addr is empty")
	}
	if c.ClientID == "" {
		c.ClientID = fmt.Sprintf("ringlog-replica-%d", c.ReplicaID)
	}
	if c.Slots == 0 {
		c.Slots = 4
	}
	if c.Slots < 1 || c.Slots > SlotsMax {
		return c, fmt.Errorf("fetcher: config: Slots %d outside 1..%d", c.Slots, SlotsMax)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.WaitMax, 500*time.Millisecond)
	def(&c.IdleRecheck, 10*time.Millisecond)
	def(&c.RetryBackoff, 50*time.Millisecond)
	def(&c.RetryBackoffMax, time.Second)
	def(&c.ReconnectBackoff, 100*time.Millisecond)
	def(&c.ReconnectBackoffMax, 5*time.Second)
	def(&c.DialTimeout, 5*time.Second)
	def(&c.RequestTimeout, 30*time.Second)
	if c.ResponseBytesMax <= 0 {
		c.ResponseBytesMax = 10 << 20
	}
	if c.PartitionBytesMax <= 0 {
		c.PartitionBytesMax = 1 << 20
	}
	if c.FrameBytesMax <= 0 {
		c.FrameBytesMax = 100 << 20
	}
	if c.FetchVersionMax == 0 {
		c.FetchVersionMax = fetchVersionCap
	}
	if c.FetchVersionMax < fetchVersionMin {
		return c, fmt.Errorf("fetcher: config: FetchVersionMax %d below %d", c.FetchVersionMax, fetchVersionMin)
	}
	if c.WaitMax > time.Duration(1<<31-1)*time.Millisecond {
		return c, fmt.Errorf("fetcher: config: WaitMax %v too long", c.WaitMax)
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
	return c, nil
}
