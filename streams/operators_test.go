package streams

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOperators: the stateless operators, Reduce, Aggregate and a global
// table in one application, each output checked against a reference
// computed here from the same input: events "<user> <amount>" from two
// topics matched by a pattern, merged with a third; Branch splits them
// into small and large amounts; Map re-keys by user and the sums per user
// are reduced; Aggregate keeps each user's largest amount; Peek counts
// what passes; the global table of user names answers by key on the
// instance.
func TestOperators(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"ev-a", "ev-b", "other", "small", "large", "names"} {
			createTopic(t, addr, tp, 2, nil)
		}
		prod := newClient(t, addr)
		var rs []*kgo.Record
		sum, maxOf := map[string]int64{}, map[string]int64{}
		var small, large []string
		for i := range 300 {
			user, amount := fmt.Sprintf("u%d", i%7), int64(i*37%101)
			topic := []string{"ev-a", "ev-b", "other"}[i%3]
			v := fmt.Sprintf("%s %d", user, amount)
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(v)})
			sum[user] += amount
			maxOf[user] = max(maxOf[user], amount)
			if amount < 50 {
				small = append(small, v)
			} else {
				large = append(large, v)
			}
		}
		for i := range 7 {
			rs = append(rs, &kgo.Record{Topic: "names", Key: []byte(fmt.Sprintf("u%d", i)), Value: []byte(fmt.Sprintf("user %d", i))})
		}
		if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}

		b := NewBuilder()
		evs := SourcePattern(b, regexp.MustCompile(`ev-.`), String, String).Merge(Source(b, []string{"other"}, String, String))
		var peekMu sync.Mutex
		peeked := 0
		evs = evs.Peek(func(string, string) { peekMu.Lock(); peeked++; peekMu.Unlock() })
		parsed := Map(evs, func(_ string, v string) (string, int64) {
			f := strings.Fields(v)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return f[0], n
		}, KeySerde(String), ValueSerde(Int64))
		parts := evs.Branch(func(_, v string) bool { n, _ := strconv.Atoi(strings.Fields(v)[1]); return n < 50 },
			func(string, string) bool { return true })
		parts[0].To("small")
		parts[1].To("large")
		Reduce(GroupByKey(parsed, Named("by-user")), func(a, v int64) int64 { return a + v }, Named("sums"))
		Aggregate(GroupByKey(SelectKey(parsed, func(k string, _ int64) string { return k }), KeySerde(String), ValueSerde(Int64), Named("by-user-2")),
			func() int64 { return -1 }, func(_ string, v, acc int64) int64 { return max(acc, v) }, ValueSerde(Int64), Named("maxima"))
		NewGlobalTable(b, "names", String, String, Named("names"))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "ops", Brokers: []string{addr}, StateDir: t.TempDir()})

		for _, c := range []struct {
			topic string
			want  []string
		}{{"small", small}, {"large", large}} {
			got := readValues(t, addr, c.topic, len(c.want))
			sort.Strings(got)
			want := append([]string(nil), c.want...)
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s: %d records, want %d", c.topic, len(got), len(want))
			}
		}
		for _, c := range []struct {
			store string
			want  map[string]int64
		}{{"sums", sum}, {"maxima", maxOf}} {
			q, err := Query[string, int64](a, c.store)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(15 * time.Second)
			for u, n := range c.want {
				for {
					v, ok, err := q.Get(u)
					if err == nil && ok && v == n {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s[%s] = %d, %v, %v; want %d", c.store, u, v, ok, err, n)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
		names, err := Query[string, string](a, "names")
		if err != nil {
			t.Fatal(err)
		}
		if v, ok, err := names.Get("u3"); err != nil || !ok || v != "user 3" {
			t.Errorf("global names[u3] = %q, %v, %v", v, ok, err)
		}
		peekMu.Lock()
		defer peekMu.Unlock()
		if peeked != 300 {
			t.Errorf("peeked %d records, want 300", peeked)
		}
	})
}

// readValues reads n values of topic from the start.
func readValues(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
