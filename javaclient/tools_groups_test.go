package javaclient

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestToolConsumerGroups: the console producer writes keyed lines, the
// console consumer reads them in a group, and kafka-consumer-groups
// lists, describes (offsets, state, the members of a live KIP-848 group),
// resets offsets (--to-earliest, --to-offset, --shift-by, a --dry-run),
// deletes offsets, refuses to delete a live group, and deletes groups.
func TestToolConsumerGroups(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic, parts = "ops-orders", 5
	b.createTopic(t, topic, parts)

	// kafka-console-producer: 30 keyed lines, seven keys.
	var in strings.Builder
	for i := range 30 {
		fmt.Fprintf(&in, "k%d:v%d\n", i%7, i)
	}
	if out, err := b.toolIn(t, in.String(), kafkaConsoleProd, "--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:"); err != nil {
		t.Fatalf("kafka-console-producer: %v\n%s", err, out)
	}
	// franz-go reads them: every value once, each key in one partition.
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var want []string // Partition:p\tOffset:o\tkey\tvalue, as the console consumer prints them
	keyPartition := map[string]int32{}
	for len(want) < 30 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go read %d of the console producer's 30 records", len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			want = append(want, fmt.Sprintf("Partition:%d\tOffset:%d\t%s\t%s", r.Partition, r.Offset, r.Key, r.Value))
			if p, ok := keyPartition[string(r.Key)]; ok && p != r.Partition {
				t.Errorf("key %s in partitions %d and %d", r.Key, p, r.Partition)
			}
			keyPartition[string(r.Key)] = r.Partition
		})
	}
	cl.Close()

	// A live member of a KIP-848 group, started now so that it has its
	// assignment by the time the tool describes it.
	live := b.startTool(t, kafkaConsoleCons, "--topic", topic, "--group", "ops-live",
		"--command-property", "group.protocol=consumer")

	// kafka-console-consumer in group ops-console: the same 30 records.
	out := b.toolOK(t, kafkaConsoleCons, "--topic", topic, "--from-beginning", "--max-messages", "30", "--group", "ops-console",
		"--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
		"--formatter-property", "print.offset=true")
	var got []string
	for _, l := range outputLines(out) {
		if strings.HasPrefix(l, "Partition:") {
			got = append(got, l)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("kafka-console-consumer printed\n%s\nfranz-go read\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantContains(t, "kafka-console-consumer", out, "Processed a total of 30 messages")

	adm := kadm.NewClient(b.client(t))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := func(p int) int64 {
		o, _ := ends.Lookup(topic, int32(p))
		return o.Offset
	}

	// The live member, as kafka-consumer-groups --describe --members
	// shows it once it holds every partition.
	var member []string
	for attempt := 0; ; attempt++ {
		out = b.toolOK(t, kafkaConsumerGroups, "--describe", "--group", "ops-live", "--members", "--verbose")
		if rows := tableRows(out, "ops-live"); len(rows) == 1 && len(rows[0]) == 9 && rows[0][4] == strconv.Itoa(parts) {
			member = rows[0]
			break
		}
		if attempt == 10 {
			t.Fatalf("kafka-consumer-groups --describe --members: no member holding %d partitions:\n%s\nconsole consumer:\n%s", parts, out, live.out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT
	all := topic + ":0,1,2,3,4"
	if member[2] != "/127.0.0.1" || member[3] != "console-consumer" || member[6] != all || member[8] != all || member[5] != member[7] {
		t.Errorf("kafka-consumer-groups --describe --members: %q; want host /127.0.0.1, client console-consumer, "+
			"assignment and target %s at the same epoch", member, all)
	}
	out = b.toolOK(t, kafkaConsumerGroups, "--describe", "--group", "ops-live", "--state", "--verbose")
	// GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
	if rows := tableRows(out, "ops-live"); len(rows) != 1 || len(rows[0]) != 8 || rows[0][3] != "uniform" || rows[0][4] != "Stable" ||
		rows[0][5] != member[5] || rows[0][6] != member[5] || rows[0][7] != "1" {
		t.Errorf("kafka-consumer-groups --describe --state: want strategy uniform, Stable, epochs %s, one member:\n%s", member[5], out)
	}
	// The tool says so, and exits 0 (against Kafka too).
	out = b.toolOK(t, kafkaConsumerGroups, "--delete", "--group", "ops-live")
	wantContains(t, "kafka-consumer-groups --delete of a live group", out,
		"Group 'ops-live' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException")

	out = b.toolOK(t, kafkaConsumerGroups, "--list")
	groupNames := outputLines(out)
	slices.Sort(groupNames)
	if !slices.Equal(groupNames, []string{"ops-console", "ops-live"}) {
		t.Errorf("kafka-consumer-groups --list: %q, want ops-console and ops-live", groupNames)
	}

	// The console consumer's group, empty now, committed up to the ends.
	out = b.toolOK(t, kafkaConsumerGroups, "--describe", "--group", "ops-console")
	wantContains(t, "kafka-consumer-groups --describe", out, "Consumer group 'ops-console' has no active members.")
	rows := tableRows(out, "ops-console")
	if len(rows) != parts {
		t.Fatalf("kafka-consumer-groups --describe: %d rows, want %d:\n%s", len(rows), parts, out)
	}
	for _, r := range rows {
		// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
		p, _ := strconv.Atoi(r[2])
		if r[1] != topic || r[3] != r[4] || r[4] != strconv.FormatInt(end(p), 10) || r[5] != "0" {
			t.Errorf("kafka-consumer-groups --describe: %q; want offset and log end offset %d, lag 0", r, end(p))
		}
	}
	out = b.toolOK(t, kafkaConsumerGroups, "--describe", "--group", "ops-console", "--state")
	if rows := tableRows(out, "ops-console"); len(rows) != 1 || len(rows[0]) != 6 || rows[0][4] != "Empty" || rows[0][5] != "0" {
		t.Errorf("kafka-consumer-groups --describe --state: want Empty with no member:\n%s", out)
	}

	// Resets: every partition to its start, then p0 to offset 1 and p1
	// shifted by 2; a dry run to the ends changes nothing.
	out = b.toolOK(t, kafkaConsumerGroups, "--reset-offsets", "--group", "ops-console", "--topic", topic, "--to-earliest", "--execute")
	wantResets(t, "--to-earliest", out, map[int]int64{0: 0, 1: 0, 2: 0, 3: 0, 4: 0})
	out = b.toolOK(t, kafkaConsumerGroups, "--reset-offsets", "--group", "ops-console", "--topic", topic+":0", "--to-offset", "1", "--execute")
	wantResets(t, "--to-offset 1", out, map[int]int64{0: 1})
	out = b.toolOK(t, kafkaConsumerGroups, "--reset-offsets", "--group", "ops-console", "--topic", topic+":1", "--shift-by", "2", "--execute")
	wantResets(t, "--shift-by 2", out, map[int]int64{1: 2})
	out = b.toolOK(t, kafkaConsumerGroups, "--reset-offsets", "--group", "ops-console", "--all-topics", "--to-latest", "--dry-run")
	wantResets(t, "--to-latest --dry-run", out, map[int]int64{0: end(0), 1: end(1), 2: end(2), 3: end(3), 4: end(4)})
	out = b.toolOK(t, kafkaConsumerGroups, "--delete-offsets", "--group", "ops-console", "--topic", topic+":2")
	wantContains(t, "kafka-consumer-groups --delete-offsets", out, "Request succeeded for deleting offsets from group ops-console.")
	if rows := tableRows(out, topic); len(rows) != 1 || rows[0][1] != "2" || rows[0][2] != "Successful" {
		t.Errorf("kafka-consumer-groups --delete-offsets: want partition 2 Successful:\n%s", out)
	}
	committed, err := adm.FetchOffsets(ctx, "ops-console")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 1, 1: 2, 2: -1, 3: 0, 4: 0} {
		o, ok := committed.Lookup(topic, p)
		if at := o.At; !ok {
			at = -1
			if want != -1 {
				t.Errorf("partition %d: no committed offset after the resets, want %d", p, want)
			}
		} else if at != want {
			t.Errorf("partition %d: committed %d after the resets, want %d", p, at, want)
		}
	}

	// The live member leaves (SIGTERM: the console consumer closes),
	// and both groups go.
	live.stop(t)
	out = b.toolOK(t, kafkaConsumerGroups, "--delete", "--group", "ops-console", "--group", "ops-live")
	if !strings.Contains(out, "Deletion of requested consumer groups ('ops-console', 'ops-live') was successful.") &&
		!strings.Contains(out, "Deletion of requested consumer groups ('ops-live', 'ops-console') was successful.") {
		t.Errorf("kafka-consumer-groups --delete of both groups:\n%s", out)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil || len(groups) != 0 {
		t.Errorf("groups left after kafka-consumer-groups --delete: %v (%v)", groups.Groups(), err)
	}
}

// tableRows returns the fields of the lines of a tool's table whose first
// field is first (a group's rows, say).
func tableRows(out, first string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			rows = append(rows, f)
		}
	}
	return rows
}

// wantResets checks the NEW-OFFSET column of kafka-consumer-groups
// --reset-offsets (GROUP TOPIC PARTITION NEW-OFFSET): exactly the
// partitions in want, at their offsets.
func wantResets(t *testing.T, what, out string, want map[int]int64) {
	t.Helper()
	rows := tableRows(out, "ops-console")
	got := map[int]int64{}
	for _, r := range rows {
		if len(r) != 4 {
			continue
		}
		p, _ := strconv.Atoi(r[2])
		o, _ := strconv.ParseInt(r[3], 10, 64)
		got[p] = o
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kafka-consumer-groups --reset-offsets %s: new offsets %v, want %v:\n%s", what, got, want, out)
	}
}
