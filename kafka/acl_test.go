package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"ringlog/broker"
	"ringlog/internal/acl"
	"ringlog/kafka"
)

// The ACL matrix (issue 15): every API ringlog serves checks exactly the
// operation and resource Kafka's KafkaApis and ControllerApis check, with
// Kafka's error codes. One broker serves every case: a PLAINTEXT listener
// whose ANONYMOUS principal is a super user sets things up, and a
// SASL_PLAINTEXT listener authenticates one PLAIN user per case, who holds
// exactly the case's bindings.

const (
	aclTopic    = "mx"     // read, described, written by the cases
	aclDelTopic = "mx-del" // deleted by DeleteTopics' case
	aclCPTopic  = "mx-cp"  // grown (validate only) by CreatePartitions'
)

// aclCase is one principal, its bindings, one request and the code it
// must get.
type aclCase struct {
	name   string
	grants []acl.Binding // Principal filled in with the case's user
	// call sends the request and returns the code the check decides.
	call func(ctx context.Context, c *aclEnv) int16
	want int16
	// versions, when set, caps the client's request versions.
	versions func(*kversion.Versions)
}

// aclEnv is what a case's call uses.
type aclEnv struct {
	t       *testing.T
	cl      *kgo.Client
	user    string
	topicID [16]byte
}

// req sends r straight to the broker (not through kgo's coordinator
// lookup, which would hide the code).
func (e *aclEnv) req(ctx context.Context, r kmsg.Request) kmsg.Response {
	e.t.Helper()
	resp, err := e.cl.SeedBrokers()[0].Request(ctx, r)
	if err != nil {
		e.t.Fatalf("%s: %T: %v", e.user, r, err)
	}
	return resp
}

func grant(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: acl.PatternLiteral, Host: acl.WildcardHost,
		Operation: op, Permission: acl.PermissionAllow}
}

func topicGrant(op acl.Operation) acl.Binding { return grant(acl.ResourceTopic, aclTopic, op) }
func clusterGrant(op acl.Operation) acl.Binding {
	return grant(acl.ResourceCluster, acl.ClusterName, op)
}

// aclBroker starts a broker with the authorizer on, ANONYMOUS (the
// PLAINTEXT listener) a super user, and a SASL listener with users.
func aclBroker(t *testing.T, users []string, allowIfNoACL bool) (*testBroker, string) {
	t.Helper()
	pw := map[string]string{}
	for _, u := range users {
		pw[u] = u + "-pw"
	}
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		c.Authorizer, c.AllowEveryoneIfNoACL = true, allowIfNoACL
		c.SuperUsers = []string{"User:ANONYMOUS", "User:root"}
		c.Listeners = append(c.Listeners, broker.Listener{Name: "SASL", Protocol: kafka.SASLPlaintext, Addr: "127.0.0.1:0",
			Mechanisms: []string{"PLAIN"}, PlainUsers: pw})
	}})
	return b, b.B.ListenerAddr("SASL")
}

func aclUserClient(t *testing.T, addr, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return saslClient(t, addr, plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism(), opts...)
}

// createBindings creates bs as the super user and fails on any error.
func createBindings(t *testing.T, ctx context.Context, b *testBroker, bs []acl.Binding) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, x := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(x.ResourceType), x.ResourceName, kmsg.ACLResourcePatternType(x.PatternType)
		c.Principal, c.Host, c.Operation, c.PermissionType = x.Principal, x.Host, kmsg.ACLOperation(x.Operation), kmsg.ACLPermissionType(x.Permission)
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, b.client())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create %v: %v %v", bs[i], kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
}

