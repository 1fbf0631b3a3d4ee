package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchMetadataReadme: `ringlog bench metadata -readme` writes its
// table between the markers, keeps the rest of the file, and refuses a
// file without them.
func TestBenchMetadataReadme(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	before, after := "# x\n\nintro\n\n", "\n## Layout\n"
	if err := os.WriteFile(readme, []byte(before+metadataBegin+"\nold table\n"+metadataEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	args := []string{"-brokers", "5", "-partitions", "200", "-partitions-per-topic", "20", "-failed-leads", "40", "-changes", "10", "-readme", readme}
	if err := benchMetadata(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, before+metadataBegin+"\n") || !strings.HasSuffix(s, metadataEnd+after) || strings.Contains(s, "old table") {
		t.Fatalf("README after the run:\n%s", s)
	}
	for _, want := range []string{"5 brokers and 200 partitions", "new leaders for its 40 partitions", "| Apply one change (mean) |", out.String()} {
		if !strings.Contains(s, want) {
			t.Errorf("README lacks %q:\n%s", want, s)
		}
	}
	if err := os.WriteFile(readme, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := benchMetadata(args, io.Discard, io.Discard); err == nil {
		t.Fatal("a README without the markers was accepted")
	}
}
