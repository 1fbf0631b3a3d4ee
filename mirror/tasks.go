package mirror

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tasksMax bounds tasks.max: each task holds up to five transactional ids
// on the target.
const tasksMax = 1024

// codecNames are the batch attributes' compression codecs, by number
// (kgo's CompressionCodecType and Kafka's attribute bits 0-2).
var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// codecOf is the codec of the source batch r came in; an unknown one is
// treated as none (the record was decoded, so the client knew it).
func codecOf(r *kgo.Record) int8 {
	c := r.Attrs.CompressionType()
	if int(c) >= len(codecNames) {
		return 0
	}
	return int8(c)
}

func codecOpt(c int8) kgo.CompressionCodec {
	switch c {
	case 1:
		return kgo.GzipCompression()
	case 2:
		return kgo.SnappyCompression()
	case 3:
		return kgo.Lz4Compression()
	case 4:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// task is a share of a flow's source partitions with transactional ids of
// its own: the unit of ownership, fenced as a whole. A flow with
// tasks.max = 1 has one task holding every partition, under the flow's
// transactional id. The task writes through one producer per source codec
// (the codec is a producer-wide setting in kgo), each with its own
// transactional id derived from the task's, and a partition's source
// offsets go in the same transaction as its records.
type task struct {
	id    int
	txnID string
	prods [len(codecNames)]*kgo.Client
	// pending are the offset syncs (and so the source offsets) mirrored
	// but not yet written, lastOffsetFlush when they last were: only
	// without exactly once do they wait (offset.flush.interval.ms).
	pending         map[tp]OffsetSync
	lastOffsetFlush time.Time
	// open are the producers' batches not yet committed, by codec (nil:
	// none). A source partition is in at most one of them at a time, so
	// that its records reach the target, and are committed, in order.
	open [len(codecNames)]*batch
}

// taskOf is the fixed map of source partitions to tasks: a hash of the
// topic plus the partition, so a topic's partitions spread over the tasks
// and a partition added later moves no other.
func taskOf(topic string, partition int32, tasks int) int {
	if tasks <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((h.Sum32() + uint32(partition)) % uint32(tasks))
}

// taskTxnID is task k's transactional id when the flow has tasks tasks:
// the flow's own with one task (so that a flow's id did not change with
// tasks.max), suffixed with the task otherwise.
func (f *Flow) taskTxnID(tasks, k int) string {
	if tasks <= 1 {
		return f.TransactionalID
	}
	return f.TransactionalID + "-" + strconv.Itoa(k)
}

// codecTxnID is the transactional id of a task's producer for codec c.
func codecTxnID(task string, c int8) string {
	if c == 0 {
		return task
	}
	return task + "." + codecNames[c]
}

func (t *task) txnIDFor(c int8) string { return codecTxnID(t.txnID, c) }

// newTask is task k, not yet fenced (takeTasks).
func (w *worker) newTask(k int) *task {
	return &task{id: k, txnID: w.f.taskTxnID(w.f.Tasks, k), lastOffsetFlush: time.Now()}
}

// fenceTxnIDs fences ids at once (each is a round trip to its coordinator
// and a write of the transaction log there).
func fenceTxnIDs(ctx context.Context, cl *kgo.Client, ids []string) error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = fenceTxnID(ctx, cl, id) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// takeTasks starts the tasks ids this process was given (fencing their
// previous owners) and returns the committed source offsets, final once
// they are. When the offsets topic records another task count for the
// flow, tasks.max was changed: a task number then names other partitions
// than before, and a zombie of the previous count could still commit
// under ids this count's tasks do not fence. So every id of the previous
// count is fenced and the new count recorded before the offsets are read
// (KIP-618 fences the previous generation's tasks the same way). A live
// process of this count whose task shares an id fails once and starts
// over, finding the count recorded. w.mu is held.
func (w *worker) takeTasks(ctx context.Context, ids []int) (map[tp]int64, error) {
	var started []*task
	var fence []string
	for _, k := range ids {
		if w.tasks[k] == nil {
			t := w.newTask(k)
			started = append(started, t)
			for c := range codecNames {
				fence = append(fence, t.txnIDFor(int8(c)))
			}
		}
	}
	// With exactly once, InitProducerId with every id the tasks' previous
	// owners may hold (one per codec) bumps the epoch, aborts their open
	// transactions and makes any later write or commit of theirs fail
	// with PRODUCER_FENCED: only then are the committed offsets final.
	if w.f.ExactlyOnce {
		if err := fenceTxnIDs(ctx, w.dstCl, fence); err != nil {
			return nil, err
		}
	}
	for _, t := range started {
		w.tasks[t.id] = t
	}
	if w.f.ExactlyOnce {
		if err := w.fencePreviousCount(ctx); err != nil {
			return nil, err
		}
	}
	committed, _, err := w.readOffsets(ctx, false)
	return committed, err
}

// fencePreviousCount fences every transactional id of the task count
// recorded in the offsets topic when it is not this flow's tasks.max, and
// records this one. It must come before the committed offsets are read:
// that read waits for open transactions, and a zombie of the previous
// count holding one open (paused mid-transaction) would hold it back
// until the coordinator aborts it at its timeout (a minute: a run of
// TestMirrorTasksMaxChangeFencesZombie saw the new process idle that
// long).
func (w *worker) fencePreviousCount(ctx context.Context) error {
	_, recorded, err := w.readOffsets(ctx, true)
	if err != nil {
		return err
	}
	// No record: the flow ran with one task (before tasks.max, or never),
	// and a flow of one task records nothing.
	prev := max(recorded, 1)
	if prev == w.f.Tasks {
		return nil
	}
	w.log.Info("mirror: tasks.max changed: fencing the previous tasks' transactional ids", "flow", w.f.Name(), "from", prev, "to", w.f.Tasks)
	var old []string
	for k := range prev {
		for c := range codecNames {
			old = append(old, codecTxnID(w.f.taskTxnID(prev, k), int8(c)))
		}
	}
	if err := fenceTxnIDs(ctx, w.dstCl, old); err != nil {
		return err
	}
	rec := &kgo.Record{Topic: w.f.OffsetsTopic(), Key: taskCountKey(w.f.Name()), Value: taskCountValue(w.f.Tasks)}
	if err := w.dstCl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("record the flow's task count in %s: %w", w.f.OffsetsTopic(), err)
	}
	return nil
}

// taskCountConnector names the task-count records in the offsets topic:
// Connect's key shape with a connector name of ringlog's own, so that
// Connect's and MM2's readers skip them as another connector's.
//
//	key   ["ringlog-mirror-tasks",{"flow":"A->B"}]
//	value {"tasks":4}
const taskCountConnector = "ringlog-mirror-tasks"

func taskCountKey(flow string) []byte {
	b, _ := json.Marshal([]any{taskCountConnector, map[string]string{"flow": flow}})
	return b
}

func taskCountValue(n int) []byte {
	b, _ := json.Marshal(map[string]int{"tasks": n})
	return b
}

// decodeTaskCount reads a task-count record; ok is false for any other
// record (and for a tombstone).
func decodeTaskCount(key, value []byte) (flow string, n int, ok bool, err error) {
	if len(key) > maxOffsetRecord || len(value) > maxOffsetRecord || !bytes.HasPrefix(key, []byte(`["`+taskCountConnector+`"`)) || value == nil {
		return "", 0, false, nil
	}
	var k []json.RawMessage
	var f struct {
		Flow string `json:"flow"`
	}
	if err := json.Unmarshal(key, &k); err != nil || len(k) != 2 || json.Unmarshal(k[1], &f) != nil || f.Flow == "" {
		return "", 0, false, fmt.Errorf("task count key %q: %w", key, ErrFormat)
	}
	var v struct {
		Tasks *int `json:"tasks"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.Tasks == nil || *v.Tasks < 1 || *v.Tasks > tasksMax {
		return "", 0, false, fmt.Errorf("task count value %q: %w", value, ErrFormat)
	}
	return f.Flow, *v.Tasks, true, nil
}

// fenceTxnID sends InitProducerId for id, retrying while the coordinator
// is still ending the previous owner's transaction.
func fenceTxnID(ctx context.Context, cl *kgo.Client, id string) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(txnTimeout / time.Millisecond)
	req.ProducerID, req.ProducerEpoch = -1, -1
	for attempt := 0; ; attempt++ {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return nil
		}
		if attempt >= 100 || !(errors.Is(err, kerr.ConcurrentTransactions) || kerr.IsRetriable(err)) {
			return fmt.Errorf("fence transactional id %q on the target: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// producer is the task's producer for codec c, created (and, with exactly
// once, initialised) on first use.
func (w *worker) producer(ctx context.Context, t *task, c int8) (*kgo.Client, error) {
	if p := t.prods[c]; p != nil {
		return p, nil
	}
	opts := []kgo.Opt{
		kgo.ClientID("ringlog-mirror-" + w.f.Name()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// kgo's default batch bound (1,000,012 bytes), below Kafka's
		// default max.message.bytes (1,048,588): a larger bound let
		// batches of small records grow past what a default topic
		// accepts (MESSAGE_TOO_LARGE on every retry). A single record
		// above it is refused, as MM2's producer refuses one above its
		// max.request.size.
		kgo.ProducerBatchMaxBytes(1_000_012),
		// kgo's default linger (10 ms), as the yardstick producer of the
		// bench runs with: a transaction spans polls, and with no linger
		// the records of each poll left in many small produce requests
		// (a quarter of the records per request, and more target CPU
		// per record). A commit does not wait for it: Flush sends what
		// lingers at once.
		kgo.ProducerLinger(10 * time.Millisecond),
		kgo.ProducerBatchCompression(codecOpt(c)),
	}
	if w.f.ExactlyOnce {
		opts = append(opts, kgo.TransactionalID(t.txnIDFor(c)), kgo.TransactionTimeout(txnTimeout))
	}
	p, err := w.f.targetClient(opts...)
	if err != nil {
		return nil, err
	}
	if w.f.ExactlyOnce {
		if _, _, err := p.ProducerID(ctx); err != nil {
			p.Close()
			return nil, fmt.Errorf("init transactional producer %q on the target: %w", t.txnIDFor(c), err)
		}
	}
	t.prods[c] = p
	return p, nil
}

func (t *task) close() {
	for i, p := range t.prods {
		if p != nil {
			p.Close()
			t.prods[i] = nil
		}
	}
}

// taskBalancer is the source group's assignor: it hands out whole tasks,
// each task's partitions to one member, round robin over the members
// (sorted by the coordinator) that run the same tasks.max as the leader.
// A member with another tasks.max gets nothing: its map of partitions to
// tasks differs, and two owners of one partition under two task ids would
// not fence each other. The leader's tasks.max travels in each
// assignment's user data, so such a member can say why it is idle.
type taskBalancer struct {
	w     *worker
	tasks int
}

func (*taskBalancer) ProtocolName() string { return "ringlog-mirror-tasks" }
func (*taskBalancer) IsCooperative() bool  { return false }

func (b *taskBalancer) JoinGroupMetadata(interests []string, _ map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	meta.UserData = binary.BigEndian.AppendUint32(nil, uint32(b.tasks))
	return meta.AppendTo(nil)
}

func (b *taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("mirror: group assignment: %w", err)
	}
	if len(a.UserData) == 4 {
		if n := int(binary.BigEndian.Uint32(a.UserData)); n != b.tasks {
			b.w.log.Error("mirror: the group's leader runs another tasks.max: this process gets no partitions until they agree",
				"flow", b.w.f.Name(), "group", b.w.f.GroupID, "tasks_max", b.tasks, "leader_tasks_max", n)
		}
	}
	m := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		m[t.Topic] = t.Partitions
	}
	return m, nil
}

func (b *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	return cb, cb.MemberTopics(), err
}

// Balance implements kgo.ConsumerBalancerBalance.
func (b *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	type member struct {
		id     string
		topics map[string]bool
	}
	var eligible []member
	all := map[string]map[string][]int32{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		all[m.MemberID] = map[string][]int32{}
		if len(meta.UserData) != 4 || int(binary.BigEndian.Uint32(meta.UserData)) != b.tasks {
			return
		}
		ts := map[string]bool{}
		for _, t := range meta.Topics {
			ts[t] = true
		}
		eligible = append(eligible, member{m.MemberID, ts})
	})
	if len(eligible) > 0 {
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			for p := range topics[t] {
				// A member that does not know the topic yet (its list
				// is older) would drop the partition: the partition
				// waits for the member's next refresh and rejoin.
				m := eligible[taskOf(t, p, b.tasks)%len(eligible)]
				if m.topics[t] {
					all[m.id][t] = append(all[m.id][t], p)
				}
			}
		}
	}
	return taskAssignment{all: all, tasks: b.tasks}
}

type taskAssignment struct {
	all   map[string]map[string][]int32
	tasks int
}

func (a taskAssignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	ids := make([]string, 0, len(a.all))
	for id := range a.all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(ids))
	for _, id := range ids {
		var ma kmsg.ConsumerMemberAssignment
		ma.UserData = binary.BigEndian.AppendUint32(nil, uint32(a.tasks))
		topics := a.all[id]
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			ma.Topics = append(ma.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: slices.Sorted(slices.Values(topics[t]))})
		}
		out = append(out, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: ma.AppendTo(nil)})
	}
	return out
}

// groupConsumer is the source consumer of a flow shared by several
// processes: a member of the flow's group on the source, assigned whole
// tasks by taskBalancer. Rebalances happen only between polls
// (BlockRebalanceOnPoll), so a task is never handed over with a
// transaction of this process open; a process that lost its tasks without
// knowing (paused past its session, cut off) is fenced by the new owner's
// InitProducerId (takeTasks) and can commit nothing for them any more.
func (w *worker) groupConsumer(src map[string]int32) (*kgo.Client, error) {
	topics := make([]string, 0, len(src))
	for t := range src {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	opts := append(w.consumerOpts(),
		kgo.ConsumerGroup(w.f.GroupID), kgo.ConsumeTopics(topics...),
		kgo.Balancers(&taskBalancer{w: w, tasks: w.f.Tasks}),
		kgo.BlockRebalanceOnPoll(), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(w.f.SessionTimeout),
		kgo.HeartbeatInterval(max(100*time.Millisecond, min(3*time.Second, w.f.SessionTimeout/3))),
		kgo.RebalanceTimeout(max(w.f.SessionTimeout, 30*time.Second)),
		// Registered so that the assignment, like the revocation, waits
		// for the poll loop (BlockRebalanceOnPoll gates it only then).
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {}),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) { w.dropTasks() }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { w.dropTasks() }),
		kgo.AdjustFetchOffsetsFn(w.assigned),
	)
	cons, err := w.f.sourceClient(opts...)
	if err != nil {
		return nil, err
	}
	w.log.Info("mirror: flow joining its group", "flow", w.f.Name(), "group", w.f.GroupID, "topics", len(src), "tasks_max", w.f.Tasks)
	return cons, nil
}

// assigned runs once the group assigned partitions, before they are
// fetched: it starts the tasks they belong to (fencing their previous
// owners), reads the committed source offsets and resumes each partition
// just after its own. The group's committed offsets are not used (the
// mirror commits none there: its offsets are on the target, in the
// transactions). An error fails the run: the partitions are not fetched.
func (w *worker) assigned(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ks := map[int]bool{}
	n := 0
	for t, ps := range offsets {
		for p := range ps {
			if m, ok := w.plan[t]; !ok || p >= m {
				w.replan.Store(true)
			}
			ks[taskOf(t, p, w.f.Tasks)] = true
			n++
		}
	}
	fail := func(err error) (map[string]map[int32]kgo.Offset, error) {
		w.groupErr.Store(&err)
		return nil, err
	}
	ids := make([]int, 0, len(ks))
	for k := range ks {
		ids = append(ids, k)
	}
	sort.Ints(ids)
	committed, err := w.takeTasks(ctx, ids)
	if err != nil && ctx.Err() != nil {
		// kgo cancels ctx when the group session begins revoking (another
		// member joined or left, a rebalance is under way): no failure of
		// the flow. kgo rejoins on the error, the revoke drops the tasks,
		// and the next assignment takes them again. A run of
		// TestMirrorSharedFlowFollowsNewPartitions logged "flow failed"
		// for ListOffsets cancelled that way.
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	var resume []string // "topic/partition@offset", what Connect logs as the offsets a task starts from
	for t, ps := range offsets {
		for p := range ps {
			ps[p] = w.resumeAt(committed, t, p)
			at := "start"
			if o, ok := committed[tp{t, p}]; ok {
				at = strconv.FormatInt(o+1, 10)
			}
			resume = append(resume, fmt.Sprintf("%s/%d@%s", t, p, at))
		}
	}
	sort.Strings(resume)
	if len(resume) > maxResumeLogged {
		resume = append(resume[:maxResumeLogged], fmt.Sprintf("and %d more", len(resume)-maxResumeLogged))
	}
	w.log.Info("mirror: tasks assigned", "flow", w.f.Name(), "group", w.f.GroupID, "tasks", fmt.Sprint(ids), "partitions", n,
		"resume", strings.Join(resume, " "))
	return offsets, nil
}

// maxResumeLogged bounds the partitions "tasks assigned" names with the
// offsets they resume from.
const maxResumeLogged = 32
