package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"time"
)

// The forwarding RPC: any node sends a command to the raft leader and gets
// the result back. After rpcMagic, a connection carries request and
// response frames, one request at a time:
//
//	frame:    length u32 (of what follows, at most maxFrameBytes) | body
//	request:  timeout ms u32 | command (see commands.go)
//	response: error code i16 | message str | raft index u64 | payload bytes
//
// The leader answers NOT_CONTROLLER when it is not (or no longer) the
// leader; the sender then finds the new leader and retries within its
// deadline. Index is the raft index the command was applied at (0 when
// nothing was written), so that the sender can wait until its own state
// machine has applied it.

const (
	maxFrameBytes = maxCommandBytes + 64
	// rpcIdleTimeout closes a server connection that sent nothing for this
	// long; the client pool drops its connections well before.
	rpcIdleTimeout = 2 * time.Minute
	// rpcTimeoutMax bounds the timeout a request may ask for.
	rpcTimeoutMax = time.Minute
	// rpcPoolPerPeer bounds the idle client connections kept per leader.
	rpcPoolPerPeer = 4
	// defaultRequestTimeout applies to calls whose context has no deadline.
	defaultRequestTimeout = 30 * time.Second
)

// reply is a command's outcome on success.
type reply struct {
	index   uint64
	payload []byte
}

// transportError marks a failure to reach the leader or a broken
// connection: the request may be retried elsewhere.
type transportError struct{ err error }

func (e *transportError) Error() string { return "controller: forwarding: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func writeFrame(w io.Writer, body []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// readFrame reads one frame. The buffer grows with the bytes that arrive,
// never to a length the peer merely announced.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrameBytes {
		return nil, fmt.Errorf("%w: frame of %d bytes, at most %d", ErrCorrupt, n, maxFrameBytes)
	}
	body, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return nil, err
	}
	if len(body) != int(n) {
		return nil, io.ErrUnexpectedEOF
	}
	return body, nil
}

func encodeRequest(timeout time.Duration, cmd []byte) []byte {
	e := &encoder{b: make([]byte, 0, 4+len(cmd))}
	e.u32(uint32(min(timeout, rpcTimeoutMax).Milliseconds()))
	e.b = append(e.b, cmd...)
	return e.b
}

// decodeRequest decodes a request frame's body.
func decodeRequest(b []byte) (time.Duration, *command, error) {
	d := &decoder{b: b}
	ms := d.u32()
	if d.err != nil {
		return 0, nil, d.err
	}
	cmd, err := decodeCommand(d.b)
	return time.Duration(ms) * time.Millisecond, cmd, err
}

func encodeResponse(r reply, err error) []byte {
	e := &encoder{}
	e.i16(ErrorCode(err))
	if err != nil {
		e.str(err.Error())
	} else {
		e.str("")
	}
	e.u64(r.index)
	e.bytes(r.payload)
	return e.b
}

func decodeResponse(b []byte) (reply, error) {
	d := &decoder{b: b}
	code, msg := d.i16(), d.str()
	r := reply{index: d.u64(), payload: d.bytes()}
	if err := d.done(); err != nil {
		return reply{}, err
	}
	return r, errorFromCode(code, msg)
}

// serveRPC serves one forwarding connection until it fails, idles out or
// the controller closes (the mux closes the connection then). peer is the
// node its TLS certificate names (-1 without TLS): a command that acts for
// one broker is refused from any other.
func (c *Controller) serveRPC(conn net.Conn, peer int32) {
	c.serveFrames(conn, "forwarding RPC", func(body []byte) (reply, error) {
		timeout, cmd, err := decodeRequest(body)
		if err != nil {
			return reply{}, err
		}
		id, scoped := actsFor(cmd)
		switch {
		case cmd.typ == cmdFenceBroker, cmd.typ == cmdUnfenceBroker, cmd.typ == cmdElectRecovery:
			// Only the leader itself decides on liveness, and on when
			// an unclean recovery has waited long enough.
			return reply{}, errf(ErrInvalidRequest, "%s is not a request", cmd.typ)
		case c.cfg.TLS != nil && scoped && id != peer:
			return reply{}, errf(ErrClusterAuthorization, "node %d may not send %s for broker %d", peer, cmd.typ, id)
		}
		return c.whenReady(timeout, func(ctx context.Context) (reply, error) { return c.lead(ctx, cmd) })
	})
}

