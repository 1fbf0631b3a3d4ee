package engine

import "ringlog/segment"

// LeaderEpochs returns tp's leader-epoch cache (epoch and start offset, in
// ascending order), as a follower needs it to decide where to truncate
// after a leader change (KIP-101, KIP-279). It is a copy; any goroutine may
// call it.
func (e *Core) LeaderEpochs(tp TP) ([]segment.EpochEntry, error) {
	p, err := e.partition(tp)
	if err != nil {
		return nil, err
	}
	return p.log().Epochs(), nil
}

// ApplyConfigOps returns the topic overrides cur after an incremental
// configuration change (set, delete, append, subtract, as
// IncrementalAlterTopicConfig applies them), checked against base: a
// replication layer applies it to the cluster's configuration of a topic
// that this broker may not host.
func ApplyConfigOps(cur map[string]string, base TopicConfig, ops []ConfigOp) (map[string]string, error) {
	return applyOps(cur, base, ops)
}
