package pkgbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// testVersion marks the packages this test installs: a ringlog package
// of this version found installed is a leftover of a run that was killed
// before its cleanup, and is purged; any other version is an operator's,
// and the test refuses to replace it.
const testVersion = "0.0.0~pkgtest"

// TestDebInstallServeRemove builds the packages as scripts/package.sh
// does, installs the .deb with dpkg, checks what it laid out (user, data
// directory, conffile), verifies the unit with systemd-analyze, runs the
// installed binary as the unit would (its ExecStart, as the ringlog user,
// with the packaged config; only the ports and the data directory, a
// directory of its own under /var/lib/ringlog, overridden), produces and
// consumes with kcat, reloads with the unit's ExecReload, stops it with
// SIGTERM, then removes and purges the package: the binary goes, the data
// and the user stay.
func TestDebInstallServeRemove(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("dpkg -i needs root (the suite runs as root here and in CI)")
	}
	for _, tool := range []string{"dpkg", "dpkg-query", "kcat", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (scripts/test.sh installs it)", tool)
		}
	}
	// The package is the machine's: one run at a time, across processes
	// (other worktrees, a suite and a single run). Released last.
	t.Cleanup(lockMachine(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	switch status, version := dpkgStatus(t); {
	case status == "":
	case version == testVersion:
		t.Logf("purging a ringlog %s left by an earlier run (%s)", version, status)
		dpkg(t, ctx, "--purge", "ringlog")
	default:
		t.Fatalf("a ringlog package %s is on this machine (%s): the test would replace it", version, status)
	}
	_, err := user.Lookup(User)
	userBefore := err == nil
	_, err = os.Stat(DataDir)
	dataBefore := err == nil

	paths, err := Build(Options{Binary: testkit.Binary(t), Version: testVersion, Arch: runtime.GOARCH, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var deb string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.Size() < 1<<20 {
			t.Fatalf("package %s: %v (%d bytes; the binary alone is larger)", p, err, st.Size())
		}
		if strings.HasSuffix(p, ".deb") {
			deb = p
		}
	}
	if len(paths) != len(Formats) || deb == "" {
		t.Fatalf("packages %q, want one per format %q", paths, Formats)
	}

	dataSub := filepath.Join(DataDir, fmt.Sprintf("pkgtest-%d", os.Getpid()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if status, _ := dpkgStatus(t); status != "" {
			dpkg(t, ctx, "--purge", "ringlog")
		}
		os.RemoveAll(dataSub)
		if !dataBefore {
			os.Remove(DataDir)
		}
		if !userBefore {
			if out, err := exec.Command("userdel", User).CombinedOutput(); err != nil {
				t.Errorf("userdel %s: %v %s", User, err, out)
			}
			exec.Command("groupdel", User).Run() // gone with the user when it was its only member
		}
	})

	dpkg(t, ctx, "-i", deb)
	if st, err := os.Stat(BinaryPath); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s after dpkg -i: %v", BinaryPath, err)
	}
	if out := query(t, "${Conffiles}"); !strings.Contains(out, ConfigPath) {
		t.Fatalf("conffiles %q do not hold %s", out, ConfigPath)
	}
	u, err := user.Lookup(User)
	if err != nil {
		t.Fatalf("the postinstall script made no %s user: %v", User, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if !dataBefore {
		st, err := os.Stat(DataDir)
		if err != nil {
			t.Fatal(err)
		}
		owner := st.Sys().(*syscall.Stat_t)
		if owner.Uid != uint32(uid) || owner.Gid != uint32(gid) || st.Mode().Perm() != 0o750 || !st.IsDir() {
			t.Fatalf("%s: %v owned by %d:%d, want a directory 0750 owned by %s (%d:%d)", DataDir, st.Mode(), owner.Uid, owner.Gid, User, uid, gid)
		}
	}

	// systemd-analyze verify reads the unit offline (no systemd runs
	// here) and checks, among the rest, that its commands exist.
	if out, err := exec.CommandContext(ctx, "systemd-analyze", "verify", UnitDebPath).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", UnitDebPath, err, out)
	}
	unit, err := os.ReadFile(UnitDebPath)
	if err != nil {
		t.Fatal(err)
	}
	execStart, execReload := unitLine(t, unit, "ExecStart"), unitLine(t, unit, "ExecReload")
	if execStart[0] != BinaryPath || !slices.Contains(execStart, ConfigPath) {
		t.Fatalf("ExecStart %q: want %s with -config %s", execStart, BinaryPath, ConfigPath)
	}

	// The installed broker, as the unit starts it; -listen, -admin and
	// -data-dir come after the unit's flags and win.
	args := append(execStart[1:], "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-data-dir", dataSub)
	broker := exec.Command(execStart[0], args...)
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	broker.SysProcAttr = cred
	var log testkit.Buffer
	broker.Stdout, broker.Stderr = &log, &log
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- broker.Wait() }()
	t.Cleanup(func() {
		broker.Process.Kill()
		<-exited
	})
	addr := logValue(t, &log, exited, "ringlog started", "listen")
	admin := logValue(t, &log, exited, "admin HTTP", "addr")

	kcat := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %q: %v\n%s%s\nbroker:\n%s", args, err, out.String(), errb.String(), log.String())
		}
		return out.String()
	}
	kcat("one\ntwo\nthree\n", "-P", "-t", "pkg")
	if got := strings.Fields(kcat("", "-C", "-t", "pkg", "-o", "beginning", "-e", "-q")); strings.Join(got, " ") != "one two three" {
		t.Fatalf("consumed %q, want one two three", got)
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}

	// systemctl reload: the unit's ExecReload, $MAINPID the broker's, run
	// as the unit's user as systemd runs it. The broker reloads and serves on.
	reload := exec.CommandContext(ctx, execReload[0], execReload[1:]...)
	for i, a := range reload.Args {
		reload.Args[i] = strings.ReplaceAll(a, "$MAINPID", strconv.Itoa(broker.Process.Pid))
	}
	reload.SysProcAttr = cred
	if out, err := reload.CombinedOutput(); err != nil {
		t.Fatalf("ExecReload %q: %v %s", reload.Args, err, out)
	}
	logValue(t, &log, exited, "SIGHUP: TLS files reloaded", "keystores")
	kcat("four\n", "-P", "-t", "pkg")
	if got := strings.Fields(kcat("", "-C", "-t", "pkg", "-o", "beginning", "-e", "-q")); len(got) != 4 {
		t.Fatalf("consumed %q after the reload, want four records", got)
	}

	// systemctl stop sends SIGTERM (the unit's KillSignal, by default).
	broker.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err // for the cleanup's wait
		if err != nil || !strings.Contains(log.String(), "stopped cleanly") {
			t.Fatalf("the broker after SIGTERM: %v\n%s", err, log.String())
		}
	case <-ctx.Done():
		t.Fatalf("the broker did not stop after SIGTERM:\n%s", log.String())
	}

	dpkg(t, ctx, "-r", "ringlog")
	for _, gone := range []string{BinaryPath, UnitDebPath} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after dpkg -r: %v, want it gone", gone, err)
		}
	}
	if _, err := os.Stat(ConfigPath); err != nil {
		t.Errorf("%s after dpkg -r: %v, want it kept until purge", ConfigPath, err)
	}
	checkData := func(when string) {
		t.Helper()
		logs, _ := filepath.Glob(filepath.Join(dataSub, "pkg-0", "*.log"))
		if len(logs) == 0 || testkit.LogBytes(t, filepath.Join(dataSub, "pkg-0")) == 0 {
			t.Fatalf("%s: no log left in %s (%q)", when, dataSub, logs)
		}
		if _, err := user.Lookup(User); err != nil {
			t.Fatalf("%s: the %s user is gone: %v", when, User, err)
		}
	}
	checkData("after dpkg -r")
	dpkg(t, ctx, "--purge", "ringlog")
	if _, err := os.Stat(ConfigPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after dpkg --purge: %v, want it gone", ConfigPath, err)
	}
	checkData("after dpkg --purge")
}

