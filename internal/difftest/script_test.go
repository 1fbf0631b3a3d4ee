package difftest

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A script is one scenario: requests sent to one broker (a side). It runs
// once against Kafka and once against ringlog, and may use what a side
// answered (a member id, a producer id, a topic id) in its next requests;
// it must otherwise send the same requests to both.
type script func(s *side)

// side is one broker as a script sees it.
type side struct {
	t    *testing.T
	name string // "kafka" or "ringlog"
	addr string
	// saslAddr is the broker's SASL_PLAINTEXT listener, where a scenario
	// has one (userConn).
	saslAddr string
	main     *conn
	conns    []*conn
	steps    []step
	calls    []*call // sent with async and not waited for yet
	// skipped counts the slow parts not run (without -full).
	skipped int
}

// step is one recorded request and what the broker did with it.
type step struct {
	label   string
	key     int16
	version int16
	resp    kmsg.Response // nil when the connection was closed instead
	closed  bool
}

// abort stops a script on one side (a broken connection, a timeout): the
// test fails with the transcript recorded so far.
type abort struct{ err error }

func (s *side) fail(format string, args ...any) {
	panic(abort{fmt.Errorf(format, args...)})
}

// conn opens a connection of the script's own (a second group member must
// not wait behind the first one's JoinGroup on the same connection), with
// a client id of its own: a group's members are told apart by it.
func (s *side) conn() *conn {
	c, err := dial(s.addr, fmt.Sprintf("difftest-%d", len(s.conns)))
	if err != nil {
		s.fail("%v", err)
	}
	s.conns = append(s.conns, c)
	return c
}

func (s *side) mainConn() *conn {
	if s.main == nil {
		s.main = s.conn()
	}
	return s.main
}

// do sends req on the script's main connection and records the answer
// under label. A connection the broker closes is recorded as such (and
// opened again for the next request); do then returns an empty response of
// the right kind, so that the script goes on.
func (s *side) do(label string, req kmsg.Request) kmsg.Response {
	if res, ok := alteredTopic(req); ok {
		return s.alterSettled(label, req, res)
	}
	return s.doOn(s.mainConn(), label, req)
}

