package streams

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// onWrite runs its armed function once, when the client writes a request
// of the given key (a kgo hook).
type onWrite struct {
	key int16
	fn  atomic.Pointer[func()]
}

func (h *onWrite) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == h.key {
		if f := h.fn.Swap(nil); f != nil {
			(*f)()
		}
	}
}

// TestCloseDuringCommit: exactly once, a Close landing while the loop ends
// a transaction (here: as it commits its offsets) lets that commit
// finish. It used to cancel it, leaving the transaction open on the
// broker (a read_committed reader stuck at the last stable offset
// until the transaction timed out and was aborted) and what it processed
// uncommitted, while Close returned nil.
func TestCloseDuringCommit(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		topo := passThrough(t, addr, "cc-in", "cc-out")
		hook := &onWrite{key: 28} // TxnOffsetCommit
		a := startApp(t, topo, Config{ApplicationID: "cc", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, ClientOpts: []kgo.Opt{kgo.WithHooks(hook)}})
		in := newKeyedInput(t, addr, "cc-in", "cc")
		in.produce(0, 5)
		in.waitCommitted(5, 15*time.Second)
		// The next commit is the loop's, of the next 5 records: Close's
		// first step (a.cancel) lands in it.
		stop := func() { a.cancel() }
		hook.fn.Store(&stop)
		in.produce(5, 10)
		select {
		case <-a.done:
		case <-time.After(15 * time.Second):
			t.Fatal("the application did not stop")
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if hook.fn.Load() != nil {
			t.Fatal("no TxnOffsetCommit was written")
		}
		if at := in.committed(); at != 10 {
			t.Fatalf("committed offset %d, want 10: the commit Close landed in did not finish", at)
		}
		if got := readAll(t, addr, "cc-out"); len(got) != 10 {
			t.Fatalf("%d records out, want 10", len(got))
		}
	})
}

// TestCloseContextBounded: exactly once, a CloseContext whose context
// ends while the commit it waits for hangs (a TxnOffsetCommit the hook
// holds) returns the context's error instead of waiting; the instance
// stops as a crash would, and the same instance started again fences the
// transaction left open: every input record is in the read_committed
// output exactly once.
func TestCloseContextBounded(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		topo := passThrough(t, addr, "cb-in", "cb-out")
		cfg := func(opts ...kgo.Opt) Config {
			return Config{ApplicationID: "cb", Brokers: []string{addr}, StateDir: t.TempDir(),
				Guarantee: ExactlyOnce, InstanceID: "one", ClientOpts: opts}
		}
		hook := &onWrite{key: 28} // TxnOffsetCommit
		a := startApp(t, topo, cfg(kgo.WithHooks(hook)))
		in := newKeyedInput(t, addr, "cb-in", "cb")
		in.produce(0, 5)
		in.waitCommitted(5, 20*time.Second)
		// The next commit hangs in the hook until released.
		entered, release := make(chan struct{}), make(chan struct{})
		hang := func() { close(entered); <-release }
		hook.fn.Store(&hang)
		defer func() {
			select {
			case <-release:
			default:
				close(release)
			}
		}()
		in.produce(5, 10)
		select {
		case <-entered:
		case <-time.After(15 * time.Second):
			t.Fatal("no TxnOffsetCommit was written")
		}
		closed := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			closed <- a.CloseContext(ctx)
		}()
		select {
		case err := <-closed:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("CloseContext returned %v, want its context's deadline", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("CloseContext waited for the hanging commit past its context")
		}
		close(release)
		done := make(chan struct{})
		go func() { _ = a.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("the instance did not stop after its commit was released")
		}
		// Started again, the instance fences its previous life; the
		// records of the cut transaction are processed again, once.
		startApp(t, topo, cfg())
		in.waitCommitted(10, 20*time.Second)
		got := readAll(t, addr, "cb-out")
		seen := map[string]int{}
		for _, r := range got {
			seen[r.Key]++
		}
		for i := 0; i < 10; i++ {
			if n := seen[fmt.Sprint(i)]; n != 1 {
				t.Errorf("key %d: %d times in the read_committed output, want once (%d records)", i, n, len(got))
			}
		}
	})
}