// lockMachine takes an exclusive lock shared by every process on the
// machine and returns its release.
func lockMachine(t *testing.T) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "ringlog-package-test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// dpkg runs dpkg with args, again while another dpkg (an apt-get of the
// suite's tools) holds its lock.
func dpkg(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	for {
		cmd := exec.CommandContext(ctx, "dpkg", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		if !bytes.Contains(out, []byte("lock")) || ctx.Err() != nil {
			t.Fatalf("dpkg %q: %v\n%s", args, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dpkgStatus is the ringlog package's status and version; "" when dpkg
// knows none, or only as not installed.
func dpkgStatus(t *testing.T) (status, version string) {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}\t${Version}", "ringlog").Output()
	if err != nil {
		return "", "" // no package matching
	}
	status, version, _ = strings.Cut(string(out), "\t")
	if strings.HasSuffix(status, " not-installed") {
		return "", ""
	}
	return status, version
}

func query(t *testing.T, format string) string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f", format, "ringlog").CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-query %s: %v %s", format, err, out)
	}
	return string(out)
}

// unitLine is the command of a unit's key (ExecStart=...), split into
// words (the unit quotes nothing).
func unitLine(t *testing.T, unit []byte, key string) []string {
	t.Helper()
	for line := range strings.Lines(string(unit)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return f
			}
		}
	}
	t.Fatalf("no %s= in the unit:\n%s", key, unit)
	return nil
}

// logValue waits for a log line holding msg and returns its key's value
// (slog's text format: key=value).
func logValue(t *testing.T, log *testkit.Buffer, exited chan error, msg, key string) string {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(msg) + `"?.*\b` + regexp.QuoteMeta(key) + `=(\S+)`)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the broker exited (%v) before logging %q:\n%s", err, msg, log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no %q with %s= in the broker's log:\n%s", msg, key, log.String())
	return ""
}
