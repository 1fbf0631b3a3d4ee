package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Checkpoint is MM2's checkpoint: group's committed offset Upstream on
// the source partition translates to Downstream on the remote partition
// Topic/Partition (the remote topic's name).
//
//	key    | group STRING | topic STRING | partition INT32 |
//	value  | version INT16 (0) | upstreamOffset INT64 | offset INT64 | metadata STRING |
type Checkpoint struct {
	Group      string
	Topic      string
	Partition  int32
	Upstream   int64
	Downstream int64
	Metadata   string
}

func (c Checkpoint) Key() []byte {
	b := appendString(appendString(nil, c.Group), c.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(c.Partition))
}

func (c Checkpoint) Value() []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Upstream))
	b = binary.BigEndian.AppendUint64(b, uint64(c.Downstream))
	return appendString(b, c.Metadata)
}

// DecodeCheckpoint reads a checkpoint record of version 0.
func DecodeCheckpoint(key, value []byte) (Checkpoint, error) {
	k, v := reader{b: key}, reader{b: value}
	c := Checkpoint{Group: k.string(), Topic: k.string(), Partition: k.int32()}
	if version := v.int16(); version != 0 && !v.bad {
		return Checkpoint{}, fmt.Errorf("checkpoint value version %d: %w", version, ErrFormat)
	}
	c.Upstream, c.Downstream, c.Metadata = v.int64(), v.int64(), v.string()
	if err := k.done(); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint key: %w", err)
	}
	if err := v.done(); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint value: %w", err)
	}
	return c, nil
}

// CheckpointsTopic is MM2's checkpoints topic on the target.
func (f *Flow) CheckpointsTopic() string { return f.SourceAlias + ".checkpoints.internal" }

// syncsKept bounds the offset syncs kept per source partition.
const syncsKept = 1024

// syncStore holds the offset syncs read from the target, per source
// partition, in the order written (upstream offsets increasing).
type syncStore map[tp][]OffsetSync

func (s syncStore) add(o OffsetSync) {
	k := tp{o.Topic, o.Partition}
	l := s[k]
	// A mirror that started over (a replan, a crash) writes again from
	// its committed offsets: drop the syncs it supersedes.
	for len(l) > 0 && l[len(l)-1].Upstream >= o.Upstream {
		l = l[:len(l)-1]
	}
	if len(l) == syncsKept {
		l = append(l[:0], l[1:]...)
	}
	s[k] = append(l, o)
}

// translate is OffsetSyncStore.translateDownstream: the latest sync at or
// before upstream; the group's offset is that sync's downstream offset
// when it is the sync's upstream offset, else one past it (records after
// a sync may be fewer on the target, never more). ok is false when no
// sync is old enough.
func (s syncStore) translate(k tp, upstream int64) (int64, bool) {
	l := s[k]
	i := sort.Search(len(l), func(i int) bool { return l[i].Upstream > upstream })
	if i == 0 {
		return 0, false
	}
	sync := l[i-1]
	if sync.Upstream == upstream {
		return sync.Downstream, true
	}
	return sync.Downstream + 1, true
}

