package difftest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/internal/kafkaref"
	"ringlog/kafka"
)

// The ACL scenario needs brokers of its own: Kafka's StandardAuthorizer
// and ringlog's authorizer on, allow.everyone.if.no.acl.found off, the
// PLAINTEXT listener's ANONYMOUS a super user (the scripts' set-up, and
// Kafka's own controller traffic), and a SASL_PLAINTEXT listener with the
// same PLAIN users on both.
var aclUsers = map[string]string{"reader": "reader-pw", "nobody": "nobody-pw"}

var aclBrokers struct {
	once               sync.Once
	err                error
	dir                string
	kafka              *kafkaref.Cluster
	ringlog            *broker.Broker
	kafkaSASL, rlgSASL string
}

// aclPair starts (once) and returns the ACL brokers: each side's
// PLAINTEXT and SASL addresses.
func aclPair(t *testing.T) (k, r [2]string) {
	t.Helper()
	aclBrokers.once.Do(func() {
		start := time.Now()
		startACLBrokers()
		t.Logf("Apache Kafka %s and ringlog with authorizers started in %v", kafkaref.Version, time.Since(start).Round(time.Millisecond))
	})
	if aclBrokers.err != nil {
		t.Fatal(aclBrokers.err)
	}
	t.Cleanup(stopACLBrokers)
	return [2]string{aclBrokers.kafka.Bootstrap(), aclBrokers.kafkaSASL}, [2]string{aclBrokers.ringlog.Addr(), aclBrokers.rlgSASL}
}

func startACLBrokers() {
	dir, err := os.MkdirTemp("", "difftest-acl-")
	if err != nil {
		aclBrokers.err = err
		return
	}
	aclBrokers.dir = dir
	props := map[string]string{
		"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                    "User:ANONYMOUS",
		"allow.everyone.if.no.acl.found": "false",
	}
	for k, v := range kafkaProps {
		props[k] = v
	}
	var wg sync.WaitGroup
	var kafkaErr, ringlogErr error
	wg.Go(func() {
		aclBrokers.kafka, kafkaErr = kafkaref.Start(kafkaref.Options{Dir: filepath.Join(dir, "kafka"), Heap: "512m", Props: props, PlainUsers: aclUsers})
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg := ringlogConfig(filepath.Join(dir, "ringlog"))
		cfg.Authorizer, cfg.SuperUsers = true, []string{"User:ANONYMOUS"}
		cfg.Listeners = append(cfg.Listeners, broker.Listener{Name: "SASL", Protocol: kafka.SASLPlaintext, Addr: "127.0.0.1:0",
			Mechanisms: []string{"PLAIN"}, PlainUsers: aclUsers})
		aclBrokers.ringlog, ringlogErr = broker.Start(ctx, cfg)
	})
	wg.Wait()
	if kafkaErr == nil {
		afterFirstRetentionPass()
	}
	switch {
	case kafkaErr != nil:
		aclBrokers.err = fmt.Errorf("difftest: Apache Kafka: %w", kafkaErr)
	case ringlogErr != nil:
		aclBrokers.err = fmt.Errorf("difftest: ringlog: %w", ringlogErr)
	default:
		aclBrokers.kafkaSASL = aclBrokers.kafka.Nodes[0].SASLAddr
		aclBrokers.rlgSASL = aclBrokers.ringlog.ListenerAddr("SASL")
	}
}

// stopACLBrokers stops them after the one test that uses them.
func stopACLBrokers() {
	if aclBrokers.ringlog != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = aclBrokers.ringlog.Close(ctx)
		cancel()
		aclBrokers.ringlog = nil
	}
	if aclBrokers.kafka != nil {
		aclBrokers.kafka.Stop()
		aclBrokers.kafka = nil
	}
	if aclBrokers.dir != "" {
		os.RemoveAll(aclBrokers.dir)
		aclBrokers.dir = ""
	}
}

// userConn opens a connection to the side's SASL listener authenticated
// as user with PLAIN (unrecorded: both brokers accept the same users).
func (s *side) userConn(user string) *conn {
	c, err := dial(s.saslAddr, "difftest-"+user)
	if err != nil {
		s.fail("%v", err)
	}
	s.conns = append(s.conns, c)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if r := s.quietOn(c, hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		s.fail("SaslHandshake as %s: %d", user, r.ErrorCode)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("\x00" + user + "\x00" + aclUsers[user])
	if r := s.quietOn(c, auth).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		s.fail("SaslAuthenticate as %s: %d", user, r.ErrorCode)
	}
	return c
}

