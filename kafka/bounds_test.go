package kafka_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"ringlog/broker"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
)

// createOne asks for one topic with the given configs.
func createOne(validateOnly bool, name string, partitions int32, configs ...string) *kmsg.CreateTopicsRequest {
	req := createTopicsReq(newTopicReq(name, partitions, -1, configs...))
	req.ValidateOnly = validateOnly
	return req
}

// wantRefusal fails unless code and msg are want's code and wantMsg.
func wantRefusal(t testing.TB, what string, code int16, msg *string, want *kerr.Error, wantMsg string) {
	t.Helper()
	wantCode(t, what, code, want)
	if msg == nil || *msg != wantMsg {
		t.Errorf("%s: message %v, want %q", what, derefString(msg), wantMsg)
	}
}

func derefString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// TestSegmentBytesFloor: segment.bytes below 1 MiB (KIP-1030) is refused
// with Kafka's INVALID_CONFIG and message by CreateTopics, AlterConfigs
// and IncrementalAlterConfigs (as Apache Kafka 4.4 answers them: the
// difftest's TestTopicConfigFloors compares), and 1 MiB is accepted.
func TestSegmentBytesFloor(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	c := dialAdmin(t, b.Addr)
	const msg = "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"

	for _, validate := range []bool{true, false} {
		rt := c.do(7, createOne(validate, "small", 1, "segment.bytes", "1048575")).(*kmsg.CreateTopicsResponse).Topics[0]
		wantRefusal(t, "CreateTopics", rt.ErrorCode, rt.ErrorMessage, kerr.InvalidConfig, msg)
	}
	if _, ok := b.Engine.Topic("small"); ok {
		t.Fatal("a refused CreateTopics made the topic")
	}
	rt := c.do(7, createOne(false, "floor", 1, "segment.bytes", "1048576")).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics at the floor", rt.ErrorCode, nil)

	ar := c.do(2, alterReq(false, kmsg.ConfigResourceTypeTopic, "floor", sp("segment.bytes"), sp("1048575"))).(*kmsg.AlterConfigsResponse).Resources[0]
	wantRefusal(t, "AlterConfigs", ar.ErrorCode, ar.ErrorMessage, kerr.InvalidConfig, msg)

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "floor"
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Op, op.Value = "segment.bytes", kmsg.IncrementalAlterConfigOpSet, sp("1048575")
	r.Configs = append(r.Configs, op)
	inc.Resources = append(inc.Resources, r)
	ir := c.do(1, inc).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	wantRefusal(t, "IncrementalAlterConfigs", ir.ErrorCode, ir.ErrorMessage, kerr.InvalidConfig, msg)

	if info, _ := b.Engine.Topic("floor"); info.Config.Log.SegmentBytes != 1<<20 {
		t.Fatalf("segment.bytes %d after the refused changes, want 1048576", info.Config.Log.SegmentBytes)
	}
}

// deleteRecordsOne asks to delete tp's records below offset.
func deleteRecordsOne(topic string, partition int32, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	p := kmsg.NewDeleteRecordsRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestInternalTopicRecords: DeleteRecords on __consumer_offsets and
// __transaction_state is refused with INVALID_TOPIC_EXCEPTION, as Kafka
// 4.4 refuses it (Topic.isInternal), and the committed offsets stay. What
// Kafka allows on them stays allowed: creating __transaction_state (and
// Metadata marks it internal), changing __consumer_offsets' configs,
// deleting __transaction_state. Before, DeleteRecords on
// __consumer_offsets answered POLICY_VIOLATION (it is compacted) and on
// __transaction_state deleted the records.
func TestInternalTopicRecords(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	c := dialAdmin(t, b.Addr)
	adm, ctx := b.admin(), adminCtx(t)
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "some", Partition: 0, At: 7})
	createTopic(t, b, "some", 1, nil)
	if _, err := adm.CommitOffsets(ctx, "g", commit); err != nil {
		t.Fatal(err)
	}

	for _, offset := range []int64{0, -1} {
		for p := range b.Groups.Partitions() {
			r := c.do(2, deleteRecordsOne(group.OffsetsTopic, p, offset)).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
			wantCode(t, fmt.Sprintf("DeleteRecords %s-%d to %d", group.OffsetsTopic, p, offset), r.ErrorCode, kerr.InvalidTopicException)
			if r.LowWatermark != -1 {
				t.Errorf("refused DeleteRecords answered low watermark %d, want -1", r.LowWatermark)
			}
		}
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("some", 0); !ok || o.At != 7 {
		t.Fatalf("committed offset after the refused DeleteRecords: %+v %v, want 7", o, ok)
	}

	rt := c.do(4, createOne(false, "__transaction_state", 1)).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics __transaction_state (Kafka allows it)", rt.ErrorCode, nil)
	waitLeading(t, b, "__transaction_state")
	if _, err := b.client().ProduceSync(ctx, &kgo.Record{Topic: "__transaction_state", Value: []byte("v")}).First(); err != nil {
		t.Fatal(err)
	}
	r := c.do(2, deleteRecordsOne("__transaction_state", 0, -1)).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	wantCode(t, "DeleteRecords __transaction_state", r.ErrorCode, kerr.InvalidTopicException)
	if lso, err := b.Engine.State(engine.TP{Topic: "__transaction_state", Partition: 0}); err != nil || lso.LogStartOffset != 0 {
		t.Fatalf("__transaction_state after the refused DeleteRecords: %+v %v, want log start offset 0", lso, err)
	}
	md, err := adm.Metadata(ctx, "__transaction_state")
	if err != nil || !md.Topics["__transaction_state"].IsInternal {
		t.Fatalf("Metadata of __transaction_state: %+v %v, want it internal", md.Topics["__transaction_state"], err)
	}

	ar := c.do(2, alterReq(false, kmsg.ConfigResourceTypeTopic, group.OffsetsTopic, sp("retention.ms"), sp("604800000"))).(*kmsg.AlterConfigsResponse).Resources[0]
	wantCode(t, "AlterConfigs __consumer_offsets (Kafka allows it)", ar.ErrorCode, nil)
	dr, err := adm.DeleteTopics(ctx, "__transaction_state")
	if err != nil || dr["__transaction_state"].Err != nil {
		t.Fatalf("DeleteTopics __transaction_state (Kafka allows it): %+v %v", dr, err)
	}
}

