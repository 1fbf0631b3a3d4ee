package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/engine/txn"
	"ringlog/internal/acl"
	"ringlog/internal/kwire"
	"ringlog/netpoll"
	"ringlog/replication/node"
)

// Config describes the broker to its clients.
type Config struct {
	// NodeID, AdvertisedHost and AdvertisedPort are this broker's id and
	// the address it registered with its quorum, which Fetch names in
	// node_endpoints (KIP-951); Rack is broker.rack.
	NodeID         int32
	AdvertisedHost string
	AdvertisedPort int32
	Rack           string
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// AutoCreateMax bounds the topics one Metadata request may create
	// (0: 100); see handleMetadata.
	AutoCreateMax int
	// MaxRequestBytes bounds every request but Produce (whose bound is the
	// frame limit, socket.request.max.bytes): decoding a request allocates
	// a multiple of its size, so requests that carry no data stay small.
	// What decoding a Produce request allocates besides its records (which
	// are not copied) is held to the same bound (checkProduceShape).
	MaxRequestBytes int
	Logger          *slog.Logger
	// Metrics, when set, receives per-API counts and latencies.
	Metrics *Metrics
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots (0:
	// Kafka's 1000; -1: no sessions) and FetchSessionEviction
	// min.incremental.fetch.session.eviction.ms (0: Kafka's 2 minutes).
	FetchSessionSlots    int
	FetchSessionEviction time.Duration
	// FetchMaxBytes is fetch.max.bytes (0: Kafka's 55 MiB) and
	// ReplicaFetchMaxBytes replica.fetch.response.max.bytes (0: 10 MiB):
	// the most a consumer's, or a follower's, Fetch response carries
	// whatever its max_bytes asks (the first batch still goes whole,
	// KIP-74).
	FetchMaxBytes        int32
	ReplicaFetchMaxBytes int32
	// Groups is the group coordinator (engine/group) that the group and
	// offset APIs use; without one they answer COORDINATOR_NOT_AVAILABLE.
	Groups *group.Coordinator
	// Txns is the transaction coordinator (engine/txn) that
	// FindCoordinator for transactions, InitProducerId with a
	// transactional id and the transaction APIs use; without one they
	// answer COORDINATOR_NOT_AVAILABLE.
	Txns *txn.Coordinator
	// Markers reaches the other brokers for transactions: the
	// coordinator's markers, and the verification of transactional
	// produces by a coordinator elsewhere (txn_verify.go). Without one,
	// only a local coordinator is asked.
	Markers *MarkerSender
	// Node is this broker's part in its metadata quorum (replication/
	// node; a single broker is the only voter of a local quorum):
	// metadata, leadership and topic administration come from the
	// controller through it, and followers fetch from this broker.
	// Required: handlers assume it is set. Only a Server that parses
	// requests and never serves them (FuzzRequest) goes without one.
	Node *node.Node
	// SuperUsers is super.users: the principals ("User:<name>") that may
	// fetch as a replica on an inter-broker listener that authenticates
	// its clients (see clusterAction).
	SuperUsers []string
	// Authorizer decides every request's access (ACLs, authz.go); nil:
	// none configured (authorizer.class.name empty), every request is
	// allowed and the ACL APIs answer SECURITY_DISABLED.
	Authorizer *acl.Authorizer
	// QuotaWindowNum and QuotaWindow are quota.window.num and
	// quota.window.size.seconds (0: Kafka's 11 and 1 s).
	QuotaWindowNum int
	QuotaWindow    time.Duration
	// ControllerQuotaWindowNum and ControllerQuotaWindow are
	// controller.quota.window.num and controller.quota.window.size.seconds
	// (0: Kafka's 11 and 1 s): the burst of a controller mutation quota
	// is its rate times their span (quota_mutation.go).
	ControllerQuotaWindowNum int
	ControllerQuotaWindow    time.Duration
}

// Server is the Kafka protocol on top of an engine. It implements
// netpoll.Handler.
type Server struct {
	cfg Config
	eng *engine.Core
	log *slog.Logger

	plaintext    *handler // Serve's listener: PLAINTEXT and inter-broker
	superUsers   map[string]bool
	inflightSync atomic.Int64   // blocking handlers running on their own goroutines
	waits        fetchWaits     // long-polling fetches (fetch_wait.go)
	sessions     *fetchSessions // incremental fetch sessions (fetch_session.go)
	quotas       *quotas        // client quotas' measurements (quota.go)
	offsetsMu    sync.Mutex     // one creation of __consumer_offsets at a time (offsetsTopic)
}

// NewServer returns the protocol handler for eng. cfg.Node must be set
// for a Server that serves (see Config.Node).
func NewServer(cfg Config, eng *engine.Core) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 8 << 20
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 55 << 20
	}
	if cfg.ReplicaFetchMaxBytes <= 0 {
		cfg.ReplicaFetchMaxBytes = 10 << 20
	}
	if cfg.ControllerQuotaWindowNum <= 0 {
		cfg.ControllerQuotaWindowNum = ControllerQuotaWindowNumDefault
	}
	if cfg.ControllerQuotaWindow <= 0 {
		cfg.ControllerQuotaWindow = ControllerQuotaWindowSizeDefault
	}
	if cfg.AutoCreateMax <= 0 {
		cfg.AutoCreateMax = autoCreateMaxDefault
	}
	s := &Server{cfg: cfg, eng: eng, log: cfg.Logger, superUsers: map[string]bool{},
		sessions: newFetchSessions(cfg.FetchSessionSlots, cfg.FetchSessionEviction),
		quotas:   newQuotas(cfg.QuotaWindowNum, cfg.QuotaWindow)}
	for _, p := range cfg.SuperUsers {
		s.superUsers[p] = true
	}
	s.plaintext = s.Listener(Listener{Name: string(Plaintext), Protocol: Plaintext, InterBroker: true}).(*handler)
	return s
}