func aclCreation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
	return c
}

func aclFilterReq(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal *string) *kmsg.DescribeACLsRequest {
	r := kmsg.NewPtrDescribeACLsRequest()
	r.SetVersion(3)
	r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal = rt, name, pt, principal
	r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return r
}

// TestACLs: CreateAcls, DescribeAcls and DeleteAcls (valid and invalid
// bindings and filters), then the answers a principal gets from the APIs
// that check ACLs, with and without the operation each needs.
func TestACLs(t *testing.T) {
	k, r := aclPair(t)
	kafkaSide := runSideSASL(t, "kafka", k, aclScript)
	ringlogSide := runSideSASL(t, "ringlog", r, aclScript)
	compareTranscripts(t, kafkaSide, ringlogSide)
}

func aclScript(s *side) {
	topic, group, txnID := name(s.t, "t"), name(s.t, "g"), name(s.t, "tx")
	s.createTopic(topic, 1, nil)
	s.coordinated(group)
	// Kafka creates __transaction_state at the first FindCoordinator of
	// a transactional id, answering COORDINATOR_NOT_AVAILABLE meanwhile.
	s.eventually("a transaction coordinator", func() kmsg.Request { return findCoordinatorReq(1, txnID+"-1") }, func(r kmsg.Response) bool {
		cs := r.(*kmsg.FindCoordinatorResponse).Coordinators
		return len(cs) == 1 && cs[0].ErrorCode == 0
	})
	const reader = "User:reader"

	// The ACL APIs themselves, as the super user.
	create := kmsg.NewPtrCreateACLsRequest()
	create.SetVersion(3)
	create.Creations = []kmsg.CreateACLsRequestCreation{
		aclCreation(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral, reader, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeGroup, group, kmsg.ACLResourcePatternTypeLiteral, reader, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTransactionalId, txnID, kmsg.ACLResourcePatternTypePrefixed, reader, kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeCluster, "not-the-cluster", kmsg.ACLResourcePatternTypeLiteral, reader, kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral, "reader", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
	}
	s.do("create acls", create)
	s.eventually("the bindings applied", func() kmsg.Request {
		return aclFilterReq(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, kmsg.StringPtr(reader))
	}, func(r kmsg.Response) bool {
		return len(r.(*kmsg.DescribeACLsResponse).Resources) == 3
	})
	s.do("describe: the topic, MATCH", aclFilterReq(kmsg.ACLResourceTypeTopic, &topic, kmsg.ACLResourcePatternTypeMatch, nil))
	s.do("describe: an id under the prefix, MATCH", aclFilterReq(kmsg.ACLResourceTypeTransactionalId, kmsg.StringPtr(txnID+"-1"), kmsg.ACLResourcePatternTypeMatch, nil))
	s.do("describe: an id under the prefix, ANY", aclFilterReq(kmsg.ACLResourceTypeTransactionalId, kmsg.StringPtr(txnID+"-1"), kmsg.ACLResourcePatternTypeAny, nil))
	s.do("describe: the group, LITERAL", aclFilterReq(kmsg.ACLResourceTypeGroup, &group, kmsg.ACLResourcePatternTypeLiteral, nil))

	// The APIs, as a principal with the bindings above and as one with none.
	for _, user := range []string{"reader", "nobody"} {
		c := s.userConn(user)
		do := func(label string, req kmsg.Request) kmsg.Response { return s.doOn(c, user+": "+label, req) }
		do("metadata", metadataReq(topic))
		do("list offsets", listOffsetsReq(topic, 0, -1))
		do("find coordinator, group", findCoordinatorReq(0, group))
		do("find coordinator, transaction", findCoordinatorReq(1, txnID+"-1"))
		do("describe groups", describeGroupsReq(group))

		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.SetVersion(vOffsetCommitNames)
		commit.Group, commit.Generation = group, -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Offset = 0
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		do("offset commit", commit)

		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.SetVersion(vOffsetFetchNames)
		fg := kmsg.NewOffsetFetchRequestGroup()
		fg.Group = group
		ft := kmsg.NewOffsetFetchRequestGroupTopic()
		ft.Topic, ft.Partitions = topic, []int32{0}
		fg.Topics = append(fg.Topics, ft)
		fetch.Groups = append(fetch.Groups, fg)
		do("offset fetch", fetch)

		join := kmsg.NewPtrJoinGroupRequest()
		join.SetVersion(vJoinGroup)
		join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = group+"-other", 10000, 10000, "consumer"
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name = "range"
		join.Protocols = append(join.Protocols, jp)
		do("join another group", join)

		hb := kmsg.NewPtrHeartbeatRequest()
		hb.SetVersion(vHeartbeat)
		hb.Group, hb.Generation, hb.MemberID = group+"-other", 1, "m"
		do("heartbeat in another group", hb)

		del := kmsg.NewPtrDeleteGroupsRequest()
		del.SetVersion(vDeleteGroups)
		del.Groups = []string{group}
		do("delete the group", del)

		ct2 := kmsg.NewPtrCreateTopicsRequest()
		ct2.SetVersion(vCreateTopics)
		ct2.ValidateOnly = true
		nt := kmsg.NewCreateTopicsRequestTopic()
		nt.Topic, nt.NumPartitions, nt.ReplicationFactor = topic+"-new", 1, 1
		ct2.Topics = append(ct2.Topics, nt)
		do("create a topic", ct2)

		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.SetVersion(vDeleteTopics)
		dtt := kmsg.NewDeleteTopicsRequestTopic()
		dtt.Topic = kmsg.StringPtr(topic)
		dt.Topics, dt.TimeoutMillis = append(dt.Topics, dtt), 5000
		do("delete the topic", dt)

		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.SetVersion(vInitProducerID)
		ip.TransactionTimeoutMillis = 10000
		do("init an idempotent producer", ip)
		ipt := kmsg.NewPtrInitProducerIDRequest()
		ipt.SetVersion(vInitProducerID)
		ipt.TransactionalID, ipt.TransactionTimeoutMillis = kmsg.StringPtr(txnID+"-1"), 10000
		do("init a transactional producer", ipt)

		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.SetVersion(vDescribeConfigs)
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"cleanup.policy"}
		dc.Resources = append(dc.Resources, dr)
		do("describe configs", dc)

		ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ia.SetVersion(vIncrementalAlter)
		ia.ValidateOnly = true
		iar := kmsg.NewIncrementalAlterConfigsRequestResource()
		iar.ResourceType, iar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		ia.Resources = append(ia.Resources, iar)
		do("alter configs", ia)

		ld := kmsg.NewPtrDescribeLogDirsRequest()
		ld.SetVersion(vDescribeLogDirs)
		ld.Topics = []kmsg.DescribeLogDirsRequestTopic{}
		do("describe log dirs", ld)

		cpr := kmsg.NewPtrCreatePartitionsRequest()
		cpr.SetVersion(vCreatePartitions)
		cpr.ValidateOnly = true
		cpt := kmsg.NewCreatePartitionsRequestTopic()
		cpt.Topic, cpt.Count = topic, 2
		cpr.Topics = append(cpr.Topics, cpt)
		do("create partitions", cpr)

		dsc := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		dsc.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{}
		do("describe SCRAM credentials", dsc)

		dtx := kmsg.NewPtrDescribeTransactionsRequest()
		dtx.TransactionalIDs = []string{txnID + "-1"}
		do("describe transactions", dtx)

		dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dtpt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dtpt.Topic = topic
		dtp.Topics, dtp.ResponsePartitionLimit = append(dtp.Topics, dtpt), 100
		do("describe topic partitions", dtp)

		da := aclFilterReq(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil)
		do("describe acls", da)
		aclMoreSteps(s, do, topic, group, txnID)
	}

	// DeleteAcls: one filter matching one binding, one matching none.
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeGroup, &group, kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	none := f
	none.ResourceName = kmsg.StringPtr(group + "-none")
	del.Filters = append(del.Filters, f, none)
	s.do("delete acls", del)
}

