package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerDirectWrites: `-writes direct` logs the write path per log
// directory, serves produce and fetch, and keeps every acknowledged record
// across a SIGKILL (the reserved blocks cut at recovery as zeros, nothing
// truncated); on tmpfs it falls back and warns why; a bad value is refused.
// The default, auto, writes directly on the io_uring disk path and through
// the page cache on the portable one, and falls back on tmpfs without a
// warning.
func TestBrokerDirectWrites(t *testing.T) {
	addr := testkit.FreeAddr(t)
	dir := t.TempDir()
	p := start(t, "-listen", addr, "-data-dir", dir, "-writes", "direct")
	p.waitFor(t, "ringlog started")
	// The log names the tail caches' budget (engine.DefaultTailCacheBytes).
	if out := p.out.String(); !strings.Contains(out, "msg=writes kind=direct dir="+dir+` reason="asked for" tail_cache_bytes=268435456`+"\n") {
		t.Fatalf("no direct writes for %s, with the tail caches' budget, in the log:\n%s", dir, out)
	}
	produceN := func(n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("direct"), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range n {
			// Values of 1 to 1,500 bytes: the log's end falls anywhere in
			// a block.
			r := &kgo.Record{Value: []byte(fmt.Sprintf("%d:%s", i, strings.Repeat("v", (i*97)%1500)))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	consumeAll := func(n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("direct"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for got := 0; got < n; {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%d of %d records read back", got, n)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if want := fmt.Sprintf("%d:%s", got, strings.Repeat("v", (got*97)%1500)); string(r.Value) != want {
					t.Fatalf("record %d: %.20q..., want %.20q...", got, r.Value, want)
				}
				got++
			})
		}
	}
	produceN(300)
	consumeAll(300)
	p.cmd.Process.Kill()
	<-p.done
	p.done <- nil
	p = start(t, "-listen", addr, "-data-dir", dir, "-writes", "direct")
	p.waitFor(t, "ringlog started")
	if out := p.out.String(); !strings.Contains(out, `msg="recovered partition" partition=`+dir+"/direct-0 ") || !strings.Contains(out, "truncated_bytes=0 zero_bytes=") || strings.Contains(out, "zero_bytes=0 ") {
		t.Fatalf("recovery after SIGKILL did not cut reserved zeros alone:\n%s", out)
	}
	consumeAll(300)
	p.stop(t)

	shm, err := os.MkdirTemp("/dev/shm", "ringlog-writes-")
	if err != nil {
		t.Fatalf("a tmpfs directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	p = start(t, "-listen", addr, "-data-dir", shm, "-writes", "direct")
	p.waitFor(t, "ringlog started")
	if out := p.out.String(); !strings.Contains(out, "direct writes unavailable") {
		t.Fatalf("no warning for direct writes on tmpfs:\n%s", out)
	}
	produceN(20)
	consumeAll(20)
	p.stop(t)

	// The default: direct on io_uring, buffered on the portable path and
	// on tmpfs, each saying why; only an explicit -writes direct warns.
	shm2, err := os.MkdirTemp("/dev/shm", "ringlog-writes-")
	if err != nil {
		t.Fatalf("a tmpfs directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm2) })
	// "ringlog started" names what the log directories got.
	for _, c := range []struct {
		dir     string
		args    []string
		want    string
		started string
	}{
		{t.TempDir(), []string{"-io", "uring"}, `msg=writes kind=direct dir=%s reason="auto: the disk path is io_uring" tail_cache_bytes=268435456` + "\n", " writes=direct "},
		{t.TempDir(), []string{"-io", "portable"}, `msg=writes kind=buffered reason="auto: the disk path is portable"` + "\n", " writes=buffered "},
		{shm2, []string{"-io", "uring"}, `msg=writes kind=buffered dir=%s reason="auto: the file system has no direct I/O: `, " writes=buffered "},
	} {
		p = start(t, append([]string{"-listen", addr, "-data-dir", c.dir}, c.args...)...)
		p.waitFor(t, "ringlog started")
		want := c.want
		if strings.Contains(want, "%s") {
			want = fmt.Sprintf(want, c.dir)
		}
		if out := p.out.String(); !strings.Contains(out, want) || !strings.Contains(out, c.started) || strings.Contains(out, "direct writes unavailable") {
			t.Fatalf("%v: want %q and %q in the log, and no warning:\n%s", c.args, want, c.started, out)
		}
		produceN(20)
		consumeAll(20)
		p.stop(t)
	}

	p = start(t, "-data-dir", t.TempDir(), "-writes", "sideways")
	err = <-p.done
	p.done <- err
	if err == nil || !strings.Contains(p.out.String(), "sideways") {
		t.Fatalf("bad -writes accepted: %v %s", err, p.out.String())
	}
}
