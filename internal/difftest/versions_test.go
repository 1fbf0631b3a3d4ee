package difftest

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pinned is every API version the scenarios send.
var pinned = map[kmsg.Key][]int16{
	kmsg.Produce:                 {vProduce, vProduceNames},
	kmsg.Fetch:                   {vFetch, vFetchNames},
	kmsg.ListOffsets:             {vListOffsets},
	kmsg.Metadata:                {vMetadata},
	kmsg.OffsetCommit:            {vOffsetCommit, vOffsetCommitNames},
	kmsg.OffsetFetch:             {vOffsetFetch, vOffsetFetchNames},
	kmsg.FindCoordinator:         {vFindCoordinator},
	kmsg.JoinGroup:               {vJoinGroup},
	kmsg.Heartbeat:               {vHeartbeat},
	kmsg.LeaveGroup:              {vLeaveGroup},
	kmsg.SyncGroup:               {vSyncGroup},
	kmsg.DescribeGroups:          {vDescribeGroups},
	kmsg.ListGroups:              {vListGroups},
	kmsg.ApiVersions:             {vApiVersions},
	kmsg.CreateTopics:            {vCreateTopics},
	kmsg.DeleteTopics:            {vDeleteTopics},
	kmsg.DeleteRecords:           {vDeleteRecords},
	kmsg.InitProducerID:          {vInitProducerID},
	kmsg.OffsetForLeaderEpoch:    {vOffsetForLeaderEpoch},
	kmsg.DescribeConfigs:         {vDescribeConfigs},
	kmsg.AlterConfigs:            {vAlterConfigs},
	kmsg.CreatePartitions:        {vCreatePartitions},
	kmsg.DeleteGroups:            {vDeleteGroups},
	kmsg.IncrementalAlterConfigs: {vIncrementalAlter},
	kmsg.OffsetDelete:            {vOffsetDelete},
	kmsg.DescribeCluster:         {vDescribeCluster},
	kmsg.ConsumerGroupHeartbeat:  {vConsumerHeartbeat},
	kmsg.ConsumerGroupDescribe:   {vConsumerDescribe},
	kmsg.DescribeLogDirs:         {vDescribeLogDirs},
	kmsg.EndTxn:                  {vEndTxn},
	kmsg.DescribeProducers:       {vDescribeProducers},
	kmsg.ListTransactions:        {vListTransactions},
	kmsg.TxnOffsetCommit:         {vTxnOffsetCommit, vTxnOffsetCommitNames},
	kmsg.DescribeQuorum:          {vDescribeQuorum, 1, 0},
}

// ringlogAPIs are the APIs ringlog serves (kafka/'s registry, as its
// ApiVersions lists them).
var ringlogAPIs = map[int16]bool{}

func init() {
	for key := range pinned {
		ringlogAPIs[int16(key)] = true
	}
}

// TestVersions checks that both brokers serve every version the scenarios
// pin, and that for every API both serve, the newest version is the same:
// a newer Kafka (or a ringlog that fell behind) shows up here first.
func TestVersions(t *testing.T) {
	kafkaAddr, ringlogAddr := pair(t)
	ranges := func(addr string) map[int16][2]int16 {
		c, err := dial(addr, "difftest")
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(vApiVersions)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "difftest", "1"
		resp, err := c.roundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int16][2]int16{}
		for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
			m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		return m
	}
	kr, rr := ranges(kafkaAddr), ranges(ringlogAddr)
	for key, versions := range pinned {
		for _, v := range versions {
			for side, m := range map[string]map[int16][2]int16{"kafka": kr, "ringlog": rr} {
				r, ok := m[int16(key)]
				if !ok || v < r[0] || v > r[1] {
					t.Errorf("%s does not serve %s v%d (it serves %v)", side, kmsg.NameForKey(int16(key)), v, r)
				}
			}
		}
	}
	for key, r := range rr {
		k, ok := kr[key]
		switch {
		case !ok:
			t.Errorf("ringlog serves %s, which Kafka %s does not", kmsg.NameForKey(key), "4.4.0")
		case k[1] != r[1]:
			if b, ok := behind[kmsg.Key(key)]; ok && b.kafka == k[1] && b.ringlog == r[1] {
				t.Logf("%s: Kafka's newest version is v%d, ringlog's v%d: known difference %s", kmsg.NameForKey(key), k[1], r[1], b.ref)
				continue
			}
			t.Errorf("%s: Kafka's newest version is v%d, ringlog's v%d", kmsg.NameForKey(key), k[1], r[1])
		}
	}
	for key, b := range behind {
		if k, r := kr[int16(key)], rr[int16(key)]; k[1] != b.kafka || r[1] != b.ringlog {
			t.Errorf("known difference %s (%s v%d against v%d) no longer seen (Kafka v%d, ringlog v%d): remove it from behind and README.md",
				b.ref, kmsg.NameForKey(int16(key)), b.kafka, b.ringlog, k[1], r[1])
		}
	}
}

// behind are the APIs whose newest version ringlog does not serve yet,
// each a known difference of README.md: Kafka's newest and ringlog's.
var behind = map[kmsg.Key]struct {
	kafka, ringlog int16
	ref            string
}{}

func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "difftest", "1"
	return req
}

// TestApiVersions compares ApiVersions itself: the versions of the APIs
// both brokers serve (the APIs only Kafka serves are left out: ringlog
// implements a subset, README.md), the features, and v5's check of the
// cluster and node a client believes it reached (KIP-1242).
func TestApiVersions(t *testing.T) {
	run(t, func(s *side) {
		resp := s.do("versions", apiVersionsReq(vApiVersions)).(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = slices.DeleteFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
			_, ok := ringlogAPIs[k.ApiKey]
			return !ok
		})
		cluster := *s.quiet(metadataReq()).(*kmsg.MetadataResponse).ClusterID
		v5 := func(label string, cluster *string, node int32) {
			req := apiVersionsReq(5)
			req.ClusterID, req.NodeID = cluster, node
			resp := s.do(label, req).(*kmsg.ApiVersionsResponse)
			// Compared once, above.
			resp.ApiKeys, resp.SupportedFeatures, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch = nil, nil, nil, -1
		}
		v5("v5, bootstrapping", nil, -1)
		v5("v5, this cluster and node", &cluster, nodeID)
		v5("v5, another cluster", kmsg.StringPtr("AAAAAAAAAAAAAAAAAAAAAA"), nodeID)
		v5("v5, another node", &cluster, nodeID+6)
		v5("v5, a cluster without a node", &cluster, -1)
		v5("v5, a node without a cluster", nil, nodeID)
	})
}
