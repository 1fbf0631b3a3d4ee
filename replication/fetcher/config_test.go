package fetcher

import (
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{Addr: "x:1", ReplicaID: 3}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Slots != 4 || c.WaitMax != 500*time.Millisecond || c.ResponseBytesMax != 10<<20 ||
		c.PartitionBytesMax != 1<<20 || c.FetchVersionMax != 16 || c.FrameBytesMax != 100<<20 ||
		c.ClientID != "ringlog-replica-3" || c.Dial == nil {
		t.Errorf("defaults: %+v", c)
	}
	for _, bad := range []Config{
		{},
		{Addr: "x:1", Slots: SlotsMax + 1},
		{Addr: "x:1", Slots: -1},
		{Addr: "x:1", FetchVersionMax: 3},
		{Addr: "x:1", WaitMax: 1000 * time.Hour},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
