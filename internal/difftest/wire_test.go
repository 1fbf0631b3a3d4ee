package difftest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is a raw Kafka connection pinned to one broker. It sends requests at
// exactly the version set on them (kgo's client would negotiate a version,
// retry retriable errors and split requests by leader, all of which would
// hide the broker's own answer).
type conn struct {
	c    net.Conn
	r    *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
}

// responseBytesMax bounds a response frame read: the scenarios fetch at most
// a few MiB.
const responseBytesMax = 64 << 20

// ioTimeout bounds one request's round trip. JoinGroup may wait for a whole
// rebalance, so it is longer than any rebalance timeout the scenarios use.
const ioTimeout = 30 * time.Second

func dial(addr, clientID string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("difftest: dial %s: %w", addr, err)
	}
	return &conn{c: c, r: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

func (c *conn) close() { _ = c.c.Close() }

// errClosed is a connection the broker closed instead of answering (what
// Kafka does, for instance, to an acks=0 producer whose batch failed).
var errClosed = errors.New("difftest: connection closed by the broker")

// send writes req and returns its correlation id.
func (c *conn) send(req kmsg.Request) (int32, error) {
	c.corr++
	_ = c.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.c.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		return 0, fmt.Errorf("difftest: write %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return c.corr, nil
}

// recv reads the response to correlation id corr into resp, whose version
// is the request's.
func (c *conn) recv(corr int32, resp kmsg.Response) error {
	_ = c.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return errClosed
		}
		return fmt.Errorf("difftest: read %s response: %w", kmsg.NameForKey(resp.Key()), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > responseBytesMax {
		return fmt.Errorf("difftest: %s response frame of %d bytes", kmsg.NameForKey(resp.Key()), n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return fmt.Errorf("difftest: read %s response: %w", kmsg.NameForKey(resp.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return fmt.Errorf("difftest: response to correlation id %d expected, got %d", corr, got)
	}
	b = b[4:]
	// ApiVersions answers with a v0 header whatever its version (KIP-511),
	// so that a client can read the answer of a broker that refused it.
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		var err error
		if b, err = skipTags(b); err != nil {
			return fmt.Errorf("difftest: %s response header: %w", kmsg.NameForKey(resp.Key()), err)
		}
	}
	if err := resp.ReadFrom(b); err != nil {
		return fmt.Errorf("difftest: decode %s v%d response: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return nil
}

// roundTrip sends req and reads its response.
func (c *conn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	corr, err := c.send(req)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	if err := c.recv(corr, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// skipTags skips a tagged-field section (KIP-482): a count, then per field
// a tag and a size, all unsigned varints.
func skipTags(b []byte) ([]byte, error) {
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	count, ok := next()
	for i := uint64(0); ok && i < count; i++ {
		var size uint64
		if _, ok = next(); !ok {
			break
		}
		if size, ok = next(); !ok || size > uint64(len(b)) {
			ok = false
			break
		}
		b = b[size:]
	}
	if !ok {
		return nil, errors.New("truncated tagged fields")
	}
	return b, nil
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
