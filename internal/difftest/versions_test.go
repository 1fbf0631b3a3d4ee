package difftest

import (
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
		case k[1] != r[1] && key != int16(kmsg.ApiVersions):
			t.Errorf("%s: Kafka's newest version is v%d, ringlog's v%d", kmsg.NameForKey(key), k[1], r[1])
		}
	}
}
