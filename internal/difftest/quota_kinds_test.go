package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientQuotaKinds: the quota keys besides the byte rates, set and
// described: request_percentage (KIP-124) and controller_mutation_rate
// (KIP-599) on a user and a client id, connection_creation_rate (KIP-612)
// on the ip entity, an IPv6 address among them, described by name, by
// type (specified) and strictly, then removed. (Never the default ip
// entity: a rate there would pace every later test's connections.)
func TestClientQuotaKinds(t *testing.T) {
	run(t, func(s *side) {
		user := name(s.t, "u")
		client := name(s.t, "c")
		ip4, ip6 := "10.1.2.3", "fd00::7"
		s.do("request_percentage on a user", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "request_percentage", 25, false)))
		s.quotaSettled(1, quotaComp("user", 0, &user))
		s.do("controller_mutation_rate on a client id", alterQuotasReq(false, quotaEntry([][2]string{{"client-id", client}}, "controller_mutation_rate", 2.5, false)))
		s.quotaSettled(1, quotaComp("client-id", 0, &client))
		s.do("controller_mutation_rate beside it on the user", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "controller_mutation_rate", 10, false)))
		s.quotaSettled(2, quotaComp("user", 0, &user))
		s.do("connection_creation_rate on an IPv4 address", alterQuotasReq(false, quotaEntry([][2]string{{"ip", ip4}}, "connection_creation_rate", 5, false)))
		s.quotaSettled(1, quotaComp("ip", 0, &ip4))
		s.do("connection_creation_rate on an IPv6 address", alterQuotasReq(false, quotaEntry([][2]string{{"ip", ip6}}, "connection_creation_rate", 7, false)))
		s.quotaSettled(1, quotaComp("ip", 0, &ip6))
		for _, r := range []struct {
			what  string
			key   string
			value float64
		}{
			{"a fractional connection rate", "connection_creation_rate", 2.5},
			{"a connection rate too large for an INT", "connection_creation_rate", 3e9},
			{"a byte rate on an ip", "producer_byte_rate", 1000},
			{"a request percentage on an ip", "request_percentage", 10},
			{"a zero connection rate", "connection_creation_rate", 0},
		} {
			s.do("refused: "+r.what, alterQuotasReq(false, quotaEntry([][2]string{{"ip", ip4}}, r.key, r.value, false)))
		}
		s.do("describe the user, strict", describeQuotasReq(true, quotaComp("user", 0, &user)))
		s.do("describe the client id, strict", describeQuotasReq(true, quotaComp("client-id", 0, &client)))
		s.do("describe the IPv4 address, strict", describeQuotasReq(true, quotaComp("ip", 0, &ip4)))
		s.do("describe the IPv6 address", describeQuotasReq(false, quotaComp("ip", 0, &ip6)))
		s.do("describe the default ip", describeQuotasReq(false, quotaComp("ip", 1, nil)))
		s.do("remove the IPv4 address's rate", alterQuotasReq(false, quotaEntry([][2]string{{"ip", ip4}}, "connection_creation_rate", 0, true)))
		s.quotaSettled(0, quotaComp("ip", 0, &ip4))
		s.do("remove the IPv6 address's rate", alterQuotasReq(false, quotaEntry([][2]string{{"ip", ip6}}, "connection_creation_rate", 0, true)))
		s.quotaSettled(0, quotaComp("ip", 0, &ip6))
		s.do("remove the client id's", alterQuotasReq(false, quotaEntry([][2]string{{"client-id", client}}, "controller_mutation_rate", 0, true)))
		s.do("remove the user's", alterQuotasReq(false,
			quotaEntry([][2]string{{"user", user}}, "controller_mutation_rate", 0, true)))
		s.do("remove the user's last", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "request_percentage", 0, true)))
		s.quotaSettled(0, quotaComp("user", 0, &user))
	})
}

