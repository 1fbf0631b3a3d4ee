package kafka

import (
	"cmp"
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// DescribeLogDirs v0-v5 (KIP-113): the broker's log directory, the size of
// every partition in it, and from v4 the volume's total and usable bytes
// (KIP-827). ringlog keeps one directory. v2 is flexible, v3 adds a
// top-level error code, v5 the cordoned flag (KIP-1066), always false.
func init() {
	register(api{key: kmsg.DescribeLogDirs, min: 0, max: 5, sync: handleDescribeLogDirs})
}

func handleDescribeLogDirs(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizeCluster(cx, acl.OpDescribe) {
		// With an authorizer, DESCRIBE on the cluster: no directory, the
		// code at the top (v3+; older versions only see nothing).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	d := kmsg.NewDescribeLogDirsResponseDir()
	dir, err := filepath.Abs(s.eng.Dir())
	if err != nil {
		dir = s.eng.Dir()
	}
	d.Dir = dir
	// The volume's space is best effort: where the system cannot say, the
	// fields keep Kafka's "unknown", -1.
	if total, usable, err := diskSpace(dir); err == nil {
		d.TotalBytes, d.UsableBytes = total, usable
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
		return cmp.Or(cmp.Compare(a.TP.Topic, b.TP.Topic), cmp.Compare(a.TP.Partition, b.TP.Partition))
	})
	for _, ps := range sizes {
		if want != nil && !want[ps.TP] {
			continue
		}
		if n := len(d.Topics); n == 0 || d.Topics[n-1].Topic != ps.TP.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = ps.TP.Topic
			d.Topics = append(d.Topics, t)
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		// The offset lag is max(HW - LEO, 0): a leader's is always 0,
		// and a single node leads every partition. No replica moves
		// between directories, so none is a future log.
		p.Partition, p.Size = ps.TP.Partition, ps.Size
		t := &d.Topics[len(d.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp.Dirs = append(resp.Dirs, d)
	return resp
}
