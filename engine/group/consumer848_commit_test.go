package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commit848 is an OffsetCommit v9 of member at epoch, of topic t's
// partitions.
func commit848(member string, epoch int32, topic string, partitions ...int32) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestConsumerCommitOlderEpoch: a member whose commit crossed the heartbeat
// that moved its epoch on commits, at its older epoch, the partitions it
// held since that epoch, and only those (KIP-1251, Kafka 4.3). ringlog
// refused every commit not at the member's current epoch with
// STALE_MEMBER_EPOCH, which internal/difftest found against Kafka 4.4.
func TestConsumerCommitOlderEpoch(t *testing.T) {
	h := newHarness(t)
	t1 := h.topics.set("t", 2)
	a := h.do(joinReq("a", "t"))
	first := a.MemberEpoch
	// b comes and goes: a gives one partition up and gets it back, at a
	// later epoch than the partition it kept.
	h.do(joinReq("b", "t"))
	keep := respAssignment(h.do(beat("a", first, nil)))
	h.do(beat("a", first, keep))
	h.do(beat("b", h.cg.members["b"].cur.epoch, assignment{}))
	h.do(beat("b", leaveEpoch, nil))
	r := h.do(beat("a", h.cg.members["a"].cur.epoch, keep))
	if respAssignment(r).count() != 2 {
		t.Fatalf("a did not get both partitions back: %v", respAssignment(r))
	}
	now := r.MemberEpoch
	if now <= first {
		t.Fatalf("a's epoch %d did not move past %d", now, first)
	}
	var kept, other int32 = keep[t1][0], 1 - keep[t1][0]
	for _, c := range []struct {
		name  string
		req   *kmsg.OffsetCommitRequest
		wantC *kerr.Error
	}{
		{"current epoch", commit848("a", now, "t", 0, 1), nil},
		{"first epoch, the partition held since", commit848("a", first, "t", kept), nil},
		{"first epoch, the partition got back later", commit848("a", first, "t", other), kerr.StaleMemberEpoch},
		{"first epoch, both", commit848("a", first, "t", 0, 1), kerr.StaleMemberEpoch},
		{"newer epoch", commit848("a", now+1, "t", kept), kerr.StaleMemberEpoch},
		{"older epoch, a topic not held", commit848("a", first, "u", 0), kerr.StaleMemberEpoch},
		{"unknown member", commit848("z", now, "t", 0), kerr.UnknownMemberID},
	} {
		if got := kerr.ErrorForCode(h.cg.checkCommit(c.req)); got != c.wantC && !(got == nil && c.wantC == nil) {
			t.Errorf("%s: %v, want %v", c.name, got, c.wantC)
		}
	}
}
