package controller

import "testing"

// TestMeasureScale builds a small cluster with MeasureScale and checks
// what its report claims: broker 1's leaderships all moved, the snapshot
// restored to the same image, a change is far smaller than the image.
func TestMeasureScale(t *testing.T) {
	cfg := ScaleConfig{Brokers: 10, Partitions: 2000, PartitionsPerTopic: 100, RF: 3, FailedLeads: 500, Changes: 50}
	rep, err := MeasureScale(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FenceMoved != cfg.FailedLeads {
		t.Errorf("fencing broker 1 moved %d leaderships, it led %d", rep.FenceMoved, cfg.FailedLeads)
	}
	if rep.SnapshotBytes < cfg.Partitions*3*4 || rep.ChangeCommandBytes == 0 || rep.ChangeCommandBytes > 200 {
		t.Errorf("snapshot %d bytes, change %d bytes", rep.SnapshotBytes, rep.ChangeCommandBytes)
	}
	if rep.ImageHeapBytes <= 0 {
		t.Errorf("image heap %d bytes", rep.ImageHeapBytes)
	}
	for _, bad := range []ScaleConfig{
		{Brokers: 2, Partitions: 10, PartitionsPerTopic: 10, RF: 3},
		{Brokers: 5, Partitions: 10, PartitionsPerTopic: 20, RF: 3},
		{Brokers: 5, Partitions: 10, PartitionsPerTopic: 10, RF: 3, FailedLeads: 11},
	} {
		if _, err := MeasureScale(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestScaleAssignment: every assignment has distinct replicas led by the
// broker the layout names.
func TestScaleAssignment(t *testing.T) {
	for _, cfg := range []ScaleConfig{{Brokers: 3, RF: 3, FailedLeads: 5}, {Brokers: 100, RF: 3, FailedLeads: 10}, {Brokers: 7, RF: 5}} {
		for k := range 1000 {
			a := scaleAssignment(cfg, k)
			if hasDuplicates(a) || len(a) != cfg.RF {
				t.Fatalf("%+v partition %d: %v", cfg, k, a)
			}
			if (k < cfg.FailedLeads) != (a[0] == 1) {
				t.Fatalf("%+v partition %d led by %d", cfg, k, a[0])
			}
			for _, r := range a {
				if r < 1 || int(r) > cfg.Brokers {
					t.Fatalf("%+v partition %d: %v", cfg, k, a)
				}
			}
		}
	}
}
