package streams

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestForeignKeyJoin: orders (3 partitions, o<n> written to partition
// n%3, not where the key's hash would put it) joined with customers (2
// partitions) on the customer an order names, inner and left, and
// customers joined with themselves (c<n> with c<n+1 mod 6>: one
// subtopology reading both internal topics), at least once and exactly
// once. Orders change customer (some three times in one
// batch, so that the answers for the older customers come back after the
// newer value is in the table), lose it ("-": no foreign key) and are
// deleted; customers are updated and deleted. Checked against a
// reference computed from the input:
//   - the last update of each key in the output topics, and each result
//     store (read from its changelog), is the join of the final tables;
//   - every update the results emitted joins an order with its own
//     customer: a response computed for an older value of the order is
//     dropped (the test counts the drops: the bursts make some);
//   - the subscription stores (read from their changelogs) hold exactly
//     one subscription per order with a customer, to that customer: a
//     changed or deleted foreign key removed the old one;
//   - the internal topics have the partitions of the side reading them.
//
// Exactly once, the instance is killed half way and restarted with an
// empty state directory.
func TestForeignKeyJoin(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, g := range []struct {
			name string
			g    Guarantee
		}{{"alo", AtLeastOnce}, {"eos", ExactlyOnce}} {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				fkJoinRun(t, addr, "fk"+g.name, g.g)
			})
		}
	})
}

