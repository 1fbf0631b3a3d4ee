package controller

import (
	"encoding/base64"
	"testing"
)

// TestClusterIDFromVoters: the id depends on the voters, not on their
// order, and has Kafka's Uuid form.
func TestClusterIDFromVoters(t *testing.T) {
	a, err := ParseVoters("1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseVoters("3@127.0.0.1:9097,1@127.0.0.1:9093,2@127.0.0.1:9095")
	c, _ := ParseVoters("1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9099")
	d, _ := ParseVoters("1@127.0.0.1:9093,2@127.0.0.1:9095")
	id := ClusterIDFromVoters(a)
	if got := ClusterIDFromVoters(b); got != id {
		t.Fatalf("order changes the id: %s, %s", id, got)
	}
	for _, other := range [][]Voter{c, d} {
		if ClusterIDFromVoters(other) == id {
			t.Fatalf("voters %v share the id of %v", other, a)
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(id)
	if err != nil || len(raw) != 16 || len(id) != 22 || id[0] == '-' {
		t.Fatalf("id %q is not a Kafka Uuid (%v)", id, err)
	}
	// Pinned: a change of the derivation would make every upgraded broker
	// refuse its data directory.
	if pinned := "O_OlZ5CMOjROrmx4Klc7lQ"; id != pinned {
		t.Fatalf("derived id %s, pinned %s", id, pinned)
	}
}
