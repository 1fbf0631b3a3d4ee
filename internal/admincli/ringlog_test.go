package admincli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit/testbroker"
)

// admin runs Main against addr with args, returning what it printed and
// its error.
func admin(t *testing.T, addr string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	// The defaults go right after GROUP VERB, so that args may override
	// them (the flag package keeps the last value).
	all := append(append(append([]string{}, args[:2]...), "-b", addr, "--timeout", "20s"), args[2:]...)
	err = Main(all, &out, &errOut)
	return out.String(), errOut.String(), err
}

// adminOK runs Main and fails the test on an error.
func adminOK(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, errOut, err := admin(t, addr, args...)
	if err != nil {
		t.Fatalf("admin %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// adminJSON runs Main with --json and decodes its output into v.
func adminJSON(t *testing.T, addr string, v any, args ...string) {
	t.Helper()
	out := adminOK(t, addr, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("admin %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestTopicCommandsRinglog: on a real ringlog broker, topic create makes
// the topic with its partitions and configs (and refuses a second create
// unless --if-not-exists), list hides internal topics unless asked,
// describe shows the partitions' leader, replicas and ISR and the configs
// with their sources, alter sets and deletes configs and adds partitions,
// delete removes the topic.
func TestTopicCommandsRinglog(t *testing.T) {
	b := testbroker.StartBroker(t, testbroker.Config(t.TempDir()))
	addr := b.Addr

	out := adminOK(t, addr, "topic", "create", "orders", "-p", "3", "-c", "retention.ms=3600000", "-c", "cleanup.policy=delete")
	if !strings.Contains(out, "orders") || !strings.Contains(out, "created") {
		t.Fatalf("create printed:\n%s", out)
	}
	out, _, err := admin(t, addr, "topic", "create", "orders", "-p", "3")
	if err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second create: %v\n%s", err, out)
	}
	var created struct {
		Topics []topicResult `json:"topics"`
	}
	adminJSON(t, addr, &created, "topic", "create", "orders", "--if-not-exists")
	if len(created.Topics) != 1 || created.Topics[0].Status != "exists" {
		t.Fatalf("create --if-not-exists: %+v", created)
	}

	// Make __consumer_offsets exist: a group commit.
	produce(t, addr, "orders", 3, 2)
	consumeAndCommit(t, addr, "listing-group", "orders", 6).Close()

	var listed struct {
		Topics []topicSummary `json:"topics"`
	}
	adminJSON(t, addr, &listed, "topic", "list")
	if len(listed.Topics) != 1 || listed.Topics[0].Topic != "orders" || listed.Topics[0].Partitions != 3 || listed.Topics[0].ReplicationFactor != 1 {
		t.Fatalf("topic list: %+v", listed.Topics)
	}
	adminJSON(t, addr, &listed, "topic", "list", "--internal")
	var names []string
	for _, tp := range listed.Topics {
		names = append(names, tp.Topic)
	}
	if fmt.Sprint(names) != "[__consumer_offsets orders]" || !listed.Topics[0].Internal {
		t.Fatalf("topic list --internal: %+v", listed.Topics)
	}

	describe := func() topicDescription {
		t.Helper()
		var d struct {
			Topics []topicDescription `json:"topics"`
		}
		adminJSON(t, addr, &d, "topic", "describe", "orders")
		if len(d.Topics) != 1 {
			t.Fatalf("describe: %+v", d)
		}
		return d.Topics[0]
	}
	configOf := func(d topicDescription, key string) (configInfo, bool) {
		for _, c := range d.Configs {
			if c.Key == key {
				return c, true
			}
		}
		return configInfo{}, false
	}
	d := describe()
	if len(d.Partitions) != 3 || d.ReplicationFactor != 1 || d.ID == "" {
		t.Fatalf("describe: %+v", d)
	}
	for i, p := range d.Partitions {
		if p.Partition != int32(i) || p.Leader != 0 || fmt.Sprint(p.Replicas) != "[0]" || fmt.Sprint(p.ISR) != "[0]" || len(p.OfflineReplicas) != 0 {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	if c, ok := configOf(d, "retention.ms"); !ok || c.Value == nil || *c.Value != "3600000" || c.Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms: %+v %v (configs %+v)", c, ok, d.Configs)
	}
	text := adminOK(t, addr, "topic", "describe", "orders")
	for _, want := range []string{"PARTITION", "LEADER", "ISR", "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"} {
		if !strings.Contains(text, want) {
			t.Fatalf("describe table lacks %q:\n%s", want, text)
		}
	}

	adminOK(t, addr, "topic", "alter", "orders", "--set", "retention.ms=7200000", "--set", "max.message.bytes=2000000", "--partitions", "5")
	d = describe()
	if len(d.Partitions) != 5 {
		t.Fatalf("after --partitions 5: %d partitions", len(d.Partitions))
	}
	if c, ok := configOf(d, "retention.ms"); !ok || *c.Value != "7200000" {
		t.Fatalf("retention.ms after --set: %+v", c)
	}
	if c, ok := configOf(d, "max.message.bytes"); !ok || *c.Value != "2000000" {
		t.Fatalf("max.message.bytes after --set: %+v", c)
	}
	adminOK(t, addr, "topic", "alter", "orders", "--delete", "retention.ms")
	d = describe()
	if c, ok := configOf(d, "retention.ms"); ok {
		t.Fatalf("retention.ms after --delete is still an override: %+v", c)
	}
	if c, ok := configOf(d, "max.message.bytes"); !ok || *c.Value != "2000000" {
		t.Fatalf("max.message.bytes after deleting another key: %+v", c)
	}
	// Fewer partitions is the broker's INVALID_PARTITIONS.
	if _, _, err := admin(t, addr, "topic", "alter", "orders", "--partitions", "2"); err == nil || !strings.Contains(err.Error(), "INVALID_PARTITIONS") {
		t.Fatalf("alter to fewer partitions: %v", err)
	}

	adminOK(t, addr, "topic", "delete", "orders")
	adminJSON(t, addr, &listed, "topic", "list")
	if len(listed.Topics) != 0 {
		t.Fatalf("topic list after delete: %+v", listed.Topics)
	}
	if _, _, err := admin(t, addr, "topic", "describe", "orders"); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("describe a deleted topic: %v", err)
	}
	if _, _, err := admin(t, addr, "topic", "delete", "orders"); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("delete a deleted topic: %v", err)
	}
}

// kip848Opts make a kgo consumer join with KIP-848's protocol (the
// coordinator assigns), a group of type "consumer".
var kip848Opts = []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}

// checkKIP848Group joins a KIP-848 group on topic (partitions of
// perPartition records each), and checks that group describe shows it as
// type consumer with its member, the member's assignment and no lag.
func checkKIP848Group(t *testing.T, addr, group, topic string, partitions, perPartition int) {
	t.Helper()
	member := consumeAndCommit(t, addr, group, topic, partitions*perPartition, kip848Opts...)
	defer member.Close()
	var described struct {
		Groups []groupDescription `json:"groups"`
	}
	adminJSON(t, addr, &described, "group", "describe", group)
	g := described.Groups[0]
	if g.Type != "consumer" || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].ClientID != "lag-test" {
		t.Fatalf("KIP-848 group: %+v", g)
	}
	if a := g.Members[0].Assignment; len(a) != 1 || a[0].Topic != topic || len(a[0].Partitions) != partitions {
		t.Fatalf("KIP-848 member's assignment: %+v", a)
	}
	if len(g.Offsets) != partitions {
		t.Fatalf("KIP-848 group's offsets: %+v", g.Offsets)
	}
	for _, o := range g.Offsets {
		if o.CommittedOffset == nil || *o.CommittedOffset != int64(perPartition) || o.Lag == nil || *o.Lag != 0 || o.MemberID != g.Members[0].MemberID {
			t.Fatalf("KIP-848 group, partition %d: %+v", o.Partition, o)
		}
	}
}

// checkNewGroupReset sets the offsets of a group that does not exist
// yet, as Kafka's tool allows (the group is Dead: no members), and checks
// that describe then shows them; describing it before was an error.
func checkNewGroupReset(t *testing.T, addr, group, topic string, partitions int) {
	t.Helper()
	if _, _, err := admin(t, addr, "group", "describe", group); err == nil || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Fatalf("describe a group that does not exist: %v", err)
	}
	adminOK(t, addr, "group", "reset-offsets", group, "--topic", topic, "--to-offset", "3", "--execute")
	var described struct {
		Groups []groupDescription `json:"groups"`
	}
	adminJSON(t, addr, &described, "group", "describe", group)
	g := described.Groups[0]
	if g.State != "Empty" || len(g.Offsets) != partitions {
		t.Fatalf("a new group after reset-offsets: %+v", g)
	}
	for _, o := range g.Offsets {
		if o.CommittedOffset == nil || *o.CommittedOffset != 3 {
			t.Fatalf("a new group after reset-offsets --to-offset 3: %+v", o)
		}
	}
}

// produce writes perPartition records to each of partitions partitions.
func produce(t *testing.T, addr, topic string, partitions, perPartition int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for p := range partitions {
		for i := range perPartition {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAndCommit joins group on topic (the classic protocol unless opts
// say kip848Opts), reads n records, commits them and returns the client,
// still a member.
func consumeAndCommit(t *testing.T, addr, group, topic string, n int, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("lag-test")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			cl.Close()
			t.Fatalf("poll: %v (after %d records)", err, got)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		cl.Close()
		t.Fatalf("commit: %v", err)
	}
	return cl
}

// TestGroupCommandsRinglog: a group made by a kgo consumer is listed,
// described with its member, assignment, committed offsets and lag (end
// offset minus committed), summed by `group lag`; reset-offsets refuses
// while the member is in the group, and once it left changes nothing in
// a dry run and commits the new offsets with --execute. A KIP-848 group
// is described too (ConsumerGroupDescribe).
func TestGroupCommandsRinglog(t *testing.T) {
	b := testbroker.StartBroker(t, testbroker.Config(t.TempDir()))
	addr := b.Addr
	adminOK(t, addr, "topic", "create", "events", "-p", "3")
	produce(t, addr, "events", 3, 10)
	member := consumeAndCommit(t, addr, "billing", "events", 30)
	defer member.Close()
	// Lag: 4 more records on partition 1, none read.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 4 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 1, Value: fmt.Appendf(nil, "late-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	var groups struct {
		Groups []groupSummary `json:"groups"`
	}
	adminJSON(t, addr, &groups, "group", "list")
	if len(groups.Groups) != 1 || groups.Groups[0].Group != "billing" || groups.Groups[0].State != "Stable" || groups.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("group list: %+v", groups.Groups)
	}

	var described struct {
		Groups []groupDescription `json:"groups"`
	}
	adminJSON(t, addr, &described, "group", "describe", "billing")
	g := described.Groups[0]
	if g.State != "Stable" || len(g.Members) != 1 || g.Members[0].ClientID != "lag-test" {
		t.Fatalf("describe: %+v", g)
	}
	if a := g.Members[0].Assignment; len(a) != 1 || a[0].Topic != "events" || fmt.Sprint(a[0].Partitions) != "[0 1 2]" {
		t.Fatalf("assignment: %+v", a)
	}
	if len(g.Offsets) != 3 {
		t.Fatalf("offsets: %+v", g.Offsets)
	}
	for _, o := range g.Offsets {
		wantEnd, wantLag := int64(10), int64(0)
		if o.Partition == 1 {
			wantEnd, wantLag = 14, 4
		}
		if o.CommittedOffset == nil || *o.CommittedOffset != 10 || o.LogEndOffset != wantEnd || o.Lag == nil || *o.Lag != wantLag || o.MemberID != g.Members[0].MemberID {
			t.Fatalf("partition %d: %+v (committed %v, lag %v)", o.Partition, o, optInt(o.CommittedOffset), optInt(o.Lag))
		}
	}
	text := adminOK(t, addr, "group", "describe", "billing")
	for _, want := range []string{"CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "events", "lag-test"} {
		if !strings.Contains(text, want) {
			t.Fatalf("describe table lacks %q:\n%s", want, text)
		}
	}

	var lag struct {
		Lag []lagSummary `json:"lag"`
	}
	adminJSON(t, addr, &lag, "group", "lag")
	if len(lag.Lag) != 1 || lag.Lag[0].Group != "billing" || lag.Lag[0].Topic != "events" || lag.Lag[0].Lag != 4 || lag.Lag[0].MaxLag != 4 || lag.Lag[0].Partitions != 3 {
		t.Fatalf("group lag: %+v", lag.Lag)
	}

	// A group with a member is refused, dry run or not.
	for _, extra := range [][]string{nil, {"--execute"}} {
		_, _, err := admin(t, addr, append([]string{"group", "reset-offsets", "billing", "--topic", "events", "--to-earliest"}, extra...)...)
		if !errors.Is(err, ErrGroupActive) || !strings.Contains(err.Error(), "Stable") {
			t.Fatalf("reset-offsets %v on a Stable group: %v", extra, err)
		}
	}
	member.Close() // leaves the group

	committed := func() map[int32]int64 {
		adminJSON(t, addr, &described, "group", "describe", "billing")
		m := make(map[int32]int64)
		for _, o := range described.Groups[0].Offsets {
			if o.CommittedOffset != nil {
				m[o.Partition] = *o.CommittedOffset
			}
		}
		return m
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		adminJSON(t, addr, &described, "group", "describe", "billing")
		if described.Groups[0].State == "Empty" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not become Empty: %+v", described.Groups[0])
		}
		time.Sleep(100 * time.Millisecond)
	}

	var reset struct {
		Group    string        `json:"group"`
		Executed bool          `json:"executed"`
		Offsets  []resetOffset `json:"offsets"`
	}
	adminJSON(t, addr, &reset, "group", "reset-offsets", "billing", "--topic", "events", "--to-earliest")
	if reset.Executed || len(reset.Offsets) != 3 || reset.Offsets[1].NewOffset != 0 || *reset.Offsets[1].CurrentOffset != 10 {
		t.Fatalf("dry run: %+v", reset)
	}
	if got := committed(); fmt.Sprint(got) != "map[0:10 1:10 2:10]" {
		t.Fatalf("a dry run changed the committed offsets: %v", got)
	}
	if _, _, err := admin(t, addr, "group", "reset-offsets", "billing", "--topic", "events", "--to-earliest", "--dry-run", "--execute"); !errors.Is(err, ErrUsage) {
		t.Fatalf("--dry-run with --execute: %v", err)
	}
	_, stderr, err := admin(t, addr, "group", "reset-offsets", "billing", "--topic", "events", "--to-earliest", "--dry-run")
	if err != nil || !strings.Contains(stderr, "--execute") {
		t.Fatalf("dry run in text: %v, stderr %q", err, stderr)
	}

	adminJSON(t, addr, &reset, "group", "reset-offsets", "billing", "--topic", "events:1", "--to-offset", "12", "--execute")
	if !reset.Executed || len(reset.Offsets) != 1 || reset.Offsets[0].NewOffset != 12 {
		t.Fatalf("--to-offset 12 --execute: %+v", reset)
	}
	if got := committed(); fmt.Sprint(got) != "map[0:10 1:12 2:10]" {
		t.Fatalf("after --to-offset 12 on partition 1: %v", got)
	}
	// Beyond the end is kept at the end, as Kafka's tool does.
	adminOK(t, addr, "group", "reset-offsets", "billing", "--all-topics", "--to-offset", "1000", "--execute")
	if got := committed(); fmt.Sprint(got) != "map[0:10 1:14 2:10]" {
		t.Fatalf("after --to-offset 1000: %v", got)
	}
	adminOK(t, addr, "group", "reset-offsets", "billing", "--all-topics", "--to-earliest", "--execute")
	if got := committed(); fmt.Sprint(got) != "map[0:0 1:0 2:0]" {
		t.Fatalf("after --to-earliest --execute: %v", got)
	}
	adminOK(t, addr, "group", "reset-offsets", "billing", "--all-topics", "--to-datetime", time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"), "--execute")
	if got := committed(); fmt.Sprint(got) != "map[0:10 1:14 2:10]" {
		t.Fatalf("after --to-datetime an hour ahead (the end): %v", got)
	}
	adminOK(t, addr, "group", "reset-offsets", "billing", "--all-topics", "--to-datetime", "2020-01-01T00:00:00.000Z", "--execute")
	if got := committed(); fmt.Sprint(got) != "map[0:0 1:0 2:0]" {
		t.Fatalf("after --to-datetime 2020 (the start): %v", got)
	}
	adminOK(t, addr, "group", "reset-offsets", "billing", "--topic", "events", "--to-latest", "--execute")
	if got := committed(); fmt.Sprint(got) != "map[0:10 1:14 2:10]" {
		t.Fatalf("after --to-latest --execute: %v", got)
	}

	checkNewGroupReset(t, addr, "fresh", "events", 3)

	adminOK(t, addr, "topic", "create", "next-gen", "-p", "2")
	produce(t, addr, "next-gen", 2, 3)
	checkKIP848Group(t, addr, "kip848", "next-gen", 2, 3)
}

// TestClusterAndPartitionCommandsRinglog: cluster status reports the
// broker, its cluster id and the partition counts from DescribeCluster and
// Metadata; partition elect runs ElectLeaders (one broker: every partition
// is already led by its preferred replica); cluster quorum shows the
// broker as its quorum's one voter; the reassignment plan, pure
// computation, works, --execute of an empty plan sends nothing, and
// --list shows nothing in progress (TestPartitionReassignRinglogCluster
// moves partitions for real).
func TestClusterAndPartitionCommandsRinglog(t *testing.T) {
	b := testbroker.StartBroker(t, testbroker.Config(t.TempDir()))
	addr := b.Addr
	adminOK(t, addr, "topic", "create", "a", "-p", "2")
	adminOK(t, addr, "topic", "create", "b", "-p", "3")

	var st clusterStatusOut
	adminJSON(t, addr, &st, "cluster", "status")
	if st.ClusterID == "" || st.Controller != 0 || len(st.Brokers) != 1 || st.Brokers[0].NodeID != 0 ||
		fmt.Sprintf("%s:%d", st.Brokers[0].Host, st.Brokers[0].Port) != addr ||
		st.Topics != 2 || st.Partitions != 5 || st.UnderReplicatedPartitions != 0 || st.OfflinePartitions != 0 {
		t.Fatalf("cluster status: %+v", st)
	}
	text := adminOK(t, addr, "cluster", "status")
	if !strings.Contains(text, st.ClusterID) || !strings.Contains(text, addr) {
		t.Fatalf("cluster status table:\n%s", text)
	}

	// A single broker is its own quorum's one voter (node 0).
	var q quorumOut
	adminJSON(t, addr, &q, "cluster", "quorum")
	if q.LeaderID != 0 || q.HighWatermark <= 0 || len(q.Replicas) != 1 || q.Replicas[0].NodeID != 0 || q.Replicas[0].Role != "Leader" ||
		q.Replicas[0].Lag != 0 {
		t.Fatalf("cluster quorum: %+v", q)
	}
	var elect struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Status    string `json:"status"`
		} `json:"partitions"`
	}
	for _, typ := range []string{"preferred", "unclean"} {
		adminJSON(t, addr, &elect, "partition", "elect", "--topic", "b", "--type", typ)
		if len(elect.Partitions) != 3 {
			t.Fatalf("%s election of b: %+v", typ, elect)
		}
		for _, p := range elect.Partitions {
			if p.Status != "already-elected" {
				t.Fatalf("%s election of b: %+v", typ, elect)
			}
		}
	}
	// One broker: nothing to spread, and nowhere to move broker 0's
	// replicas to.
	var plan reassignOut
	adminJSON(t, addr, &plan, "partition", "reassign", "--spread")
	if plan.Executed || len(plan.Proposed.Partitions) != 0 || plan.Proposed.Version != 1 {
		t.Fatalf("spread on one broker: %+v", plan)
	}
	adminJSON(t, addr, &plan, "partition", "reassign", "--spread", "--execute")
	if plan.Executed || len(plan.Proposed.Partitions) != 0 {
		t.Fatalf("spread --execute on one broker: %+v", plan)
	}
	var listed struct {
		Reassignments []ongoing `json:"reassignments"`
	}
	adminJSON(t, addr, &listed, "partition", "reassign", "--list")
	if listed.Reassignments == nil || len(listed.Reassignments) != 0 {
		t.Fatalf("--list with nothing in progress: %+v", listed)
	}
	if _, _, err := admin(t, addr, "partition", "reassign", "--move-off", "0"); !errors.Is(err, ErrPlan) {
		t.Fatalf("move-off the only broker: %v, want ErrPlan", err)
	}
}