func fkJoinRun(t *testing.T, addr, app string, g Guarantee) {
	orders, customers := app+"-orders", app+"-customers"
	createTopic(t, addr, orders, 3, nil)
	createTopic(t, addr, customers, 2, nil)
	kinds := []string{"inner", "left", "self"}
	for _, kind := range kinds {
		createTopic(t, addr, app+"-"+kind+"-out", 2, nil)
	}

	// The input, in batches, and the final tables it leaves.
	rng := rand.New(rand.NewSource(17))
	lm, rm := map[string]string{}, map[string]string{}
	var batches [][]*kgo.Record
	seq := 0
	put := func(batch []*kgo.Record, m map[string]string, topic, key, val string) []*kgo.Record {
		r := &kgo.Record{Topic: topic, Key: []byte(key)}
		if topic == orders {
			// Orders are not where Kafka's partitioner would put
			// them: o<n> in partition n%3. The answers go back to the
			// order's partition, not to its key's hash.
			n, _ := strconv.Atoi(key[1:])
			r.Partition = int32(n % 3)
		}
		if val != "" {
			r.Value = []byte(val)
			m[key] = val
		} else {
			delete(m, key)
		}
		return append(batch, r)
	}
	cust := func() string { return fmt.Sprintf("c%d", rng.Intn(6)) }
	for round := range 14 {
		var batch []*kgo.Record
		for range 4 + rng.Intn(4) {
			seq++
			if rng.Intn(3) == 0 {
				key := cust()
				val := fmt.Sprintf("%s#%d", key, seq)
				if _, ok := rm[key]; ok && rng.Intn(4) == 0 {
					val = ""
				}
				batch = put(batch, rm, customers, key, val)
				continue
			}
			key := fmt.Sprintf("o%d", rng.Intn(16))
			val := fmt.Sprintf("%s#%d:%s", key, seq, cust())
			switch _, ok := lm[key]; {
			case ok && rng.Intn(6) == 0:
				val = ""
			case rng.Intn(8) == 0:
				val = fmt.Sprintf("%s#%d:-", key, seq)
			}
			batch = put(batch, lm, orders, key, val)
		}
		if round%3 == 1 {
			// One order changes customer three times in one batch,
			// read in one fetch: the answers for the first two find
			// the third value in the table.
			key := fmt.Sprintf("o%d", rng.Intn(16))
			for i := range 3 {
				seq++
				batch = put(batch, lm, orders, key, fmt.Sprintf("%s#%d:c%d", key, seq, (round+i)%6))
			}
		}
		batches = append(batches, batch)
	}
	// An order names its customer after its last ':' ("-": none); a
	// customer c<n> names c<n+1 mod 6> (the self-join).
	fkOf := func(v string) string { return v[strings.LastIndexByte(v, ':')+1:] }
	nextOf := func(v string) string {
		n, _ := strconv.Atoi(v[1:strings.IndexByte(v, '#')])
		return fmt.Sprintf("c%d", (n+1)%6)
	}
	// The reference: each join of the final tables, and the left
	// table and foreign key of each join.
	want := map[string]map[string]string{"inner": {}, "left": {}, "self": {}}
	lefts := map[string]map[string]string{"inner": lm, "left": lm, "self": rm}
	fks := map[string]func(string) string{"inner": fkOf, "left": fkOf, "self": nextOf}
	for k, v := range lm {
		rv, ok := rm[fkOf(v)]
		if ok {
			want["inner"][k] = v + "+" + rv
		} else {
			rv = "-"
		}
		want["left"][k] = v + "+" + rv
	}
	for k, v := range rm {
		if rv, ok := rm[nextOf(v)]; ok {
			want["self"][k] = v + "+" + rv
		}
	}

	b := NewBuilder()
	ot := TableFrom(b, orders, String, String, Named("orders"))
	ct := TableFrom(b, customers, String, String, Named("customers"))
	extract := func(v string) (string, bool) {
		fk := fkOf(v)
		return fk, fk != "-"
	}
	out := func(tbl *Table[string, string], topic string) {
		MapValues(tbl.Changes(), func(c Change[string]) string {
			if !c.HasNew {
				return "deleted"
			}
			return c.New
		}, ValueSerde(String)).To(topic)
	}
	out(JoinTablesByForeignKey(ot, ct, extract, func(_, lv, rv string) string { return lv + "+" + rv },
		Named("inner"), ValueSerde(String)), app+"-inner-out")
	out(LeftJoinTablesByForeignKey(ot, ct, extract, func(_, lv, rv string, ok bool) string {
		if !ok {
			rv = "-"
		}
		return lv + "+" + rv
	}, Named("left"), ValueSerde(String)), app+"-left-out")
	out(JoinTablesByForeignKey(ct, ct, func(v string) (string, bool) { return nextOf(v), true },
		func(_, lv, rv string) string { return lv + "+" + rv }, Named("self"), ValueSerde(String)), app+"-self-out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{ApplicationID: app, Brokers: []string{addr}, StateDir: t.TempDir(), Guarantee: g, InstanceID: "a"}
	a := startApp(t, topo, cfg)

	// Each batch is flushed at once, so that one partition's records
	// share a produce request and a fetch.
	prod := newClient(t, addr, kgo.ManualFlushing(), kgo.RecordPartitioner(&ordersPartitioner{orders}))
	for i, batch := range batches {
		if g == ExactlyOnce && i == len(batches)/2 {
			// Crash half way, and come back with no local state: the
			// subscription and result stores are restored from their
			// changelogs, the open transaction is aborted. The first
			// instance must have committed a transaction by then, or
			// there is nothing to restore (a loaded run killed it
			// before its first commit).
			waitInputCommitted(t, addr, app, orders, customers)
			a.kill()
			cfg.StateDir = t.TempDir()
			a = startApp(t, topo, cfg)
		}
		for _, r := range batch {
			prod.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce to %s: %v", r.Topic, err)
				}
			})
		}
		if err := prod.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}

	// The outputs reach the reference (the last update of each key).
	got := map[string]map[string]string{"inner": {}, "left": {}, "self": {}}
	iso := kgo.ReadUncommitted()
	if g == ExactlyOnce {
		iso = kgo.ReadCommitted()
	}
	outs := newClient(t, addr, kgo.ConsumeTopics(app+"-inner-out", app+"-left-out", app+"-self-out"), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !maps.EqualFunc(got, want, maps.Equal) {
		fs := outs.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("outputs %v, want %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			m := got[strings.TrimSuffix(strings.TrimPrefix(r.Topic, app+"-"), "-out")]
			if v := string(r.Value); v == "deleted" {
				delete(m, string(r.Key))
			} else {
				m[string(r.Key)] = v
			}
		})
	}
	var dropped, restored int64
	for _, ts := range a.Stats().Tasks {
		dropped += ts.Dropped
		restored += ts.Restored
	}
	t.Logf("%d responses dropped as stale, %d changelog records restored", dropped, restored)
	if g == ExactlyOnce && restored == 0 {
		t.Errorf("the restarted instance restored nothing")
	}
	if dropped == 0 {
		t.Errorf("no stale response was dropped: the bursts should have made some")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	for _, kind := range kinds {
		want, fkOf := want[kind], fks[kind]
		last := map[string]string{}
		for _, r := range readAll(t, addr, app+"-"+kind+"-out") {
			if r.P != partOf(r.Key, 2) {
				t.Errorf("%s: %s in partition %d", kind, r.Key, r.P)
			}
			if r.Value == "deleted" {
				delete(last, r.Key)
				continue
			}
			last[r.Key] = r.Value
			lv, rv, _ := strings.Cut(r.Value, "+")
			fk := fkOf(lv)
			switch {
			case !strings.HasPrefix(lv, r.Key+"#"):
				t.Errorf("%s: %s joined to another key's value: %s", kind, r.Key, r.Value)
			case rv == "-" && kind == "inner":
				t.Errorf("inner: %s emitted without a customer: %s", r.Key, r.Value)
			case rv != "-" && !strings.HasPrefix(rv, fk+"#"):
				t.Errorf("%s: %s joined with another row than its foreign key's (a stale response): %s", kind, r.Key, r.Value)
			}
		}
		if !maps.Equal(last, want) {
			t.Errorf("%s: the output's last updates %v, want %v", kind, last, want)
		}

		// The result store, from its changelog.
		stored := map[string]string{}
		for _, r := range readAll(t, addr, app+"-"+kind+"-changelog") {
			if r.Value == "" {
				delete(stored, r.Key)
			} else {
				stored[r.Key] = r.Value
			}
		}
		if !maps.Equal(stored, want) {
			t.Errorf("%s: the result store holds %v, want %v", kind, stored, want)
		}

		// Subscriptions, from the subscription store's changelog.
		subs := map[string]bool{}
		for _, r := range readAll(t, addr, app+"-"+kind+"-subscription-store-changelog") {
			n := int(binary.BigEndian.Uint32([]byte(r.Key)))
			sub := r.Key[4:4+n] + "/" + r.Key[4+n:]
			if r.Value == "" {
				delete(subs, sub)
			} else {
				subs[sub] = true
			}
		}
		wantSubs := map[string]bool{}
		for k, v := range lefts[kind] {
			if fk := fkOf(v); fk != "-" {
				wantSubs[fk+"/"+k] = true
			}
		}
		if !maps.Equal(subs, wantSubs) {
			t.Errorf("%s: subscriptions %q, want %q", kind, slices.Sorted(maps.Keys(subs)), slices.Sorted(maps.Keys(wantSubs)))
		}
	}

	// The subscription topics have the customers' partitions, the
	// response topics the left table's.
	td, err := kadm.NewClient(newClient(t, addr)).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range kinds {
		leftN := 3
		if kind == "self" {
			leftN = 2
		}
		for suffix, n := range map[string]int{"-subscription-registration-topic": 2, "-subscription-response-topic": leftN} {
			name := app + "-" + kind + suffix
			if d, ok := td[name]; !ok || len(d.Partitions) != n {
				t.Errorf("%s: %d partitions (exists: %v), want %d", name, len(d.Partitions), ok, n)
			}
		}
	}
}

