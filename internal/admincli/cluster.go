package admincli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnsupported is returned, wrapped, when a broker does not serve the
// API a command needs: its ApiVersions answer does not list the key. The
// command checks before sending, since a broker that does not know a key
// may close the connection rather than answer.
var ErrUnsupported = errors.New("admincli: unsupported API")

// requireAPI checks that every broker advertises key in ApiVersions.
func (c *cli) requireAPI(ctx context.Context, key int16) error {
	vs, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("api versions: %w", err)
	}
	ids := make([]int32, 0, len(vs))
	for id := range vs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		v := vs[id]
		if v.Err != nil {
			return fmt.Errorf("api versions of broker %d: %w", id, v.Err)
		}
		if _, ok := v.KeyMaxVersion(key); !ok {
			return fmt.Errorf("%w: broker %d does not support %s (API key %d): its ApiVersions answer does not list it",
				ErrUnsupported, id, apiName(key), key)
		}
	}
	return nil
}

// apiName is Kafka's name of an API key (franz-go calls key 45
// AlterPartitionAssignments; Kafka's protocol guide says
// AlterPartitionReassignments).
func apiName(key int16) string {
	if key == kmsg.AlterPartitionAssignments.Int16() {
		return "AlterPartitionReassignments"
	}
	return kmsg.NameForKey(key)
}

// brokerInfo is the JSON of one broker.
type brokerInfo struct {
	NodeID int32   `json:"node_id"`
	Host   string  `json:"host"`
	Port   int32   `json:"port"`
	Rack   *string `json:"rack"`
}

// clusterStatus is the JSON of `cluster status`.
type clusterStatusOut struct {
	ClusterID                 string       `json:"cluster_id"`
	Controller                int32        `json:"controller"`
	Brokers                   []brokerInfo `json:"brokers"`
	Topics                    int          `json:"topics"`
	Partitions                int          `json:"partitions"`
	UnderReplicatedPartitions int          `json:"under_replicated_partitions"`
	OfflinePartitions         int          `json:"offline_partitions"`
}

func clusterStatus(c *cli, args []string) error {
	fs := c.flags()
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: cluster status takes no arguments (%q)", ErrUsage, pos)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.requireAPI(ctx, kmsg.DescribeCluster.Int16()); err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("describe cluster: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("describe cluster: %w", brokerError(err, deref(resp.ErrorMessage)))
	}
	out := clusterStatusOut{ClusterID: resp.ClusterID, Controller: resp.ControllerID, Brokers: []brokerInfo{}}
	for _, b := range resp.Brokers {
		out.Brokers = append(out.Brokers, brokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].NodeID < out.Brokers[j].NodeID })
	md, err := c.adm.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for _, t := range md.Topics {
		out.Topics++
		for _, p := range t.Partitions {
			out.Partitions++
			if p.Leader < 0 {
				out.OfflinePartitions++
			}
			if len(p.ISR) < len(p.Replicas) {
				out.UnderReplicatedPartitions++
			}
		}
	}
	if c.json {
		return c.printJSON(out)
	}
	fmt.Fprintf(c.stdout, "Cluster: %s  Controller: %d\n", out.ClusterID, out.Controller)
	fmt.Fprintf(c.stdout, "Topics: %d  Partitions: %d  Under-replicated: %d  Offline: %d\n\n",
		out.Topics, out.Partitions, out.UnderReplicatedPartitions, out.OfflinePartitions)
	var rows [][]string
	for _, b := range out.Brokers {
		rows = append(rows, []string{fmt.Sprint(b.NodeID), fmt.Sprintf("%s:%d", b.Host, b.Port), dash(deref(b.Rack))})
	}
	return c.table([]string{"BROKER", "ADDRESS", "RACK"}, rows)
}

// replicaState is the JSON of one voter or observer of the quorum.
type replicaState struct {
	NodeID            int32  `json:"node_id"`
	Role              string `json:"role"` // Leader, Follower or Observer
	LogEndOffset      int64  `json:"log_end_offset"`
	Lag               int64  `json:"lag"`
	LastFetchMillis   int64  `json:"last_fetch_timestamp_ms"`
	LastCaughtUpMilli int64  `json:"last_caught_up_timestamp_ms"`
}

// quorumOut is the JSON of `cluster quorum`.
type quorumOut struct {
	LeaderID      int32          `json:"leader_id"`
	LeaderEpoch   int32          `json:"leader_epoch"`
	HighWatermark int64          `json:"high_watermark"`
	Replicas      []replicaState `json:"replicas"`
}

func clusterQuorum(c *cli, args []string) error {
	fs := c.flags()
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: cluster quorum takes no arguments (%q)", ErrUsage, pos)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.requireAPI(ctx, kmsg.DescribeQuorum.Int16()); err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", brokerError(err, deref(resp.ErrorMessage)))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("describe quorum: the answer has no __cluster_metadata partition")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", brokerError(err, deref(p.ErrorMessage)))
	}
	out := quorumOut{LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark, Replicas: []replicaState{}}
	add := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, observer bool) {
		for _, r := range rs {
			role := "Follower"
			switch {
			case observer:
				role = "Observer"
			case r.ReplicaID == p.LeaderID:
				role = "Leader"
			}
			out.Replicas = append(out.Replicas, replicaState{NodeID: r.ReplicaID, Role: role, LogEndOffset: r.LogEndOffset,
				Lag: max(p.HighWatermark-r.LogEndOffset, 0), LastFetchMillis: r.LastFetchTimestamp, LastCaughtUpMilli: r.LastCaughtUpTimestamp})
		}
	}
	add(p.CurrentVoters, false)
	add(p.Observers, true)
	if c.json {
		return c.printJSON(out)
	}
	fmt.Fprintf(c.stdout, "Leader: %d  Epoch: %d  High watermark: %d\n\n", out.LeaderID, out.LeaderEpoch, out.HighWatermark)
	var rows [][]string
	for _, r := range out.Replicas {
		rows = append(rows, []string{fmt.Sprint(r.NodeID), r.Role, fmt.Sprint(r.LogEndOffset), fmt.Sprint(r.Lag), ago(r.LastFetchMillis), ago(r.LastCaughtUpMilli)})
	}
	return c.table([]string{"NODE", "ROLE", "LOG-END-OFFSET", "LAG", "LAST-FETCH", "LAST-CAUGHT-UP"}, rows)
}

// ago shows a wall-clock timestamp in milliseconds as a time before now.
func ago(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.Since(time.UnixMilli(ms)).Round(time.Millisecond).String() + " ago"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
