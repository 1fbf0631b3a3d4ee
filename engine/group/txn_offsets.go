package group

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/segment/batch"
)

// Transactional offset commits (KIP-98, KIP-447): a transactional producer
// commits its consumer group's offsets inside its transaction
// (TxnOffsetCommit), after AddOffsetsToTxn put the group's partition of
// __consumer_offsets in the transaction. The offsets are written at once,
// in a transactional batch of the producer, and kept pending: they become
// the group's committed offsets when the transaction's COMMIT marker lands
// on the partition, and are dropped by an ABORT (TxnCompleted, called by
// the partition's leader when it writes the marker; replay does the same
// with the markers in the log). While pending, a partition's offset is
// UNSTABLE_OFFSET_COMMIT to a fetch with require_stable and never expires
// (pendingCommits counts it).

// txnPending is one producer's pending offsets in one group.
type txnPending struct {
	offsets map[engine.TP]committed
	// n counts, per partition, the pendingCommits this producer holds.
	n map[engine.TP]int
}

// TxnOffsetCommit (v0-v6) writes a transactional producer's offsets for
// the group, pending until its transaction ends. A commit naming a member
// or a generation (v3+, KIP-447) must come from a current member at the
// current generation, or for a KIP-848 group at its member epoch or an
// older one for partitions it held since (checkTxnCommit); an anonymous
// one is accepted (the producer uses the group only to store offsets).
// v6 (KIP-1319) names topics by id, as OffsetCommit v10 does: an unknown
// id is UNKNOWN_TOPIC_ID, and offsets stay keyed by name in the log.
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse)) {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	var items []commitItem
	now := time.Now().UnixMilli()
	for i, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var info engine.TopicInfo
		exists, name, unknown := false, rt.Topic, kerr.UnknownTopicOrPartition.Code
		if c != nil {
			if req.Version >= 6 {
				info, exists = c.eng.TopicByID(rt.TopicID)
				if name = info.Name; !exists {
					unknown = kerr.UnknownTopicID.Code
				}
			} else {
				info, exists = c.eng.Topic(rt.Topic)
			}
		}
		for j, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
			if c != nil && (!exists || rp.Partition < 0 || rp.Partition >= info.Partitions) {
				st.Partitions[j].ErrorCode = unknown
				continue
			}
			cm := committed{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, commitMs: now, expireMs: -1}
			items = append(items, commitItem{t: i, p: j, tp: engine.TP{Topic: name, Partition: rp.Partition}, c: cm, meta: rp.Metadata})
		}
		resp.Topics = append(resp.Topics, st)
	}
	fail := func(code int16) {
		for _, it := range items {
			resp.Topics[it.t].Partitions[it.p].ErrorCode = code
		}
		reply(resp)
	}
	if len(items) == 0 {
		reply(resp)
		return
	}
	c.onGroupPartition(req.Group, func(p *partition) { p.txnCommit(req, items, resp, reply, fail) }, fail)
}

// checkTxnCommit is Kafka's check of a TxnOffsetCommit's member. For a
// KIP-848 group it is OffsetCommit's (cgroup.checkCommit: an older member
// epoch commits the partitions held since it, KIP-1251), except that an
// epoch that does not fit is ILLEGAL_GENERATION before v6 and
// STALE_MEMBER_EPOCH from v6 (KIP-1319), as in Kafka's
// OffsetMetadataManager.
func (g *group) checkTxnCommit(req *kmsg.TxnOffsetCommitRequest) int16 {
	if req.MemberID == "" && req.Generation < 0 {
		return 0
	}
	if cg := g.consumer; cg != nil {
		if req.Generation < 0 && len(cg.members) == 0 {
			return 0
		}
		m := cg.members[req.MemberID]
		if m == nil {
			return kerr.UnknownMemberID.Code
		}
		stale := req.Generation > m.cur.epoch
		if req.Generation < m.cur.epoch {
			for _, t := range req.Topics {
				id := t.TopicID
				if req.Version < 6 {
					meta, ok := cg.subMeta[t.Topic]
					if !ok {
						stale = true
						break
					}
					id = meta.id
				}
				for _, p := range t.Partitions {
					if since, ok := m.cur.assignedSince(id, p.Partition); !ok || req.Generation < since {
						stale = true
					}
				}
			}
		}
		switch {
		case !stale:
			return 0
		case req.Version >= 6:
			return kerr.StaleMemberEpoch.Code
		}
		return kerr.IllegalGeneration.Code
	}
	if req.MemberID != "" {
		if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
	}
	if req.Generation >= 0 && req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	return 0
}

