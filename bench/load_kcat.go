package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kcat is librdkafka's command-line client: a second Kafka client, written
// independently of franz-go (C, its own batching and codecs), for the
// produce and consume throughput rows. It runs with librdkafka's defaults
// but for acks and compression.
type kcat struct {
	path    string
	version string
	workDir string
	vals    *values

	mu    sync.Mutex
	files map[string]string // input files by size and count, written once
}

// kcatSettings is the client configuration as the report states it.
const kcatSettings = "librdkafka defaults (linger.ms 5, batch.size 1000000, sticky partitioning); " +
	"one kcat process per producer, reading its records from a file, one record per line; " +
	"a single kcat process consumes every partition (kcat -C takes one partition or all of them); " +
	"times include process start and exit"

// findKcat returns the kcat client, or why there is none.
func findKcat(workDir string, vals *values) (*kcat, string) {
	p, err := exec.LookPath("kcat")
	if err != nil {
		return nil, "kcat is not installed (apt-get install kcat; scripts/bench.sh installs it)"
	}
	k := &kcat{path: p, workDir: workDir, vals: vals, files: map[string]string{}}
	out, _ := exec.Command(p, "-V").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Version ") {
			// "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
			f := strings.Fields(l)
			k.version = "kcat " + f[1]
			if i := strings.Index(l, "librdkafka "); i >= 0 {
				k.version += ", librdkafka " + strings.Fields(l[i+len("librdkafka "):])[0]
			}
		}
	}
	if k.version == "" {
		k.version = "kcat (version unknown)"
	}
	return k, ""
}

// input returns a file of n records of size bytes, one per line.
func (k *kcat) input(size int, n int64) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := fmt.Sprintf("%d-%d", size, n)
	if f, ok := k.files[key]; ok {
		return f, nil
	}
	path := filepath.Join(k.workDir, "kcat-input-"+key+".txt")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		w.Write(k.vals.line(i, size))
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	k.files[key] = path
	return path, nil
}

// removeInputs deletes the input files.
func (k *kcat) removeInputs() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, f := range k.files {
		os.Remove(f)
		delete(k.files, key)
	}
}

func kcatAcks(acks int) []string {
	switch acks {
	case 0:
		return []string{"-X", "acks=0"}
	case 1:
		return []string{"-X", "acks=1"}
	}
	return []string{"-X", "acks=all", "-X", "enable.idempotence=true"}
}

// produce runs s.producers kcat processes at once, each sending its share
// of the records from a file, to the peer conn reaches (-b and any
// security settings). kcat cannot stop on a clock, so the run is
// bounded by records (the caller sizes them to the run's duration) and by
// ctx, which kills the processes.
func (k *kcat) produce(ctx context.Context, conn []string, s produceSpec) (loadResult, error) {
	per := max(1, s.records/int64(s.producers))
	// Files hold a power of two of lines, so that runs sized a little
	// differently share one file; -c stops kcat after its share.
	lines := int64(1)
	for lines < per {
		lines *= 2
	}
	file, err := k.input(s.size, lines)
	if err != nil {
		return loadResult{}, fmt.Errorf("kcat input: %w", err)
	}
	args := append([]string{"-P", "-t", s.topic, "-q", "-c", strconv.FormatInt(per, 10),
		"-X", "compression.codec=" + s.compression}, kcatAcks(s.acks)...)
	args = append(args, conn...)
	args = append(args, "-l", file)
	if s.sending != nil {
		s.sending()
	}
	start := time.Now()
	var errs firstErr
	var wg sync.WaitGroup
	for range s.producers {
		wg.Go(func() {
			out, err := kcatRun(ctx, k.path, args)
			if err != nil {
				errs.add(err)
			} else if bad := kcatProblems(out); bad != "" {
				errs.add(errors.New("kcat: " + bad))
			}
		})
	}
	wg.Wait()
	n := per * int64(s.producers)
	return loadResult{records: n, bytes: n * int64(s.size), elapsed: time.Since(start)}, errs.get()
}

// consume reads want records from every partition with one kcat process.
// conn are the arguments that reach the peer (-b and any security
// settings).
func (k *kcat) consume(ctx context.Context, conn []string, s consumeSpec) (loadResult, error) {
	args := append([]string{"-C", "-t", s.topic, "-o", "beginning", "-e", "-q",
		"-c", strconv.FormatInt(s.want, 10), "-f", "%o\n",
		// librdkafka learns that a partition has no more data from a fetch
		// that long-polls for fetch.wait.max.ms; -c ends the run first.
		"-X", "fetch.wait.max.ms=100"}, conn...)
	start := time.Now()
	cmd := exec.CommandContext(ctx, k.path, args...)
	setParentDeathSignal(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return loadResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return loadResult{}, err
	}
	var lines int64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines++
	}
	err = cmd.Wait()
	elapsed := time.Since(start)
	res := loadResult{records: lines, bytes: lines * int64(s.size), elapsed: elapsed}
	if err != nil {
		return res, fmt.Errorf("kcat -C: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if bad := kcatProblems(stderr.Bytes()); bad != "" {
		return res, errors.New("kcat: " + bad)
	}
	if lines < s.want {
		return res, fmt.Errorf("kcat consumed %d of %d records", lines, s.want)
	}
	return res, nil
}

func kcatRun(ctx context.Context, path string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	setParentDeathSignal(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kcat: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// kcatProblems returns the first line of kcat's output that reports a
// failure (kcat may exit 0 after failed deliveries), or "".
func kcatProblems(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "failed") || strings.Contains(l, "Delivery failed") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