// api is one Kafka API: its key, the versions served, and its handler.
// Exactly one of sync and async is set:
//   - sync handlers may block (disk, shards round trips); each runs on its
//     own goroutine and returns the response;
//   - async handlers run on the connection's network goroutine and must
//     not block; they answer through the request context when ready (a
//     produce when its appends are written, a fetch when data arrives or
//     max_wait_ms passes).
type api struct {
	key      kmsg.Key // kmsg.Produce, kmsg.Metadata, ...
	min, max int16
	sync     func(s *Server, cx *reqCtx, req kmsg.Request) kmsg.Response
	async    func(s *Server, cx *reqCtx, req kmsg.Request)
	// bigRequests lets the request reach the frame limit instead of
	// MaxRequestBytes (Produce).
	bigRequests bool
	// check, when set, vets the body before kmsg decodes it, for what
	// decoding would get wrong or too big (see checkProduceShape). Its
	// error must wrap errBadRequest.
	check func(s *Server, version int16, body []byte) error
}

// maxAPIKey bounds the API keys served (Kafka's highest is below 100).
const maxAPIKey = 128

var apis [maxAPIKey]*api

// register adds an API; each API file registers itself in init.
func register(a api) {
	if a.key < 0 || int(a.key) >= len(apis) || apis[a.key] != nil || (a.sync == nil) == (a.async == nil) ||
		kmsg.RequestForKey(int16(a.key)) == nil || a.min < 0 || a.max < a.min || a.max > kmsg.RequestForKey(int16(a.key)).MaxVersion() {
		panic(fmt.Sprintf("kafka: bad registration of API %d", a.key))
	}
	apis[a.key] = &a
}

