package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
)

// A data directory's quorum state against the configuration it starts
// with. Raft bootstraps only a directory without state, so once a quorum
// has written a term, an entry or a snapshot, its configuration (the voters
// and observers raft replicated) is what the node rejoins, whatever
// controller.quorum.voters says now. Three starts would go wrong silently,
// and are refused here:
//
//   - A single-node directory (a local quorum: one voter at localAddr)
//     started as a broker-only node, or as a controller that finds its
//     quorum by bootstrap servers: it would elect itself the leader of its
//     own one-voter quorum beside the cluster's, or, once the cluster's
//     leader added it, have its log overwritten by the cluster's, after
//     which the broker deletes every topic the cluster does not have: its
//     acknowledged records.
//   - A single-node directory started with voters beside itself: those
//     voters bootstrap with empty logs, and two of three elect a leader of
//     an empty quorum whose log then replaces the seed's.
//   - A cluster member's directory started alone: its configuration names
//     voters an in-memory transport never reaches, and it waits forever.
//
// The one start of a single-node directory in a cluster that keeps its
// data is the seed: its broker,controller node restarted with
// controller.quorum.voters naming itself alone (and the cluster id its
// meta.properties recorded). Its quorum becomes the cluster's, with every
// topic, offset, config and producer-id block in it; brokers join as
// observers and controllers are added with AddRaftVoter (KIP-853), as a
// Kafka quorum formatted with --standalone grows. Its voter's address in
// the configuration is localAddr until the seed, leading, replaces it with
// its controller port (quorumHeartbeat), so that a later leader reaches it.

// ErrStoredQuorum refuses a start whose configuration contradicts the
// quorum state in the data directory.
var ErrStoredQuorum = errors.New("controller: the data directory's quorum state does not fit this start")

// storedConfiguration returns the latest raft configuration on disk: the
// last configuration entry of the log, else the newest snapshot's. Only
// the entries after that snapshot are read (at most SnapshotThreshold plus
// the trailing logs).
func storedConfiguration(logs raft.LogStore, snaps raft.SnapshotStore) (raft.Configuration, error) {
	var conf raft.Configuration
	from := uint64(0)
	metas, err := snaps.List()
	if err != nil {
		return conf, fmt.Errorf("controller: snapshots: %w", err)
	}
	if len(metas) > 0 {
		conf, from = metas[0].Configuration, metas[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return conf, fmt.Errorf("controller: raft log: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return conf, fmt.Errorf("controller: raft log: %w", err)
	}
	for i := max(first, from+1); i <= last && i > 0; i++ {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			return conf, fmt.Errorf("controller: raft log entry %d: %w", i, err)
		}
		if e.Type == raft.LogConfiguration {
			conf = raft.DecodeConfiguration(e.Data)
		}
	}
	return conf, nil
}

// isLocalQuorum reports whether conf is a local quorum's: one voter, at
// the in-memory address.
func isLocalQuorum(conf raft.Configuration) bool {
	return len(conf.Servers) == 1 && conf.Servers[0].Address == localAddr
}

// checkStoredQuorum refuses the starts described at the top of the file.
// It reports whether this start seeds a cluster with a local quorum.
func (cfg *Config) checkStoredQuorum(conf raft.Configuration) (seed bool, err error) {
	if len(conf.Servers) == 0 {
		// A node that was never added (a broker or controller whose
		// first start died before the leader reached it).
		return false, nil
	}
	local := isLocalQuorum(conf)
	switch {
	case cfg.local() && local:
		return false, nil
	case cfg.local():
		return false, fmt.Errorf("%w: %s holds the metadata quorum of a cluster (%s); this node starts alone, "+
			"where it would wait forever for those voters: start it with controller.quorum.voters or "+
			"controller.quorum.bootstrap.servers", ErrStoredQuorum, cfg.Dir, describeServers(conf))
	case !local:
		return false, nil
	}
	id, _ := nodeID(conf.Servers[0].ID)
	keep := fmt.Sprintf("to keep its topics, start it as the seed of the cluster (process.roles=broker,controller, "+
		"controller.quorum.voters naming node %d alone, cluster.id as its meta.properties records) and add "+
		"brokers and controllers to it; to join a cluster without them, start on an empty directory", cfg.NodeID)
	switch {
	case id != cfg.NodeID:
		return false, fmt.Errorf("%w: %s holds the single-node quorum of node %d, this is node %d",
			ErrStoredQuorum, cfg.Dir, id, cfg.NodeID)
	case cfg.NonVoter:
		return false, fmt.Errorf("%w: %s holds a single-node cluster's metadata quorum (node %d its only voter); "+
			"a broker-only node cannot join another quorum with it: the cluster's log would replace it and the "+
			"broker delete every topic that cluster does not have; %s", ErrStoredQuorum, cfg.Dir, cfg.NodeID, keep)
	case !cfg.staticVoter():
		return false, fmt.Errorf("%w: %s holds a single-node cluster's metadata quorum (node %d its only voter); "+
			"it cannot join the quorum at controller.quorum.bootstrap.servers with it; %s", ErrStoredQuorum, cfg.Dir, cfg.NodeID, keep)
	case len(cfg.Voters) > 1:
		var others []string
		for _, v := range cfg.Voters {
			if v.ID != cfg.NodeID {
				others = append(others, fmt.Sprint(v.ID))
			}
		}
		return false, fmt.Errorf("%w: %s holds a single-node cluster's metadata quorum (node %d its only voter); "+
			"controller.quorum.voters names voters %s beside it, which would bootstrap a second, empty quorum of "+
			"their own: seed the cluster with controller.quorum.voters naming node %d alone, then add controllers "+
			"with AddRaftVoter (ringlog admin cluster add-voter)", ErrStoredQuorum, cfg.Dir, cfg.NodeID,
			strings.Join(others, ","), cfg.NodeID)
	}
	return true, nil
}

// describeServers names a configuration's members for an error.
func describeServers(conf raft.Configuration) string {
	var out []string
	for _, s := range conf.Servers {
		role := "voter"
		if s.Suffrage != raft.Voter {
			role = "observer"
		}
		out = append(out, fmt.Sprintf("%s %s@%s", role, s.ID, s.Address))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
