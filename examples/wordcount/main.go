// Command wordcount is Kafka Streams' WordCountDemo on ringlog/streams:
// it counts the words of the lines in one topic and writes the count
// updates to another, keyed by word (int64 values, Kafka's LongSerde), with
// at-least-once or exactly-once processing. A record cache of -cache bytes
// (Kafka's default, 10 MiB) merges a word's updates between commits;
// -cache 0 writes every update. Run several with the same
// -app to share the work; kill one and the others take its tasks over.
//
//	wordcount -brokers 127.0.0.1:9092 -in lines -out word-counts -state /tmp/wc [-eos]
//
// -session-timeout and -commit-interval shorten Kafka's defaults (45 s,
// and 30 s at least once or 100 ms exactly once): streams' kill test
// SIGKILLs instances of this program and wants the group to notice in a
// second or two, which needs the broker's group.min.session.timeout.ms
// lowered as well.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/streams"
)

// topology is the word count: lines split into lowercase words,
// repartitioned by word, counted in store "counts".
func topology(in, out string) (*streams.Topology, error) {
	b := streams.NewBuilder()
	lines := streams.Source(b, []string{in}, streams.String, streams.String)
	words := streams.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
	byWord := streams.GroupBy(words, func(_, w string) string { return w },
		streams.KeySerde(streams.String), streams.ValueSerde(streams.String), streams.Named("words"))
	streams.Count(byWord, streams.Named("counts")).ToStream().To(out)
	return b.Build()
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated bootstrap brokers")
	app := flag.String("app", "wordcount", "application id (consumer group, prefix of internal topics)")
	in := flag.String("in", "lines", "input topic")
	out := flag.String("out", "word-counts", "output topic")
	state := flag.String("state", "wordcount-state", "state directory")
	instance := flag.String("instance", "", "instance id (exactly once: keep it across restarts)")
	eos := flag.Bool("eos", false, "exactly once")
	session := flag.Duration("session-timeout", 0, "consumer group session timeout (default kgo's, 45s); heartbeats go at a tenth of it")
	cache := flag.Int64("cache", streams.DefaultCacheMaxBytes, "record cache bytes (statestore.cache.max.bytes); 0 forwards every count update")
	commit := flag.Duration("commit-interval", 0, "commit interval (default 30s at least once, 100ms exactly once)")
	flag.Parse()
	topo, err := topology(*in, *out)
	if err != nil {
		log.Fatal(err)
	}
	cfg := streams.Config{ApplicationID: *app, Brokers: strings.Split(*brokers, ","), StateDir: *state, InstanceID: *instance,
		CommitInterval: *commit, CacheMaxBytes: *cache,
		OnRestore: func(p streams.RestoreProgress) {
			if p.Done {
				log.Printf("restored %s %s/%d to %d", p.Store, p.Topic, p.Partition, p.Total)
			}
		}}
	if *eos {
		cfg.Guarantee = streams.ExactlyOnce
	}
	if *session > 0 {
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.SessionTimeout(*session), kgo.HeartbeatInterval(*session/10))
	}
	a, err := streams.New(topo, cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Print(topo.Describe())
	stopped := make(chan error, 1)
	go func() { stopped <- a.Wait() }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-stopped:
			// Processing stopped by itself (fenced, a broker error):
			// exit, so that a supervisor restarts the instance.
			log.Fatalf("stopped: %v", err)
		case <-ctx.Done():
			if err := a.Close(); err != nil {
				log.Fatal(err)
			}
			return
		case <-tick.C:
			st := a.Stats()
			log.Printf("%d tasks, %.0f records/s", len(st.Tasks), st.RecordsPerSec)
		}
	}
}
