package kafka

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
	"ringlog/internal/fsutil"
)

// DescribeLogDirs v0-v5 (KIP-113): every log directory of the broker (Kafka's
// log.dirs), the size of every partition in it, and from v4 the volume's
// total and usable bytes (KIP-827). An offline directory is listed with
// KAFKA_STORAGE_ERROR and nothing else, as Kafka lists one. v2 is flexible,
// v3 adds a top-level error code, v5 the cordoned flag (KIP-1066), always
// false. With an authorizer it needs DESCRIBE on the cluster (Kafka's
// check): without it the answer lists no directory, with
// CLUSTER_AUTHORIZATION_FAILED from v3.
func init() {
	register(api{key: kmsg.DescribeLogDirs, min: 0, max: 5, sync: handleDescribeLogDirs})
}

func handleDescribeLogDirs(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizeCluster(cx, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	// A null topic list asks for every partition; otherwise only those
	// asked for that exist here are listed (Kafka leaves the others out).
	var want map[engine.TP]bool
	if req.Topics != nil {
		want = make(map[engine.TP]bool)
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[engine.TP{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	sizes := s.eng.Sizes()
	slices.SortFunc(sizes, func(a, b engine.PartitionSize) int {
		return cmp.Or(cmp.Compare(a.TP.Topic, b.TP.Topic), cmp.Compare(a.TP.Partition, b.TP.Partition), cmp.Compare(boolInt(a.Future), boolInt(b.Future)))
	})
	for _, ld := range s.eng.LogDirs() {
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.Dir = ld.Path
		if ld.Err != nil {
			d.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, d)
			continue
		}
		// The volume's space is best effort: where the system cannot say,
		// the fields keep Kafka's "unknown", -1.
		if total, usable, err := fsutil.DiskSpace(ld.Path); err == nil {
			d.TotalBytes, d.UsableBytes = total, usable
		}
		for _, ps := range sizes {
			if ps.Dir != ld.Path || (want != nil && !want[ps.TP]) {
				continue
			}
			if n := len(d.Topics); n == 0 || d.Topics[n-1].Topic != ps.TP.Topic {
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = ps.TP.Topic
				d.Topics = append(d.Topics, t)
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			// The offset lag is max(HW - LEO, 0) for a current log: a
			// leader's is always 0, and a single node leads every
			// partition. A future log's (a move between directories under
			// way) is how far its copy is behind the current log's LEO, as
			// Kafka reports it.
			p.Partition, p.Size, p.IsFuture, p.OffsetLag = ps.TP.Partition, ps.Size, ps.Future, ps.Lag
			t := &d.Topics[len(d.Topics)-1]
			t.Partitions = append(t.Partitions, p)
		}
		resp.Dirs = append(resp.Dirs, d)
	}
	return resp
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
