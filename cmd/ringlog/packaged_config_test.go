package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPackagedServerProperties: the server.properties the packages
// install (internal/pkgbuild) loads, and so does every example it
// comments out, uncommented; the ones that need more than the file
// holds (a quorum of other nodes, a TLS listener) are left commented.
// The install test starts the binary on the file as shipped; this one
// keeps the commented keys from drifting from what config.go reads.
func TestPackagedServerProperties(t *testing.T) {
	b, err := os.ReadFile("../../internal/pkgbuild/files/server.properties")
	if err != nil {
		t.Fatal(err)
	}
	shipped := string(b)
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader(shipped)); err != nil {
		t.Fatalf("as shipped: %v", err)
	}
	if s.DataDir != "/var/lib/ringlog" || s.Listen != "127.0.0.1:9092" {
		t.Fatalf("as shipped: data dir %q, listener %q; want /var/lib/ringlog and 127.0.0.1:9092", s.DataDir, s.Listen)
	}
	example := regexp.MustCompile(`(?m)^#([a-z][a-z.]*)=(.*)$`)
	uncommented, n := shipped, 0
	for _, m := range example.FindAllStringSubmatch(shipped, -1) {
		switch m[1] {
		case "controller.quorum.voters", "listener.security.protocol.map":
			continue
		}
		uncommented = strings.Replace(uncommented, m[0], m[1]+"="+m[2], 1)
		n++
	}
	if n < 9 {
		t.Fatalf("%d commented examples found, want the nine the file has", n)
	}
	s = defaultSettings()
	if err := s.loadProperties(strings.NewReader(uncommented)); err != nil {
		t.Fatalf("with its %d examples uncommented: %v", n, err)
	}
}
