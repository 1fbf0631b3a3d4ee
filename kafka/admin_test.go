package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/kafka"
)

// adminConn sends requests at the exact version a test picks, over a
// plain TCP connection, and decodes the answers with kmsg: old versions
// are served too, and kgo would negotiate them away.
type adminConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func dialAdmin(t testing.TB, addr string) *adminConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &adminConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("admin-test"))}
}

// do sends req at version v and returns its decoded response.
func (a *adminConn) do(v int16, req kmsg.Request) kmsg.Response {
	a.t.Helper()
	a.send(v, req)
	return a.read(req)
}

// send writes req at version v without waiting for the answer.
func (a *adminConn) send(v int16, req kmsg.Request) {
	a.t.Helper()
	req.SetVersion(v)
	a.corr++
	if _, err := a.c.Write(a.f.AppendRequest(nil, req, a.corr)); err != nil {
		a.t.Fatal(err)
	}
}

// read reads and decodes the answer to req, the last request sent.
func (a *adminConn) read(req kmsg.Request) kmsg.Response {
	a.t.Helper()
	v := req.GetVersion()
	a.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(a.c, size[:]); err != nil {
		a.t.Fatalf("%s v%d: read response: %v", kmsg.NameForKey(req.Key()), v, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(a.c, frame); err != nil {
		a.t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != a.corr {
		a.t.Fatalf("correlation id %d, want %d", corr, a.corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(v)
	if resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			a.t.Fatalf("%s v%d: response header with tagged fields %x", kmsg.NameForKey(req.Key()), v, body[:min(len(body), 4)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		a.t.Fatalf("%s v%d: decode response: %v", kmsg.NameForKey(req.Key()), v, err)
	}
	return resp
}

// adminIOPaths runs fn on a broker of each I/O path (io_uring with gnet
// where the machine has them, and portable) for tests that touch storage.
func adminIOPaths(t *testing.T, opts brokerOpts, fn func(t *testing.T, b *testBroker)) {
	for _, portable := range []bool{false, true} {
		name := "default"
		if portable {
			name = "portable"
		}
		t.Run(name, func(t *testing.T) {
			o := opts
			o.Portable = portable
			fn(t, startBroker(t, o))
		})
	}
}

func adminCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails unless code is want's.
func wantCode(t testing.TB, what string, code int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if code != wantCode {
		t.Errorf("%s: error %v (%d), want %v", what, kerr.ErrorForCode(code), code, want)
	}
}

// partitionDirs lists the partition folders of topic under the data dir.
func partitionDirs(t testing.TB, dir, topic string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if i := strings.LastIndexByte(e.Name(), '-'); e.IsDir() && i > 0 && e.Name()[:i] == topic {
			out = append(out, e.Name())
		}
	}
	return out
}

func createTopicsReq(topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	req.Topics = topics
	return req
}

func newTopicReq(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

// TestCreateTopicsKadm creates topics the way admin tools do: a validate-
// only create leaves nothing behind, a real one makes the partition
// folders, and DescribeConfigs shows the overrides as TOPIC_CONFIG and
// every other supported config as a default.
func TestCreateTopicsKadm(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		adm, ctx := b.admin(), adminCtx(t)
		configs := map[string]*string{"retention.ms": kmsg.StringPtr("3600000"), "cleanup.policy": kmsg.StringPtr("compact")}

		dry, err := adm.ValidateCreateTopics(ctx, 3, 1, configs, "dry")
		if err != nil {
			t.Fatal(err)
		}
		if r := dry["dry"]; r.Err != nil || r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID != (kadm.TopicID{}) {
			t.Fatalf("validate only: %+v", r)
		}
		if _, ok := b.Engine.Topic("dry"); ok {
			t.Fatal("validate only created the topic")
		}
		if dirs := partitionDirs(t, b.dir, "dry"); len(dirs) != 0 {
			t.Fatalf("validate only made folders %v", dirs)
		}

		created, err := adm.CreateTopics(ctx, 3, 1, configs, "events")
		if err != nil {
			t.Fatal(err)
		}
		r := created["events"]
		info, _ := b.Engine.Topic("events")
		if r.Err != nil || r.NumPartitions != 3 || r.ReplicationFactor != 1 || [16]byte(r.ID) != info.ID || info.ID == [16]byte{} {
			t.Fatalf("create: %+v, engine id %x", r, info.ID)
		}
		// KIP-525: the answer lists the resulting configs.
		if c := r.Configs["retention.ms"]; c.Value == nil || *c.Value != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("create answer retention.ms: %+v", c)
		}
		if c := r.Configs["segment.bytes"]; c.Value == nil || *c.Value != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("create answer segment.bytes: %+v", c)
		}
		if dirs := partitionDirs(t, b.dir, "events"); len(dirs) != 3 {
			t.Fatalf("partition folders %v, want 3", dirs)
		}
		topics, err := adm.ListTopics(ctx, "events")
		if err != nil || len(topics["events"].Partitions) != 3 {
			t.Fatalf("metadata after create: %+v, %v", topics, err)
		}

		rcs, err := adm.DescribeTopicConfigs(ctx, "events")
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe: %+v, %v", rcs, err)
		}
		var names []string
		for _, c := range rcs[0].Configs {
			names = append(names, c.Key)
			want := kmsg.ConfigSourceDefaultConfig
			if _, set := configs[c.Key]; set {
				want = kmsg.ConfigSourceDynamicTopicConfig
			}
			if c.Source != want || c.Sensitive || c.Value == nil {
				t.Errorf("%s: source %v sensitive %v value %v, want source %v", c.Key, c.Source, c.Sensitive, c.Value, want)
			}
			// kadm asks for synonyms: the one in effect comes first. The
			// broker configs behind segment.ms and flush.ms (and
			// retention.ms) have a null default in Kafka, which Kafka does
			// not list as a synonym; the throttled-replicas configs have
			// no broker config at all.
			_, set := configs[c.Key]
			nullDefault := c.Key == "segment.ms" || c.Key == "flush.ms" || c.Key == "retention.ms" ||
				strings.HasSuffix(c.Key, ".replication.throttled.replicas")
			if nullDefault && !set {
				if len(c.Synonyms) != 0 {
					t.Errorf("%s: synonyms %+v, want none", c.Key, c.Synonyms)
				}
			} else if len(c.Synonyms) == 0 || c.Synonyms[0].Source != c.Source {
				t.Errorf("%s: synonyms %+v", c.Key, c.Synonyms)
			}
		}
		slices.Sort(names)
		want := engine.ConfigNames()
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("described %v, want exactly %v", names, want)
		}
	})
}

