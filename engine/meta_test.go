package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"ringlog/internal/fsutil"
)

// Tests of meta.properties (the cluster id) and of where producer ids come
// from: the data directory's producer-ids file, or Config.ProducerIDBlock.

const (
	clusterA = "MkU3OEVBNTcwNTJENDM2Qg" // Kafka's own example id
	clusterB = "AAAAAAAAAAAAAAAAAAAAAA"
)

func openMeta(dir, clusterID string, hook func(floor int64) (int64, int64, error)) (*Core, error) {
	return OpenCore(Config{Dir: dir, Shards: 1, NodeID: 1, ClusterID: clusterID, ProducerIDBlock: hook})
}

// TestClusterIDRecordedAndChecked: a configured cluster id is recorded at
// first start and served; a directory of another cluster is refused with
// both ids named; an unconfigured restart keeps the recorded id.
func TestClusterIDRecordedAndChecked(t *testing.T) {
	dir := t.TempDir()
	e, err := openMeta(dir, clusterA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.ClusterID() != clusterA {
		t.Fatalf("cluster id %q", e.ClusterID())
	}
	e.Close()
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil || !strings.Contains(string(b), "cluster.id="+clusterA+"\n") {
		t.Fatalf("meta.properties %q, %v", b, err)
	}

	_, err = openMeta(dir, clusterB, nil)
	if !errors.Is(err, ErrInconsistentClusterID) || !strings.Contains(err.Error(), clusterA) || !strings.Contains(err.Error(), clusterB) {
		t.Fatalf("other cluster id: %v", err)
	}
	if b2, _ := os.ReadFile(filepath.Join(dir, metaFile)); string(b2) != string(b) {
		t.Fatal("a refused start rewrote meta.properties")
	}

	for _, id := range []string{"", clusterA} {
		e, err = openMeta(dir, id, nil)
		if err != nil {
			t.Fatalf("restart with cluster id %q: %v", id, err)
		}
		if e.ClusterID() != clusterA {
			t.Fatalf("restart with cluster id %q: serves %q", id, e.ClusterID())
		}
		e.Close()
	}
}

// TestClusterIDRandomWithoutConfig: a single broker without cluster.id
// records a random id of Kafka's form once and keeps it.
func TestClusterIDRandomWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	e, err := openMeta(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := e.ClusterID()
	e.Close()
	if !validClusterID(id) {
		t.Fatalf("random cluster id %q is not a Kafka Uuid", id)
	}
	e, err = openMeta(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.ClusterID() != id {
		t.Fatalf("cluster id %q after restart, was %q", e.ClusterID(), id)
	}
}

func TestClusterIDMalformedRefused(t *testing.T) {
	for _, id := range []string{"my-cluster", clusterA + "A", "MkU3OEVBNTcwNTJENDM2Qg=="} {
		if e, err := openMeta(t.TempDir(), id, nil); err == nil {
			e.Close()
			t.Errorf("cluster id %q accepted", id)
		}
	}
}

// TestProducerIDBlockHookUsed: with the hook, ids come from its blocks
// (a new block once one is used up), concurrent callers share one call,
// and nothing is written to the data directory.
func TestProducerIDBlockHookUsed(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var calls int
	next := int64(5000)
	var floors []int64
	hook := func(floor int64) (int64, int64, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		floors = append(floors, floor)
		start := max(next, floor)
		next += 3
		return start, start + 3, nil
	}
	e, err := openMeta(dir, clusterA, hook)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for range 7 {
		id, err := e.AllocateProducerID()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	want := []int64{5000, 5001, 5002, 5003, 5004, 5005, 5006}
	if !slices.Equal(got, want) || calls != 3 || !slices.Equal(floors, []int64{0, 5003, 5006}) {
		t.Fatalf("ids %v from %d calls with floors %v, want %v from 3 with floors [0 5003 5006]", got, calls, floors, want)
	}

	// Concurrent callers: every id once, one call per block.
	var wg sync.WaitGroup
	ids := make(chan int64, 60)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				id, err := e.AllocateProducerID()
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] || id < 5007 {
			t.Fatalf("id %d twice or from an old block", id)
		}
		seen[id] = true
	}
	if calls != 3+20 {
		t.Fatalf("%d hook calls for 67 ids in blocks of 3", calls)
	}
	e.Close()
	if _, err := os.Stat(filepath.Join(dir, producerIDFile)); !os.IsNotExist(err) {
		t.Fatalf("%s written with a ProducerIDBlock hook: %v", producerIDFile, err)
	}

	// A restart takes a new block: the rest of the old one is abandoned.
	e, err = openMeta(dir, clusterA, hook)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if id, err := e.AllocateProducerID(); err != nil || id != next-3 {
		t.Fatalf("after restart: %d, %v (want %d)", id, err, next-3)
	}
}

// TestProducerIDBlockHookErrors: a failed hook is ErrNoProducerIDBlock
// (wrapping its error) and is asked again on the next call; a block that
// does not grow is refused rather than handing an id out twice.
func TestProducerIDBlockHookErrors(t *testing.T) {
	errQuorum := errors.New("no quorum")
	blocks := []struct {
		start, end int64
		err        error
	}{{0, 0, errQuorum}, {10, 12, nil}, {11, 20, nil}, {30, 30, nil}, {40, 41, nil}}
	i := 0
	hook := func(int64) (int64, int64, error) {
		b := blocks[i]
		i++
		return b.start, b.end, b.err
	}
	e, err := openMeta(t.TempDir(), "", hook)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.AllocateProducerID(); !errors.Is(err, ErrNoProducerIDBlock) || !errors.Is(err, errQuorum) {
		t.Fatalf("failed hook: %v", err)
	}
	for _, want := range []int64{10, 11} {
		if id, err := e.AllocateProducerID(); err != nil || id != want {
			t.Fatalf("id %d, %v; want %d", id, err, want)
		}
	}
	// [11, 20) overlaps [10, 12); [30, 30) is empty.
	for range 2 {
		if id, err := e.AllocateProducerID(); !errors.Is(err, ErrNoProducerIDBlock) {
			t.Fatalf("bad block: id %d, %v", id, err)
		}
	}
	if id, err := e.AllocateProducerID(); err != nil || id != 40 {
		t.Fatalf("id %d, %v; want 40", id, err)
	}
}

// TestProducerIDFileIsTheFirstFloor: a directory whose broker handed out
// ids on its own (a producer-ids file) and now takes blocks from a quorum
// asks for its first block above what it used, so that no id is handed
// out twice across the change.
func TestProducerIDFileIsTheFirstFloor(t *testing.T) {
	dir := t.TempDir()
	e, err := openMeta(dir, clusterA, nil)
	if err != nil {
		t.Fatal(err)
	}
	used, err := e.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	var floor int64 = -1
	e, err = openMeta(dir, clusterA, func(f int64) (int64, int64, error) {
		floor = f
		return f, f + 10, nil // the quorum's counter was below f
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	id, err := e.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if floor < used+1 || id <= used {
		t.Fatalf("first block asked above %d and gave id %d after id %d was used without a quorum", floor, id, used)
	}
}

// TestProducerIDFileWithoutHook: a single broker keeps reserving blocks in
// its producer-ids file, and ids grow across restarts.
func TestProducerIDFileWithoutHook(t *testing.T) {
	dir := t.TempDir()
	e, err := openMeta(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.AllocateProducerID()
	if err != nil || first != 0 {
		t.Fatalf("first id %d, %v", first, err)
	}
	e.Close()
	if b, err := os.ReadFile(filepath.Join(dir, producerIDFile)); err != nil || string(b) != "1000\n" {
		t.Fatalf("%s: %q, %v", producerIDFile, b, err)
	}
	e, err = openMeta(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if id, err := e.AllocateProducerID(); err != nil || id != producerIDBlock {
		t.Fatalf("id after restart %d, %v", id, err)
	}
}

// TestDataDirectoryLocked: a second engine on a directory in use fails at
// once, before it reads or recovers anything, and the directory is free
// again after Close.
func TestDataDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	e, err := openMeta(dir, clusterA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e2, err := openMeta(dir, clusterA, nil); !errors.Is(err, fsutil.ErrDirLocked) {
		if e2 != nil {
			e2.Close()
		}
		t.Fatalf("second Open on a directory in use: %v, want ErrDirLocked", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = openMeta(dir, clusterA, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	e.Close()
	// A failed Open leaves the directory free too.
	if _, err := openMeta(dir, clusterB, nil); !errors.Is(err, ErrInconsistentClusterID) {
		t.Fatalf("Open with another cluster id: %v", err)
	}
	e, err = openMeta(dir, clusterA, nil)
	if err != nil {
		t.Fatalf("Open after a failed Open: %v", err)
	}
	e.Close()
}