// reqCtx is one request in flight: where and how to answer it.
type reqCtx struct {
	s             *Server
	c             *netpoll.Conn
	session       *session // the connection's listener and principal
	seq           uint64
	key, version  int16
	correlationID int32
	clientID      string
	times         requestTimes // for the request metrics (metrics.go)
	answered      atomic.Bool
	onDone        func() // run once the response is written or dropped
}

// header is a request header (v1, or v2 with tagged fields for flexible
// versions).
type header struct {
	key, version  int16
	correlationID int32
	clientID      string
}

var (
	// errBadRequest marks a request the connection cannot survive (Kafka
	// closes it too): malformed header or body, unknown API, unsupported
	// version, a request above its size limit.
	errBadRequest = errors.New("kafka: bad request")
	// errApiVersionsUnsupported is an ApiVersions request of a version this
	// broker does not serve: it is answered (KIP-511), not refused.
	errApiVersionsUnsupported = errors.New("kafka: unsupported ApiVersions version")
)

// Serve serves a connection of a PLAINTEXT listener that is also the
// inter-broker listener: a Server is itself the netpoll.Handler of the
// simplest broker. Listener makes the handler of any other listener.
func (s *Server) Serve(c *netpoll.Conn, seq uint64, frame []byte) {
	s.plaintext.Serve(c, seq, frame)
}

// serve parses and decodes the request and dispatches it. It runs on the
// connection's network goroutine, in request order for the connection,
// once the listener's handler admitted the frame for the session.
func (s *Server) serve(c *netpoll.Conn, seq uint64, frame []byte, ss *session) {
	h, a, req, err := s.parseRequest(frame)
	if err != nil && !errors.Is(err, errApiVersionsUnsupported) {
		s.log.Debug("closing connection", "remote", c.RemoteAddr(), "err", err)
		c.Close()
		return
	}
	cx := &reqCtx{s: s, c: c, seq: seq, session: ss,
		key: h.key, version: h.version, correlationID: h.correlationID, clientID: h.clientID}
	cx.times.received = c.FrameTime()
	if cx.times.received == 0 { // not served by netpoll (a test's own conn)
		cx.times.received = now()
	}
	if err != nil {
		cx.times.started = now()
		// KIP-511: answer with UNSUPPORTED_VERSION in a v0 body that lists
		// what is supported, so that the client can pick a version.
		cx.version = 0
		cx.reply(apiVersionsResponse(kerr.UnsupportedVersion.Code))
		return
	}
	if a.async != nil {
		cx.times.started = now()
		s.run(cx, func() { a.async(s, cx, req) })
		return
	}
	s.inflightSync.Add(1)
	go func() {
		defer s.inflightSync.Add(-1)
		cx.times.started = now() // RequestQueueTime ends when the goroutine runs
		s.run(cx, func() { cx.reply(a.sync(s, cx, req)) })
	}()
}

// run calls a handler. A panic in it is a bug of ours, not the client's,
// but it must not take down every other connection with it: it is logged
// and the connection, whose request may be left unanswered, is closed.
func (s *Server) run(cx *reqCtx, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("kafka: handler panic; closing the connection", "api", kmsg.NameForKey(cx.key),
				"version", cx.version, "remote", cx.c.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
			cx.c.Close()
		}
	}()
	fn()
}