// TestDataDirModes: everything the broker creates under its data directory
// (partition folders, segments, indexes, checkpoints, the group
// coordinator's topic, the metadata quorum's store, the lock, the
// clean-shutdown markers) is readable by the broker's user and group only:
// files 0640 or stricter, folders 0750 or stricter. Before, files were
// 0644 and folders 0755: any local user could read every record.
func TestDataDirModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // made by the broker
	b := startBroker(t, brokerOpts{Dir: dir})
	createTopic(t, b, "modes", 2, map[string]string{"cleanup.policy": "compact"})
	cl := b.client()
	ctx := adminCtx(t)
	for i := range 20 {
		r := &kgo.Record{Topic: "modes", Partition: int32(i % 2), Key: []byte{byte(i % 3)}, Value: []byte("v")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "modes", Partition: 0, At: 3})
	if _, err := b.admin().CommitOffsets(ctx, "g", commit); err != nil {
		t.Fatal(err)
	}
	b.Restart() // clean shutdown: markers, producer snapshots, trimmed indexes
	seen := map[bool]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		allowed := fs.FileMode(0o640)
		if d.IsDir() {
			allowed = 0o750
		}
		if extra := info.Mode().Perm() &^ allowed; extra != 0 {
			t.Errorf("%s: mode %v, want at most %v", strings.TrimPrefix(path, dir), info.Mode().Perm(), allowed)
		}
		seen[d.IsDir()]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen[false] < 10 || seen[true] < 5 {
		t.Fatalf("walked %d files and %d folders: the broker wrote less than this test expects", seen[false], seen[true])
	}
}

// TestPartitionCap: CreateTopics and CreatePartitions that would make the
// broker hold more than ringlog.max.partitions (engine.DefaultMaxPartitions
// here; __consumer_offsets holds 4) are refused with POLICY_VIOLATION,
// naming the setting; up to it they pass. Validate-only requests, so that
// no test waits for ten thousand logs to open (the controller applies
// the same check to real ones, replication/controller's
// TestMaxTotalPartitions).
func TestPartitionCap(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	c := dialAdmin(t, b.Addr)
	createTopic(t, b, "one", 1, nil)
	var held int32
	for _, ti := range b.Engine.Topics() {
		held += ti.Partitions
	}
	if held != 5 {
		t.Fatalf("the broker holds %d partitions, want __consumer_offsets' 4 and one", held)
	}
	room := engine.DefaultMaxPartitions - held

	rt := c.do(4, createOne(true, "wide", room+1)).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics past the cap", rt.ErrorCode, kerr.PolicyViolation)
	if rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, "ringlog.max.partitions") {
		t.Errorf("message %v, want it to name ringlog.max.partitions", derefString(rt.ErrorMessage))
	}
	rt = c.do(4, createOne(true, "wide", room)).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics up to the cap", rt.ErrorCode, nil)

	grow := func(count int32) kmsg.CreatePartitionsResponseTopic {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly, req.TimeoutMillis = true, 5000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "one", count
		req.Topics = append(req.Topics, rt)
		return c.do(3, req).(*kmsg.CreatePartitionsResponse).Topics[0]
	}
	gr := grow(1 + room + 1)
	wantCode(t, "CreatePartitions past the cap", gr.ErrorCode, kerr.PolicyViolation)
	gr = grow(1 + room)
	wantCode(t, "CreatePartitions up to the cap", gr.ErrorCode, nil)
}

// TestPartitionCapConfigured: broker.Config.MaxPartitions (server.properties'
// ringlog.max.partitions) reaches the engine and the quorum: with a cap of
// 8, a Metadata request's automatic creation beyond it creates nothing.
func TestPartitionCapConfigured(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.MaxPartitions = 8; c.NumPartitions = 3 }})
	c := dialAdmin(t, b.Addr)
	rt := c.do(4, createOne(true, "fits", 4)).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics to the cap of 8 (4 of __consumer_offsets held)", rt.ErrorCode, nil)
	rt = c.do(4, createOne(true, "too-wide", 5)).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics past the cap of 8", rt.ErrorCode, kerr.PolicyViolation)
	createTopic(t, b, "three", 3, nil)
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 9, true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, mt)
	resp := c.do(9, req).(*kmsg.MetadataResponse)
	if code := resp.Topics[0].ErrorCode; code == 0 {
		t.Fatalf("auto-creation of 3 partitions past the cap answered %v", kerr.ErrorForCode(code))
	}
	for _, ti := range b.Engine.Topics() {
		if ti.Name == "auto" {
			t.Fatal("auto-created past the cap")
		}
	}
}