// TestACL runs every ACL test on one broker (the suite's time is
// counted): the matrix, Kafka's decision rules end to end, what Metadata
// and the listing APIs hide, KIP-430's operations, a consumer group
// without READ, and kadm's ACL round trip.
func TestACL(t *testing.T) {
	cases := aclCases()
	var users []string
	for i := range cases {
		users = append(users, fmt.Sprintf("u%d", i))
	}
	users = append(users, "pre", "deny", "root", "nobody", "hosty", "hosty2", "meta", "lister", "viewer", "cons", "cons2", "rx")
	b, addr := aclBroker(t, users, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createTopic(t, b, aclTopic, 1, nil)
	createTopic(t, b, aclDelTopic, 1, nil)
	createTopic(t, b, aclCPTopic, 1, nil)
	md, err := b.admin().Metadata(ctx, aclTopic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := [16]byte(md.Topics[aclTopic].ID)

	var bindings []acl.Binding
	for i, c := range cases {
		for _, g := range c.grants {
			g.Principal = "User:" + users[i]
			bindings = append(bindings, g)
		}
	}
	createBindings(t, ctx, b, bindings)

	t.Run("matrix", func(t *testing.T) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var opts []kgo.Opt
				if c.versions != nil {
					v := kversion.Stable()
					c.versions(v)
					opts = append(opts, kgo.MaxVersions(v))
				}
				e := &aclEnv{t: t, cl: aclUserClient(t, addr, users[i], opts...), user: users[i], topicID: topicID}
				if got := c.call(ctx, e); got != c.want {
					t.Errorf("got %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
				}
			})
		}
	})
	t.Run("rules", func(t *testing.T) { testACLRules(t, ctx, b, addr) })
	t.Run("hidden", func(t *testing.T) { testACLHidden(t, ctx, b, addr) })
	t.Run("consumer", func(t *testing.T) { testACLConsumer(t, ctx, b, addr) })
	t.Run("regex", func(t *testing.T) { testACLRegex(t, ctx, b, addr) })
	t.Run("kadm", func(t *testing.T) { testACLKadm(t, ctx, b) })
}

// codeOf is the Kafka code of a client's error (0 for none, -1 for one
// that is not Kafka's).
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -1
}