// aclMoreSteps are the rest of the APIs a principal may be refused: the
// data path, the transaction APIs (the reader may only DESCRIBE its
// transactional ids: WRITE is refused first), listings, and the cluster's.
func aclMoreSteps(s *side, do func(string, kmsg.Request) kmsg.Response, topic, group, txnID string) {
	p := part{topic: topic}
	do("produce", produceReq(vProduceNames, -1, p, plain("v")))
	do("fetch", fetchReq(vFetchNames, p, 0, 1<<20))
	do("metadata of every topic", metadataReq())

	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(vListGroups)
	do("list groups", lg)

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.SetVersion(vOffsetDelete)
	od.Group = group
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = topic
	odt.Partitions = append(odt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
	od.Topics = append(od.Topics, odt)
	do("offset delete", od)

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.SetVersion(vDeleteRecords)
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = topic
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics, dr.TimeoutMillis = append(dr.Topics, drt), 5000
	do("delete records", dr)

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.SetVersion(vOffsetForLeaderEpoch)
	oe.ReplicaID = -1
	oet := kmsg.NewOffsetForLeaderEpochRequestTopic()
	oet.Topic = topic
	oep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	oep.CurrentLeaderEpoch, oep.LeaderEpoch = -1, 0
	oet.Partitions = append(oet.Partitions, oep)
	oe.Topics = append(oe.Topics, oet)
	do("offset for leader epoch", oe)

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.SetVersion(3)
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = txnID+"-1", 12345, 0
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = topic, []int32{0}
	ap.Topics = append(ap.Topics, apt)
	do("add partitions to txn", ap)

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.SetVersion(4)
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = txnID+"-1", 12345, 0, group
	do("add offsets to txn", ao)

	et := kmsg.NewPtrEndTxnRequest()
	et.SetVersion(5)
	et.TransactionalID, et.ProducerID, et.ProducerEpoch = txnID+"-1", 12345, 0
	do("end txn", et)

	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.SetVersion(5)
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = txnID+"-1", group, 12345, 0, -1
	toct := kmsg.NewTxnOffsetCommitRequestTopic()
	toct.Topic = topic
	toct.Partitions = append(toct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	toc.Topics = append(toc.Topics, toct)
	do("txn offset commit", toc)

	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dpt)
	do("describe producers", dp)

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.SetVersion(1)
	lt.DurationFilterMillis = -1
	do("list transactions", lt)

	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	elt := kmsg.NewElectLeadersRequestTopic()
	elt.Topic, elt.Partitions = topic, []int32{0}
	el.Topics, el.TimeoutMillis = append(el.Topics, elt), 5000
	do("elect leaders", el)

	as := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	asd := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	asd.Name, asd.Mechanism = "nobody-at-all", 1
	as.Deletions = append(as.Deletions, asd)
	do("alter SCRAM credentials", as)

	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.SetVersion(vDescribeCluster)
	dcl.IncludeClusterAuthorizedOperations = true
	do("describe cluster", dcl)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(vConsumerHeartbeat)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = group+"-848", "AAAAAAAAAAAAAAAAAAAAAA", 0, 10000
	hb.SubscribedTopicNames, hb.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	do("consumer group heartbeat", hb)
	hb2 := *hb
	hb2.Group, hb2.SubscribedTopicNames = group, []string{topic, topic + "-hidden"}
	do("consumer group heartbeat, a topic not described", &hb2)

	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.SetVersion(vConsumerDescribe)
	cd.Groups, cd.IncludeAuthorizedOperations = []string{group}, true
	do("consumer group describe", cd)

	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.SetVersion(vAlterConfigs)
	ac.ValidateOnly = true
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeBroker, fmt.Sprint(nodeID)
	ac.Resources = append(ac.Resources, acr)
	do("alter broker configs", ac)

	dq := kmsg.NewPtrDescribeClientQuotasRequest()
	dq.SetVersion(1)
	do("describe client quotas", dq)

	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.SetVersion(1)
	aq.ValidateOnly = true
	aqe := kmsg.NewAlterClientQuotasRequestEntry()
	aqn := kmsg.NewAlterClientQuotasRequestEntryEntity()
	aqn.Type, aqn.Name = "user", kmsg.StringPtr("quota-user")
	aqo := kmsg.NewAlterClientQuotasRequestEntryOp()
	aqo.Key, aqo.Value = "producer_byte_rate", 1024
	aqe.Entity, aqe.Ops = append(aqe.Entity, aqn), append(aqe.Ops, aqo)
	aq.Entries = append(aq.Entries, aqe)
	do("alter client quotas", aq)

	ca := kmsg.NewPtrCreateACLsRequest()
	ca.SetVersion(3)
	ca.Creations = append(ca.Creations, aclCreation(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral, "User:x", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	do("create acls", ca)
}
