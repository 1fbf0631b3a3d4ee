package kafkaref

import (
	"testing"
)

// StartT starts a cluster for a test, in a folder of the test's, and stops
// it when the test ends. A cluster that cannot start (no Java or Maven, no
// jars) fails the test with the reason: nothing is skipped.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}