func aclCases() []aclCase {
	const (
		topicAuth   = 29 // TOPIC_AUTHORIZATION_FAILED
		groupAuth   = 30 // GROUP_AUTHORIZATION_FAILED
		clusterAuth = 31 // CLUSTER_AUTHORIZATION_FAILED
		txnAuth     = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	)
	var (
		group = func(name string, op acl.Operation) acl.Binding { return grant(acl.ResourceGroup, name, op) }
		txnID = func(name string, op acl.Operation) acl.Binding { return grant(acl.ResourceTransactionalID, name, op) }
	)
	listOffsets := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrListOffsetsRequest()
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = aclTopic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp = -1
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	produce := func(ctx context.Context, e *aclEnv) int16 {
		return codeOf(e.cl.ProduceSync(ctx, &kgo.Record{Topic: aclTopic, Value: []byte("v")}).FirstErr())
	}
	fetch := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrFetchRequest()
		r.MaxWaitMillis, r.MaxBytes, r.SessionEpoch = 0, 1<<20, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = aclTopic, e.topicID
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes = 1 << 20
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	metadata := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(aclTopic)
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}
	offsetCommit := func(g string) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation = g, -1
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.TopicID = aclTopic, e.topicID
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Offset = 0
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return e.req(ctx, r).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}
	}
	offsetFetch := func(g string, partition bool) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrOffsetFetchRequest()
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic, t.TopicID, t.Partitions = aclTopic, e.topicID, []int32{0}
			rg.Topics = append(rg.Topics, t)
			r.Groups = append(r.Groups, rg)
			resp := e.req(ctx, r).(*kmsg.OffsetFetchResponse)
			if gr := resp.Groups[0]; !partition || gr.ErrorCode != 0 {
				return gr.ErrorCode
			}
			return resp.Groups[0].Topics[0].Partitions[0].ErrorCode
		}
	}
	findCoordinator := func(typ int8, key string) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorType, r.CoordinatorKeys = typ, []string{key}
			return e.req(ctx, r).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		}
	}
	joinGroup := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g-join", 10000, 10000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		r.Protocols = append(r.Protocols, p)
		return e.req(ctx, r).(*kmsg.JoinGroupResponse).ErrorCode
	}
	syncGroup := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID = "g-sync", 1, "m"
		return e.req(ctx, r).(*kmsg.SyncGroupResponse).ErrorCode
	}
	heartbeat := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.Generation, r.MemberID = "g-hb", 1, "m"
		return e.req(ctx, r).(*kmsg.HeartbeatResponse).ErrorCode
	}
	leaveGroup := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group = "g-leave"
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = "m"
		r.Members = append(r.Members, m)
		resp := e.req(ctx, r).(*kmsg.LeaveGroupResponse)
		if resp.ErrorCode != 0 || len(resp.Members) == 0 {
			return resp.ErrorCode
		}
		return resp.Members[0].ErrorCode
	}
	describeGroups := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{"g-describe"}
		return e.req(ctx, r).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
	}
	deleteGroups := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{"g-delete"}
		return e.req(ctx, r).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	offsetDelete := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g-offdel"
		t := kmsg.NewOffsetDeleteRequestTopic()
		t.Topic = aclTopic
		p := kmsg.NewOffsetDeleteRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		resp := e.req(ctx, r).(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) == 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	createTopics := func(name string, configs bool) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.ValidateOnly = true
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = name, 1, 1
			r.Topics = append(r.Topics, t)
			rt := e.req(ctx, r).(*kmsg.CreateTopicsResponse).Topics[0]
			if configs && rt.ErrorCode == 0 {
				return rt.ConfigErrorCode
			}
			return rt.ErrorCode
		}
	}
	deleteTopics := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDeleteTopicsRequest()
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(aclDelTopic)
		r.Topics, r.TopicNames = append(r.Topics, t), []string{aclDelTopic}
		return e.req(ctx, r).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
	}
	deleteRecords := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDeleteRecordsRequest()
		t := kmsg.NewDeleteRecordsRequestTopic()
		t.Topic = aclTopic
		p := kmsg.NewDeleteRecordsRequestTopicPartition()
		p.Offset = 0
		t.Partitions = append(t.Partitions, p)
		r.Topics, r.TimeoutMillis = append(r.Topics, t), 5000
		return e.req(ctx, r).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
	}
	initProducerID := func(txn *string) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = txn, 10000
			return e.req(ctx, r).(*kmsg.InitProducerIDResponse).ErrorCode
		}
	}
	addPartitions := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx-add", 12345, 0
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = aclTopic, []int32{0}
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
	}
	v3AddPartitions := func(v *kversion.Versions) { v.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3) }
	addOffsets := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx-addoff", 12345, 0, "g-addoff"
		return e.req(ctx, r).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	}
	endTxn := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx-end", 12345, 0
		return e.req(ctx, r).(*kmsg.EndTxnResponse).ErrorCode
	}
	writeMarkers := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = 12345, 0, false
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = aclTopic, []int32{0}
		m.Topics = append(m.Topics, t)
		r.Markers = append(r.Markers, m)
		return e.req(ctx, r).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	txnOffsetCommit := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = "tx-toc", "g-toc", 12345, 0, -1
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = aclTopic, e.topicID
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	describeConfigs := func(rt kmsg.ConfigResourceType, name string) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = rt, name
			r.Resources = append(r.Resources, rr)
			return e.req(ctx, r).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
		}
	}
	alterConfigs := func(rt kmsg.ConfigResourceType, name string) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrAlterConfigsRequest()
			r.ValidateOnly = true
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = rt, name
			r.Resources = append(r.Resources, rr)
			return e.req(ctx, r).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
		}
	}
	incrementalAlterConfigs := func(rt kmsg.ConfigResourceType, name string) func(ctx context.Context, e *aclEnv) int16 {
		return func(ctx context.Context, e *aclEnv) int16 {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r.ValidateOnly = true
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = rt, name
			r.Resources = append(r.Resources, rr)
			return e.req(ctx, r).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
		}
	}
	describeLogDirs := func(ctx context.Context, e *aclEnv) int16 {
		return e.req(ctx, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse).ErrorCode
	}
	createPartitions := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.ValidateOnly = true
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = aclCPTopic, 2
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
	}
	electLeaders := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrElectLeadersRequest()
		t := kmsg.NewElectLeadersRequestTopic()
		t.Topic, t.Partitions = aclTopic, []int32{0}
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.ElectLeadersResponse).ErrorCode
	}
	describeScram := func(ctx context.Context, e *aclEnv) int16 {
		return e.req(ctx, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
	}
	alterScram := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = "nobody", 1
		r.Deletions = append(r.Deletions, d)
		return e.req(ctx, r).(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode
	}
	describeProducers := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDescribeProducersRequest()
		t := kmsg.NewDescribeProducersRequestTopic()
		t.Topic, t.Partitions = aclTopic, []int32{0}
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
	}
	describeTransactions := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = []string{"tx-describe"}
		return e.req(ctx, r).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
	}
	consumerHeartbeat := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g-cgh", "member-"+e.user, 0, 10000
		r.SubscribedTopicNames, r.Topics = []string{aclTopic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return e.req(ctx, r).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	}
	consumerDescribe := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups = []string{"g-cgd"}
		return e.req(ctx, r).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode
	}
	describeTopicPartitions := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		t := kmsg.NewDescribeTopicPartitionsRequestTopic()
		t.Topic = aclTopic
		r.Topics, r.ResponsePartitionLimit = append(r.Topics, t), 100
		return e.req(ctx, r).(*kmsg.DescribeTopicPartitionsResponse).Topics[0].ErrorCode
	}
	offsetForLeaderEpoch := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.ReplicaID = -1
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = aclTopic
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return e.req(ctx, r).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}
	describeAcls := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDescribeACLsRequest()
		r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return e.req(ctx, r).(*kmsg.DescribeACLsResponse).ErrorCode
	}
	createAcls := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "made-by-"+e.user, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:nobody", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		r.Creations = append(r.Creations, c)
		return e.req(ctx, r).(*kmsg.CreateACLsResponse).Results[0].ErrorCode
	}
	deleteAcls := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("no-such-binding"), kmsg.ACLResourcePatternTypeLiteral
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		r.Filters = append(r.Filters, f)
		return e.req(ctx, r).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
	}
	txn := func(s string) *string { return &s }
	describeQuotas := func(ctx context.Context, e *aclEnv) int16 {
		return e.req(ctx, kmsg.NewPtrDescribeClientQuotasRequest()).(*kmsg.DescribeClientQuotasResponse).ErrorCode
	}
	alterQuotas := func(ctx context.Context, e *aclEnv) int16 {
		r := kmsg.NewPtrAlterClientQuotasRequest()
		r.ValidateOnly = true
		en := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = "user", kmsg.StringPtr("quota-user")
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = "producer_byte_rate", 1024
		en.Entity, en.Ops = append(en.Entity, ent), append(en.Ops, op)
		r.Entries = append(r.Entries, en)
		return e.req(ctx, r).(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode
	}
	apiVersions := func(ctx context.Context, e *aclEnv) int16 {
		return e.req(ctx, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode
	}

	return []aclCase{
		{name: "Produce/WRITE", grants: []acl.Binding{topicGrant(acl.OpWrite)}, call: produce, want: 0},
		{name: "Produce/none", call: produce, want: topicAuth}, // kgo learns it from Metadata first
		{name: "Produce/DESCRIBE", grants: []acl.Binding{topicGrant(acl.OpDescribe), clusterGrant(acl.OpIdempotentWrite)}, call: produce, want: topicAuth},
		{name: "Fetch/READ", grants: []acl.Binding{topicGrant(acl.OpRead)}, call: fetch, want: 0},
		{name: "Fetch/none", call: fetch, want: topicAuth},
		{name: "ListOffsets/DESCRIBE", grants: []acl.Binding{topicGrant(acl.OpDescribe)}, call: listOffsets, want: 0},
		{name: "ListOffsets/none", call: listOffsets, want: topicAuth},
		{name: "Metadata/DESCRIBE", grants: []acl.Binding{topicGrant(acl.OpDescribe)}, call: metadata, want: 0},
		{name: "Metadata/none", call: metadata, want: topicAuth},
		{name: "OffsetCommit/READ", grants: []acl.Binding{group("g-commit", acl.OpRead), topicGrant(acl.OpRead)}, call: offsetCommit("g-commit"), want: 0},
		{name: "OffsetCommit/topic-only", grants: []acl.Binding{topicGrant(acl.OpRead)}, call: offsetCommit("g-commit"), want: groupAuth},
		{name: "OffsetCommit/group-only", grants: []acl.Binding{group("g-commit", acl.OpRead)}, call: offsetCommit("g-commit"), want: topicAuth},
		{name: "OffsetFetch/DESCRIBE", grants: []acl.Binding{group("g-fetch", acl.OpDescribe), topicGrant(acl.OpDescribe)}, call: offsetFetch("g-fetch", true), want: 0},
		{name: "OffsetFetch/none", call: offsetFetch("g-fetch", false), want: groupAuth},
		{name: "OffsetFetch/group-only", grants: []acl.Binding{group("g-fetch", acl.OpDescribe)}, call: offsetFetch("g-fetch", true), want: topicAuth},
		{name: "FindCoordinator/group", grants: []acl.Binding{group("g-find", acl.OpDescribe)}, call: findCoordinator(0, "g-find"), want: 0},
		{name: "FindCoordinator/group-none", call: findCoordinator(0, "g-find"), want: groupAuth},
		{name: "FindCoordinator/txn", grants: []acl.Binding{txnID("tx-find", acl.OpDescribe)}, call: findCoordinator(1, "tx-find"), want: 0},
		{name: "FindCoordinator/txn-none", call: findCoordinator(1, "tx-find"), want: txnAuth},
		{name: "JoinGroup/READ", grants: []acl.Binding{group("g-join", acl.OpRead)}, call: joinGroup, want: kerr.MemberIDRequired.Code},
		{name: "JoinGroup/DESCRIBE", grants: []acl.Binding{group("g-join", acl.OpDescribe)}, call: joinGroup, want: groupAuth},
		{name: "SyncGroup/READ", grants: []acl.Binding{group("g-sync", acl.OpRead)}, call: syncGroup, want: kerr.UnknownMemberID.Code},
		{name: "SyncGroup/none", call: syncGroup, want: groupAuth},
		{name: "Heartbeat/READ", grants: []acl.Binding{group("g-hb", acl.OpRead)}, call: heartbeat, want: kerr.UnknownMemberID.Code},
		{name: "Heartbeat/none", call: heartbeat, want: groupAuth},
		{name: "LeaveGroup/READ", grants: []acl.Binding{group("g-leave", acl.OpRead)}, call: leaveGroup, want: kerr.UnknownMemberID.Code},
		{name: "LeaveGroup/none", call: leaveGroup, want: groupAuth},
		{name: "DescribeGroups/DESCRIBE", grants: []acl.Binding{group("g-describe", acl.OpDescribe)}, call: describeGroups, want: kerr.GroupIDNotFound.Code},
		{name: "DescribeGroups/none", call: describeGroups, want: groupAuth},
		{name: "DeleteGroups/DELETE", grants: []acl.Binding{group("g-delete", acl.OpDelete)}, call: deleteGroups, want: kerr.GroupIDNotFound.Code},
		{name: "DeleteGroups/DESCRIBE", grants: []acl.Binding{group("g-delete", acl.OpDescribe)}, call: deleteGroups, want: groupAuth},
		{name: "OffsetDelete/DELETE", grants: []acl.Binding{group("g-offdel", acl.OpDelete), topicGrant(acl.OpRead)}, call: offsetDelete, want: kerr.GroupIDNotFound.Code},
		{name: "OffsetDelete/READ-group", grants: []acl.Binding{group("g-offdel", acl.OpRead), topicGrant(acl.OpRead)}, call: offsetDelete, want: groupAuth},
		{name: "OffsetDelete/group-only", grants: []acl.Binding{group("g-offdel", acl.OpDelete)}, call: offsetDelete, want: topicAuth},
		{name: "CreateTopics/CREATE-topic", grants: []acl.Binding{grant(acl.ResourceTopic, "mx-new", acl.OpCreate)}, call: createTopics("mx-new", false), want: 0},
		{name: "CreateTopics/CREATE-cluster", grants: []acl.Binding{clusterGrant(acl.OpCreate)}, call: createTopics("mx-new", false), want: 0},
		{name: "CreateTopics/none", call: createTopics("mx-new", false), want: topicAuth},
		{name: "CreateTopics/configs-hidden", grants: []acl.Binding{grant(acl.ResourceTopic, "mx-new", acl.OpCreate)}, call: createTopics("mx-new", true), want: topicAuth},
		{name: "CreateTopics/configs", grants: []acl.Binding{grant(acl.ResourceTopic, "mx-new", acl.OpCreate), grant(acl.ResourceTopic, "mx-new", acl.OpDescribeConfigs)},
			call: createTopics("mx-new", true), want: 0},
		{name: "DeleteTopics/DESCRIBE", grants: []acl.Binding{grant(acl.ResourceTopic, aclDelTopic, acl.OpDescribe)}, call: deleteTopics, want: topicAuth},
		{name: "DeleteTopics/DELETE", grants: []acl.Binding{grant(acl.ResourceTopic, aclDelTopic, acl.OpDelete)}, call: deleteTopics, want: 0},
		{name: "DeleteRecords/DELETE", grants: []acl.Binding{topicGrant(acl.OpDelete)}, call: deleteRecords, want: 0},
		{name: "DeleteRecords/READ", grants: []acl.Binding{topicGrant(acl.OpRead)}, call: deleteRecords, want: topicAuth},
		{name: "InitProducerId/txn-WRITE", grants: []acl.Binding{txnID("tx-init", acl.OpWrite)}, call: initProducerID(txn("tx-init")), want: 0},
		{name: "InitProducerId/txn-DESCRIBE", grants: []acl.Binding{txnID("tx-init", acl.OpDescribe)}, call: initProducerID(txn("tx-init")), want: txnAuth},
		{name: "InitProducerId/IDEMPOTENT_WRITE", grants: []acl.Binding{clusterGrant(acl.OpIdempotentWrite)}, call: initProducerID(nil), want: 0},
		{name: "InitProducerId/WRITE-any-topic", grants: []acl.Binding{grant(acl.ResourceTopic, "anything", acl.OpWrite)}, call: initProducerID(nil), want: 0},
		{name: "InitProducerId/none", grants: []acl.Binding{topicGrant(acl.OpRead)}, call: initProducerID(nil), want: clusterAuth},
		{name: "AddPartitionsToTxn/WRITE", grants: []acl.Binding{txnID("tx-add", acl.OpWrite), topicGrant(acl.OpWrite)}, call: addPartitions, versions: v3AddPartitions,
			want: kerr.InvalidProducerIDMapping.Code},
		{name: "AddPartitionsToTxn/none", call: addPartitions, versions: v3AddPartitions, want: txnAuth},
		{name: "AddPartitionsToTxn/txn-only", grants: []acl.Binding{txnID("tx-add", acl.OpWrite)}, call: addPartitions, versions: v3AddPartitions, want: topicAuth},
		{name: "AddOffsetsToTxn/WRITE-READ", grants: []acl.Binding{txnID("tx-addoff", acl.OpWrite), group("g-addoff", acl.OpRead)}, call: addOffsets,
			want: kerr.InvalidProducerIDMapping.Code},
		{name: "AddOffsetsToTxn/none", call: addOffsets, want: txnAuth},
		{name: "AddOffsetsToTxn/txn-only", grants: []acl.Binding{txnID("tx-addoff", acl.OpWrite)}, call: addOffsets, want: groupAuth},
		{name: "EndTxn/WRITE", grants: []acl.Binding{txnID("tx-end", acl.OpWrite)}, call: endTxn, want: kerr.InvalidProducerIDMapping.Code},
		{name: "EndTxn/DESCRIBE", grants: []acl.Binding{txnID("tx-end", acl.OpDescribe)}, call: endTxn, want: txnAuth},
		{name: "WriteTxnMarkers/ALTER", grants: []acl.Binding{clusterGrant(acl.OpAlter)}, call: writeMarkers, want: 0},
		{name: "WriteTxnMarkers/none", call: writeMarkers, want: clusterAuth},
		{name: "TxnOffsetCommit/all", grants: []acl.Binding{txnID("tx-toc", acl.OpWrite), group("g-toc", acl.OpRead), topicGrant(acl.OpRead)}, call: txnOffsetCommit,
			want: kerr.InvalidProducerIDMapping.Code},
		{name: "TxnOffsetCommit/none", call: txnOffsetCommit, want: txnAuth},
		{name: "TxnOffsetCommit/txn-only", grants: []acl.Binding{txnID("tx-toc", acl.OpWrite)}, call: txnOffsetCommit, want: groupAuth},
		{name: "TxnOffsetCommit/no-topic", grants: []acl.Binding{txnID("tx-toc", acl.OpWrite), group("g-toc", acl.OpRead)}, call: txnOffsetCommit, want: topicAuth},
		{name: "DescribeConfigs/topic", grants: []acl.Binding{topicGrant(acl.OpDescribeConfigs)}, call: describeConfigs(kmsg.ConfigResourceTypeTopic, aclTopic), want: 0},
		{name: "DescribeConfigs/topic-none", grants: []acl.Binding{topicGrant(acl.OpDescribe)}, call: describeConfigs(kmsg.ConfigResourceTypeTopic, aclTopic), want: topicAuth},
		{name: "DescribeConfigs/broker", grants: []acl.Binding{clusterGrant(acl.OpDescribeConfigs)}, call: describeConfigs(kmsg.ConfigResourceTypeBroker, ""), want: 0},
		{name: "DescribeConfigs/broker-none", call: describeConfigs(kmsg.ConfigResourceTypeBroker, ""), want: clusterAuth},
		{name: "AlterConfigs/topic", grants: []acl.Binding{topicGrant(acl.OpAlterConfigs)}, call: alterConfigs(kmsg.ConfigResourceTypeTopic, aclTopic), want: 0},
		{name: "AlterConfigs/topic-none", grants: []acl.Binding{topicGrant(acl.OpDescribeConfigs)}, call: alterConfigs(kmsg.ConfigResourceTypeTopic, aclTopic), want: topicAuth},
		{name: "AlterConfigs/broker-none", call: alterConfigs(kmsg.ConfigResourceTypeBroker, ""), want: clusterAuth},
		{name: "IncrementalAlterConfigs/topic", grants: []acl.Binding{topicGrant(acl.OpAlterConfigs)}, call: incrementalAlterConfigs(kmsg.ConfigResourceTypeTopic, aclTopic), want: 0},
		{name: "IncrementalAlterConfigs/topic-none", call: incrementalAlterConfigs(kmsg.ConfigResourceTypeTopic, aclTopic), want: topicAuth},
		{name: "IncrementalAlterConfigs/broker-none", grants: []acl.Binding{clusterGrant(acl.OpDescribeConfigs)}, call: incrementalAlterConfigs(kmsg.ConfigResourceTypeBroker, ""), want: clusterAuth},
		{name: "DescribeLogDirs/DESCRIBE", grants: []acl.Binding{clusterGrant(acl.OpDescribe)}, call: describeLogDirs, want: 0},
		{name: "DescribeLogDirs/none", call: describeLogDirs, want: clusterAuth},
		{name: "CreatePartitions/ALTER", grants: []acl.Binding{grant(acl.ResourceTopic, aclCPTopic, acl.OpAlter)}, call: createPartitions, want: 0},
		{name: "CreatePartitions/none", grants: []acl.Binding{grant(acl.ResourceTopic, aclCPTopic, acl.OpDescribe)}, call: createPartitions, want: topicAuth},
		{name: "ElectLeaders/ALTER", grants: []acl.Binding{clusterGrant(acl.OpAlter)}, call: electLeaders, want: 0},
		{name: "ElectLeaders/none", call: electLeaders, want: clusterAuth},
		{name: "DescribeUserScramCredentials/DESCRIBE", grants: []acl.Binding{clusterGrant(acl.OpDescribe)}, call: describeScram, want: 0},
		{name: "DescribeUserScramCredentials/none", call: describeScram, want: clusterAuth},
		{name: "AlterUserScramCredentials/ALTER", grants: []acl.Binding{clusterGrant(acl.OpAlter)}, call: alterScram, want: kerr.ResourceNotFound.Code},
		{name: "AlterUserScramCredentials/none", grants: []acl.Binding{clusterGrant(acl.OpDescribe)}, call: alterScram, want: clusterAuth},
		{name: "DescribeProducers/READ", grants: []acl.Binding{topicGrant(acl.OpRead)}, call: describeProducers, want: 0},
		{name: "DescribeProducers/DESCRIBE", grants: []acl.Binding{topicGrant(acl.OpDescribe)}, call: describeProducers, want: topicAuth},
		{name: "DescribeTransactions/DESCRIBE", grants: []acl.Binding{txnID("tx-describe", acl.OpDescribe)}, call: describeTransactions, want: kerr.TransactionalIDNotFound.Code},
		{name: "DescribeTransactions/none", call: describeTransactions, want: txnAuth},
		{name: "ConsumerGroupHeartbeat/READ", grants: []acl.Binding{group("g-cgh", acl.OpRead), topicGrant(acl.OpDescribe)}, call: consumerHeartbeat, want: 0},
		{name: "ConsumerGroupHeartbeat/none", call: consumerHeartbeat, want: groupAuth},
		{name: "ConsumerGroupDescribe/DESCRIBE", grants: []acl.Binding{group("g-cgd", acl.OpDescribe)}, call: consumerDescribe, want: kerr.GroupIDNotFound.Code},
		{name: "ConsumerGroupDescribe/none", call: consumerDescribe, want: groupAuth},
		{name: "DescribeTopicPartitions/DESCRIBE", grants: []acl.Binding{topicGrant(acl.OpDescribe)}, call: describeTopicPartitions, want: 0},
		{name: "DescribeTopicPartitions/none", call: describeTopicPartitions, want: topicAuth},
		{name: "OffsetForLeaderEpoch/DESCRIBE", grants: []acl.Binding{topicGrant(acl.OpDescribe)}, call: offsetForLeaderEpoch, want: 0},
		{name: "OffsetForLeaderEpoch/CLUSTER_ACTION", grants: []acl.Binding{clusterGrant(acl.OpClusterAction)}, call: offsetForLeaderEpoch, want: 0},
		{name: "OffsetForLeaderEpoch/none", call: offsetForLeaderEpoch, want: topicAuth},
		{name: "DescribeAcls/DESCRIBE", grants: []acl.Binding{clusterGrant(acl.OpDescribe)}, call: describeAcls, want: 0},
		{name: "DescribeAcls/none", call: describeAcls, want: clusterAuth},
		{name: "CreateAcls/ALTER", grants: []acl.Binding{clusterGrant(acl.OpAlter)}, call: createAcls, want: 0},
		{name: "CreateAcls/DESCRIBE", grants: []acl.Binding{clusterGrant(acl.OpDescribe)}, call: createAcls, want: clusterAuth},
		{name: "DeleteAcls/ALTER", grants: []acl.Binding{clusterGrant(acl.OpAlter)}, call: deleteAcls, want: 0},
		{name: "DeleteAcls/none", call: deleteAcls, want: clusterAuth},
		{name: "DescribeClientQuotas/DESCRIBE_CONFIGS", grants: []acl.Binding{clusterGrant(acl.OpDescribeConfigs)}, call: describeQuotas, want: 0},
		{name: "DescribeClientQuotas/DESCRIBE", grants: []acl.Binding{clusterGrant(acl.OpDescribe)}, call: describeQuotas, want: clusterAuth},
		{name: "AlterClientQuotas/ALTER_CONFIGS", grants: []acl.Binding{clusterGrant(acl.OpAlterConfigs)}, call: alterQuotas, want: 0},
		{name: "AlterClientQuotas/DESCRIBE_CONFIGS", grants: []acl.Binding{clusterGrant(acl.OpDescribeConfigs)}, call: alterQuotas, want: clusterAuth},
		// Checks nothing, in Kafka too (SaslHandshake and SaslAuthenticate
		// neither; ListGroups, ListTransactions and DescribeCluster filter
		// instead of refusing: TestACL/hidden).
		{name: "ApiVersions/none", call: apiVersions, want: 0},
	}
}