// TestCreateTopicsErrors checks each refusal's exact code, at v7 and, for
// the codes old clients know, at v0 (which has no messages).
func TestCreateTopicsErrors(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.NumPartitions = 2 }})
	createTopic(t, b, "taken", 1, nil)
	assign := func(tp kmsg.CreateTopicsRequestTopic, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
		for i, r := range replicas {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), r
			tp.ReplicaAssignment = append(tp.ReplicaAssignment, a)
		}
		return tp
	}
	nullConfig := newTopicReq("nullcfg", 1, 1)
	nullConfig.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms"}}
	gap := assign(newTopicReq("gap", -1, -1), []int32{0}, []int32{0})
	gap.ReplicaAssignment[1].Partition = 2
	cases := []struct {
		topic   kmsg.CreateTopicsRequestTopic
		want    *kerr.Error
		message string // a part of the v1+ message
	}{
		{newTopicReq("", 1, 1), kerr.InvalidTopicException, ""},
		{newTopicReq("a/b", 1, 1), kerr.InvalidTopicException, "a/b"},
		{newTopicReq("..", 1, 1), kerr.InvalidTopicException, ""},
		{newTopicReq(strings.Repeat("x", 250), 1, 1), kerr.InvalidTopicException, ""},
		{newTopicReq("taken", 1, 1), kerr.TopicAlreadyExists, "'taken' already exists"},
		{newTopicReq("zero", 0, 1), kerr.InvalidPartitions, "non-positive"},
		{newTopicReq("negative", -2, 1), kerr.InvalidPartitions, ""},
		{newTopicReq("toomany", 100000, 1), kerr.InvalidPartitions, ""},
		{newTopicReq("rf0", 1, 0), kerr.InvalidReplicationFactor, ""},
		{newTopicReq("rf-2", 1, -2), kerr.InvalidReplicationFactor, ""},
		{newTopicReq("rf3", 1, 3), kerr.InvalidReplicationFactor, "only 1 broker"},
		{newTopicReq("unknowncfg", 1, 1, "retention.mss", "1"), kerr.InvalidConfig, `"retention.mss"`},
		{newTopicReq("badvalue", 1, 1, "retention.ms", "soon"), kerr.InvalidConfig, "retention.ms"},
		{newTopicReq("badpolicy", 1, 1, "cleanup.policy", "shred"), kerr.InvalidConfig, "cleanup.policy"},
		{nullConfig, kerr.InvalidConfig, "retention.ms"}, // as Kafka (internal/difftest)
		{assign(newTopicReq("assign-rf", -1, 1), []int32{0}), kerr.InvalidRequest, "replication factor"},
		{assign(newTopicReq("assign-n", 1, -1), []int32{0}), kerr.InvalidRequest, "numPartitions"},
		{assign(newTopicReq("assign-other", -1, -1), []int32{7}), kerr.InvalidReplicaAssignment, "broker 7"},
		{assign(newTopicReq("assign-empty", -1, -1), []int32{}), kerr.InvalidReplicaAssignment, "empty"},
		{assign(newTopicReq("assign-twice", -1, -1), []int32{0, 0}), kerr.InvalidReplicaAssignment, "more than once"},
		{gap, kerr.InvalidReplicaAssignment, "consecutive"},
	}
	c := dialAdmin(t, b.Addr)
	for _, v := range []int16{0, 1, 4, 7} {
		for _, tc := range cases {
			resp := c.do(v, createTopicsReq(tc.topic)).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 1 {
				t.Fatalf("v%d %q: %d answers", v, tc.topic.Topic, len(resp.Topics))
			}
			r := resp.Topics[0]
			wantCode(t, fmt.Sprintf("v%d %s", v, tc.topic.Topic), r.ErrorCode, tc.want)
			if v >= 1 && (r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.message)) {
				t.Errorf("v%d %q: message %v, want it to mention %q", v, tc.topic.Topic, r.ErrorMessage, tc.message)
			}
			if v >= 5 && (r.NumPartitions != -1 || r.ReplicationFactor != -1 || r.Configs != nil || r.TopicID != [16]byte{}) {
				t.Errorf("v%d %q: failed answer carries %+v", v, tc.topic.Topic, r)
			}
		}
	}
	if got := len(userTopics(b.Engine.Topics())); got != 1 {
		t.Fatalf("refused creates left %d topics", got)
	}

	// Duplicates are answered once each and not created; the rest of the
	// request goes ahead.
	resp := c.do(7, createTopicsReq(newTopicReq("dup", 1, 1), newTopicReq("single", -1, -1), newTopicReq("dup", 2, 1))).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("duplicate request: %d answers, want 2", len(resp.Topics))
	}
	for _, r := range resp.Topics {
		switch r.Topic {
		case "dup":
			wantCode(t, "duplicate", r.ErrorCode, kerr.InvalidRequest)
		case "single":
			wantCode(t, "single", r.ErrorCode, nil)
			// KIP-464: -1 takes the broker's num.partitions.
			if r.NumPartitions != 2 || r.ReplicationFactor != 1 {
				t.Errorf("defaults: %d partitions, rf %d; want 2, 1", r.NumPartitions, r.ReplicationFactor)
			}
		}
	}
	if _, ok := b.Engine.Topic("dup"); ok {
		t.Error("a duplicated topic was created")
	}

	// Past kafka.MaxCreateTopics, topics are refused without being looked at
	// (invalid names keep the first ones cheap).
	many := createTopicsReq()
	for i := range kafka.MaxCreateTopics + 1 {
		many.Topics = append(many.Topics, newTopicReq(fmt.Sprintf("bad/%d", i), 1, 1))
	}
	manyResp := c.do(7, many).(*kmsg.CreateTopicsResponse)
	if n := len(manyResp.Topics); n != kafka.MaxCreateTopics+1 {
		t.Fatalf("%d answers to %d topics", n, kafka.MaxCreateTopics+1)
	}
	wantCode(t, "first of many", manyResp.Topics[0].ErrorCode, kerr.InvalidTopicException)
	wantCode(t, "one too many", manyResp.Topics[kafka.MaxCreateTopics].ErrorCode, kerr.InvalidRequest)

	// The only assignment a single node can honour: every partition on it.
	r := c.do(7, createTopicsReq(assign(newTopicReq("manual", -1, -1), []int32{0}, []int32{0}, []int32{0}))).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "manual assignment", r.ErrorCode, nil)
	if info, _ := b.Engine.Topic("manual"); info.Partitions != 3 || r.NumPartitions != 3 {
		t.Errorf("manual assignment: %d partitions, answered %d; want 3", info.Partitions, r.NumPartitions)
	}

	// v0 creates too (no validate_only field there).
	r = c.do(0, createTopicsReq(newTopicReq("old", 2, 1, "retention.bytes", "1000"))).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "v0 create", r.ErrorCode, nil)
	if info, ok := b.Engine.Topic("old"); !ok || info.Partitions != 2 || info.Overrides["retention.bytes"] != "1000" {
		t.Errorf("v0 create: %+v", info)
	}
	// v1 validate only, v7 validate only: nothing made.
	for _, v := range []int16{1, 7} {
		req := createTopicsReq(newTopicReq("checked", 2, 1))
		req.ValidateOnly = true
		r = c.do(v, req).(*kmsg.CreateTopicsResponse).Topics[0]
		wantCode(t, "validate only", r.ErrorCode, nil)
		if _, ok := b.Engine.Topic("checked"); ok {
			t.Fatalf("v%d validate only created the topic", v)
		}
	}
}

