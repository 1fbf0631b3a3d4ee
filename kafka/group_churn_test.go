package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
)

// A consumer group under churn: kgo members consume a topic that is being
// produced to while members join, leave, and die (their connections cut,
// no LeaveGroup: the broker finds out by the session timeout). The checks
// are the promises of the group protocol:
//
//   - every record is consumed at least once;
//   - committed offsets never go backwards (watched from outside with
//     OffsetFetch all along);
//   - no partition is owned by two members at once: a member may be
//     assigned a partition only once its previous owner revoked it (or
//     died), in every generation.

// churnDialer connects a member and can cut every connection it made and
// refuse new ones: a process dying, as the broker sees it.
type churnDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (d *churnDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("churn: member is dead")
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *churnDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// ownership tracks which member owns each partition, from the members'
// assignment callbacks, and records every violation.
type ownership struct {
	mu     sync.Mutex
	owner  map[int32]string
	events []string // "gen G member M +[...] / -[...]", for failures
	errs   []string
}

func (o *ownership) assigned(member string, gen int32, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("gen %d %s +%v", gen, member, ps))
	for _, p := range ps {
		if cur, ok := o.owner[p]; ok && cur != member {
			o.errs = append(o.errs, fmt.Sprintf("generation %d: partition %d assigned to %s while %s owns it", gen, p, member, cur))
		}
		o.owner[p] = member
	}
}

func (o *ownership) revoked(member string, gen int32, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("gen %d %s -%v", gen, member, ps))
	for _, p := range ps {
		if o.owner[p] == member {
			delete(o.owner, p)
		}
	}
}

// died forgets everything a dead member owned: it consumes nothing more.
func (o *ownership) died(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("%s died", member))
	for p, m := range o.owner {
		if m == member {
			delete(o.owner, p)
		}
	}
}

// churnSeen records which (partition, sequence) records were consumed.
type churnSeen struct {
	mu    sync.Mutex
	seen  [][]bool
	count int
}

func (s *churnSeen) record(r *kgo.Record) {
	p := int32(binary.BigEndian.Uint32(r.Value))
	seq := int(binary.BigEndian.Uint64(r.Value[4:]))
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(p) < len(s.seen) && seq < len(s.seen[p]) && !s.seen[p][seq] {
		s.seen[p][seq] = true
		s.count++
	}
}

type churnMember struct {
	name   string
	dialer *churnDialer
	cl     *kgo.Client
	stop   chan string // "leave" or "kill"
	done   chan struct{}
}

type churnRun struct {
	t         *testing.T
	b         *testBroker
	topic     string
	groupID   string
	balancer  kgo.GroupBalancer
	own       *ownership
	seen      *churnSeen
	ctx       context.Context
	pollErrs  chan error
	closers   sync.WaitGroup
	nextIndex int
	// kip848 runs the members with KIP-848's consumer group protocol
	// (the broker assigns; the balancer picks the server assignor).
	kip848 bool
}

func (r *churnRun) start() *churnMember {
	r.nextIndex++
	m := &churnMember{name: fmt.Sprintf("m%d", r.nextIndex), dialer: &churnDialer{}, stop: make(chan string, 1), done: make(chan struct{})}
	var self *kgo.Client
	onAssigned := func(_ context.Context, cl *kgo.Client, a map[string][]int32) {
		_, gen := cl.GroupMetadata()
		r.own.assigned(m.name, gen, a[r.topic])
	}
	onRevoked := func(ctx context.Context, cl *kgo.Client, a map[string][]int32) {
		_, gen := cl.GroupMetadata()
		// What the default revoke does under autocommit: commit what was
		// polled, before the partitions go to another member.
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			r.t.Logf("%s: commit on revoke: %v", m.name, err)
		}
		r.own.revoked(m.name, gen, a[r.topic])
	}
	opts := []kgo.Opt{kgo.SeedBrokers(r.b.Addr), kgo.Dialer(m.dialer.dial),
		kgo.ConsumerGroup(r.groupID), kgo.ConsumeTopics(r.topic), kgo.Balancers(r.balancer),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(1500 * time.Millisecond), kgo.HeartbeatInterval(150 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.OnPartitionsAssigned(onAssigned), kgo.OnPartitionsRevoked(onRevoked), kgo.OnPartitionsLost(onRevoked)}
	if r.kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	self = cl
	m.cl = self
	go func() {
		defer close(m.done)
		for {
			select {
			case how := <-m.stop:
				if how == "kill" {
					// Die between two polls: everything polled was recorded.
					m.dialer.kill()
					r.own.died(m.name)
				}
				r.closers.Add(1)
				go func() { defer r.closers.Done(); cl.Close() }()
				return
			default:
			}
			ctx, cancel := context.WithTimeout(r.ctx, 300*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					select {
					case r.pollErrs <- fmt.Errorf("%s: %s/%d: %w", m.name, topic, p, err):
					default:
					}
				}
			})
			fs.EachRecord(r.seen.record)
		}
	}()
	return m
}

func (m *churnMember) end(how string) {
	m.stop <- how
	<-m.done
}

// runChurn produces n records over parts partitions while members come and
// go, and checks the promises above.
func runChurn(t *testing.T, balancer kgo.GroupBalancer, n int) {
	runChurnWith(t, balancer, n, false)
}

