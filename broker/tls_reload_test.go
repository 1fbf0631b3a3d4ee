package broker

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// TestReloadTLS: ReloadTLS serves a keystore file replaced with its old
// modification time, which the timed reload does not see; a file that
// no longer loads is reported, by its path, and the last good certificate
// keeps serving.
func TestReloadTLS(t *testing.T) {
	ca := testkit.NewCA(t, "ringlog test CA")
	first, second := ca.Issue(pkix.Name{CommonName: "first"}), ca.Issue(pkix.Name{CommonName: "second"})
	keystore := filepath.Join(t.TempDir(), "keystore.pem")
	write := func(b []byte, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(keystore, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(keystore, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	write(first.Keystore(), old)
	cfg, err := TLSConfig(TLSSettings{"ssl.keystore.location": keystore}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		cn, err := handshake(t, cfg, ca.ClientTLS(nil))
		if err != nil {
			t.Fatal(err)
		}
		return cn
	}
	if cn := served(); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	write(second.Keystore(), old)
	time.Sleep(reloadCheckInterval + 10*time.Millisecond)
	if cn := served(); cn != "first" {
		t.Fatalf("served %q before ReloadTLS, want first (the file's time did not change)", cn)
	}
	// Other tests' keystores may be alive in this process, their files
	// gone with their directories: only this one's errors count here.
	mine := func(err error) bool { return err != nil && strings.Contains(err.Error(), keystore) }
	n, err := ReloadTLS()
	if n < 1 || mine(err) {
		t.Fatalf("ReloadTLS: %d keystores, %v", n, err)
	}
	if cn := served(); cn != "second" {
		t.Fatalf("served %q after ReloadTLS, want second", cn)
	}

	write([]byte("not PEM"), old)
	if _, err := ReloadTLS(); !mine(err) {
		t.Fatalf("ReloadTLS of a keystore that is not PEM: %v, want an error naming %s", err, keystore)
	}
	if cn := served(); cn != "second" {
		t.Fatalf("served %q after a failed reload, want the last good, second", cn)
	}
}
