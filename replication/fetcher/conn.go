package fetcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"ringlog/internal/framepool"
	"ringlog/internal/kwire"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one connection to the leader. The stream's loop goroutine writes
// requests; one reader goroutine reads, decodes and hands responses back in
// the order the requests were written (Kafka answers in request order on a
// connection).
type conn struct {
	nc       net.Conn
	frameMax int

	// pending carries the requests written and not yet answered, in write
	// order, from the loop to the reader. Its capacity is the in-flight
	// limit, so the loop never blocks on it.
	pending chan *request
	// results carries decoded responses (or the error that ended the
	// connection) from the reader to the loop.
	results chan result
	// done is closed when the loop gives the connection up; the reader
	// stops sending results then.
	done chan struct{}
	// readerDone is closed when the reader goroutine has returned.
	readerDone chan struct{}

	corr     int32
	fmt      *kmsg.RequestFormatter
	wbuf     []byte
	bytesIn  *atomic.Int64
	versions versions
	// reauthAt, when set, is when the stream must replace the connection:
	// its SASL session is about to expire (see reauthAt).
	reauthAt time.Time
}

// versions are the API versions chosen for a connection.
type versions struct {
	fetchMin, fetch int16 // fetchMin is the leader's minimum, for the v12 fallback
	ofle            int16 // -1 when the leader serves no usable version
	// saslAuth is the SaslAuthenticate version, -1 when the leader serves
	// no usable one (or not SaslHandshake v1).
	saslAuth int16
}

// result is one response from the reader, or the error that ended the
// connection (req is nil then).
type result struct {
	req  *request
	resp kmsg.Response
	// frame holds the bytes resp was decoded from (its record batches
	// point into them).
	frame *frame
	err   error
}

// dial connects (over TLS when cfg.TLS is set), negotiates versions with
// ApiVersions and authenticates when cfg.SASL is set. It is bounded by ctx
// and cfg.DialTimeout.
func dial(ctx context.Context, cfg *Config, inflightMax int, bytesIn *atomic.Int64) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	nc, err := cfg.Dial(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("fetcher: dial %s: %w", cfg.Addr, err)
	}
	c := &conn{
		nc:         nc,
		frameMax:   cfg.FrameBytesMax,
		pending:    make(chan *request, inflightMax),
		results:    make(chan result, inflightMax+1),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		fmt:        kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		bytesIn:    bytesIn,
	}
	// The handshake runs on this goroutine: a cancelled ctx (Close, or the
	// dial timeout) must unblock its reads and writes.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	err = c.open(ctx, cfg)
	if !stop() || err != nil {
		nc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("fetcher: handshake with %s: %w", cfg.Addr, err)
	}
	go c.readLoop()
	return c, nil
}

// open runs what precedes the first Fetch on a new connection: TLS,
// ApiVersions, SASL.
func (c *conn) open(ctx context.Context, cfg *Config) error {
	if cfg.TLS != nil {
		if err := c.startTLS(ctx, cfg); err != nil {
			return err
		}
	}
	v, err := c.handshake(cfg)
	if err != nil {
		return err
	}
	c.versions = v
	if cfg.SASL != nil {
		life, err := c.authenticate(ctx, cfg, v)
		if err != nil {
			return err
		}
		c.reauthAt = reauthAt(time.Now(), life)
	}
	return nil
}

