//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ringlog/internal/testkit"
)

// tuneLine is one item of tune's report.
type tuneLine struct{ found, want, status string }

var tuneLineRe = regexp.MustCompile(`(?m)^(\S+): found (.*); recommend (.*); ([a-zA-Z ]+?)(: .*)?$`)

func parseTune(t *testing.T, out string) map[string]tuneLine {
	t.Helper()
	items := map[string]tuneLine{}
	for _, m := range tuneLineRe.FindAllStringSubmatch(out, -1) {
		items[m[1]] = tuneLine{found: m[2], want: m[3], status: m[4]}
	}
	return items
}

// runTune runs the binary's tune subcommand and returns its output and
// exit code.
func runTune(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), append([]string{"tune"}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("ringlog tune: %v\n%s", err, out)
	return "", 0
}

func readProcSys(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// bracketed reads a sysfs choice file's current value ("[madvise]").
func bracketed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\[([^\]]+)\]`).FindStringSubmatch(string(b))
	if m == nil {
		return strings.TrimSpace(string(b))
	}
	return m[1]
}

// diskOf resolves the disk holding dir the plain way: st_dev, its sysfs
// node, up one level for a partition.
func diskOf(t *testing.T, dir string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	sys, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		t.Fatalf("%s: device %d:%d not in /sys/dev/block: %v", dir, unix.Major(st.Dev), unix.Minor(st.Dev), err)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys)
	}
	return filepath.Base(sys)
}

// TestTuneReportsThisHost runs `ringlog tune` (checks only) on this
// machine with a data directory on the disk (t.TempDir) and one on tmpfs
// (/dev/shm), and checks every item against values this test reads
// itself from /proc and /sys; nothing may change.
func TestTuneReportsThisHost(t *testing.T) {
	disk := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "ringlog-tune-")
	if err != nil {
		t.Fatalf("a tmpfs directory for the test: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	// Partitions the report counts: 3 partitions, one with two segments.
	for p, segs := range []int{1, 2, 1} {
		pd := filepath.Join(disk, fmt.Sprintf("orders-%d", p))
		if err := os.Mkdir(pd, 0o755); err != nil {
			t.Fatal(err)
		}
		for s := range segs {
			for _, suf := range []string{".log", ".index", ".timeindex"} {
				if err := os.WriteFile(filepath.Join(pd, fmt.Sprintf("%020d%s", s*100, suf)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	sysctls := []string{"vm.max_map_count", "vm.swappiness", "vm.dirty_background_ratio", "vm.dirty_ratio", "net.core.somaxconn", "kernel.io_uring_disabled"}
	if readProcSys(t, "vm.dirty_bytes") != "0" || readProcSys(t, "vm.dirty_background_bytes") != "0" {
		sysctls = append(sysctls[:2], "vm.dirty_background_bytes", "vm.dirty_bytes", sysctls[4], sysctls[5])
	}
	before := map[string]string{}
	for _, s := range sysctls {
		before[s] = readProcSys(t, s)
	}

	out, code := runTune(t, "-data", disk+","+shm, "-connections", "500")
	t.Logf("ringlog tune:\n%s", out)
	if code != 0 {
		t.Fatalf("exit code %d without -apply", code)
	}
	items := parseTune(t, out)

	for _, s := range sysctls {
		it, ok := items[s]
		if !ok {
			t.Errorf("no %s in the report", s)
			continue
		}
		if it.found != before[s] {
			t.Errorf("%s: reported %q, /proc/sys has %q", s, it.found, before[s])
		}
		if got := readProcSys(t, s); got != before[s] {
			t.Errorf("%s changed from %s to %s without -apply", s, before[s], got)
		}
	}
	for key, file := range map[string]string{"thp.enabled": "enabled", "thp.defrag": "defrag"} {
		want := bracketed(t, "/sys/kernel/mm/transparent_hugepage/"+file)
		if it, ok := items[key]; !ok || it.found != want {
			t.Errorf("%s: reported %+v, sysfs has %q", key, it, want)
		}
	}
	if it := items["vm.max_map_count"]; !strings.HasPrefix(it.want, "at least ") {
		t.Errorf("vm.max_map_count recommends %q", it.want)
	}
	if !strings.Contains(out, "4 segments counted") || !strings.Contains(out, "3 partitions holding 4 segments") {
		t.Errorf("the report does not count the data directory's 3 partitions and 4 segments")
	}

	// Limits: the child's hard limits are this process's (Go raises the
	// soft open-files limit to the hard one at start; memlock it leaves).
	var nofile, memlock unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &memlock); err != nil {
		t.Fatal(err)
	}
	if it := items["nofile"]; !strings.Contains(it.found, fmt.Sprintf("this shell: soft %s, hard %s", rlimitText(nofile.Max), rlimitText(nofile.Max))) {
		t.Errorf("nofile: reported %q, the process has hard %d", it.found, nofile.Max)
	}
	if it := items["memlock"]; !strings.Contains(it.found, fmt.Sprintf("this shell: soft %s, hard %s", bytesText(memlock.Cur), bytesText(memlock.Max))) {
		t.Errorf("memlock: reported %q, the process has %d/%d", it.found, memlock.Cur, memlock.Max)
	}

	// The disk's scheduler, and tmpfs said to have none.
	d := diskOf(t, disk)
	if it, ok := items["scheduler:"+d]; !ok || it.found != bracketed(t, "/sys/block/"+d+"/queue/scheduler") {
		t.Errorf("scheduler:%s: reported %+v, sysfs has %q", d, items["scheduler:"+d], bracketed(t, "/sys/block/"+d+"/queue/scheduler"))
	}
	if it := items["scheduler:"+shm]; it.status != string(statusUnknown) || !strings.Contains(out, "tmpfs on /dev/shm") {
		t.Errorf("scheduler:%s: reported %+v, want cannot tell (tmpfs)", shm, it)
	}

	// The file systems, by their magic numbers, and the measured writes:
	// ext4 and tmpfs have no non-blocking buffered write on this kernel,
	// so every write went to an io-wq worker.
	for dir, fs := range map[string]string{disk: "ext4", shm: "tmpfs"} {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		magic := map[string]int64{"ext4": unix.EXT4_SUPER_MAGIC, "tmpfs": unix.TMPFS_MAGIC}[fs]
		if int64(st.Type) != magic {
			t.Fatalf("%s is not on %s (statfs type %#x): the test expects this machine's layout", dir, fs, st.Type)
		}
		it, ok := items["fs:"+dir]
		if !ok || !strings.HasPrefix(it.found, fs+", buffered io_uring writes punted to io-wq (0 of 8 ") {
			t.Errorf("fs:%s: reported %+v, want %s with every write punted", dir, it, fs)
		}
	}
	if !strings.Contains(out, "nothing was changed") {
		t.Errorf("no word that nothing was changed")
	}
}

// TestTuneApplySetsSwappiness applies one harmless setting for real
// (vm.swappiness) and puts the original value back afterwards.
func TestTuneApplySetsSwappiness(t *testing.T) {
	const path = "/proc/sys/vm/swappiness"
	orig := readProcSys(t, "vm.swappiness")
	if err := os.WriteFile(path, []byte(orig), 0); err != nil {
		t.Fatalf("%s is not writable here (%v): this test needs root and a writable /proc/sys (not a container's)", path, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, []byte(orig), 0); err != nil {
			t.Errorf("restoring vm.swappiness=%s: %v", orig, err)
		}
	})
	if n, _ := strconv.Atoi(orig); n <= 1 {
		// Already as recommended: make it differ, so that -apply has
		// something to do.
		if err := os.WriteFile(path, []byte("30"), 0); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runTune(t, "-apply", "-only", "vm.swappiness")
	t.Logf("ringlog tune -apply -only vm.swappiness:\n%s", out)
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if it := parseTune(t, out)["vm.swappiness"]; it.status != string(statusChanged) {
		t.Errorf("vm.swappiness reported %+v, want changed", it)
	}
	if got := readProcSys(t, "vm.swappiness"); got != "1" {
		t.Fatalf("vm.swappiness is %s after -apply, want 1", got)
	}
	if strings.Contains(out, "nofile") || strings.Contains(out, "vm.max_map_count") {
		t.Errorf("-only vm.swappiness reported other items")
	}
}

// TestTuneApplyFailsOnReadOnlyProcSys runs -apply where /proc/sys is
// read-only, as in a container (a mount namespace of its own with
// /proc/sys bound read-only): the failure is reported and the exit code
// is not zero.
func TestTuneApplyFailsOnReadOnlyProcSys(t *testing.T) {
	orig := readProcSys(t, "vm.swappiness")
	if orig == "1" {
		// Make it differ so there is something to apply.
		if err := os.WriteFile("/proc/sys/vm/swappiness", []byte("30"), 0); err != nil {
			t.Fatalf("/proc/sys/vm/swappiness is not writable here (%v): this test needs root", err)
		}
		t.Cleanup(func() { os.WriteFile("/proc/sys/vm/swappiness", []byte(orig), 0) })
	}
	was := readProcSys(t, "vm.swappiness")
	script := `mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec "$0" tune -apply -only vm.swappiness`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, testkit.Binary(t))
	out, err := cmd.CombinedOutput()
	t.Logf("ringlog tune -apply in a namespace with /proc/sys read-only:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want code 1", err)
	}
	if it := parseTune(t, string(out))["vm.swappiness"]; it.status != string(statusFailed) || !strings.Contains(string(out), "read-only") {
		t.Errorf("vm.swappiness reported %+v, want FAILED naming the read-only file system", it)
	}
	if got := readProcSys(t, "vm.swappiness"); got != was {
		t.Errorf("vm.swappiness changed from %s to %s", was, got)
	}
}

// TestTuneLimitsFiles: what -apply writes for the limits, a systemd
// drop-in or a limits.d file (in a temporary directory here, not /etc),
// replaces its own earlier lines and keeps the others.
func TestTuneLimitsFiles(t *testing.T) {
	for _, kind := range []string{"systemd", "pam"} {
		path := filepath.Join(t.TempDir(), kind+".conf")
		l := limitsTarget{o: tuneOptions{Limits: kind, User: "ringlog"}, path: path}
		for _, step := range []struct {
			res int
			v   uint64
		}{{unix.RLIMIT_NOFILE, 65536}, {unix.RLIMIT_MEMLOCK, 64 << 20}, {unix.RLIMIT_NOFILE, 131072}} {
			if err := l.set(step.res, step.v); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got := string(b)
		want := map[string][]string{
			"systemd": {"[Service]\n", "\nLimitNOFILE=131072\n", "\nLimitMEMLOCK=67108864\n"},
			"pam":     {"\nringlog soft nofile 131072\n", "\nringlog hard nofile 131072\n", "\nringlog soft memlock 65536\n", "\nringlog hard memlock 65536\n"},
		}[kind]
		for _, w := range want {
			if strings.Count(got, w) != 1 {
				t.Errorf("%s file has %q %d times, want once:\n%s", kind, w, strings.Count(got, w), got)
			}
		}
		if strings.Contains(got, "65536\n") && kind == "systemd" {
			t.Errorf("the systemd drop-in kept the replaced LimitNOFILE:\n%s", got)
		}
	}
}

// TestTuneSchedulerThroughLoop puts a data directory on an ext4 file
// system in a loop device whose image lives on this machine's disk: the
// scheduler checked is the disk's under the image, named through the
// loop device.
func TestTuneSchedulerThroughLoop(t *testing.T) {
	tmp := t.TempDir()
	img, mnt := filepath.Join(tmp, "fs.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", "truncate -s 32M "+img+" && mkfs.ext4 -q "+img).CombinedOutput(); err != nil {
		t.Fatalf("making an ext4 image (e2fsprogs): %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -o loop (this test needs root and a free loop device): %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	out, code := runTune(t, "-only", "scheduler", "-data", mnt)
	t.Logf("ringlog tune -only scheduler -data %s:\n%s", mnt, out)
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	d := diskOf(t, tmp)
	want := bracketed(t, "/sys/block/"+d+"/queue/scheduler")
	if it, ok := parseTune(t, out)["scheduler:"+d]; !ok || it.found != want {
		t.Errorf("scheduler:%s reported %+v, sysfs has %q", d, it, want)
	}
	if !regexp.MustCompile(`loop[0-9]+ is a loop device backed by ` + regexp.QuoteMeta(img)).MatchString(out) {
		t.Errorf("the report does not name the loop device and its image %s", img)
	}
}