// alteredTopic names the topic a config change that is not validate-only
// alters.
func alteredTopic(req kmsg.Request) (string, bool) {
	switch r := req.(type) {
	case *kmsg.AlterConfigsRequest:
		if !r.ValidateOnly && len(r.Resources) == 1 && r.Resources[0].ResourceType == kmsg.ConfigResourceTypeTopic {
			return r.Resources[0].ResourceName, true
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		if !r.ValidateOnly && len(r.Resources) == 1 && r.Resources[0].ResourceType == kmsg.ConfigResourceTypeTopic {
			return r.Resources[0].ResourceName, true
		}
	}
	return "", false
}

// alterSettled does a topic config change and, when it succeeded, waits
// (at most 2 s) until DescribeConfigs shows it: Kafka's controller
// answers once the change is committed, and its broker, which answers
// DescribeConfigs, applies it a moment later (on a loaded machine, a
// describe right after an APPEND still showed the old list). ringlog's
// describe shows a change at once.
func (s *side) alterSettled(label string, req kmsg.Request, topic string) kmsg.Response {
	describe := func() string {
		r := s.quiet(describeConfigsReq(kmsg.ConfigResourceTypeTopic, topic))
		return fmt.Sprintf("%+v", r)
	}
	before := describe()
	resp := s.doOn(s.mainConn(), label, req)
	ok := false
	switch r := resp.(type) {
	case *kmsg.AlterConfigsResponse:
		ok = len(r.Resources) == 1 && r.Resources[0].ErrorCode == 0
	case *kmsg.IncrementalAlterConfigsResponse:
		ok = len(r.Resources) == 1 && r.Resources[0].ErrorCode == 0
	}
	for deadline := time.Now().Add(2 * time.Second); ok && describe() == before && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return resp
}

func (s *side) doOn(c *conn, label string, req kmsg.Request) kmsg.Response {
	resp, err := c.roundTrip(req)
	return s.record(c, label, req, resp, err)
}

func (s *side) record(c *conn, label string, req kmsg.Request, resp kmsg.Response, err error) kmsg.Response {
	st := step{label: label, key: req.Key(), version: req.GetVersion(), resp: resp}
	if errors.Is(err, errClosed) {
		st.closed, resp = true, req.ResponseKind()
		if c == s.main {
			s.main = nil
		}
	} else if err != nil {
		s.fail("%s: %v", label, err)
	}
	s.steps = append(s.steps, st)
	return resp
}

// quiet sends req and returns the answer without recording it: set-up and
// waiting, whose answers may differ in timing but not in outcome.
func (s *side) quiet(req kmsg.Request) kmsg.Response {
	return s.quietOn(s.mainConn(), req)
}

func (s *side) quietOn(c *conn, req kmsg.Request) kmsg.Response {
	resp, err := c.roundTrip(req)
	if err != nil {
		s.fail("%s (set-up): %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// sendOnly sends req and records nothing, for requests that get no answer
// (Produce with acks=0).
func (s *side) sendOnly(req kmsg.Request) {
	if _, err := s.mainConn().send(req); err != nil {
		s.fail("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// call is a request sent with async, answered later.
type call struct {
	c     *conn
	label string
	req   kmsg.Request
	done  chan struct{}
	resp  kmsg.Response
	err   error
}

// async sends req on c and returns at once; wait records the answer. Answers
// are recorded in the order the script waits for them, which keeps the
// transcript in the same order on both sides.
func (s *side) async(c *conn, label string, req kmsg.Request) *call {
	cl := &call{c: c, label: label, req: req, done: make(chan struct{})}
	corr, err := c.send(req)
	if err != nil {
		s.fail("%s: %v", label, err)
	}
	go func() {
		defer close(cl.done)
		resp := req.ResponseKind()
		if cl.err = c.recv(corr, resp); cl.err == nil {
			cl.resp = resp
		}
	}()
	s.calls = append(s.calls, cl)
	return cl
}

// wait waits for the answer to an async call and records it.
func (s *side) wait(cl *call) kmsg.Response {
	select {
	case <-cl.done:
	case <-time.After(ioTimeout + 5*time.Second):
		s.fail("%s: no answer", cl.label)
	}
	return s.record(cl.c, cl.label, cl.req, cl.resp, cl.err)
}

// settleTimeout bounds eventually.
const settleTimeout = 90 * time.Second

// eventually sends req (unrecorded) until ok accepts the answer, for state
// that settles asynchronously on one broker or the other (a new topic's
// leader, a coordinator's load). The wait is long: on a loaded machine,
// Kafka's first producer id block once took 28 s after its start.
func (s *side) eventually(what string, req func() kmsg.Request, ok func(kmsg.Response) bool) kmsg.Response {
	deadline := time.Now().Add(settleTimeout)
	for {
		resp := s.quiet(req())
		if ok(resp) {
			return resp
		}
		if time.Now().After(deadline) {
			s.fail("%s: not settled after %v: %+v", what, settleTimeout, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *side) close() {
	for _, c := range s.conns {
		c.close()
	}
	for _, cl := range s.calls {
		<-cl.done
	}
}

// slow runs the slow part of a script (waits for session and rebalance
// timeouts, long polls) with -full, and counts it as not run without.
func (s *side) slow(part func()) {
	if *full {
		part()
		return
	}
	s.skipped++
}

// name makes a topic or group name for the running test: distinct across
// tests, the same on both sides.
func name(t *testing.T, suffix string) string {
	n := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	n = strings.TrimPrefix(n, "test")
	if suffix != "" {
		n += "-" + suffix
	}
	return n
}

// run runs a script against Kafka, then against ringlog, and fails the test
// for every difference between their transcripts that is neither allowed
// (allowances) nor written down (known).
func run(t *testing.T, sc script) {
	t.Helper()
	kafkaAddr, ringlogAddr := pair(t)
	k := runSide(t, "kafka", kafkaAddr, sc)
	r := runSide(t, "ringlog", ringlogAddr, sc)
	compareTranscripts(t, k, r)
	if k.skipped > 0 {
		t.Logf("%d slow part(s) of this scenario not run: scripts/difftest.sh (-full) runs them", k.skipped)
	}
}

func runSide(t *testing.T, name, addr string, sc script) *side {
	t.Helper()
	return runSideSASL(t, name, [2]string{addr, ""}, sc)
}

// runSideSASL is runSide on a broker with a SASL listener: addrs are the
// PLAINTEXT and SASL_PLAINTEXT addresses.
func runSideSASL(t *testing.T, name string, addrs [2]string, sc script) *side {
	t.Helper()
	s := &side{t: t, name: name, addr: addrs[0], saslAddr: addrs[1]}
	defer s.close()
	start := time.Now()
	defer func() { t.Logf("%s: %d steps in %v", name, len(s.steps), time.Since(start).Round(time.Millisecond)) }()
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				if a, ok := v.(abort); ok {
					err = a.err
					return
				}
				err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			}
		}()
		sc(s)
		return nil
	}()
	if err != nil {
		t.Fatalf("%s: the script stopped after %d steps: %v", name, len(s.steps), err)
	}
	return s
}

func compareTranscripts(t *testing.T, k, r *side) {
	t.Helper()
	seen := map[*knownDifference]bool{}
	taken := map[string]bool{}
	for i := range max(len(k.steps), len(r.steps)) {
		if i >= len(k.steps) || i >= len(r.steps) {
			t.Errorf("the transcripts differ in length: kafka %d steps, ringlog %d", len(k.steps), len(r.steps))
			break
		}
		ks, rs := k.steps[i], r.steps[i]
		taken[ks.label] = true
		if ks.label != rs.label {
			t.Errorf("step %d: kafka's script took step %q, ringlog's %q", i, ks.label, rs.label)
			break
		}
		if *dump {
			t.Logf("%s:\n  kafka   %s\n  ringlog %s", ks.label, show(ks), show(rs))
		}
		var diffs []difference
		switch {
		case ks.closed || rs.closed:
			if ks.closed != rs.closed {
				diffs = append(diffs, difference{Path: "(connection)", Kafka: outcome(ks), Ringlog: outcome(rs)})
			}
		default:
			diffs = compareResponses(ks.resp, rs.resp)
		}
		for _, d := range diffs {
			api := kmsg.NameForKey(ks.key)
			if kd := lookupKnown(t.Name(), ks.label, d.Path); kd != nil {
				seen[kd] = true
				t.Logf("%s (%s v%d): known difference (README.md %s): %s", ks.label, api, ks.version, kd.ref, d)
				continue
			}
			t.Errorf("%s (%s v%d): %s", ks.label, api, ks.version, d)
		}
	}
	for i := range known {
		kd := &known[i]
		if kd.test == t.Name() && (taken[kd.step] || kd.step == "*") && !seen[kd] {
			t.Errorf("known difference %s (%s at %s) no longer seen: remove it from known and README.md", kd.ref, kd.step, kd.path)
		}
	}
}

// show prints a step's answer for -dump.
func show(s step) string {
	if s.closed {
		return outcome(s)
	}
	b, err := json.Marshal(s.resp)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func outcome(s step) string {
	if s.closed {
		return "closed the connection"
	}
	return "answered"
}