func runChurnWith(t *testing.T, balancer kgo.GroupBalancer, n int, kip848 bool) {
	b := startBroker(t, brokerOpts{Groups: func(c *group.Config) {
		c.MinSessionTimeout = 500 * time.Millisecond
		// The KIP-848 members' session and heartbeat are the broker's,
		// the same as the classic members ask for.
		c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval = 1500*time.Millisecond, 150*time.Millisecond
	}})
	const parts = 6
	topic := "churn-" + balancer.ProtocolName()
	if kip848 {
		topic = "churn-848-" + balancer.ProtocolName()
	}
	e2eCreateTopic(t, b, topic, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	perPart := n / parts
	r := &churnRun{t: t, b: b, topic: topic, groupID: "churn-g-" + topic, balancer: balancer,
		own: &ownership{owner: map[int32]string{}}, seen: &churnSeen{seen: make([][]bool, parts)},
		ctx: ctx, pollErrs: make(chan error, 16), kip848: kip848}
	for p := range r.seen.seen {
		r.seen.seen[p] = make([]bool, perPart)
	}

	// Produce at a steady pace for the whole churn schedule.
	prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	produced := make(chan error, 1)
	go func() {
		const steps = 60
		per := (perPart + steps - 1) / steps
		for from := 0; from < perPart; from += per {
			var rs []*kgo.Record
			for seq := from; seq < min(from+per, perPart); seq++ {
				for p := range int32(parts) {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: e2eValue(p, seq, 16)})
				}
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
		produced <- nil
	}()

	// Committed offsets are watched from outside all along.
	adm := kadm.NewClient(b.client())
	var monitorErr error
	monitorDone := make(chan struct{})
	stopMonitor := make(chan struct{})
	go func() {
		defer close(monitorDone)
		last := map[int32]int64{}
		for {
			select {
			case <-stopMonitor:
				return
			case <-time.After(25 * time.Millisecond):
			}
			offs, err := adm.FetchOffsets(ctx, r.groupID)
			if err != nil {
				continue // the coordinator may answer a retriable error under churn
			}
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic != topic || o.Err != nil {
					return
				}
				if o.At < last[o.Partition] && monitorErr == nil {
					monitorErr = fmt.Errorf("partition %d: committed offset went back from %d to %d", o.Partition, last[o.Partition], o.At)
				}
				last[o.Partition] = max(last[o.Partition], o.At)
			})
		}
	}()

	members := []*churnMember{r.start(), r.start(), r.start()}
	step := func(d time.Duration, what string, fn func()) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			t.Fatalf("timed out before %s", what)
		}
		t.Logf("%s (%d records consumed)", what, r.seenCount())
		fn()
	}
	pop := func(i int) *churnMember {
		m := members[i]
		members = slices.Delete(members, i, i+1)
		return m
	}
	step(1500*time.Millisecond, "a fourth member joins", func() { members = append(members, r.start()) })
	step(1500*time.Millisecond, "a member leaves", func() { pop(0).end("leave") })
	step(1500*time.Millisecond, "a member dies", func() { pop(0).end("kill") })
	step(1000*time.Millisecond, "a member joins", func() { members = append(members, r.start()) })
	step(1500*time.Millisecond, "another member dies", func() { pop(1).end("kill") })
	step(2500*time.Millisecond, "a member leaves", func() { pop(0).end("leave") })

	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	// The survivors finish the topic and commit its end.
	for {
		offs, err := adm.FetchOffsets(ctx, r.groupID)
		if err == nil && r.seenCount() == perPart*parts && committedAll(offs, topic, parts, int64(perPart)) {
			break
		}
		select {
		case err := <-r.pollErrs:
			t.Fatalf("poll: %v", err)
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d records; committed %v\nevents:\n%s", r.seenCount(), perPart*parts, offs, strings.Join(r.own.events, "\n"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	close(stopMonitor)
	<-monitorDone
	if kip848 {
		// The members really ran KIP-848: the group is a consumer group
		// whose members are the survivors.
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{r.groupID}
		resp, err := req.RequestWith(ctx, b.client())
		if err != nil {
			t.Fatal(err)
		}
		if g := resp.Groups[0]; g.ErrorCode != 0 || len(g.Members) != len(members) {
			t.Fatalf("ConsumerGroupDescribe: error %d, %d members; want 0 and %d (the survivors)", g.ErrorCode, len(g.Members), len(members))
		}
	}
	for _, m := range members {
		m.end("leave")
	}
	r.closers.Wait()
	if monitorErr != nil {
		t.Error(monitorErr)
	}
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	if len(r.own.errs) > 0 {
		t.Errorf("ownership violations:\n%s\nevents:\n%s", strings.Join(r.own.errs, "\n"), strings.Join(r.own.events, "\n"))
	}
	t.Logf("%d records consumed, %d assignment events:\n%s", perPart*parts, len(r.own.events), strings.Join(r.own.events, "\n"))
}

func (r *churnRun) seenCount() int {
	r.seen.mu.Lock()
	defer r.seen.mu.Unlock()
	return r.seen.count
}

func committedAll(offs kadm.OffsetResponses, topic string, parts int32, want int64) bool {
	for p := range parts {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != want {
			return false
		}
	}
	return true
}

// TestGroupChurnEager runs the churn with the range balancer (eager: every
// member gives up everything at each rebalance).
func TestGroupChurnEager(t *testing.T) {
	t.Parallel() // rebalance timers: about a tenth of a core for 10 s
	runChurn(t, kgo.RangeBalancer(), churnRecords())
}

// TestGroupChurnCooperative runs the churn with cooperative-sticky
// (KIP-429: partitions move in two rebalances, the others keep consuming).
func TestGroupChurnCooperative(t *testing.T) {
	t.Parallel() // rebalance timers: about a tenth of a core for 10 s
	runChurn(t, kgo.CooperativeStickyBalancer(), churnRecords())
}

func churnRecords() int {
	if testing.Short() {
		return 24_000
	}
	return 100_002 // a multiple of the 6 partitions
}
