package streams

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit/testbroker"
)

// clusters are the two Kafkas every test runs against: a ringlog broker
// started in the test's process (the binary's wiring) and franz-go's
// kfake.
var clusters = []struct {
	name  string
	start func(t *testing.T) string
}{
	{"ringlog", func(t *testing.T) string {
		return testbroker.StartBroker(t, testbroker.Config(t.TempDir())).Addr
	}},
	{"kfake", func(t *testing.T) string {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c.ListenAddrs()[0]
	}},
}

// onClusters runs fn as a parallel subtest on each cluster.
func onClusters(t *testing.T, fn func(t *testing.T, addr string)) {
	t.Parallel()
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fn(t, c.start(t))
		})
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	resp, err := adm.CreateTopic(context.Background(), partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// lines returns n lines of words drawn from a small vocabulary, and the
// count of each word in them: the reference a word count must reach.
func lines(seed int64, n int) ([]string, map[string]int64) {
	rng := rand.New(rand.NewSource(seed))
	ref := map[string]int64{}
	out := make([]string, n)
	for i := range out {
		var ws []string
		for range 1 + rng.Intn(5) {
			w := fmt.Sprintf("w%02d", rng.Intn(40))
			ws = append(ws, w)
			ref[w]++
		}
		out[i] = strings.Join(ws, " ")
	}
	return out, ref
}

func addRef(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

func produceLines(t *testing.T, cl *kgo.Client, topic string, ls []string) {
	t.Helper()
	rs := make([]*kgo.Record, len(ls))
	for i, l := range ls {
		rs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(l)}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// wordCount is the word-count topology: lines split into words,
// repartitioned by word, counted in store "counts", every update written
// to out.
func wordCount(in, out string) *Topology {
	b := NewBuilder()
	ls := Source(b, []string{in}, String, String)
	words := FlatMapValues(ls, strings.Fields)
	byWord := GroupBy(words, func(_, w string) string { return w }, KeySerde(String), ValueSerde(String), Named("words"))
	Count(byWord, Named("counts")).ToStream().To(out)
	t, err := b.Build()
	if err != nil {
		panic(err)
	}
	return t
}

func startApp(t *testing.T, topo *Topology, cfg Config) *App {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testbroker.Logger()
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 100 * time.Millisecond
	}
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(10*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond), kgo.TransactionTimeout(10*time.Second))
	a, err := New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { _ = a.Close() }) })
	return a
}

// latest reads topic (string keys, int64 values) with the given
// isolation until every key of want has its value or the deadline
// passes; it returns every update per key in order.
func readCounts(t *testing.T, addr, topic string, want map[string]int64, iso kgo.IsolationLevel, wait time.Duration) map[string][]int64 {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[string][]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for !countsReached(got, want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, err := Int64.Deserialize(topic, r.Value)
			if err != nil {
				t.Errorf("%s: %v", topic, err)
				return
			}
			got[string(r.Key)] = append(got[string(r.Key)], v)
		})
	}
	return got
}

func countsReached(got map[string][]int64, want map[string]int64) bool {
	for k, n := range want {
		u := got[k]
		if len(u) == 0 || u[len(u)-1] != n {
			return false
		}
	}
	return true
}

func checkFinal(t *testing.T, got map[string][]int64, want map[string]int64) {
	t.Helper()
	for k, n := range want {
		u := got[k]
		if len(u) == 0 || u[len(u)-1] != n {
			t.Errorf("count of %q: updates %v, want last %d", k, u, n)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("count of %q: not in the input", k)
		}
	}
}

// checkStore reads every reference key from the application's store
// (interactive queries): each must be local to one instance of apps and
// hold its count once the instances committed (a store serves committed
// state), within a few seconds.
func checkStore(t *testing.T, want map[string]int64, apps ...*App) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		bad := storeMismatch(t, want, apps)
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("store counts: %s", strings.Join(bad, "; "))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func storeMismatch(t *testing.T, want map[string]int64, apps []*App) []string {
	var bad []string
	for k, n := range want {
		local := 0
		for _, a := range apps {
			q, err := Query[string, int64](a, "counts")
			if err != nil {
				t.Fatal(err)
			}
			v, ok, err := q.Get(k)
			if errors.Is(err, ErrKeyNotLocal) {
				continue
			}
			local++
			if err != nil || !ok || v != n {
				bad = append(bad, fmt.Sprintf("%s=%d,%v,%v want %d", k, v, ok, err, n))
			}
		}
		if local != 1 {
			bad = append(bad, fmt.Sprintf("%s on %d instances", k, local))
		}
	}
	return bad
}

func removeAll(dir string) error { return os.RemoveAll(dir) }
