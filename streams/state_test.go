package streams

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTableFromCompactedTopic: a table read from a compacted topic with
// updates and deletes holds the last value of each key and none of the
// deleted ones (read from the store by key), and its change stream ends
// with the same values.
func TestTableFromCompactedTopic(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		compact := "compact"
		createTopic(t, addr, "users", 2, map[string]*string{"cleanup.policy": &compact})
		createTopic(t, addr, "users-out", 2, nil)
		want := map[string]string{}
		var rs []*kgo.Record
		for i := range 300 {
			k := fmt.Sprintf("u%02d", i%30)
			if i%7 == 3 {
				rs = append(rs, &kgo.Record{Topic: "users", Key: []byte(k)}) // tombstone
				delete(want, k)
				continue
			}
			v := fmt.Sprintf("name-%d", i)
			rs = append(rs, &kgo.Record{Topic: "users", Key: []byte(k), Value: []byte(v)})
			want[k] = v
		}
		if err := newClient(t, addr).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		b := NewBuilder()
		users := TableFrom(b, "users", String, String, Named("users"))
		users.ToStream().To("users-out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "tbl", Brokers: []string{addr}, StateDir: t.TempDir()})
		q, err := Query[string, string](a, "users")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			var bad []string
			for i := range 30 {
				k := fmt.Sprintf("u%02d", i)
				v, ok, err := q.Get(k)
				if err != nil || ok != (want[k] != "") || v != want[k] {
					bad = append(bad, fmt.Sprintf("%s=%q,%v,%v (want %q)", k, v, ok, err, want[k]))
				}
			}
			if len(bad) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("store users: %v", bad)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The untyped view answers too.
		if v, ok, err := a.Store("users").Get("u01"); err != nil || ok != (want["u01"] != "") || (ok && v.(string) != want["u01"]) {
			t.Errorf("Store(users).Get(u01) = %v, %v, %v; want %q", v, ok, err, want["u01"])
		}
		if _, _, err := a.Store("users").Get(7); err == nil {
			t.Errorf("Get with an int key: no error")
		}
	})
}

// TestRestoreFromChangelog: a word count stopped, its state directory
// deleted, and restarted on more input: the store is restored from the
// changelog (the restore callback says how much), so the counts go on
// from where they were and equal the reference over all the input.
func TestRestoreFromChangelog(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 2, nil)
		createTopic(t, addr, "counts-out", 2, nil)
		n := 600
		if testing.Short() {
			n = 200
		}
		ls, ref := lines(2, n)
		prod := newClient(t, addr)
		produceLines(t, prod, "lines", ls)
		state := t.TempDir()
		cfg := Config{ApplicationID: "rs", Brokers: []string{addr}, StateDir: state}
		a := startApp(t, wordCount("lines", "counts-out"), cfg)
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 20*time.Second), ref)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(state, "rs")); err != nil {
			t.Fatal(err)
		}
		ls2, ref2 := lines(3, n/2)
		produceLines(t, prod, "lines", ls2)
		addRef(ref, ref2)
		var mu sync.Mutex
		restored := map[string]int64{}
		cfg.OnRestore = func(p RestoreProgress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Store == "counts" {
				restored[p.Task] = p.Restored
			}
		}
		b := startApp(t, wordCount("lines", "counts-out"), cfg)
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 20*time.Second), ref)
		mu.Lock()
		var total int64
		for _, r := range restored {
			total += r
		}
		mu.Unlock()
		if total == 0 {
			t.Errorf("no changelog record restored: %v", restored)
		}
		checkStore(t, ref, b)
	})
}

// TestTwoInstances: two instances of one application share the tasks
// (each gets some, every task once); one is closed midway and the other
// takes its tasks over, restoring their stores from the changelogs; the
// counts equal the reference.
func TestTwoInstances(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		n := 600
		if testing.Short() {
			n = 200
		}
		prod := newClient(t, addr)
		cfg := Config{ApplicationID: "two", Brokers: []string{addr}}
		cfg.StateDir = t.TempDir()
		a := startApp(t, wordCount("lines", "counts-out"), cfg)
		cfg.StateDir = t.TempDir()
		b := startApp(t, wordCount("lines", "counts-out"), cfg)
		deadline := time.Now().Add(20 * time.Second)
		for {
			ta, tb := a.Stats().Tasks, b.Stats().Tasks
			if len(ta) > 0 && len(tb) > 0 && len(ta)+len(tb) == 8 {
				seen := map[string]bool{}
				for _, x := range append(ta, tb...) {
					if seen[x.Task] {
						t.Fatalf("task %s on both instances", x.Task)
					}
					seen[x.Task] = true
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tasks not shared: a %v, b %v", ta, tb)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The input is written once the tasks are shared: b's stores and
		// changelogs hold counts that a must restore when it takes them.
		ls, ref := lines(4, n)
		produceLines(t, prod, "lines", ls)
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 20*time.Second), ref)
		checkStore(t, ref, a, b)
		bTasks := b.Stats().Tasks
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		ls2, ref2 := lines(5, n/2)
		produceLines(t, prod, "lines", ls2)
		addRef(ref, ref2)
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 20*time.Second), ref)
		if got := len(a.Stats().Tasks); got != 8 {
			t.Errorf("after b closed, a has %d tasks, want 8", got)
		}
		// Each of b's tasks that has a store (subtopology 1) was restored
		// on a from its changelog.
		restored := map[string]int64{}
		for _, x := range a.Stats().Tasks {
			restored[x.Task] = x.Restored
		}
		for _, x := range bTasks {
			if x.Task[0] == '1' && restored[x.Task] == 0 {
				t.Errorf("a took b's task %s without restoring its store: a %+v, b had %+v", x.Task, a.Stats(), bTasks)
			}
		}
		checkStore(t, ref, a)
	})
}