// handshake asks the leader which versions it serves (once per
// connection: a leader may be upgraded between connections).
func (c *conn) handshake(cfg *Config) (versions, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = apiVersionsVersion
	req.ClientSoftwareName = "ringlog-fetcher"
	req.ClientSoftwareVersion = "1"
	var resp *kmsg.ApiVersionsResponse
	for attempt := 0; ; attempt++ {
		r, err := c.roundTrip(req)
		if err != nil {
			return versions{}, err
		}
		resp = r.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || attempt > 0 {
			break
		}
		// KIP-511: a broker that does not know our ApiVersions version
		// answers with a v0 body listing the versions of ApiVersions it
		// does serve; ask again with the highest of them.
		retry := int16(-1)
		for _, k := range resp.ApiKeys {
			if k.ApiKey == kmsg.ApiVersions.Int16() {
				retry = min(k.MaxVersion, apiVersionsVersion)
			}
		}
		if retry < 0 {
			break
		}
		req.Version = retry
	}
	if resp.ErrorCode != 0 {
		return versions{}, leaderError(resp.ErrorCode)
	}
	v := versions{fetch: -1, ofle: -1, saslAuth: -1}
	handshakeV1 := false
	for _, k := range resp.ApiKeys {
		switch k.ApiKey {
		case kmsg.SASLHandshake.Int16():
			handshakeV1 = k.MinVersion <= saslHandshakeVersion && saslHandshakeVersion <= k.MaxVersion
		case kmsg.SASLAuthenticate.Int16():
			if top := min(k.MaxVersion, saslAuthVersionMax); top >= max(k.MinVersion, saslAuthVersionMin) {
				v.saslAuth = top
			}
		case kmsg.Fetch.Int16():
			top := min(k.MaxVersion, cfg.FetchVersionMax, kmsg.NewPtrFetchRequest().MaxVersion())
			if top >= max(k.MinVersion, fetchVersionMin) {
				v.fetchMin, v.fetch = max(k.MinVersion, fetchVersionMin), top
			}
		case kmsg.OffsetForLeaderEpoch.Int16():
			top := min(k.MaxVersion, ofleVersionMax)
			if top >= max(k.MinVersion, ofleVersionMin) {
				v.ofle = top
			}
		}
	}
	if !handshakeV1 {
		v.saslAuth = -1
	}
	if v.fetch < 0 {
		return versions{}, fmt.Errorf("%w: Fetch v%d+", ErrUnsupported, fetchVersionMin)
	}
	return v, nil
}

// roundTrip writes one request and reads its response on this goroutine;
// only the handshake uses it, before the reader starts.
func (c *conn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	rq := &request{kind: req}
	if err := c.write(rq, time.Time{}); err != nil {
		return nil, err
	}
	frame, err := readFrame(c.nc, c.frameMax)
	if err != nil {
		return nil, err
	}
	c.bytesIn.Add(int64(len(frame)) + 4)
	return decodeResponse(rq, frame)
}

// prepare assigns the request's correlation id, in write order. It runs
// before the request is queued for the reader, which reads the id.
func (c *conn) prepare(rq *request) {
	c.corr++
	rq.corr = c.corr
	rq.version = rq.kind.GetVersion()
}

// write prepares and writes a request (the handshake's, before the reader
// runs).
func (c *conn) write(rq *request, deadline time.Time) error {
	c.prepare(rq)
	_, err := c.writePrepared(rq, deadline)
	return err
}

// writePrepared encodes and writes a prepared request, and returns the
// frame's length.
func (c *conn) writePrepared(rq *request, deadline time.Time) (int, error) {
	c.wbuf = c.fmt.AppendRequest(c.wbuf[:0], rq.kind, rq.corr)
	n := len(c.wbuf)
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return 0, fmt.Errorf("fetcher: write: %w", err)
	}
	if _, err := c.nc.Write(c.wbuf); err != nil {
		return 0, fmt.Errorf("fetcher: write: %w", err)
	}
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // a huge request (thousands of partitions) is not kept
	}
	return n, nil
}

// close gives the connection up and waits for the reader to return.
func (c *conn) close() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.nc.Close()
	<-c.readerDone
}