// TestDeleteTopics deletes by name (kadm, and v0) and by id (v6): the
// topic leaves the metadata and its folders leave the data directory.
func TestDeleteTopics(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		adm, ctx := b.admin(), adminCtx(t)
		for _, name := range []string{"gone", "old", "byid"} {
			if _, err := adm.CreateTopic(ctx, 2, 1, nil, name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.client().ProduceSync(ctx, adminRecord("gone", 0, "v")).First(); err != nil {
			t.Fatal(err)
		}
		resps, err := adm.DeleteTopics(ctx, "gone", "missing")
		if err != nil {
			t.Fatal(err)
		}
		if r := resps["gone"]; r.Err != nil {
			t.Fatalf("delete: %+v", r)
		}
		if r := resps["missing"]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("delete missing: %+v", r)
		}
		if dirs := partitionDirs(t, b.dir, "gone"); len(dirs) != 0 {
			t.Fatalf("folders left after delete: %v", dirs)
		}
		md, err := adm.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := md.Topics["gone"]; ok {
			t.Fatal("deleted topic still in metadata")
		}

		c := dialAdmin(t, b.Addr)
		v0 := kmsg.NewPtrDeleteTopicsRequest()
		v0.TopicNames = []string{"old", "old2"}
		r0 := c.do(0, v0).(*kmsg.DeleteTopicsResponse)
		if len(r0.Topics) != 2 {
			t.Fatalf("v0: %+v", r0)
		}
		wantCode(t, "v0 old", r0.Topics[0].ErrorCode, nil)
		wantCode(t, "v0 old2", r0.Topics[1].ErrorCode, kerr.UnknownTopicOrPartition)

		info, _ := b.Engine.Topic("byid")
		v6 := kmsg.NewPtrDeleteTopicsRequest()
		missing := [16]byte{1, 2, 3}
		both := "byid"
		v6.Topics = []kmsg.DeleteTopicsRequestTopic{
			{TopicID: missing},
			{Topic: &both, TopicID: info.ID},
			{},
		}
		r6 := c.do(6, v6).(*kmsg.DeleteTopicsResponse)
		wantCode(t, "unknown id", r6.Topics[0].ErrorCode, kerr.UnknownTopicID)
		wantCode(t, "name and id", r6.Topics[1].ErrorCode, kerr.InvalidRequest)
		wantCode(t, "neither", r6.Topics[2].ErrorCode, kerr.InvalidRequest)
		v6.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: info.ID}}
		r6 = c.do(6, v6).(*kmsg.DeleteTopicsResponse)
		if r := r6.Topics[0]; r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "byid" || r.TopicID != info.ID {
			t.Fatalf("delete by id: %+v", r)
		}
		if _, ok := b.Engine.Topic("byid"); ok || len(partitionDirs(t, b.dir, "byid")) != 0 {
			t.Fatal("topic deleted by id is still there")
		}
		// The deletions hold over a restart.
		b.Restart()
		if got := userTopics(b.Engine.Topics()); len(got) != 0 {
			t.Fatalf("topics after restart: %+v", got)
		}
	})
}