// ordersPartitioner places records of the orders topic in the partition
// they name, others by key.
type ordersPartitioner struct{ orders string }

func (p *ordersPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.orders {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return kgo.StickyKeyPartitioner(nil).ForTopic(topic)
}

// TestForeignKeyJoinBuildErrors: a foreign-key join without a result
// serde, or over a left table without a value serde (its values are
// hashed), is refused by Build.
func TestForeignKeyJoinBuildErrors(t *testing.T) {
	t.Parallel()
	fk := func(v string) (string, bool) { return v, true }
	b := NewBuilder()
	JoinTablesByForeignKey(TableFrom(b, "l", String, String), TableFrom(b, "r", String, String), fk,
		func(_, l, r string) int64 { return 1 }, Named("j"))
	if _, err := b.Build(); !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), `result store "j"`) {
		t.Errorf("no result serde: Build() = %v", err)
	}
	b = NewBuilder()
	r := TableFrom(b, "r", String, String)
	joined := JoinTables(TableFrom(b, "l", String, String), TableFrom(b, "l2", String, String), func(_, a, b string) string { return a + b })
	LeftJoinTablesByForeignKey(joined, r, fk, func(_, l, r string, _ bool) string { return l + r }, Named("j"), ValueSerde(String))
	if _, err := b.Build(); !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "left table needs a key and a value serde") {
		t.Errorf("left table without a value serde: Build() = %v", err)
	}
}

// FuzzFKWire: the subscription and response decoders read bytes from
// internal topics and changelogs: they never panic, refuse what is not
// theirs with ErrSerde, keep no more than they were given, and what they
// decode encodes back to the same bytes.
func FuzzFKWire(f *testing.F) {
	sub := fkSubscription{instruction: fkSubscribe, partition: 2, hash: fkHash([]byte("v")), pk: []byte("o1")}
	f.Add(sub.encode())
	f.Add(fkResponse{hash: sub.hash, hasRight: true, right: []byte("c1")}.encode())
	f.Add(fkResponse{hash: sub.hash}.encode())
	f.Add([]byte{1, 9, 0, 0, 0, 0})
	f.Add(binary.BigEndian.AppendUint32([]byte{1, 1}, 1<<31))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeFKSubscription(b); err != nil {
			if !errors.Is(err, ErrSerde) {
				t.Fatalf("subscription %x: %v", b, err)
			}
		} else if out := s.encode(); !bytes.Equal(out, b) {
			t.Fatalf("subscription %x -> %+v -> %x", b, s, out)
		} else if len(s.pk) > len(b) {
			t.Fatalf("subscription %x: key of %d bytes", b, len(s.pk))
		}
		if r, err := decodeFKResponse(b); err != nil {
			if !errors.Is(err, ErrSerde) {
				t.Fatalf("response %x: %v", b, err)
			}
		} else if out := r.encode(); !bytes.Equal(out, b) {
			t.Fatalf("response %x -> %+v -> %x", b, r, out)
		}
	})
}

// waitInputCommitted waits until group has committed an offset past 0 on
// some partition of topics: exactly once, a transaction of the
// application (its changelog writes with it) has committed.
func waitInputCommitted(t *testing.T, addr, group string, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := adm.FetchOffsets(ctx, group)
		cancel()
		if err == nil {
			done := false
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Err == nil && o.At > 0 && slices.Contains(topics, o.Topic) {
					done = true
				}
			})
			if done {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed nothing of %v in 20 s (last error %v)", group, topics, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