func (p *partition) txnCommit(req *kmsg.TxnOffsetCommitRequest, items []commitItem, resp *kmsg.TxnOffsetCommitResponse,
	reply func(*kmsg.TxnOffsetCommitResponse), fail func(int16)) {
	g := p.groups[req.Group]
	if g == nil && req.Generation >= 0 {
		// A commit from a generation of a group that does not exist:
		// Kafka answers GROUP_ID_NOT_FOUND from v6 (KIP-1319),
		// ILLEGAL_GENERATION before.
		if req.Version >= 6 {
			fail(kerr.GroupIDNotFound.Code)
		} else {
			fail(kerr.IllegalGeneration.Code)
		}
		return
	}
	if g == nil {
		g = p.newGroup(req.Group)
	}
	defer g.forgetIfUnused()
	if code := g.checkTxnCommit(req); code != 0 {
		fail(code)
		return
	}
	maxMeta := p.c.cfg.OffsetMetadataMaxBytes
	var recs []record
	stored := items[:0:0]
	for _, it := range items {
		if it.meta != nil {
			if javaLength(*it.meta) > maxMeta {
				resp.Topics[it.t].Partitions[it.p].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			it.c.metadata = *it.meta
		}
		recs = append(recs, record{key: offsetKey(g.id, it.tp), value: offsetValue(it.c)})
		stored = append(stored, it)
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	tp := p.txnPendingOf(g, req.ProducerID)
	for _, it := range stored {
		g.pendingCommits[it.tp]++
		tp.n[it.tp]++
	}
	p.appendTxnRecords(recs, req.ProducerID, req.ProducerEpoch, func(err error) {
		code := storeErrorCode(err)
		if errors.Is(err, engine.ErrInvalidProducerEpoch) {
			// A newer instance of the producer exists (Kafka answers
			// the engine's refusal as it is).
			code = kerr.InvalidProducerEpoch.Code
		}
		for _, it := range stored {
			if code != 0 {
				resp.Topics[it.t].Partitions[it.p].ErrorCode = code
				p.releaseTxnPending(g, req.ProducerID, it.tp)
				continue
			}
			p.commitSeq++
			if cur := g.txnPending[req.ProducerID]; cur == tp {
				it.c.seq = p.commitSeq
				tp.offsets[it.tp] = it.c
			}
		}
		if code != 0 {
			p.c.log.Warn("group: writing transactional offsets failed", "group", g.id, "producer_id", req.ProducerID, "err", err)
		}
		reply(resp)
	})
}

// txnPendingOf returns (making it) producer pid's pending offsets in g,
// and notes that pid has pending offsets in g (shard only).
func (p *partition) txnPendingOf(g *group, pid int64) *txnPending {
	if g.txnPending == nil {
		g.txnPending = map[int64]*txnPending{}
	}
	tp := g.txnPending[pid]
	if tp == nil {
		tp = &txnPending{offsets: map[engine.TP]committed{}, n: map[engine.TP]int{}}
		g.txnPending[pid] = tp
	}
	if p.txnGroups == nil {
		p.txnGroups = map[int64]map[string]bool{}
	}
	if p.txnGroups[pid] == nil {
		p.txnGroups[pid] = map[string]bool{}
	}
	p.txnGroups[pid][g.id] = true
	return tp
}

// releaseTxnPending gives back one pendingCommits count of pid's on tp (a
// write that failed).
func (p *partition) releaseTxnPending(g *group, pid int64, tp engine.TP) {
	t := g.txnPending[pid]
	if t == nil {
		return
	}
	if t.n[tp]--; t.n[tp] <= 0 {
		delete(t.n, tp)
	}
	if g.pendingCommits[tp]--; g.pendingCommits[tp] <= 0 {
		delete(g.pendingCommits, tp)
	}
}

// TxnCompleted settles producer pid's pending offsets on partition part of
// __consumer_offsets once its transaction marker is written there
// (committed, or dropped by an abort): Kafka's onTransactionCompleted. It
// must be called on the goroutine of the shard that owns the partition:
// the partition's leader calls it from the done callback of the marker's
// append (engine.AppendMarker), which runs there, so that the offsets
// become visible in log order with the group's other writes.
func (c *Coordinator) TxnCompleted(part int32, pid int64, commit bool) {
	if c == nil || part < 0 || int(part) >= len(c.parts) {
		return
	}
	p := c.parts[part]
	switch p.state {
	case partLoading:
		// The replay may have read the log before this marker: the
		// install applies it after the pending offsets it found
		// (applying one the replay met is a no-op).
		p.loadTxnEnds = append(p.loadTxnEnds, txnEnd{pid: pid, commit: commit})
		return
	case partLoaded:
	default:
		return // the next leader's replay applies the marker from the log
	}
	groups := p.txnGroups[pid]
	delete(p.txnGroups, pid)
	for id := range groups {
		g := p.groups[id]
		if g == nil {
			continue
		}
		t := g.txnPending[pid]
		delete(g.txnPending, pid)
		if t == nil {
			continue
		}
		for tp, n := range t.n {
			if g.pendingCommits[tp] -= n; g.pendingCommits[tp] <= 0 {
				delete(g.pendingCommits, tp)
			}
		}
		if commit && g.live() {
			for tp, c := range t.offsets {
				if old, ok := g.offsets[tp]; !ok || c.newerThan(old) {
					g.offsets[tp] = c
				}
			}
		}
		g.forgetIfUnused()
	}
}

// txnEnd is a marker written while the partition was loading.
type txnEnd struct {
	pid    int64
	commit bool
}

// installTxnPending puts the pending offsets a replay found (their
// transactions not ended in the log yet) in their groups, then settles
// those whose marker was written while the replay ran.
func (p *partition) installTxnPending(st *loadState) {
	defer func() {
		ends := p.loadTxnEnds
		p.loadTxnEnds = nil
		p.state = partLoaded // TxnCompleted applies to a loaded partition
		for _, e := range ends {
			p.c.TxnCompleted(p.tp.Partition, e.pid, e.commit)
		}
	}()
	for pid, byGroup := range st.pendingTxn {
		for id, offs := range byGroup {
			g := p.groups[id]
			if g == nil {
				g = p.newGroup(id)
			}
			t := p.txnPendingOf(g, pid)
			for tp, c := range offs {
				t.offsets[tp] = c
				t.n[tp]++
				g.pendingCommits[tp]++
			}
		}
	}
}

// appendTxnRecords writes recs in one transactional batch of producer pid
// at epoch (shard only), as Kafka writes a TxnOffsetCommit: the batch is
// part of the producer's transaction on this partition, and its marker
// settles it. Sequence numbers are not kept (the batch goes at sequence
// 0, as in Kafka; the engine checks only the epoch of a coordinator's
// write).
func (p *partition) appendTxnRecords(recs []record, pid int64, epoch int16, done func(error)) {
	ms := time.Now().UnixMilli()
	rs := make([]batch.Record, len(recs))
	for i := range rs {
		rs[i] = batch.Record{OffsetDelta: int32(i), Key: recs[i].key, Value: recs[i].value}
	}
	h := batch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(rs) - 1), BaseTimestamp: ms, MaxTimestamp: ms,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Attributes: batch.AttrTransactional}
	b, err := batch.Build(nil, h, batch.None, rs)
	if err != nil {
		done(err)
		return
	}
	p.appendBuilt(b, engine.AppendOptions{RequireISR: true, Coordinator: true}, done)
}
