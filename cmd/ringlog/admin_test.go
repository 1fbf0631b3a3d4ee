package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"ringlog/internal/testkit"
)

// TestAdminSubcommand: `ringlog admin` runs the admin command from the
// binary against a broker the binary serves: exit status 0 and a table on
// success (partition reassign --list: nothing in progress); 1 with the
// broker's error code name on stderr otherwise.
func TestAdminSubcommand(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	addr := testkit.FreeAddr(t)
	p := start(t, "-listen", addr, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")
	admin := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(testkit.Binary(t), append([]string{"admin"}, append(args, "-b", addr)...)...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := admin("topic", "create", "via-binary", "-p", "2"); code != 0 || !strings.Contains(out, "via-binary") || !strings.Contains(out, "created") {
		t.Fatalf("topic create: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := admin("topic", "create", "via-binary"); code != 1 || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second topic create: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := admin("cluster", "quorum"); code != 0 || !strings.Contains(out, "Leader: 0") {
		t.Fatalf("cluster quorum: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := admin("partition", "reassign", "--list"); code != 0 || !strings.Contains(out, "TOPIC  PARTITION  REPLICAS") {
		t.Fatalf("partition reassign --list: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := admin("topic", "list", "--json"); code != 0 || !strings.Contains(out, `"topic": "via-binary"`) {
		t.Fatalf("topic list --json: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := admin("no-such", "verb"); code != 1 || !strings.Contains(errOut, "usage: ringlog admin") {
		t.Fatalf("an unknown command: exit %d\n%s", code, errOut)
	}
	p.stop(t)
}