// readLoop reads responses until the connection fails. Each frame is
// matched with the oldest request in flight: its correlation id must be
// that request's, since Kafka answers in order.
func (c *conn) readLoop() {
	defer close(c.readerDone)
	for {
		frame, err := readFrame(c.nc, c.frameMax)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("%w: %w", ErrRequestTimeout, err)
			}
			c.send(result{err: err})
			return
		}
		c.bytesIn.Add(int64(len(frame)) + 4)
		var rq *request
		select {
		case rq = <-c.pending:
		default:
			c.send(result{err: fmt.Errorf("%w: a response with no request in flight", ErrProtocol)})
			return
		}
		resp, err := decodeResponse(rq, frame)
		if err != nil {
			framepool.Put(frame)
			c.send(result{err: err})
			return
		}
		if !c.send(result{req: rq, resp: resp, frame: newFrame(frame)}) {
			return
		}
	}
}

func (c *conn) send(r result) bool {
	select {
	case c.results <- r:
		return true
	case <-c.done:
		return false
	}
}

// decodeResponse checks the response header against the request and
// decodes the body. kmsg's decoders are bounded by the bytes they are given
// (array counts larger than the bytes left fail), so a frame allowed by
// FrameBytesMax cannot make them allocate much more than its own size.
func decodeResponse(rq *request, frame []byte) (kmsg.Response, error) {
	resp := rq.kind.ResponseKind()
	resp.SetVersion(rq.version)
	r := kwire.NewReader(frame, true)
	corr := r.Int32()
	if r.Bad() {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrProtocol, len(frame))
	}
	if corr != rq.corr {
		return nil, fmt.Errorf("%w: correlation id %d, expected %d", ErrProtocol, corr, rq.corr)
	}
	// Response header v1 (flexible versions) carries tags, except for
	// ApiVersions, whose response header is always v0 (KIP-511).
	if resp.IsFlexible() && rq.kind.Key() != kmsg.ApiVersions.Int16() {
		if r.Tags(); r.Bad() {
			return nil, fmt.Errorf("%w: bad header tags", ErrProtocol)
		}
	}
	body := r.Rest()
	if err := resp.ReadFrom(body); err != nil {
		// A KIP-511 UNSUPPORTED_VERSION answer comes as a v0 body.
		if rq.kind.Key() == kmsg.ApiVersions.Int16() && rq.version > 0 {
			v0 := kmsg.NewPtrApiVersionsResponse()
			if v0.ReadFrom(body) == nil && v0.ErrorCode == kerr.UnsupportedVersion.Code {
				return v0, nil
			}
		}
		return nil, fmt.Errorf("%w: %s v%d response: %w", ErrProtocol, kmsg.NameForKey(rq.kind.Key()), rq.version, err)
	}
	return resp, nil
}

// Frame buffers start at frameChunk and grow by frameGrowth as bytes
// arrive, so that a lying length costs a little memory, not FrameBytesMax.
// From framepool.MinSize up they come from internal/framepool, whose
// capacities are powers of two (within frameGrowth times the bytes
// received, since frameGrowth times a class size is a class size).
const (
	frameChunk  = framepool.MinSize
	frameGrowth = 4
)

// readFrame reads one length-prefixed frame. A length above max is refused
// before anything else is read or allocated. The frame's capacity may be
// larger than its length: a pooled buffer, to give back with
// framepool.Put once nothing refers to its bytes (see frame).
func readFrame(r io.Reader, frameMax int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("fetcher: read: %w", err)
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	switch {
	case n < 4:
		return nil, fmt.Errorf("%w: frame length %d", ErrProtocol, n)
	case n > int64(frameMax):
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, frameMax)
	}
	size := int(n)
	buf := framepool.Get(min(size, frameChunk))
	for {
		m, err := io.ReadFull(r, buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+m]
		if err != nil {
			framepool.Put(buf)
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("fetcher: read: %w", err)
		}
		if len(buf) == size {
			return buf, nil
		}
		nb := framepool.Get(min(size, len(buf)*frameGrowth))[:len(buf)]
		copy(nb, buf)
		framepool.Put(buf)
		buf = nb
	}
}
