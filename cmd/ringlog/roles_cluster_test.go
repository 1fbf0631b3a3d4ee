package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/admincli"
	"ringlog/internal/testkit"
	"ringlog/replication/controller"
)

// rolesCluster is controller-only and broker-only processes of the binary
// on loopback (process.roles), by node id.
type rolesCluster struct {
	t         *testing.T
	conf      string
	voters    string // controller.quorum.voters of the first controllers
	clusterID string
	procs     map[int]*proc
	ctlAddrs  map[int]string // controller ports
	addrs     map[int]string // Kafka listeners of the brokers
	dirs      map[int]string // data directories, kept over restarts
	admins    map[int]string // admin listeners (metrics)
}

// metric reads an unlabelled metric from node id's /metrics (0 when the
// node does not export it).
func (c *rolesCluster) metric(id int, name string) float64 {
	c.t.Helper()
	v, _ := scrapeSeries(c.t, "http://"+c.admins[id]+"/metrics", name)
	return v
}

func newRolesCluster(t *testing.T, controllers int, props string) *rolesCluster {
	conf := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &rolesCluster{t: t, conf: conf, procs: map[int]*proc{}, ctlAddrs: map[int]string{}, addrs: map[int]string{},
		dirs: map[int]string{}, admins: map[int]string{}}
	var vs []string
	var voters []controller.Voter
	for id := 1; id <= controllers; id++ {
		c.ctlAddrs[id] = testkit.FreeAddr(t)
		vs = append(vs, fmt.Sprintf("%d@%s", id, c.ctlAddrs[id]))
		voters = append(voters, controller.Voter{ID: int32(id), Addr: c.ctlAddrs[id]})
	}
	c.voters = strings.Join(vs, ",")
	c.clusterID = controller.ClusterIDFromVoters(voters)
	t.Cleanup(func() {
		if t.Failed() {
			for id, p := range c.procs {
				out := p.out.String()
				t.Logf("node %d, last lines:\n%s", id, out[max(0, len(out)-5000):])
			}
		}
	})
	for id := 1; id <= controllers; id++ {
		c.start(id, "-process-roles", "controller", "-controller-voters", c.voters)
	}
	return c
}

// start runs node id with args and waits until it serves its admin
// listener (a broker: its Kafka listener too).
func (c *rolesCluster) start(id int, args ...string) {
	c.t.Helper()
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	c.admins[id] = testkit.FreeAddr(c.t)
	args = append([]string{"-node-id", strconv.Itoa(id), "-config", c.conf, "-data-dir", c.dirs[id],
		"-admin", c.admins[id]}, args...)
	if c.addrs[id] != "" {
		args = append(args, "-listen", c.addrs[id])
	}
	p := start(c.t, args...)
	c.procs[id] = p
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.out.String(), `msg="admin HTTP"`); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-p.done:
			p.done <- err
			c.t.Fatalf("node %d exited (%v) before serving:\n%s", id, err, p.out)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d not serving after 30 s:\n%s", id, p.out)
		}
	}
}

// startBroker starts broker-only node id with args for the quorum.
func (c *rolesCluster) startBroker(id int, args ...string) {
	c.t.Helper()
	c.addrs[id] = testkit.FreeAddr(c.t)
	c.start(id, append([]string{"-process-roles", "broker"}, args...)...)
}

func (c *rolesCluster) seeds() []string {
	var out []string
	for _, a := range c.addrs {
		out = append(out, a)
	}
	return out
}

// waitBrokers waits until the broker at addr lists the broker ids want.
func waitBrokerIDs(t *testing.T, addr string, want ...int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var last []int32
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		if err != nil {
			continue
		}
		last = last[:0]
		for _, b := range resp.Brokers {
			last = append(last, b.NodeID)
		}
		if fmt.Sprint(sortedIDs(last)) == fmt.Sprint(sortedIDs(want)) {
			return
		}
	}
	t.Fatalf("broker %s lists brokers %v after 30 s, want %v", addr, last, want)
}

