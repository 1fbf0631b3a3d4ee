package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// TestSIGHUPReloadsCertificates: SIGHUP (the systemd unit's ExecReload)
// makes the binary serve a keystore file replaced with its old
// modification time, which the timed reload cannot see, and the broker
// keeps running (Go's default for SIGHUP is to exit).
func TestSIGHUPReloadsCertificates(t *testing.T) {
	t.Parallel()
	ca := testkit.NewCA(t, "ringlog test CA")
	first, second := ca.Issue(pkix.Name{CommonName: "first"}), ca.Issue(pkix.Name{CommonName: "second"})
	keystore := filepath.Join(t.TempDir(), "keystore.pem")
	copyFile(t, first.File, keystore)
	inter, client := testkit.FreeAddr(t), testkit.FreeAddr(t)
	props := filepath.Join(t.TempDir(), "server.properties")
	conf := fmt.Sprintf("listeners=PLAINTEXT://%s,SSL://%s\nssl.keystore.type=PEM\nssl.keystore.location=%s\n", inter, client, keystore)
	if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "-config", props, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", client, ca.ClientTLS(nil))
		if err != nil {
			t.Fatalf("TLS handshake: %v\nbroker:\n%s", err, p.out.String())
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}

	// The second certificate replaces the first in place, with the first
	// one's modification time: the timed reload (a look a second) misses it.
	st, err := os.Stat(keystore)
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, second.File, keystore)
	if err := os.Chtimes(keystore, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := served(); got != "first" {
		t.Fatalf("served %q before SIGHUP, want first (the file's time did not change)", got)
	}

	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "SIGHUP: TLS files reloaded")
	if got := served(); got != "second" {
		t.Fatalf("served %q after SIGHUP, want second", got)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("the broker after SIGHUP: %v\n%s", err, p.out.String())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
