package kafka_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/internal/acl"
)

// listOffsetsCode is ListOffsets' code for partition 0 of topic: DESCRIBE
// on the topic decides it before the topic's existence does.
func listOffsetsCode(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int16 {
	t.Helper()
	r := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Timestamp = -1
	rt.Partitions = append(rt.Partitions, p)
	r.Topics = append(r.Topics, rt)
	resp, err := cl.SeedBrokers()[0].Request(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
}

func bindingFor(principal string, b acl.Binding) acl.Binding {
	b.Principal = principal
	return b
}

// testACLRules: StandardAuthorizer's rules end to end: a PREFIXED
// pattern, DENY over ALLOW, super.users over a DENY, the wildcard
// principal, and a binding's host against the client's address.
func testACLRules(t *testing.T, ctx context.Context, b *testBroker, addr string) {
	const unknown = 3 // UNKNOWN_TOPIC_OR_PARTITION: allowed, no such topic
	prefixed := grant(acl.ResourceTopic, "mx", acl.OpDescribe)
	prefixed.PatternType = acl.PatternPrefixed
	denyDescribe := topicGrant(acl.OpDescribe)
	denyDescribe.Permission = acl.PermissionDeny
	denyAll := topicGrant(acl.OpAll)
	denyAll.Permission = acl.PermissionDeny
	local := grant(acl.ResourceTopic, "mx-host", acl.OpDescribe)
	local.Host = "127.0.0.1"
	remote := grant(acl.ResourceTopic, "mx-host", acl.OpDescribe)
	remote.Host = "10.9.9.9"
	createBindings(t, ctx, b, []acl.Binding{
		bindingFor("User:pre", prefixed),
		bindingFor("User:deny", topicGrant(acl.OpAll)),
		bindingFor("User:deny", denyDescribe),
		bindingFor("User:root", denyAll),
		bindingFor(acl.WildcardPrincipal, grant(acl.ResourceTopic, "mx-wild", acl.OpDescribe)),
		bindingFor("User:hosty", local),
		bindingFor("User:hosty2", remote),
	})
	for _, c := range []struct {
		user, topic string
		want        int16
	}{
		{"pre", aclTopic, 0},            // PREFIXED "mx" covers "mx"
		{"pre", "mx-anything", unknown}, // and every name it starts
		{"pre", "m", 29},                // but not a shorter one
		{"pre", "other", 29},            // nor another
		{"deny", aclTopic, 29},          // DENY DESCRIBE over ALLOW ALL
		{"root", aclTopic, 0},           // a super user, even with DENY ALL
		{"root", "anything", unknown},   // and everywhere
		{"nobody", "mx-wild", unknown},  // User:* applies to anyone
		{"viewer", "mx-wild", unknown},
		{"nobody", "mx-wilder", 29},   // LITERAL: that name only
		{"nobody", aclTopic, 29},      // nothing for nobody on mx
		{"hosty", "mx-host", unknown}, // the client's own address
		{"hosty2", "mx-host", 29},     // another host's binding
		{"deny", aclTopic, 29},        // asked again: the cache answers the same
	} {
		cl := aclUserClient(t, addr, c.user)
		if got := listOffsetsCode(t, ctx, cl, c.topic); got != c.want {
			t.Errorf("%s on %s: got %v, want %v", c.user, c.topic, kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
		}
	}
}

// testACLHidden: Metadata, DescribeTopicPartitions, ListGroups and
// ListTransactions show a principal only what it may DESCRIBE; KIP-430's
// operations are the principal's.
func testACLHidden(t *testing.T, ctx context.Context, b *testBroker, addr string) {
	adm := b.admin()
	// A group and a transactional id that exist, made by the super user.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: aclTopic, Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g-listed", offs); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CommitOffsets(ctx, "g-unlisted", offs); err != nil {
		t.Fatal(err)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("tx-listed"), 10000
	if _, err := ip.RequestWith(ctx, b.client()); err != nil {
		t.Fatal(err)
	}
	createBindings(t, ctx, b, []acl.Binding{
		bindingFor("User:meta", topicGrant(acl.OpDescribe)),
		bindingFor("User:lister", grant(acl.ResourceGroup, "g-listed", acl.OpDescribe)),
		bindingFor("User:lister", grant(acl.ResourceTransactionalID, "tx-listed", acl.OpDescribe)),
		bindingFor("User:viewer", clusterGrant(acl.OpDescribe)),
	})
	send := func(user string, r kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := aclUserClient(t, addr, user).SeedBrokers()[0].Request(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const describeBit = 1 << acl.OpDescribe

	// Metadata of every topic: only mx, with DESCRIBE alone (the
	// cluster's operations left Metadata in v11; DescribeCluster below).
	mr := kmsg.NewPtrMetadataRequest()
	mr.IncludeTopicAuthorizedOperations = true
	m := send("meta", mr).(*kmsg.MetadataResponse)
	if len(m.Topics) != 1 || *m.Topics[0].Topic != aclTopic || m.Topics[0].AuthorizedOperations != describeBit {
		t.Errorf("meta's metadata: %d topics, %+v", len(m.Topics), m.Topics)
	}
	if m := send("nobody", mr).(*kmsg.MetadataResponse); len(m.Topics) != 0 {
		t.Errorf("nobody sees %d topics", len(m.Topics))
	}

	dr := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dr.ResponsePartitionLimit = 100
	d := send("meta", dr).(*kmsg.DescribeTopicPartitionsResponse)
	if len(d.Topics) != 1 || *d.Topics[0].Topic != aclTopic || d.Topics[0].AuthorizedOperations != describeBit {
		t.Errorf("meta's DescribeTopicPartitions: %+v", d.Topics)
	}

	cr := kmsg.NewPtrDescribeClusterRequest()
	cr.IncludeClusterAuthorizedOperations = true
	if c := send("meta", cr).(*kmsg.DescribeClusterResponse); c.ErrorCode != 0 || c.ClusterAuthorizedOperations != 0 {
		t.Errorf("meta's DescribeCluster: code %d, operations %b", c.ErrorCode, c.ClusterAuthorizedOperations)
	}
	if c := send("viewer", cr).(*kmsg.DescribeClusterResponse); c.ClusterAuthorizedOperations != describeBit {
		t.Errorf("viewer's cluster operations: %b", c.ClusterAuthorizedOperations)
	}

	groupsOf := func(user string) []string {
		var out []string
		for _, g := range send(user, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group)
		}
		slices.Sort(out)
		return out
	}
	if got := groupsOf("lister"); !slices.Equal(got, []string{"g-listed"}) {
		t.Errorf("lister lists %v", got)
	}
	if got := groupsOf("viewer"); !slices.Contains(got, "g-listed") || !slices.Contains(got, "g-unlisted") {
		t.Errorf("viewer (DESCRIBE on the cluster) lists %v", got)
	}
	if got := groupsOf("nobody"); len(got) != 0 {
		t.Errorf("nobody lists %v", got)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g-listed", "g-unlisted"}, true
	got := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range send("lister", dg).(*kmsg.DescribeGroupsResponse).Groups {
		got[g.Group] = g
	}
	if g := got["g-listed"]; g.ErrorCode != 0 || g.AuthorizedOperations != describeBit {
		t.Errorf("lister describes g-listed: %+v", g)
	}
	if g := got["g-unlisted"]; g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("lister describes g-unlisted: %+v", g)
	}

	txnsOf := func(user string) []string {
		var out []string
		for _, s := range send(user, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse).TransactionStates {
			out = append(out, s.TransactionalID)
		}
		return out
	}
	if got := txnsOf("lister"); !slices.Equal(got, []string{"tx-listed"}) {
		t.Errorf("lister lists transactions %v", got)
	}
	if got := txnsOf("meta"); len(got) != 0 {
		t.Errorf("meta lists transactions %v", got)
	}
}

// testACLConsumer: a consumer group member with READ on its group and
// topic consumes; one without READ on the group (DESCRIBE lets it find
// the coordinator) cannot join.
func testACLConsumer(t *testing.T, ctx context.Context, b *testBroker, addr string) {
	createBindings(t, ctx, b, []acl.Binding{
		bindingFor("User:cons", grant(acl.ResourceGroup, "g-e2e", acl.OpRead)),
		bindingFor("User:cons", topicGrant(acl.OpRead)),
		bindingFor("User:cons2", grant(acl.ResourceGroup, "g-e2e2", acl.OpDescribe)),
		bindingFor("User:cons2", topicGrant(acl.OpRead)),
	})
	if err := b.client().ProduceSync(ctx, &kgo.Record{Topic: aclTopic, Value: []byte("for the group")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cons := aclUserClient(t, addr, "cons", kgo.ConsumerGroup("g-e2e"), kgo.ConsumeTopics(aclTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n == 0; {
		fs := cons.PollFetches(pctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("cons: %v", err)
		}
		n = fs.NumRecords()
	}

	cons2 := aclUserClient(t, addr, "cons2", kgo.ConsumerGroup("g-e2e2"), kgo.ConsumeTopics(aclTopic))
	for {
		fs := cons2.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatal("cons2 was not refused")
		}
		var found bool
		fs.EachError(func(_ string, _ int32, err error) {
			found = found || errors.Is(err, kerr.GroupAuthorizationFailed)
		})
		if found {
			break
		}
		if fs.NumRecords() > 0 {
			t.Fatal("cons2 consumed without READ on its group")
		}
	}
}

// testACLRegex: a KIP-848 member subscribing by regular expression is
// assigned only the matching topics it may DESCRIBE (Kafka 4,
// KAFKA-18813), and a topic it is granted later joins its assignment
// once the topics change.
func testACLRegex(t *testing.T, ctx context.Context, b *testBroker, addr string) {
	for _, name := range []string{"rx-seen", "rx-hidden"} {
		createTopic(t, b, name, 1, nil)
	}
	createBindings(t, ctx, b, []acl.Binding{
		bindingFor("User:rx", grant(acl.ResourceGroup, "g-rx", acl.OpRead)),
		bindingFor("User:rx", grant(acl.ResourceTopic, "rx-seen", acl.OpRead)),
	})
	md, err := b.admin().Metadata(ctx, "rx-seen", "rx-hidden")
	if err != nil {
		t.Fatal(err)
	}
	names := map[[16]byte]string{}
	for _, td := range md.Topics {
		names[[16]byte(td.ID)] = td.Topic
	}
	e := &aclEnv{t: t, cl: aclUserClient(t, addr, "rx"), user: "rx"}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1 // v1: regular expressions
	re := "rx-.*"
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g-rx", "member-rx", 0, 10000
	req.SubscribedTopicRegex, req.Topics = &re, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	assigned := func(r *kmsg.ConsumerGroupHeartbeatResponse) []string {
		var got []string
		if r.Assignment != nil {
			for _, tp := range r.Assignment.Topics {
				got = append(got, names[tp.TopicID])
			}
		}
		slices.Sort(got)
		return got
	}
	r := e.req(ctx, req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := assigned(r); !slices.Equal(got, []string{"rx-seen"}) {
		t.Fatalf("assigned %v, want only rx-seen: rx may not DESCRIBE rx-hidden", got)
	}
	// Granted DESCRIBE on rx-hidden, the member gets it once the topics
	// change (a new topic here), as Kafka refreshes a resolution.
	createBindings(t, ctx, b, []acl.Binding{bindingFor("User:rx", grant(acl.ResourceTopic, "rx-hidden", acl.OpDescribe))})
	createTopic(t, b, "rx-new", 1, nil)
	deadline := time.Now().Add(10 * time.Second)
	for epoch := r.MemberEpoch; ; {
		beat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		beat.Version = 1
		beat.Group, beat.MemberID, beat.MemberEpoch = "g-rx", "member-rx", epoch
		beat.Topics = owned(r)
		r = e.req(ctx, beat).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		epoch = r.MemberEpoch
		if got := assigned(r); r.Assignment != nil && slices.Contains(got, "rx-hidden") {
			if slices.Contains(got, "rx-new") {
				t.Fatalf("assigned %v: rx may not DESCRIBE rx-new", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("rx-hidden never assigned after DESCRIBE was granted")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testACLKadm: kadm's CreateACLs, DescribeACLs and DeleteACLs round-trip.
func testACLKadm(t *testing.T, ctx context.Context, b *testBroker) {
	adm := b.admin()
	builder := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow("User:kadm").AllowHosts("*").Topics("kadm-topic").
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpWrite)
	}
	created, err := adm.CreateACLs(ctx, builder())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("create %+v: %v", c, c.Err)
		}
	}
	described, err := adm.DescribeACLs(ctx, builder())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		n += len(d.Described)
	}
	if n != 2 {
		t.Fatalf("described %d bindings, want 2: %+v", n, described)
	}
	deleted, err := adm.DeleteACLs(ctx, builder())
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for _, d := range deleted {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		n += len(d.Deleted)
	}
	if n != 2 {
		t.Fatalf("deleted %d bindings, want 2", n)
	}
	described, err = adm.DescribeACLs(ctx, builder())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range described {
		if len(d.Described) != 0 {
			t.Fatalf("still described after the delete: %+v", d.Described)
		}
	}
}

// TestACLAllowEveryoneIfNoACL: with allow.everyone.if.no.acl.found, a
// resource no binding matches is open to everyone, and the first binding
// on it closes it to everyone else.
func TestACLAllowEveryoneIfNoACL(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		c.Authorizer, c.AllowEveryoneIfNoACL = true, true
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client() // ANONYMOUS, no super user
	if got := listOffsetsCode(t, ctx, cl, "open"); got != 3 {
		t.Fatalf("no binding: got %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(got))
	}
	// The cluster has no binding either: ANONYMOUS may create one.
	createBindings(t, ctx, b, []acl.Binding{bindingFor("User:someone", grant(acl.ResourceTopic, "open", acl.OpRead))})
	if got := listOffsetsCode(t, ctx, cl, "open"); got != 29 {
		t.Fatalf("a binding for someone else: got %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(got))
	}
	if got := listOffsetsCode(t, ctx, cl, "still-open"); got != 3 {
		t.Fatalf("another topic: got %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(got))
	}
}
