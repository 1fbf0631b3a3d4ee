package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// pythonTxn drives confluent-kafka (librdkafka) transactions: a
// transactional producer commits 10 records, aborts 5, commits 3 more,
// and a second producer with the same transactional.id fences the first
// (whose next commit fails); then a read_committed and a read_uncommitted
// consumer read the topic from its start. It prints one JSON object.
const pythonTxn = `
import json, sys
from confluent_kafka import Producer, Consumer, KafkaException, TopicPartition
bootstrap, topic = sys.argv[1:3]
out = {}
def producer():
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": "py-txn", "enable.idempotence": True,
                     "transaction.timeout.ms": 60000})
p = producer()
p.init_transactions(30)
for n, commit, tag in [(10, True, "a"), (5, False, "b"), (3, True, "c")]:
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=("%s%d" % (tag, i)).encode(), partition=i % 2)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
# A zombie: a new instance with the same id fences the old one.
p.begin_transaction()
p.produce(topic, value=b"zombie", partition=0)
p.flush(30)
p2 = producer()
p2.init_transactions(30)
try:
    p.commit_transaction(30)
    out["zombie"] = "committed"
except KafkaException as e:
    out["zombie"] = e.args[0].name()
p2.begin_transaction()
p2.produce(topic, value=b"d0", partition=1)
p2.commit_transaction(30)
def read(isolation):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-" + isolation, "isolation.level": isolation,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    vals, idle = [], 0
    while idle < 3:
        m = c.poll(1.0)
        if m is None:
            idle += 1
            continue
        if m.error():
            continue
        idle = 0
        vals.append(m.value().decode())
    c.close()
    return sorted(vals)
out["read_committed"] = read("read_committed")
out["read_uncommitted"] = read("read_uncommitted")
print(json.dumps(out))
`

// TestPythonTransactions: transactions from a second client family,
// confluent-kafka (librdkafka) from PyPI: a read_committed consumer sees
// exactly the committed transactions, a read_uncommitted one the aborted
// and the fenced records too, and a zombie producer's commit fails with
// PRODUCER_FENCED (librdkafka's _FENCED).
func TestPythonTransactions(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not installed")
	}
	if err := exec.Command(python, "-c", "import confluent_kafka").Run(); err != nil {
		t.Fatal("confluent-kafka not installed (scripts/test.sh installs it: pip install confluent-kafka)")
	}
	addr := testkit.FreeAddr(t)
	p := start(t, "-listen", addr, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if res, err := kadm.NewClient(cl).CreateTopic(cctx, 2, 1, nil, "py-txn"); err != nil || res.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, res.Err)
	}
	script := filepath.Join(t.TempDir(), "txn.py")
	if err := os.WriteFile(script, []byte(pythonTxn), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, script, addr, "py-txn").CombinedOutput()
	if err != nil {
		t.Fatalf("confluent-kafka: %v\n%s\nbroker:\n%s", err, out, p.out.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var got struct {
		Zombie          string   `json:"zombie"`
		ReadCommitted   []string `json:"read_committed"`
		ReadUncommitted []string `json:"read_uncommitted"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("confluent-kafka's output: %v\n%s", err, out)
	}
	var committed, all []string
	for _, g := range []struct {
		tag    string
		n      int
		commit bool
	}{{"a", 10, true}, {"b", 5, false}, {"c", 3, true}, {"d", 1, true}} {
		for i := range g.n {
			v := g.tag + string(rune('0'+i))
			all = append(all, v)
			if g.commit {
				committed = append(committed, v)
			}
		}
	}
	all = append(all, "zombie")
	slices.Sort(committed)
	slices.Sort(all)
	if !slices.Equal(got.ReadCommitted, committed) {
		t.Errorf("read_committed read %v, want %v", got.ReadCommitted, committed)
	}
	if !slices.Equal(got.ReadUncommitted, all) {
		t.Errorf("read_uncommitted read %v, want %v", got.ReadUncommitted, all)
	}
	if got.Zombie != "_FENCED" && got.Zombie != "PRODUCER_FENCED" && got.Zombie != "INVALID_PRODUCER_EPOCH" {
		t.Errorf("the zombie's commit: %q, want it fenced", got.Zombie)
	}
	p.stop(t)
}