// TestCreatePartitions grows topics (kadm, v0, a manual assignment on this
// node) and refuses what Kafka refuses.
func TestCreatePartitions(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		adm, ctx := b.admin(), adminCtx(t)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, "grow"); err != nil {
			t.Fatal(err)
		}
		dry, err := adm.ValidateUpdatePartitions(ctx, 5, "grow")
		if err != nil || dry["grow"].Err != nil {
			t.Fatalf("validate only: %+v, %v", dry, err)
		}
		if info, _ := b.Engine.Topic("grow"); info.Partitions != 2 {
			t.Fatalf("validate only grew the topic to %d", info.Partitions)
		}
		resps, err := adm.UpdatePartitions(ctx, 4, "grow")
		if err != nil || resps["grow"].Err != nil {
			t.Fatalf("grow: %+v, %v", resps, err)
		}
		if dirs := partitionDirs(t, b.dir, "grow"); len(dirs) != 4 {
			t.Fatalf("folders %v, want 4", dirs)
		}
		topics, err := adm.ListTopics(ctx, "grow")
		if err != nil || len(topics["grow"].Partitions) != 4 {
			t.Fatalf("metadata after growing: %+v, %v", topics["grow"], err)
		}
		// The new partitions take writes.
		if _, err := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, adminRecord("grow", 3, "v")).First(); err != nil {
			t.Fatal(err)
		}
		for set, want := range map[int]*kerr.Error{4: kerr.InvalidPartitions, 3: kerr.InvalidPartitions, 1: kerr.InvalidPartitions} {
			resps, err := adm.UpdatePartitions(ctx, set, "grow")
			if err != nil || !errors.Is(resps["grow"].Err, want) {
				t.Errorf("set %d partitions: %+v, %v; want %v", set, resps["grow"], err, want)
			}
		}
		resps, err = adm.UpdatePartitions(ctx, 3, "nosuch")
		if err != nil || !errors.Is(resps["nosuch"].Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("unknown topic: %+v, %v", resps, err)
		}

		c := dialAdmin(t, b.Addr)
		grow := func(count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "grow", count
			for _, a := range assignment {
				rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: a})
			}
			return rt
		}
		req := kmsg.NewPtrCreatePartitionsRequest()
		for _, tc := range []struct {
			topic kmsg.CreatePartitionsRequestTopic
			want  *kerr.Error
		}{
			{grow(6, []int32{0}), kerr.InvalidReplicaAssignment},    // 2 new, 1 assignment
			{grow(5, []int32{1}), kerr.InvalidReplicaAssignment},    // no broker 1
			{grow(5, []int32{0, 0}), kerr.InvalidReplicaAssignment}, // twice
			{grow(6, []int32{0}, []int32{0}), nil},                  // this node, as it would choose
			{grow(6), kerr.InvalidPartitions},                       // not an increase
			{kmsg.CreatePartitionsRequestTopic{Topic: "nosuch", Count: 9}, kerr.UnknownTopicOrPartition},
		} {
			req.Topics = []kmsg.CreatePartitionsRequestTopic{tc.topic}
			r := c.do(3, req).(*kmsg.CreatePartitionsResponse).Topics[0]
			wantCode(t, fmt.Sprintf("v3 count %d", tc.topic.Count), r.ErrorCode, tc.want)
			if tc.want != nil && r.ErrorMessage == nil {
				t.Errorf("count %d: no message", tc.topic.Count)
			}
		}
		req.Topics = []kmsg.CreatePartitionsRequestTopic{grow(8), grow(9)}
		rs := c.do(3, req).(*kmsg.CreatePartitionsResponse).Topics
		if len(rs) != 1 || rs[0].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("duplicate topic: %+v", rs)
		}
		req.Topics = []kmsg.CreatePartitionsRequestTopic{grow(7)}
		wantCode(t, "v0 grow", c.do(0, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, nil)
		req.ValidateOnly = true
		req.Topics = []kmsg.CreatePartitionsRequestTopic{grow(9)}
		wantCode(t, "v0 validate only", c.do(0, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, nil)
		if info, _ := b.Engine.Topic("grow"); info.Partitions != 7 || len(partitionDirs(t, b.dir, "grow")) != 7 {
			t.Fatalf("after v0: %d partitions, want 7", info.Partitions)
		}
	})
}

// adminRecord is a record for partition (used with a manual partitioner).
func adminRecord(topic string, partition int32, value string) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}
}
