package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/kafka"
	"ringlog/segment/batch"
)

// kcat is librdkafka's command-line client: a second, independent Kafka
// implementation (C, with its own codecs) against the broker.
// scripts/test.sh installs it; without it these tests fail.

func kcatBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat not installed (scripts/test.sh installs it: apt-get install kcat)")
	}
	return p
}

// kcat runs kcat against b with args, stdin as its input, and returns its
// standard output.
func kcat(t *testing.T, bin string, b *testBroker, stdin []byte, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-b", b.Addr, "-q"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "ERROR") || strings.Contains(s, "failed") {
		t.Fatalf("kcat %s reported:\n%s", strings.Join(args, " "), s)
	}
	return stdout.String()
}

func kcatLines(from, to int, codec string) []string {
	var ls []string
	for i := from; i < to; i++ {
		ls = append(ls, fmt.Sprintf("%s-record-%05d-%s", codec, i, strings.Repeat("x", i%50)))
	}
	return ls
}

// kcatConsume reads partition 0 of topic from offset spec (kcat's -o) to
// its end, as "offset:value" lines.
func kcatConsume(t *testing.T, bin string, b *testBroker, topic, from string) []string {
	out := kcat(t, bin, b, nil, "-C", "-t", topic, "-p", "0", "-o", from, "-e", "-f", "%o:%s\n",
		// librdkafka reports the end of a partition from the fetch after
		// the last data, which long-polls for fetch.wait.max.ms.
		"-X", "fetch.wait.max.ms=100")
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

func kcatCheck(t *testing.T, got []string, firstOffset int, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("consumed %d records, want %d (first: %q)", len(got), len(want), got[:min(3, len(got))])
	}
	for i := range want {
		if w := fmt.Sprintf("%d:%s", firstOffset+i, want[i]); got[i] != w {
			t.Fatalf("record %d: %q, want %q", i, got[i], w)
		}
	}
}

// TestKcatCodecs produces with kcat in each codec, checks that the batches
// are stored in that codec, and consumes them back with kcat: whole, from an
// offset, and from a timestamp.
func TestKcatCodecs(t *testing.T) {
	bin := kcatBin(t)
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			t.Run(codec, func(t *testing.T) {
				topic := "kcat-" + codec
				e2eCreateTopic(t, b, topic, 1, nil)
				first := kcatLines(0, 300, codec)
				second := kcatLines(300, 350, codec)
				produce := func(lines []string) {
					kcat(t, bin, b, []byte(strings.Join(lines, "\n")+"\n"), "-P", "-t", topic, "-p", "0", "-z", codec, "-X", "linger.ms=20")
				}
				if codec == "lz4" && !kafka.Serves(kmsg.FindCoordinator.Int16()) {
					// librdkafka enables LZ4 only when the broker
					// advertises FindCoordinator (its feature map,
					// rdkafka_feature.c, dates LZ4 by that API) and
					// otherwise sends the batches uncompressed. Until
					// the group coordinator exists, kgo writes the lz4
					// batches and kcat only consumes them.
					t.Log("FindCoordinator not served: librdkafka will not compress with lz4; producing the lz4 batches with kgo")
					cl := b.client(kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
					produce = func(lines []string) {
						var rs []*kgo.Record
						for _, l := range lines {
							rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(l)})
						}
						if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
							t.Fatal(err)
						}
					}
				}
				produce(first)

				// The producer compressed what it sent, and the log holds
				// it so. (librdkafka sends a batch uncompressed when
				// compression would not shrink it, so look for one batch
				// in the codec, not at every batch.)
				if codecs := kcatStoredCodecs(t, b, topic); !codecs[codec] {
					t.Fatalf("no batch stored as %s; codecs in the log: %v", codec, codecs)
				}

				kcatCheck(t, kcatConsume(t, bin, b, topic, "beginning"), 0, first)
				kcatCheck(t, kcatConsume(t, bin, b, topic, "250"), 250, first[250:])

				// From a timestamp: a second lot produced after a pause
				// starts at the first record at or after that time.
				time.Sleep(20 * time.Millisecond)
				ts := time.Now().UnixMilli()
				time.Sleep(5 * time.Millisecond)
				produce(second)
				kcatCheck(t, kcatConsume(t, bin, b, topic, "s@"+strconv.FormatInt(ts, 10)), 300, second)
			})
		}
	})
}

// kcatStoredCodecs lists the codecs of the batches in partition 0 of topic,
// reading the log's regions as a fetch would send them.
func kcatStoredCodecs(t *testing.T, b *testBroker, topic string) map[string]bool {
	t.Helper()
	res, err := b.Engine.Read(engine.TP{Topic: topic, Partition: 0}, 0, 64<<20, true, engine.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	var log []byte
	for _, rg := range res.Regions {
		buf := make([]byte, rg.Len)
		if err := rg.ReadAt(buf); err != nil {
			t.Fatal(err)
		}
		log = append(log, buf...)
	}
	codecs := map[string]bool{}
	for len(log) >= batch.HeaderSize {
		h, err := batch.ParseHeader(log)
		if err != nil || h.Size() > len(log) {
			t.Fatalf("batch header: %v", err)
		}
		codecs[h.Codec().String()] = true
		log = log[h.Size():]
	}
	return codecs
}