// TestControllerMutationQuota: CreateTopics, DeleteTopics and
// CreatePartitions of a client with a controller_mutation_rate of 1 a
// second (KIP-599), on both brokers' defaults (a burst of 11 windows of
// 1 s: 11 partitions). A first topic of 30 partitions is taken (a
// mutation may take the bucket below zero once) unthrottled; the bucket
// is then 19 credits short, for 19 s: the strict versions refuse with
// THROTTLING_QUOTA_EXCEEDED and a throttle, CreateTopics v5 takes the
// topic and throttles. Each request on a connection of its own (a
// throttled one is muted), with the client's id.
func TestControllerMutationQuota(t *testing.T) {
	run(t, func(s *side) {
		client := name(s.t, "c")
		big, small := name(s.t, "big"), name(s.t, "small")
		s.do("set the rate", alterQuotasReq(false, quotaEntry([][2]string{{"client-id", client}}, "controller_mutation_rate", 1, false)))
		s.quotaSettled(1, quotaComp("client-id", 0, &client))
		as := func(label string, req kmsg.Request) kmsg.Response {
			c, err := dial(s.addr, client)
			if err != nil {
				s.fail("%v", err)
			}
			s.conns = append(s.conns, c)
			return s.doOn(c, label, req)
		}
		create := func(version int16, topic string, partitions int32) *kmsg.CreateTopicsRequest {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(version)
			req.TimeoutMillis = 30000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
			req.Topics = append(req.Topics, rt)
			return req
		}
		throttled := func(what string, resp kmsg.Response, ms int32, code int16) {
			if code != kerr.ThrottlingQuotaExceeded.Code || ms < 5000 {
				s.fail("%s: code %d, throttle %d ms; want THROTTLING_QUOTA_EXCEEDED and most of 19 s", what, code, ms)
			}
		}
		first := as("30 partitions over a burst of 11", create(7, big, 30)).(*kmsg.CreateTopicsResponse)
		if first.ThrottleMillis != 0 || first.Topics[0].ErrorCode != 0 {
			s.fail("the first creation: code %d, throttle %d", first.Topics[0].ErrorCode, first.ThrottleMillis)
		}
		over := as("one partition, the bucket 19 short", create(7, small, 1)).(*kmsg.CreateTopicsResponse)
		throttled("CreateTopics v7", over, over.ThrottleMillis, over.Topics[0].ErrorCode)

		del := kmsg.NewPtrDeleteTopicsRequest()
		del.SetVersion(5)
		del.TimeoutMillis = 30000
		del.TopicNames = []string{big}
		d := as("DeleteTopics v5", del).(*kmsg.DeleteTopicsResponse)
		throttled("DeleteTopics v5", d, d.ThrottleMillis, d.Topics[0].ErrorCode)

		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.SetVersion(3)
		cp.TimeoutMillis = 30000
		cpt := kmsg.NewCreatePartitionsRequestTopic()
		cpt.Topic, cpt.Count = big, 31
		cp.Topics = append(cp.Topics, cpt)
		p := as("CreatePartitions v3", cp).(*kmsg.CreatePartitionsResponse)
		throttled("CreatePartitions v3", p, p.ThrottleMillis, p.Topics[0].ErrorCode)

		old := as("CreateTopics v5, permissive", create(5, small, 1)).(*kmsg.CreateTopicsResponse)
		if old.Topics[0].ErrorCode != 0 || old.ThrottleMillis < 5000 {
			s.fail("CreateTopics v5: code %d, throttle %d ms; want it taken and throttled", old.Topics[0].ErrorCode, old.ThrottleMillis)
		}

		s.do("remove the rate", alterQuotasReq(false, quotaEntry([][2]string{{"client-id", client}}, "controller_mutation_rate", 0, true)))
		s.quotaSettled(0, quotaComp("client-id", 0, &client))
		cleanup := kmsg.NewPtrDeleteTopicsRequest()
		cleanup.SetVersion(5)
		cleanup.TimeoutMillis = 30000
		cleanup.TopicNames = []string{big, small}
		s.quiet(cleanup)
	})
}
