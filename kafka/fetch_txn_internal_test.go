package kafka

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/segment"
)

// TestFetchFramingAbortedTransactions checks the aborted_transactions of a
// read_committed answer (with their tagged fields from v12) against kmsg
// for every version, and the null list of read_uncommitted.
func TestFetchFramingAbortedTransactions(t *testing.T) {
	for v := int16(fetchVersionMin); v <= fetchVersionMax; v++ {
		for _, committed := range []bool{false, true} {
			s := &Server{}
			part := fetchPart{tp: engine.TP{Topic: "t", Partition: 2}, hw: 9, lso: 7, logStart: 0}
			if committed {
				part.aborted = []segment.AbortedTxn{{ProducerID: 4, FirstOffset: 1, LastOffset: 3}, {ProducerID: 5, FirstOffset: 2, LastOffset: 6}}
			}
			f := &fetch{s: s, cx: &reqCtx{s: s, correlationID: 5}, version: v, readCommitted: committed,
				topics: []fetchTopic{{name: "t", id: [16]byte{1}, parts: []fetchPart{part}}}}
			want := kmsg.NewPtrFetchResponse()
			want.Version = v
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = "t", [16]byte{1}
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset, p.PreferredReadReplica, p.RecordBatches = 2, 9, 7, 0, -1, []byte{}
			if committed {
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 4, FirstOffset: 1}, {ProducerID: 5, FirstOffset: 2}}
			}
			st.Partitions = append(st.Partitions, p)
			want.Topics = append(want.Topics, st)
			if got, w := f.encode().buf, AppendFetchFrame(5, want); !bytes.Equal(got, w) {
				t.Fatalf("v%d read_committed %v:\n got %x\nwant %x", v, committed, got, w)
			}
		}
	}
}

// BenchmarkFetchEncode encodes the answer of a fetch over 100 partitions,
// read_uncommitted and read_committed (no aborted transactions, and one
// in each partition), so that the hand-written frame's cost stays seen.
func BenchmarkFetchEncode(b *testing.B) {
	for _, c := range []struct {
		name      string
		committed bool
		aborted   int
	}{{"read_uncommitted", false, 0}, {"read_committed", true, 0}, {"read_committed_aborted", true, 1}} {
		b.Run(c.name, func(b *testing.B) {
			s := &Server{}
			f := &fetch{s: s, cx: &reqCtx{s: s, correlationID: 5}, version: 16, readCommitted: c.committed}
			for ti := range 10 {
				ft := fetchTopic{name: fmt.Sprintf("topic-%d", ti), id: [16]byte{byte(ti)}}
				for pi := range 10 {
					fp := fetchPart{tp: engine.TP{Topic: ft.name, Partition: int32(pi)}, hw: 1000, lso: 990, logStart: 0}
					for range c.aborted {
						fp.aborted = append(fp.aborted, segment.AbortedTxn{ProducerID: 1, FirstOffset: 10, LastOffset: 20})
					}
					ft.parts = append(ft.parts, fp)
				}
				f.topics = append(f.topics, ft)
			}
			b.ReportAllocs()
			for b.Loop() {
				f.encode()
			}
		})
	}
}
