package mirror

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// TestMirrorKilled: the mirror process (the binary) is SIGKILLed and
// started again three times while a producer writes to A; B then holds
// every record A acknowledged exactly once, in order per partition.
// Killed in the middle of a transaction, a mirror leaves it open; the
// next one fences it (aborted) and resumes from the source offsets B
// committed with the records.
func TestMirrorKilled(t *testing.T) {
	bin := testkit.Binary(t)
	a, b := startBroker(t), startBroker(t)
	createTopic(t, kadm.NewClient(client(t, a)), "k", 4, nil)

	// The producer: sequence numbers per partition, kept when acknowledged.
	prod := client(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	var (
		mu    sync.Mutex
		acked = map[int32][]string{}
		perr  error
	)
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				if err := prod.Flush(ctx); err != nil {
					perr = err
				}
				return
			default:
			}
			p := int32(i % 4)
			v := fmt.Sprintf("p%d-%d", p, i/4)
			// Promises of one partition run in offset order.
			prod.Produce(ctx, &kgo.Record{Topic: "k", Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					perr = err
					return
				}
				acked[p] = append(acked[p], v)
			})
			if i%20 == 19 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()

	var out testkit.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "mirror", "-source", a, "-target", b, "-alias", "A", "-target-alias", "B",
			"-topics", "k", "-refresh", "1s", "-progress", "0")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	for range 3 {
		cmd := start()
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}
	final := start()
	t.Cleanup(func() { final.Process.Signal(syscall.SIGTERM); final.Wait() })
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-produced
	if perr != nil {
		t.Fatalf("produce to A: %v", perr)
	}
	total := 0
	for _, vs := range acked {
		total += len(vs)
	}
	got := readAll(t, b, "A.k", total, 30*time.Second)
	for p := range int32(4) {
		want := acked[p]
		var have []string
		for _, r := range got[p] {
			have = append(have, string(r.Value))
		}
		if len(have) != len(want) {
			t.Errorf("A.k/%d holds %d records, A acknowledged %d", p, len(have), len(want))
		}
		for i := range min(len(have), len(want)) {
			if have[i] != want[i] {
				t.Errorf("A.k/%d at %d: %s, want %s (a duplicate or a gap)", p, i, have[i], want[i])
				break
			}
		}
	}
	if t.Failed() {
		t.Logf("mirror output:\n%s", out.String())
	}
	t.Logf("%d records mirrored across 3 kills", total)
}