// TestExactlyOnceSinkTopicDeleted: exactly once, records sent to an
// output topic deleted under the application fail; the transaction that
// held them must abort, not commit without them. Before, a record that
// failed in End's own flush was found only after the commit (the input
// offsets past a lost output record). The input offset must not pass the
// records processed while the topic was gone, the application retries
// until Config.TaskTimeout and then stops with ErrTaskTimeout; once the
// topic is back (and an instance started again), every record is in the
// read_committed output once.
func TestExactlyOnceSinkTopicDeleted(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		topo := passThrough(t, addr, "sd-in", "sd-out")
		const taskTimeout = 6 * time.Second
		a := startApp(t, topo, Config{ApplicationID: "sd", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, InstanceID: "one", TaskTimeout: taskTimeout})
		in := newKeyedInput(t, addr, "sd-in", "sd")
		in.produce(0, 5)
		in.waitCommitted(5, 20*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := in.adm.DeleteTopics(ctx, "sd-out"); err != nil {
			t.Fatal(err)
		}
		in.produce(5, 10)
		// Records 5-9 cannot be written: however many transactions the
		// application tries meanwhile, none commits them.
		time.Sleep(3 * time.Second)
		if at := in.committed(); at != 5 {
			t.Fatalf("committed offset %d with the output topic deleted, want 5 (a transaction committed without its records)", at)
		}
		select {
		case <-a.done:
			t.Fatalf("the application stopped: %v", a.err)
		default:
		}
		// Past the task timeout the application stops with it (it would
		// not recover: kgo's producer keeps the deleted topic's id,
		// UNKNOWN_TOPIC_ID even once it is back), its open transaction
		// aborted; the topic is created again and an instance started.
		select {
		case <-a.done:
		case <-time.After(taskTimeout + 20*time.Second):
			t.Fatalf("the application still runs %v past its task timeout", 20*time.Second)
		}
		if err := a.Wait(); !errors.Is(err, ErrTaskTimeout) {
			t.Fatalf("the application stopped with %v, want ErrTaskTimeout", err)
		}
		if at := in.committed(); at != 5 {
			t.Fatalf("committed offset %d after the task timeout, want 5", at)
		}
		createTopic(t, addr, "sd-out", 1, nil)
		startApp(t, topo, Config{ApplicationID: "sd", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, InstanceID: "one"})
		in.waitCommitted(10, 30*time.Second)
		got := readAll(t, addr, "sd-out")
		seen := map[string]int{}
		for _, r := range got {
			seen[r.Key]++
		}
		for i := 5; i < 10; i++ {
			if n := seen[fmt.Sprint(i)]; n != 1 {
				t.Errorf("key %d: %d times in the recreated output, want once (%d records)", i, n, len(got))
			}
		}
	})
}

// keyedInput produces records keyed from..to-1 (value "x") to topic, and
// reads the group's committed offset of its partition 0: the tests of
// this file drive a one-partition pass-through application with them.
type keyedInput struct {
	t            *testing.T
	prod         *kgo.Client
	adm          *kadm.Client
	topic, group string
}

func newKeyedInput(t *testing.T, addr, topic, group string) *keyedInput {
	return &keyedInput{t: t, prod: newClient(t, addr), adm: kadm.NewClient(newClient(t, addr)), topic: topic, group: group}
}

func (k *keyedInput) produce(from, to int) {
	k.t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: k.topic, Key: []byte(fmt.Sprint(i)), Value: []byte("x")})
	}
	if err := k.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		k.t.Fatal(err)
	}
}

// committed asks with RequireStable: EndTxn is answered once the
// commit is decided, before its markers are written, and until they are
// a plain OffsetFetch still returns the offset the transaction replaces
// (a loaded suite run read 5 for 10 so, once).
func (k *keyedInput) committed() int64 {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := k.adm.FetchOffsets(kadm.RequireStable(ctx), k.group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return -1 // kfake, until the group commits
	}
	if err != nil {
		k.t.Fatal(err)
	}
	o, ok := offs.Lookup(k.topic, 0)
	if !ok {
		return -1
	}
	return o.At
}

// waitCommitted waits up to d for the committed offset to be want.
func (k *keyedInput) waitCommitted(want int64, d time.Duration) {
	k.t.Helper()
	for deadline := time.Now().Add(d); k.committed() != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			k.t.Fatalf("committed offset %d, want %d", k.committed(), want)
		}
	}
}

// passThrough creates topics in and out (one partition each) and returns
// the topology that copies in to out.
func passThrough(t *testing.T, addr, in, out string) *Topology {
	t.Helper()
	createTopic(t, addr, in, 1, nil)
	createTopic(t, addr, out, 1, nil)
	b := NewBuilder()
	Source(b, []string{in}, String, String).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}
