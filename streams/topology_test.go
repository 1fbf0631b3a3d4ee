package streams

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBuildErrors: topology mistakes are reported by Build, all of them,
// before anything runs.
func TestBuildErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(b *Builder)
		want  []string
	}{
		{"no source", func(b *Builder) {}, []string{"no source"}},
		{"name twice", func(b *Builder) {
			s := Source(b, []string{"a"}, String, String, Named("x"))
			s.Filter(func(string, string) bool { return true }, Named("x"))
		}, []string{`name "x" used twice`}},
		{"repartition without serde", func(b *Builder) {
			s := Source(b, []string{"a"}, String, String)
			m := Map(s, func(k, v string) (int64, string) { return int64(len(k)), v })
			Count(GroupByKey(m))
		}, []string{"repartition", "needs a key and a value serde"}},
		{"sink without serde", func(b *Builder) {
			s := Source(b, []string{"a"}, String, String)
			MapValues(s, func(v string) int { return len(v) }).To("out")
		}, []string{`sink`, `"out"`, "no key or value serde"}},
		{"serde of the wrong type", func(b *Builder) {
			s := Source(b, []string{"a"}, String, String)
			s.To("out", ValueSerde(Int64))
		}, []string{"value serde", "does not serialize string"}},
		{"store twice", func(b *Builder) {
			s := Source(b, []string{"a"}, String, String)
			TableFrom(b, "t", String, String, Named("st"))
			Count(GroupByKey(s), Named("st"))
		}, []string{`"st"`}},
	}
	for _, c := range cases {
		b := NewBuilder()
		c.build(b)
		_, err := b.Build()
		if err == nil || !errors.Is(err, ErrTopology) {
			t.Errorf("%s: Build() = %v, want ErrTopology", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
	// A correct topology builds, and Describe draws its two
	// subtopologies (cut at the repartition topic).
	d := wordCount("in", "out").Describe()
	for _, w := range []string{"Sub-topology: 0", "Sub-topology: 1", "<app>-words-repartition", "stores: [counts]"} {
		if !strings.Contains(d, w) {
			t.Errorf("Describe lacks %q:\n%s", w, d)
		}
	}
}

// TestStartErrors: mistakes only the cluster can show (a missing source
// or sink topic, a stateful subtopology over topics with different partition
// counts) stop Start before anything runs.
func TestStartErrors(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "two", 2, nil)
		createTopic(t, addr, "three", 3, nil)
		start := func(topo *Topology) error {
			a, err := New(topo, Config{ApplicationID: "bad", Brokers: []string{addr}, StateDir: t.TempDir()})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = a.Start(ctx)
			if err == nil {
				a.Close()
			}
			return err
		}
		if err := start(wordCount("nope", "two")); !errors.Is(err, ErrMissingTopic) || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("missing topic: %v", err)
		}
		// A sink's topic must exist too: kgo does not have it created,
		// and every record sent to it would fail.
		if err := start(wordCount("two", "nope-out")); !errors.Is(err, ErrMissingTopic) || !strings.Contains(err.Error(), `"nope-out" (sink`) {
			t.Errorf("missing sink topic: %v", err)
		}
		b := NewBuilder()
		s := Source(b, []string{"two"}, String, String).Merge(Source(b, []string{"three"}, String, String))
		Count(GroupByKey(s), Named("c"))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := start(topo); !errors.Is(err, ErrCopartition) || !strings.Contains(err.Error(), "three=3") {
			t.Errorf("co-partitioning: %v", err)
		}
	})
}