// checkpointLoop emits checkpoints, and syncs consumer-group offsets when
// asked, every emit.checkpoints.interval.seconds, until ctx is done.
func (w *worker) checkpointLoop(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := w.checkpointRun(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("mirror: checkpoints failed, starting over", "flow", w.f.Name(), "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (w *worker) checkpointRun(ctx context.Context) error {
	srcCl, err := w.f.sourceClient(kgo.ClientID("ringlog-mirror-checkpoints-" + w.f.Name()))
	if err != nil {
		return err
	}
	defer srcCl.Close()
	src := kadm.NewClient(srcCl)
	// A small MetadataMinAge: kadm's requests ask for metadata first, and
	// kgo answers from a cache younger than it (5 s by default).
	admCl, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-checkpoints-"+w.f.Name()),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer admCl.Close()
	dst := kadm.NewClient(admCl)
	resp, err := dst.CreateTopic(ctx, 1, w.f.ReplicationFactor, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, w.f.CheckpointsTopic())
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w (%s)", w.f.CheckpointsTopic(), err, resp.ErrMessage)
	}

	// Like MM2, translate nothing before the syncs were read to their end
	// once: an older sync would translate to an older offset.
	store := syncStore{}
	var end int64
	for {
		ends, err := dst.ListCommittedOffsets(ctx, w.f.OffsetSyncsTopic())
		if err != nil {
			return err
		}
		if o, ok := ends.Lookup(w.f.OffsetSyncsTopic(), 0); ok && o.Err == nil {
			end = o.Offset
			break
		}
		// The flow's worker has not created the topic yet.
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
	// The consumer starts once the topic exists: a direct consumer of a
	// missing topic waits for its next metadata refresh (minutes).
	dstCl, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-checkpoints-"+w.f.Name()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.f.OffsetSyncsTopic(): {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer dstCl.Close()
	readSyncs := func(wait time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		fs := dstCl.PollFetches(pctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			if r.Offset+1 >= end {
				end = 0
			}
			if r.Attrs.IsControl() {
				continue
			}
			s, err := DecodeOffsetSync(r.Key, r.Value)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", w.f.OffsetSyncsTopic(), r.Offset, err)
			}
			store.add(s)
		}
		return nil
	}
	for end > 0 {
		if err := readSyncs(time.Second); err != nil {
			return err
		}
	}
	for {
		if err := readSyncs(w.f.CheckpointInterval); err != nil {
			return err
		}
		if err := w.checkpoint(ctx, src, dst, dstCl, store); err != nil {
			return err
		}
	}
}

// checkpoint translates the selected groups' committed offsets on the
// source, writes them as checkpoints and, with sync.group.offsets.enabled,
// commits them for the same group on the target where that group has no
// members and is behind (MM2's rules: never move a live group, never back).
func (w *worker) checkpoint(ctx context.Context, src, dst *kadm.Client, dstCl *kgo.Client, store syncStore) error {
	listed, err := src.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list source groups: %w", err)
	}
	var groups []string
	for g := range listed {
		if w.f.Groups.match(g) && !w.f.GroupsExclude.match(g) && g != w.f.GroupID { // never the mirror's own group
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	sort.Strings(groups)
	fetched := src.FetchManyOffsets(ctx, groups...)
	var cps []Checkpoint
	translated := map[string]kadm.Offsets{}
	for _, g := range groups {
		r, ok := fetched[g]
		if !ok || r.Err != nil {
			continue
		}
		r.Fetched.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.At < 0 || !w.f.Wanted(o.Topic) {
				return
			}
			down, ok := store.translate(tp{o.Topic, o.Partition}, o.At)
			if !ok {
				return
			}
			remote := w.f.Policy.RemoteTopic(w.f.SourceAlias, o.Topic)
			cps = append(cps, Checkpoint{Group: g, Topic: remote, Partition: o.Partition, Upstream: o.At, Downstream: down, Metadata: o.Metadata})
			offs := translated[g]
			if offs == nil {
				offs = kadm.Offsets{}
				translated[g] = offs
			}
			offs.Add(kadm.Offset{Topic: remote, Partition: o.Partition, At: down, LeaderEpoch: -1, Metadata: o.Metadata})
		})
	}
	w.log.Debug("mirror: checkpoints", "flow", w.f.Name(), "groups", len(groups), "checkpoints", len(cps))
	for _, c := range cps {
		dstCl.Produce(ctx, &kgo.Record{Topic: w.f.CheckpointsTopic(), Key: c.Key(), Value: c.Value()}, nil)
	}
	if err := dstCl.Flush(ctx); err != nil {
		return fmt.Errorf("write checkpoints: %w", err)
	}
	if !w.f.SyncGroupOffsets || len(translated) == 0 {
		return nil
	}
	described, err := dst.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("describe target groups: %w", err)
	}
	for g, offs := range translated {
		w.log.Debug("mirror: group offsets", "flow", w.f.Name(), "group", g, "state", described[g].State, "err", described[g].Err, "offsets", offs.Sorted())
		if d, ok := described[g]; ok && d.Err == nil && d.State != "Empty" && d.State != "Dead" && d.State != "" {
			continue // members are consuming on the target: leave them be
		}
		have, err := dst.FetchOffsets(ctx, g)
		if err != nil {
			return fmt.Errorf("fetch %s's offsets on the target: %w", g, err)
		}
		offs.KeepFunc(func(o kadm.Offset) bool {
			cur, ok := have.Lookup(o.Topic, o.Partition)
			return !ok || cur.Err != nil || cur.At < o.At
		})
		if len(offs) == 0 {
			continue
		}
		rs, err := dst.CommitOffsets(ctx, g, offs)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return fmt.Errorf("commit %s's translated offsets on the target: %w", g, err)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