func sortedIDs(v []int32) []int32 {
	out := append([]int32(nil), v...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// ackedProducer produces acks=all records "k-<n>" to topic until stopped,
// with kgo's idempotent producer, round robin over the partitions,
// keeping where each acknowledged record was written.
type ackedProducer struct {
	cl    *kgo.Client
	mu    sync.Mutex
	acked map[string]seedRecord
	errs  int
	stop  chan struct{}
	done  chan struct{}
}

func startProducer(t *testing.T, seeds []string, topic string) *ackedProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(20), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		// A moved leadership is learned at the next metadata refresh,
		// which kgo spaces 5 s apart by default.
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	p := &ackedProducer{cl: cl, acked: map[string]seedRecord{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				cl.Flush(context.Background())
				return
			default:
			}
			v := "k-" + strconv.Itoa(n)
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.errs++
					return
				}
				p.acked[v] = seedRecord{r.Partition, r.Offset}
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Cleanup(cl.Close)
	return p
}

func (p *ackedProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// waitMore waits until n more records than now were acknowledged.
func (p *ackedProducer) waitMore(t *testing.T, n int) {
	t.Helper()
	want := p.count() + n
	for deadline := time.Now().Add(20 * time.Second); p.count() < want; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records acknowledged after 20 s, want %d (%d errors)", p.count(), want, p.errs)
		}
	}
}

// finish stops producing and reads the topic back: every acknowledged
// record is there once, at the offset it was acknowledged at, and each
// partition holds the producer's records in the order it sent them (any
// record, acknowledged or not, at most once: its idempotence).
func (p *ackedProducer) finish(t *testing.T, seeds []string, topic string) {
	t.Helper()
	close(p.stop)
	<-p.done
	p.mu.Lock()
	acked := p.acked
	p.mu.Unlock()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	lastN := map[int32]int{}
	missing := len(acked)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for missing > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			n, err := strconv.Atoi(strings.TrimPrefix(v, "k-"))
			if err != nil {
				t.Fatalf("record %q at %d/%d", v, r.Partition, r.Offset)
			}
			if last, ok := lastN[r.Partition]; ok && n <= last {
				t.Fatalf("partition %d: %s at offset %d after k-%d (out of order, or twice)", r.Partition, v, r.Offset, last)
			}
			lastN[r.Partition] = n
			if w, ok := acked[v]; ok {
				if w.partition != r.Partition || w.offset != r.Offset {
					t.Fatalf("%s at %d/%d, acknowledged at %d/%d", v, r.Partition, r.Offset, w.partition, w.offset)
				}
				seen[v] = true
				missing--
			}
		})
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records not read back", missing, len(acked))
	}
	t.Logf("%d acknowledged records read back once, in order (%d produce errors)", len(acked), p.errs)
}