// parseRequest does everything to a request frame that needs no
// connection: the header, the API and version checks, the size limit, the
// API's own pre-decoding check, and decoding. Serve and FuzzRequest call it.
// An error wraps errBadRequest (close the connection), or is
// errApiVersionsUnsupported with the header filled in.
func (s *Server) parseRequest(frame []byte) (header, *api, kmsg.Request, error) {
	h, body, err := parseHeader(frame)
	if err != nil {
		return h, nil, nil, err
	}
	if h.key < 0 || int(h.key) >= len(apis) || apis[h.key] == nil {
		return h, nil, nil, fmt.Errorf("%w: unknown API key %d", errBadRequest, h.key)
	}
	a := apis[h.key]
	if h.version < a.min || h.version > a.max {
		if h.key == int16(kmsg.ApiVersions) {
			return h, nil, nil, errApiVersionsUnsupported
		}
		return h, nil, nil, fmt.Errorf("%w: %s v%d not served", errBadRequest, kmsg.NameForKey(h.key), h.version)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		// The header's tagged fields (KIP-482): none that a broker must
		// understand.
		if body, err = skipTags(body); err != nil {
			return h, nil, nil, err
		}
	}
	if !a.bigRequests && len(body) > s.cfg.MaxRequestBytes {
		return h, nil, nil, fmt.Errorf("%w: %s of %d bytes, limit %d", errBadRequest, kmsg.NameForKey(h.key), len(body), s.cfg.MaxRequestBytes)
	}
	if a.check != nil {
		if err := a.check(s, h.version, body); err != nil {
			return h, nil, nil, err
		}
	}
	if err := decode(req, body); err != nil {
		return h, nil, nil, fmt.Errorf("%w: %s v%d: %w", errBadRequest, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, a, req, nil
}

// decode reads a request body. kmsg bounds array counts by the bytes left;
// a panic inside it on hostile input is turned into an error all the same,
// because bytes from outside must never take the broker down.
func decode(req kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v\n%s", r, debug.Stack())
		}
	}()
	return req.ReadFrom(body)
}

// Closed is called when a connection goes away.
func (s *Server) Closed(c *netpoll.Conn) {
	if ss, ok := c.Context().(*session); ok && ss.timer != nil {
		ss.timer.Stop()
	}
	s.waits.connClosed(c)
}

// parseHeader reads the request header up to the client id and returns the
// rest (the tagged fields of a flexible header are left to the caller, who
// knows the version's flexibility). The body is not copied.
func parseHeader(b []byte) (header, []byte, error) {
	var h header
	r := kwire.NewReader(b, false) // a header's client id is never compact
	h.key = r.Int16()
	h.version = r.Int16()
	h.correlationID = r.Int32()
	n := r.Int16()
	if r.Bad() {
		return header{}, nil, fmt.Errorf("%w: %d-byte frame", errBadRequest, len(b))
	}
	switch {
	case n > 0:
		if int(n) > r.Remaining() {
			return h, nil, fmt.Errorf("%w: client id of %d bytes in %d", errBadRequest, n, r.Remaining())
		}
		h.clientID = string(r.Span(int(n)))
	case n < -1:
		// kmsg would read any negative length as null; a header with
		// one is refused, as it always was here.
		return h, nil, fmt.Errorf("%w: client id length %d", errBadRequest, n)
	}
	return h, r.Rest(), nil
}

// skipTags skips a tagged-fields section (KIP-482).
func skipTags(b []byte) ([]byte, error) {
	rest, ok := kwire.SkipTags(b)
	if !ok {
		return nil, fmt.Errorf("%w: bad tagged fields", errBadRequest)
	}
	return rest, nil
}

// reply encodes resp with the response header and sends it. Exactly one of
// reply, replyRaw and noReply is called per request.
func (cx *reqCtx) reply(resp kmsg.Response) {
	resp.SetVersion(cx.version)
	// The request quota (KIP-124): the larger of its throttle and one
	// the handler set (a produce over its byte rate) is answered.
	if d := cx.s.throttleRequest(cx); d > 0 {
		if tr, ok := resp.(interface {
			kmsg.ThrottleResponse
			kmsg.SetThrottleResponse
		}); ok {
			if ms, _ := tr.Throttle(); int32(d.Milliseconds()) > ms {
				tr.SetThrottle(int32(d.Milliseconds()))
			}
		}
	}
	e := kwire.Encoder{Buf: make([]byte, 0, 256)}
	e.Int32(cx.correlationID)
	// Flexible responses carry an empty tag section in their header, except
	// ApiVersions, whose response header stays v0 so that a client that
	// sent too new a version can still read it.
	if resp.IsFlexible() && cx.key != int16(kmsg.ApiVersions) {
		e.EmptyTags()
	}
	r := &netpoll.Response{}
	r.AppendBytes(resp.AppendTo(e.Buf))
	cx.replyRaw(r)
}

