package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"ringlog/ioring"
)

// TestDirectWrites: an engine with DirectWrites appends through its
// shards' I/O paths (portable, io_uring, and io_uring rings owned by the
// shards, whose disk I/O shares the ring with the network), for flush
// never and always: every batch reads back, the active segments' files
// run ahead of their data (blocks reserved for direct writes), and after
// a clean close and a reopen everything is still there.
func TestDirectWrites(t *testing.T) {
	setups := []struct {
		name  string
		cfg   Config
		owner bool
	}{
		{"portable", Config{IO: ioring.ModePortable}, false},
		{"uring", Config{IO: ioring.ModeUring}, false},
		{"uring-owners", Config{IO: ioring.ModeUring, RingOwners: true}, true},
	}
	for _, su := range setups {
		for _, flush := range []string{"never", "always"} {
			t.Run(su.name+"/"+flush, func(t *testing.T) {
				dir := t.TempDir()
				cfg := su.cfg
				cfg.Dir, cfg.Shards, cfg.Writes = dir, 2, WritesDirect
				e, err := OpenCore(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if su.owner && len(e.RingOwners()) != 2 {
					e.Close()
					t.Fatalf("no ring owners: %s", e.RingOwnersWhy())
				}
				configs := map[string]string{}
				if flush == "always" {
					configs["flush.messages"] = "1"
				}
				if _, err := e.CreateTopic("d", 4, -1, configs, false); err != nil {
					t.Fatal(err)
				}
				want := map[int32]int{}
				for i := range 200 {
					tp := TP{"d", int32(i % 4)}
					n := 1 + i%3
					if _, err := appendSync(e, tp, mkBatch(t, n, fmt.Sprint(i%700), int64(i), -1, 0, 0)); err != nil {
						t.Fatal(err)
					}
					want[tp.Partition] += n
				}
				check := func(what string) {
					t.Helper()
					for p, n := range want {
						got := 0
						for _, h := range readAll(t, e, TP{"d", p}) {
							got += int(h.NumRecords)
						}
						if got != n {
							t.Fatalf("%s: partition %d reads back %d records, want %d", what, p, got, n)
						}
					}
				}
				check("after the appends")
				ahead := 0
				for p := range 4 {
					st, err := os.Stat(filepath.Join(dir, fmt.Sprintf("d-%d", p), "00000000000000000000.log"))
					if err != nil {
						t.Fatal(err)
					}
					if st.Size() > 8<<20-1 {
						ahead++
					}
				}
				if ahead != 4 {
					t.Fatalf("%d of 4 active segments have blocks reserved ahead: direct writes not used", ahead)
				}
				// The partitions' tail caches count in the engine's budget,
				// and leave it with the close.
				if held := e.tails.Held(); held <= 0 || held > e.cfg.TailCacheBytes {
					t.Fatalf("the engine's tail caches hold %d bytes (budget %d)", held, e.cfg.TailCacheBytes)
				}
				tails := e.tails
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				if held := tails.Held(); held != 0 {
					t.Fatalf("%d bytes still counted in the tail caches' budget after the close", held)
				}
				e, err = OpenCore(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				check("after a reopen")
			})
		}
	}
}