// TestRolesControllersAndBrokers is issue 14's elastic cluster in one
// scenario: three controller-only nodes (the quorum's voters, no Kafka
// listener) and three broker-only nodes (raft non-voters, given the voter
// list); an idempotent acks=all producer runs through all of it on a
// topic of four partitions replicated twice. A fourth broker joins knowing
// the quorum only by controller.quorum.bootstrap.servers; DescribeQuorum,
// asked of a broker, names the controllers as voters and the brokers as
// observers, each with its log end offset near the high watermark; half
// the partitions are reassigned to the new broker, which is stopped
// before and started during the move (the move completes); broker 6 is
// drained (`partition reassign --move-off`), stopped and unregistered;
// broker 5 restarts (on another controller port, found by the leader); a
// controller is replaced (AddRaftVoter, RemoveRaftVoter). Every
// acknowledged record reads back once, in order, where it was
// acknowledged.
func TestRolesControllersAndBrokers(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	c := newRolesCluster(t, 3, "broker.heartbeat.interval.ms=300\nbroker.session.timeout.ms=3000\nmin.insync.replicas=2\n")
	for _, id := range []int{1, 2, 3} {
		if out := c.procs[id].out.String(); !strings.Contains(out, "ringlog controller started") || strings.Contains(out, "ringlog started") {
			t.Fatalf("controller %d started a broker:\n%s", id, out)
		}
	}
	c.startBroker(4, "-controller-voters", c.voters)
	c.startBroker(5, "-controller-voters", c.voters)
	c.startBroker(6, "-controller-voters", c.voters)
	waitBrokerIDs(t, c.addrs[4], 4, 5, 6)

	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "roles", 4, 2
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 10000
	resp, err := create.RequestWith(ctx, adm)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	// KafkaController's metrics come from the controllers: one of them is
	// active, and it counts the topic's partitions.
	active, partitions := 0.0, 0.0
	for _, id := range []int{1, 2, 3} {
		active += c.metric(id, "kafka_controller_kafkacontroller_activecontrollercount")
		partitions += c.metric(id, "kafka_controller_kafkacontroller_globalpartitioncount")
	}
	if active != 1 || partitions != 4 {
		t.Fatalf("the controllers' metrics: %v active, %v partitions; want 1 and 4", active, partitions)
	}
	seeds := []string{c.addrs[4], c.addrs[5]}
	p := startProducer(t, seeds, "roles")
	p.waitMore(t, 200)

	bootstrap := c.ctlAddrs[2] + "," + c.ctlAddrs[3]
	c.startBroker(8, "-controller-bootstrap-servers", bootstrap, "-cluster-id", c.clusterID)
	waitBrokerIDs(t, c.addrs[8], 4, 5, 6, 8)
	p.waitMore(t, 200)

	// DescribeQuorum, asked of a broker: the three controllers vote, the
	// four brokers observe, each with a recent report near the HW.
	// The leader knows a node's log end offset from its heartbeats: broker
	// 8's first one came before it had fetched anything, so its report is
	// waited for (one heartbeat interval), not asserted at once.
	waitQuorum(t, adm, func(q *kmsg.DescribeQuorumResponseTopicPartition) error {
		if got := fmt.Sprint(replicaIDs(q.CurrentVoters), replicaIDs(q.Observers)); got != "[1 2 3] [4 5 6 8]" {
			return fmt.Errorf("voters and observers %s", got)
		}
		if q.LeaderID < 1 || q.LeaderID > 3 || q.LeaderEpoch < 1 || q.HighWatermark <= 0 {
			return fmt.Errorf("leader %d, epoch %d, high watermark %d", q.LeaderID, q.LeaderEpoch, q.HighWatermark)
		}
		for _, r := range append(q.CurrentVoters, q.Observers...) {
			lag := q.HighWatermark - r.LogEndOffset
			if r.LogEndOffset <= 0 || lag > 50 || lag < -50 || time.Since(time.UnixMilli(r.LastFetchTimestamp)) > 5*time.Second ||
				r.LastCaughtUpTimestamp <= 0 {
				return fmt.Errorf("node %d: log end offset %d (high watermark %d), last fetch %d, last caught up %d",
					r.ReplicaID, r.LogEndOffset, q.HighWatermark, r.LastFetchTimestamp, r.LastCaughtUpTimestamp)
			}
		}
		return nil
	})

	// Half the partitions move to broker 8, each in place of its first
	// replica (its leader, unless one moved): their records are copied
	// there, and leadership moves with them. Broker 8 is stopped when the
	// reassignment starts and comes back during it: the move completes.
	if err := c.procs[8].stop(t); err != nil {
		t.Fatalf("broker 8's exit: %v", err)
	}
	before, _, err := assignment(t, adm, "roles")
	if err != nil {
		t.Fatal(err)
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	want := map[int32][]int32{}
	for part := range int32(2) {
		want[part] = []int32{8, before[part][1]}
		req.Assign("roles", part, want[part])
	}
	ares, err := kadm.NewClient(adm).AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = ares.Error()
	}
	if err != nil {
		t.Fatalf("reassign half of roles to broker 8: %v", err)
	}
	// With broker 8 away, the moves wait for it: in progress, adding it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := reassigning(t, adm)
		if fmt.Sprint(m) == "map[roles-0:[8] roles-1:[8]]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignments in progress with broker 8 stopped: %v, want roles-0 and roles-1 adding [8]", m)
		}
	}
	c.start(8, "-process-roles", "broker", "-controller-bootstrap-servers", bootstrap, "-cluster-id", c.clusterID)
	waitAssignment(t, adm, "roles", func(a map[int32][]int32) bool {
		return fmt.Sprint(a[0]) == fmt.Sprint(want[0]) && fmt.Sprint(a[1]) == fmt.Sprint(want[1])
	})
	p.waitMore(t, 200)

	// Broker 6 is drained (every replica it holds moves to a broker that
	// lacks the partition), stopped, and unregistered: it leaves the
	// quorum's observers, and a second UnregisterBroker finds it gone. A
	// broker that is still a replica is refused, an unknown one too.
	c.admin("partition", "reassign", "--move-off", "6", "--execute")
	waitAssignment(t, adm, "roles", func(a map[int32][]int32) bool {
		for _, rs := range a {
			if slices.Contains(rs, 6) {
				return false
			}
		}
		return true
	})
	p.waitMore(t, 200)
	if err := c.procs[6].stop(t); err != nil {
		t.Fatalf("broker 6's exit: %v", err)
	}
	for _, tc := range []struct {
		id   int32
		want int16
	}{{42, kerr.BrokerIDNotRegistered.Code}, {4, kerr.InvalidRequest.Code}} {
		if code, msg := unregisterBroker(t, adm, tc.id); code != tc.want {
			t.Fatalf("UnregisterBroker %d: error %d (%s), want %d", tc.id, code, msg, tc.want)
		}
	}
	c.admin("cluster", "unregister", "--id", "6")
	if code, msg := unregisterBroker(t, adm, 6); code != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("UnregisterBroker 6 again: error %d (%s), want BROKER_ID_NOT_REGISTERED", code, msg)
	}
	waitQuorum(t, adm, func(p *kmsg.DescribeQuorumResponseTopicPartition) error {
		return wantIDs("observers", replicaIDs(p.Observers), "[4 5 8]")
	})
	waitBrokerIDs(t, c.addrs[4], 4, 5, 8)

	// Broker 5 restarts: its controller port is a new free one, which it
	// announces; the leader moves its non-voter membership there, it
	// catches up, and acks=all (min.insync.replicas=2) works again.
	if err := c.procs[5].stop(t); err != nil {
		t.Fatalf("broker 5's exit: %v", err)
	}
	c.start(5, "-process-roles", "broker", "-controller-voters", c.voters)
	p.waitMore(t, 200)
	// Moved, or (when the restart took longer than the session timeout)
	// pruned and added again.
	moved, added := false, 0
	for _, id := range []int{1, 2, 3} {
		out, node := c.procs[id].out.String(), "node="+strconv.Itoa(id)+" node=5 "
		moved = moved || strings.Contains(out, `msg="controller: a non-voter moved" `+node)
		added += strings.Count(out, `msg="controller: adding a non-voter (observer) to the quorum" `+node)
	}
	if !moved && added < 2 {
		t.Fatal("no controller moved broker 5's membership to its new port")
	}

	// A controller replaced while the producer runs: node 7 finds the
	// quorum by bootstrap servers and observes, AddRaftVoter makes it a
	// voter, RemoveRaftVoter takes the leader's vote and the old leader
	// stops. Then a second old controller stops: only the old third and
	// the new voter are left, a majority of the new set and of no old one,
	// and metadata writes still commit.
	c.ctlAddrs[7] = testkit.FreeAddr(t)
	// Its controller listener comes from Kafka's listeners setting (the
	// last -config wins), with the role given by flag.
	props, err := os.ReadFile(c.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf7 := filepath.Join(t.TempDir(), "controller.properties")
	props = append(props, "listeners=CONTROLLER://"+c.ctlAddrs[7]+"\ncontroller.listener.names=CONTROLLER\n"...)
	if err := os.WriteFile(conf7, props, 0o644); err != nil {
		t.Fatal(err)
	}
	c.start(7, "-config", conf7, "-process-roles", "controller", "-controller-bootstrap-servers", bootstrap, "-cluster-id", c.clusterID)
	waitQuorum(t, adm, func(p *kmsg.DescribeQuorumResponseTopicPartition) error {
		if !slices.Contains(replicaIDs(p.Observers), 7) {
			return fmt.Errorf("observers %v, without 7", replicaIDs(p.Observers))
		}
		return nil
	})
	// Through `ringlog admin` (internal/admincli), as an operator would.
	c.admin("cluster", "add-voter", "--id", "7", "--endpoint", c.ctlAddrs[7], "--cluster-id", c.clusterID)
	q := waitQuorum(t, adm, func(p *kmsg.DescribeQuorumResponseTopicPartition) error {
		return wantIDs("voters", replicaIDs(p.CurrentVoters), "[1 2 3 7]")
	})
	for _, tc := range []struct {
		name     string
		cluster  string
		id       int32
		remove   bool
		wantCode int16
	}{
		{"add a voter again", c.clusterID, 7, false, kerr.DuplicateVoter.Code},
		{"add a broker", c.clusterID, 4, false, kerr.InvalidRequest.Code},
		{"add with another cluster id", "AAAAAAAAAAAAAAAAAAAAAA", 8, false, kerr.InconsistentClusterID.Code},
		{"remove a node that is no voter", c.clusterID, 42, true, kerr.VoterNotFound.Code},
	} {
		var code int16
		var msg string
		if tc.remove {
			code, msg = removeVoter(t, adm, tc.cluster, tc.id)
		} else {
			code, msg = addVoter(t, adm, tc.cluster, tc.id, c.ctlAddrs[7])
		}
		if code != tc.wantCode {
			t.Errorf("%s: error %d (%s), want %d", tc.name, code, msg, tc.wantCode)
		}
	}
	old := int(q.LeaderID)
	c.admin("cluster", "remove-voter", "--id", strconv.Itoa(old))
	var left []int32
	for _, id := range []int32{1, 2, 3, 7} {
		if id != int32(old) {
			left = append(left, id)
		}
	}
	waitQuorum(t, adm, func(p *kmsg.DescribeQuorumResponseTopicPartition) error {
		if p.LeaderID == int32(old) {
			return fmt.Errorf("node %d still leads", old)
		}
		return wantIDs("voters", replicaIDs(p.CurrentVoters), fmt.Sprint(left))
	})
	if err := c.procs[old].stop(t); err != nil {
		t.Fatalf("controller %d's exit: %v", old, err)
	}
	p.waitMore(t, 200)
	second := int(left[0])
	if err := c.procs[second].stop(t); err != nil {
		t.Fatalf("controller %d's exit: %v", second, err)
	}
	create = kmsg.NewPtrCreateTopicsRequest()
	ct.Topic = "after-replacement"
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 15000
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	resp, err = create.RequestWith(ctx2, adm)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic with controllers %v and %d stopped: %v %+v", old, second, err, resp)
	}
	p.waitMore(t, 200)
	p.finish(t, seeds, "roles")

	// `ringlog admin cluster quorum` shows the new voter set.
	var out struct {
		LeaderID int32 `json:"leader_id"`
		Replicas []struct {
			NodeID int32  `json:"node_id"`
			Role   string `json:"role"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(c.admin("cluster", "quorum", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	roles := map[int32]string{}
	for _, r := range out.Replicas {
		roles[r.NodeID] = r.Role
	}
	if roles[7] == "Observer" || roles[7] == "" || roles[int32(old)] == "Leader" || roles[4] != "Observer" || roles[5] != "Observer" {
		t.Fatalf("cluster quorum: %+v", out)
	}
}

// admin runs `ringlog admin` against the cluster's brokers and fails the
// test unless it succeeds; it returns what it printed.
func (c *rolesCluster) admin(args ...string) string {
	c.t.Helper()
	var out, errOut strings.Builder
	if err := admincli.Main(append(args, "-b", strings.Join(c.seeds(), ",")), &out, &errOut); err != nil {
		c.t.Fatalf("ringlog admin %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// addVoter sends AddRaftVoter for node id with its controller endpoint.
func addVoter(t *testing.T, cl *kgo.Client, clusterID string, id int32, addr string) (int16, string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.ClusterID, req.VoterID, req.TimeoutMillis = &clusterID, id, 10000
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(n)
	req.Listeners = append(req.Listeners, l)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("AddRaftVoter %d: %v", id, err)
	}
	return resp.ErrorCode, deref(resp.ErrorMessage)
}

// unregisterBroker sends UnregisterBroker for broker id.
func unregisterBroker(t *testing.T, cl *kgo.Client, id int32) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("UnregisterBroker %d: %v", id, err)
	}
	return resp.ErrorCode, deref(resp.ErrorMessage)
}

// removeVoter sends RemoveRaftVoter for node id.
func removeVoter(t *testing.T, cl *kgo.Client, clusterID string, id int32) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.ClusterID, req.VoterID = &clusterID, id
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("RemoveRaftVoter %d: %v", id, err)
	}
	return resp.ErrorCode, deref(resp.ErrorMessage)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// describeQuorum asks the cluster for __cluster_metadata-0's quorum.
func describeQuorum(t *testing.T, cl *kgo.Client) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	t.Helper()
	req := testkit.DescribeQuorumRequest()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeQuorum answered %+v", resp)
	}
	return &resp.Topics[0].Partitions[0], nil
}

// waitQuorum waits until DescribeQuorum's answer satisfies ok.
// waitQuorum asks DescribeQuorum until check accepts its answer (a nil
// error), for up to 20 s, and fails with check's last complaint.
func waitQuorum(t *testing.T, cl *kgo.Client, check func(*kmsg.DescribeQuorumResponseTopicPartition) error) *kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p, err := describeQuorum(t, cl)
		if err == nil {
			if err = check(p); err == nil {
				return p
			}
		}
		last = err
	}
	t.Fatalf("DescribeQuorum after 20 s: %v", last)
	return nil
}

// wantIDs is nil when ids print as s, else an error naming what.
func wantIDs(what string, ids []int32, s string) error {
	if got := fmt.Sprint(ids); got != s {
		return fmt.Errorf("%s %s, want %s", what, got, s)
	}
	return nil
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var ids []int32
	for _, r := range rs {
		ids = append(ids, r.ReplicaID)
	}
	return sortedIDs(ids)
}

// assignment is topic's replicas and ISR by partition, from a Metadata
// request (kadm's would be kgo's cached metadata, up to 5 s old).
func assignment(t *testing.T, adm *kgo.Client, topic string) (replicas, isr map[int32][]int32, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, adm)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil, nil, fmt.Errorf("metadata of %s: %+v", topic, resp.Topics)
	}
	replicas, isr = map[int32][]int32{}, map[int32][]int32{}
	for _, p := range resp.Topics[0].Partitions {
		replicas[p.Partition], isr[p.Partition] = p.Replicas, p.ISR
	}
	return replicas, isr, nil
}

// waitAssignment waits until topic's assignment satisfies ok with no
// reassignment left in progress, every partition's ISR its whole replica
// list.
func waitAssignment(t *testing.T, adm *kgo.Client, topic string, ok func(map[int32][]int32) bool) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		a, isr, err := assignment(t, adm, topic)
		if err != nil {
			last = err.Error()
			continue
		}
		moving := reassigning(t, adm)
		inSync := true
		for part, rs := range a {
			inSync = inSync && len(isr[part]) == len(rs)
		}
		last = fmt.Sprintf("assignment %v, in sync %v, reassignments %d", a, inSync, len(moving))
		if ok(a) && inSync && len(moving) == 0 {
			return
		}
	}
	t.Fatalf("%s after 20 s: %s", topic, last)
}

// reassigning lists the reassignments in progress (every topic's:
// ListPartitionReassignments with null topics) as "topic-partition" to
// the replicas being added.
func reassigning(t *testing.T, adm *kgo.Client) map[string][]int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, adm)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	out := map[string][]int32{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = sortedIDs(rp.AddingReplicas)
		}
	}
	return out
}