// serveFrames serves one RPC connection: each frame read is handed to
// handle and its answer written, until the connection fails, idles past
// rpcIdleTimeout or the controller closes (the mux closes the connection
// then). A panic of handle (a bug of ours) is logged and closes the
// connection, not the node.
func (c *Controller) serveFrames(conn net.Conn, what string, handle func(body []byte) (reply, error)) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("controller: "+what+" panic; closing the connection", "remote", conn.RemoteAddr().String(),
				"panic", r, "stack", string(debug.Stack()))
		}
	}()
	br := bufio.NewReader(conn)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout)); err != nil {
			return
		}
		body, err := readFrame(br)
		if err != nil {
			return
		}
		r, err := handle(body)
		if err := conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return
		}
		if err := writeFrame(conn, encodeResponse(r, err)); err != nil {
			return
		}
	}
}

// whenReady runs f with the request's timeout (bounded) once raft is
// open; a node still opening is not a leader to anyone.
func (c *Controller) whenReady(timeout time.Duration, f func(context.Context) (reply, error)) (reply, error) {
	ctx, cancel := context.WithTimeout(c.ctx, min(max(timeout, time.Millisecond), rpcTimeoutMax))
	defer cancel()
	select {
	case <-c.raftReady:
		return f(ctx)
	case <-ctx.Done():
		return reply{}, errf(ErrNotController, "node %d is starting", c.cfg.NodeID)
	}
}

// forward sends an encoded command to the leader at addr.
func (c *Controller) forward(ctx context.Context, addr string, cmd []byte) (reply, error) {
	return c.call(ctx, addr, rpcMagic, cmd)
}

// call sends a request on the RPC that magic names (rpcMagic, or
// quorumMagic: quorum.go) to the node at addr and returns its answer.
func (c *Controller) call(ctx context.Context, addr string, magic byte, body []byte) (reply, error) {
	conn, err := c.rpcConn(ctx, addr, magic)
	if err != nil {
		return reply{}, &transportError{err}
	}
	// The deadline is the context's; cancelling the context fails the
	// pending read at once.
	dl, _ := ctx.Deadline()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	ok := false
	defer func() {
		if !stop() || !ok {
			conn.Close()
			return
		}
		c.rpcPut(poolKey(addr, magic), conn)
	}()
	if err := conn.SetDeadline(dl); err != nil {
		return reply{}, &transportError{err}
	}
	if err := writeFrame(conn, encodeRequest(time.Until(dl), body)); err != nil {
		return reply{}, &transportError{err}
	}
	resp, err := readFrame(conn)
	if err != nil {
		return reply{}, &transportError{err}
	}
	r, err := decodeResponse(resp)
	if errors.Is(err, ErrCorrupt) {
		return reply{}, &transportError{err}
	}
	ok = true
	return r, err
}

// poolKey names the idle connections of one RPC to one node.
func poolKey(addr string, magic byte) string { return fmt.Sprintf("%02x/%s", magic, addr) }

func (c *Controller) rpcConn(ctx context.Context, addr string, magic byte) (net.Conn, error) {
	key := poolKey(addr, magic)
	c.rpcMu.Lock()
	if idle := c.rpcIdle[key]; len(idle) > 0 {
		conn := idle[len(idle)-1]
		c.rpcIdle[key] = idle[:len(idle)-1]
		c.rpcMu.Unlock()
		return conn, nil
	}
	c.rpcMu.Unlock()
	conn, err := c.cfg.TLS.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{magic}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (c *Controller) rpcPut(addr string, conn net.Conn) {
	c.rpcMu.Lock()
	defer c.rpcMu.Unlock()
	if c.rpcIdle == nil || len(c.rpcIdle[addr]) >= rpcPoolPerPeer {
		conn.Close()
		return
	}
	c.rpcIdle[addr] = append(c.rpcIdle[addr], conn)
}

func (c *Controller) closeRPCPool() {
	c.rpcMu.Lock()
	defer c.rpcMu.Unlock()
	for _, idle := range c.rpcIdle {
		for _, conn := range idle {
			conn.Close()
		}
	}
	c.rpcIdle = nil
}
