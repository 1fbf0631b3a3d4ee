package difftest

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompareResponses checks the comparison itself, without brokers: what
// it reports, with which path, and what the allowances let through.
func TestCompareResponses(t *testing.T) {
	meta := func(mutate func(*kmsg.MetadataResponse)) *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		r.SetVersion(vMetadata)
		r.ClusterID = kmsg.StringPtr("cluster")
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
		r.Brokers = append(r.Brokers, b)
		for _, name := range []string{"a", "b"} {
			tp := kmsg.NewMetadataResponseTopic()
			tp.Topic, tp.TopicID = kmsg.StringPtr(name), [16]byte{1}
			for p := range int32(2) {
				pp := kmsg.NewMetadataResponseTopicPartition()
				pp.Partition, pp.Leader, pp.Replicas, pp.ISR = p, 1, []int32{1}, []int32{1}
				tp.Partitions = append(tp.Partitions, pp)
			}
			r.Topics = append(r.Topics, tp)
		}
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	fetch := func(values ...string) *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		r.SetVersion(vFetchNames)
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic = "t"
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches = plain(values...)
		tp.Partitions = append(tp.Partitions, p)
		r.Topics = append(r.Topics, tp)
		return r
	}
	for _, c := range []struct {
		name           string
		kafka, ringlog kmsg.Response
		want           []string
	}{
		{"equal", meta(nil), meta(nil), nil},
		{
			"allowed: ports, cluster ids, topic ids",
			meta(nil),
			meta(func(r *kmsg.MetadataResponse) {
				r.Brokers[0].Port, r.ClusterID, r.Topics[1].TopicID = 1234, kmsg.StringPtr("other"), [16]byte{2}
			}),
			nil,
		},
		{
			"an error code, by key, with names",
			meta(nil),
			meta(func(r *kmsg.MetadataResponse) { r.Topics[1].Partitions[1].ErrorCode = 6 }),
			[]string{"Topics[b].Partitions[1].ErrorCode: kafka 0, ringlog 6 (NOT_LEADER_FOR_PARTITION)"},
		},
		{
			"a generated id set on one side only",
			meta(nil),
			meta(func(r *kmsg.MetadataResponse) { r.Topics[0].TopicID = [16]byte{} }),
			[]string{"Topics[a].TopicID: kafka 01000000000000000000000000000000, ringlog 00000000000000000000000000000000"},
		},
		{
			"order does not matter, presence does",
			meta(nil),
			meta(func(r *kmsg.MetadataResponse) {
				r.Topics[0], r.Topics[1] = r.Topics[1], r.Topics[0]
				r.Topics[0].Partitions = r.Topics[0].Partitions[:1]
			}),
			[]string{"Topics[b].Partitions[1]: kafka {ErrorCode=0 Partition=1 Leader=1 LeaderEpoch=-1 Replicas=[1] ISR=[1] OfflineReplicas=[0]}, ringlog absent"},
		},
		{
			"null against a value",
			meta(nil),
			meta(func(r *kmsg.MetadataResponse) { r.Brokers[0].Rack = kmsg.StringPtr("r1") }),
			[]string{`Brokers[1].Rack: kafka null, ringlog "r1"`},
		},
		{
			"records, decoded",
			fetch("a", "b"),
			fetch("a", "c", "d"),
			[]string{
				"Topics[t].Partitions[0].RecordBatches[0].Length: kafka 65, ringlog 73",
				// The CRC covers the records.
				"Topics[t].Partitions[0].RecordBatches[0].CRC: kafka 655565938, ringlog -1484747593",
				"Topics[t].Partitions[0].RecordBatches[0].LastOffsetDelta: kafka 1, ringlog 2",
				"Topics[t].Partitions[0].RecordBatches[0].MaxTimestamp: kafka 1700000000001, ringlog 1700000000002",
				"Topics[t].Partitions[0].RecordBatches[0].NumRecords: kafka 2, ringlog 3",
				`Topics[t].Partitions[0].RecordBatches[0].Records[1].Value: kafka "b", ringlog "c"`,
				`Topics[t].Partitions[0].RecordBatches[0].Records[2]: kafka absent, ringlog {Length=7 Attributes=0 TimestampDelta=2 TimestampDelta64=2 OffsetDelta=2 Key=null Value="d" Headers=[0]}`,
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, d := range compareResponses(c.kafka, c.ringlog) {
				got = append(got, d.String())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}
