package kafka_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
)

// jbodDirs is a broker configuration with three log directories (the
// first, the broker's own, and two more).
func jbodDirs(t testing.TB, root string) (dirs []string, opts brokerOpts) {
	for _, n := range []string{"d0", "d1", "d2"} {
		dirs = append(dirs, filepath.Join(root, n))
	}
	return dirs, brokerOpts{Dir: dirs[0], Config: func(c *broker.Config) { c.LogDirs = dirs[1:] }}
}

// TestJBODDescribeLogDirs: a broker with three log.dirs places the nine
// partitions of a new topic three in each (fewest partitions first, every
// directory holding the same count of __consumer_offsets' before), and
// DescribeLogDirs lists every directory with its own partitions and its
// volume's space; DescribeConfigs reports all three in log.dirs.
func TestJBODDescribeLogDirs(t *testing.T) {
	dirs, opts := jbodDirs(t, t.TempDir())
	b := startBroker(t, opts)
	createTopic(t, b, "spread", 9, nil)
	adm, ctx := b.admin(), adminCtx(t)
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	described := all[b.nodeID]
	if len(all) != 1 || len(described) != 3 {
		t.Fatalf("log dirs: %+v", all)
	}
	totals := map[string]int{}
	for _, dir := range dirs {
		abs, _ := filepath.Abs(dir)
		d, ok := described[abs]
		if !ok || d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 {
			t.Fatalf("dir %s: %+v (ok %v)", abs, d, ok)
		}
		if n := len(d.Topics["spread"]); n != 3 {
			t.Errorf("%s holds %d partitions of spread, want 3: %v", abs, n, d.Topics["spread"])
		}
		for topic, ps := range d.Topics {
			totals[abs] += len(ps)
			for p := range ps {
				if _, err := filepathStat(filepath.Join(abs, topic+"-"+itoa32(p))); err != nil {
					t.Errorf("DescribeLogDirs says %s-%d is in %s: %v", topic, p, abs, err)
				}
			}
		}
	}
	lo, hi := 1<<30, 0
	for _, n := range totals {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Errorf("partitions per directory %v: not even", totals)
	}

	rc, err := adm.DescribeBrokerConfigs(ctx, b.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Key == "log.dirs" && c.Value != nil {
				got = *c.Value
			}
		}
	}
	if n := len(strings.Split(got, ",")); n != 3 {
		t.Errorf("log.dirs %q, want the three directories", got)
	}

	// The raw answer at v0 too: three directories.
	c := dialAdmin(t, b.Addr)
	resp := c.do(0, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 3 {
		t.Fatalf("v0: %+v", resp)
	}
}

func filepathStat(path string) (os.FileInfo, error) { return os.Stat(path) }

func itoa32(n int32) string { return strconv.Itoa(int(n)) }