// listener is the name of the listener the request came in on ("" when
// the request came from no connection, in tests of a handler).
func (cx *reqCtx) listener() string {
	if cx.session == nil {
		return ""
	}
	return cx.session.l.Name
}

// advertised is this broker's host and port on the request's listener.
func (cx *reqCtx) advertised() (string, int32) {
	if cx.session != nil && cx.session.l.Advertised != "" {
		if host, port, ok := splitHostPort(cx.session.l.Advertised); ok {
			return host, port
		}
	}
	return cx.s.cfg.AdvertisedHost, cx.s.cfg.AdvertisedPort
}

// replyThenClose answers and closes the connection once the answer is
// written (or dropped): Kafka's authenticator does so after a failed
// authentication. The close runs on a goroutine of its own: OnDone runs
// where netpoll writes, which on gnet holds the connection's lock that
// Close takes.
func (cx *reqCtx) replyThenClose(resp kmsg.Response) {
	c := cx.c
	cx.onDone = func() { go c.Close() }
	cx.reply(resp)
}

// replyRaw sends a response built by hand (the fetch response, which
// interleaves encoded bytes and file regions). It must start with the
// response header.
func (cx *reqCtx) replyRaw(r *netpoll.Response) {
	if !cx.answered.CompareAndSwap(false, true) {
		panic("kafka: request answered twice")
	}
	if m := cx.s.cfg.Metrics; m != nil {
		m.api(cx.key).requests.Inc()
		r.Observe(cx) // the times are observed once it is written (Written)
	}
	if cx.onDone != nil {
		r.OnDone(cx.onDone)
	}
	cx.c.Reply(cx.seq, r)
}

// noReply answers nothing: a produce with acks=0.
func (cx *reqCtx) noReply() {
	if !cx.answered.CompareAndSwap(false, true) {
		panic("kafka: request answered twice")
	}
	if m := cx.s.cfg.Metrics; m != nil {
		// No response: Kafka records an acks=0 produce's times with
		// nothing to queue or send, and so does this.
		t := &cx.times
		t.answered = now()
		t.sendFrom, t.sent = t.answered, t.answered
		m.api(cx.key).requests.Inc()
		m.answered(cx.key, t.received, t.answered)
		m.breakdown(cx.key, t)
	}
	cx.c.NoReply(cx.seq)
}

// park marks the request as waiting on others from now on (RemoteTime),
// until resume or its answer: a fetch's long poll, a transactional
// produce's verification by the transaction coordinator. An acks=all
// produce's wait for the in-sync replicas is stamped by the shards
// (produce.parkedAt). Called by the request's owner of the moment, never
// concurrently with the other two.
func (cx *reqCtx) park() {
	if cx.times.parkedAt == 0 && cx.s.parkingTimed() {
		cx.times.parkedAt = now()
	}
}

// resume ends the wait park began: the handler works again.
func (cx *reqCtx) resume() {
	if t := &cx.times; t.parkedAt != 0 {
		t.remote += now() - t.parkedAt
		t.parkedAt = 0
	}
}

// Written implements netpoll.Observer: the response is on the wire, and
// the request's times are complete.
func (cx *reqCtx) Written(_ *netpoll.Response, nt netpoll.Timing) {
	m := cx.s.cfg.Metrics
	t := &cx.times
	t.answered, t.sendFrom, t.sent = nt.Replied, nt.WriteStart, nt.Written
	if t.received == 0 { // a handler not served by netpoll's Serve
		t.received = nt.Received
	}
	m.answered(cx.key, t.received, t.answered)
	m.breakdown(cx.key, t)
}