// TestSecurityCommandsRinglog: on a ringlog broker with its authorizer
// on, acl create makes bindings that acl list finds by filter and acl
// delete removes; quota alter sets and removes a user's quotas, which
// quota describe shows; broker config-alter sets the replication
// throttle as the cluster default and per broker, which config-describe
// reports with its source, and a config that is not dynamic is refused.
func TestSecurityCommandsRinglog(t *testing.T) {
	cfg := testbroker.Config(t.TempDir())
	cfg.Authorizer, cfg.SuperUsers = true, []string{"User:ANONYMOUS"}
	b := testbroker.StartBroker(t, cfg)
	addr := b.Addr

	var created []aclOut
	adminJSON(t, addr, &created, "acl", "create", "--principal", "User:alice", "--topic", "orders-", "--pattern", "prefixed",
		"--operation", "write", "--operation", "describe")
	if len(created) != 2 || created[0].Status != "created" || created[1].Status != "created" {
		t.Fatalf("acl create: %+v", created)
	}
	adminOK(t, addr, "acl", "create", "--principal", "User:bob", "--group", "g1", "--operation", "read", "--deny")
	var listed []aclOut
	adminJSON(t, addr, &listed, "acl", "list", "--principal", "User:alice")
	if len(listed) != 2 || listed[0].ResourceName != "orders-" || listed[0].PatternType != "PREFIXED" || listed[0].Permission != "ALLOW" {
		t.Fatalf("acl list --principal User:alice: %+v", listed)
	}
	// A MATCH filter finds the prefixed binding from a topic it covers.
	adminJSON(t, addr, &listed, "acl", "list", "--topic", "orders-eu", "--pattern", "match")
	if len(listed) != 2 {
		t.Fatalf("acl list --topic orders-eu --pattern match: %+v", listed)
	}
	out := adminOK(t, addr, "acl", "list")
	if !strings.Contains(out, "User:bob") || !strings.Contains(out, "DENY") || !strings.Contains(out, "PRINCIPAL") {
		t.Fatalf("acl list (table):\n%s", out)
	}
	var deleted []aclOut
	adminJSON(t, addr, &deleted, "acl", "delete", "--principal", "User:alice", "--topic", "orders-", "--pattern", "prefixed", "--operation", "write")
	if len(deleted) != 1 || deleted[0].Operation != "WRITE" || deleted[0].Status != "deleted" {
		t.Fatalf("acl delete: %+v", deleted)
	}
	adminJSON(t, addr, &listed, "acl", "list", "--principal", "User:alice")
	if len(listed) != 1 || listed[0].Operation != "DESCRIBE" {
		t.Fatalf("after delete: %+v", listed)
	}
	if _, _, err := admin(t, addr, "acl", "create", "--principal", "User:alice", "--topic", "x"); !errors.Is(err, ErrUsage) {
		t.Fatalf("acl create without --operation: %v, want a usage error", err)
	}
	if _, _, err := admin(t, addr, "acl", "delete"); !errors.Is(err, ErrUsage) {
		t.Fatalf("acl delete with no filter: %v, want a usage error", err)
	}

	adminOK(t, addr, "quota", "alter", "--user", "alice", "--set", "producer_byte_rate=1048576", "--set", "request_percentage=50")
	adminOK(t, addr, "quota", "alter", "--user-default", "--set", "consumer_byte_rate=2048")
	var quotas []quotaOut
	quotas = nil // decoding into old maps would merge
	adminJSON(t, addr, &quotas, "quota", "describe", "--user", "alice")
	if len(quotas) != 1 || quotas[0].Quotas["producer_byte_rate"] != 1048576 || quotas[0].Quotas["request_percentage"] != 50 {
		t.Fatalf("quota describe --user alice: %+v", quotas)
	}
	out = adminOK(t, addr, "quota", "describe")
	if !strings.Contains(out, "user=<default>") || !strings.Contains(out, "consumer_byte_rate") {
		t.Fatalf("quota describe (table):\n%s", out)
	}
	adminOK(t, addr, "quota", "alter", "--user", "alice", "--delete", "producer_byte_rate")
	quotas = nil // decoding into old maps would merge
	adminJSON(t, addr, &quotas, "quota", "describe", "--user", "alice")
	if len(quotas) != 1 || len(quotas[0].Quotas) != 1 {
		t.Fatalf("after --delete: %+v", quotas)
	}
	if _, _, err := admin(t, addr, "quota", "alter", "--user", "alice", "--set", "producer_byte_rate=-1"); err == nil {
		t.Fatal("a negative producer_byte_rate was accepted")
	}

	adminOK(t, addr, "broker", "config-alter", "--default", "--set", "leader.replication.throttled.rate=1000000")
	var st clusterStatusOut
	adminJSON(t, addr, &st, "cluster", "status")
	id := fmt.Sprint(st.Brokers[0].NodeID)
	adminOK(t, addr, "broker", "config-alter", "--id", id, "--set", "follower.replication.throttled.rate=2000000")
	var cfgs []brokerConfigOut
	adminJSON(t, addr, &cfgs, "broker", "config-describe", "--default", "--dynamic")
	if len(cfgs) != 1 || cfgs[0].Name != "leader.replication.throttled.rate" || *cfgs[0].Value != "1000000" || cfgs[0].Source != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("config-describe --default --dynamic: %+v", cfgs)
	}
	adminJSON(t, addr, &cfgs, "broker", "config-describe", "--id", id, "--dynamic")
	got := map[string]string{}
	for _, c := range cfgs {
		got[c.Name] = *c.Value + " " + c.Source
	}
	if got["follower.replication.throttled.rate"] != "2000000 DYNAMIC_BROKER_CONFIG" || got["leader.replication.throttled.rate"] != "1000000 DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("config-describe --id %s --dynamic: %v", id, got)
	}
	if _, _, err := admin(t, addr, "broker", "config-alter", "--default", "--set", "num.io.threads=4"); err == nil {
		t.Fatal("a config that is not dynamic in ringlog was accepted")
	}
	adminOK(t, addr, "broker", "config-alter", "--default", "--delete", "leader.replication.throttled.rate")
	adminJSON(t, addr, &cfgs, "broker", "config-describe", "--default", "--dynamic")
	if len(cfgs) != 0 {
		t.Fatalf("after --delete: %+v", cfgs)
	}
}
