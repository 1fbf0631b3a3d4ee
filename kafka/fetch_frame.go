package kafka

import (
	"ringlog/internal/kwire"
	"ringlog/netpoll"
	"ringlog/segment"
)

// The fetch response is the one response framed by hand: its record sets are
// file regions sent with sendfile, so it cannot be one encoded byte slice.
// The encoder writes every field into one buffer and notes, for each
// partition with records, the position after its length prefix; the reply
// then alternates slices of that buffer with the partition's regions.
//
//	Response header      correlation_id int32, [tagged fields] (v12+)
//	throttle_time_ms     int32
//	error_code           int16                      v7+ (fetch sessions)
//	session_id           int32                      v7+ (fetch_session.go; 0: none)
//	topics               [array]
//	  topic              string (v4-v12) | uuid (v13+)
//	  partitions         [array]
//	    partition_index        int32
//	    error_code             int16
//	    high_watermark         int64
//	    last_stable_offset     int64
//	    log_start_offset       int64                v5+
//	    aborted_transactions   nullable [array]     (null: read_uncommitted)
//	      producer_id          int64
//	      first_offset         int64
//	      [tagged fields]                           v12+
//	    preferred_read_replica int32                v11+ (-1)
//	    records                nullable bytes  <--  length here, file regions after it
//	    [tagged fields]                             v12+: 1 = current_leader (v16+, KIP-951)
//	  [tagged fields]                               v12+
//	[tagged fields]                                 v12+: 0 = node_endpoints (v16+, KIP-951)
//
// From v12 (flexible versions, KIP-482) arrays, strings and bytes carry
// unsigned-varint lengths plus one (0 is null), and structures end with a
// tagged-field section. The layout is checked byte for byte against kmsg's
// encoder for every version (fetch_test.go).

// fetchFrame is an encoded fetch response with holes: the regions of
// cuts[i].res go right after buf[:cuts[i].at].
type fetchFrame struct {
	buf  []byte
	cuts []fetchCut
}

type fetchCut struct {
	at  int
	res *segment.ReadResult
}

// respond sends the answer of the last read pass. The response's OnDone
// releases every read (once the regions are on the wire, or dropped with
// the connection), which is what keeps the segment files open meanwhile.
func (f *fetch) respond() {
	f.throttleQuota()
	f.recordReplication()
	f.s.sessions.settle(f)
	fr := f.encode()
	r := &netpoll.Response{}
	prev := 0
	framed := true
	for _, c := range fr.cuts {
		r.AppendBytes(fr.buf[prev:c.at])
		var n int64
		for _, rg := range c.res.Regions {
			if rg.Mem != nil {
				// A direct-written segment's recent batches, from its tail
				// cache: never written again, kept alive by the slice.
				r.AppendBytes(rg.Mem)
			} else {
				r.AppendRegion(rg.File, rg.Pos, rg.Len)
			}
			n += rg.Len
		}
		// The length prefix was written from Bytes: if the regions said
		// otherwise, every later byte of the connection would be misread.
		framed = framed && n == c.res.Bytes
		prev = c.at
	}
	r.AppendBytes(fr.buf[prev:])
	// From here the response owns the reads whose regions it sends; the
	// others (no bytes) still pin their segment set and go now.
	var reads []*segment.ReadResult
	for i := range f.topics {
		for j := range f.topics[i].parts {
			p := &f.topics[i].parts[j]
			if p.res != nil && p.res.Bytes > 0 {
				reads = append(reads, p.res)
				p.res = nil
			}
			p.releaseRead()
		}
	}
	if len(reads) > 0 {
		r.OnDone(func() {
			for _, res := range reads {
				res.Release()
			}
		})
	}
	if !framed {
		f.s.log.Error("fetch: read regions disagree with their byte count; closing the connection", "remote", f.cx.c.RemoteAddr())
		r.AppendRegion(nil, 0, 0) // a bad region: netpoll releases the response and closes the connection
	}
	f.cx.replyRaw(r)
}

// throttleQuota measures a consumer's fetched bytes against its
// consumer_byte_rate quota. A consumer already over it gets no records
// (they do not count) and the throttle time, and its connection is muted
// for that long. One within it gets its records, which count: if they
// take it over, the answer carries the throttle time and the connection
// is muted, as for a produce. (Kafka counts a response's bytes before it
// decides, then drops them when over: the budget of every dropped
// response is lost, and a consumer whose responses are large beside its
// quota's windows gets well below its quota, 0.73x in this package's
// TestClientQuotas. Deciding on what was already sent keeps it at its
// quota.)
func (f *fetch) throttleQuota() {
	if f.replica >= 0 {
		return
	}
	var n int64
	for i := range f.topics {
		for j := range f.topics[i].parts {
			if p := &f.topics[i].parts[j]; p.res != nil {
				n += p.res.Bytes
			}
		}
	}
	// Over its request quota (KIP-124), a consumer is answered empty as
	// Kafka answers it, and its records do not count against its byte
	// rate; one already over its byte rate likewise.
	dr := f.s.throttleRequest(f.cx)
	if d := max(dr, f.s.throttle(f.cx, quotaFetch, 0)); d > 0 {
		f.throttleMs = int32(d.Milliseconds())
		for i := range f.topics {
			for j := range f.topics[i].parts {
				f.topics[i].parts[j].releaseRead()
			}
		}
		return
	}
	if d := f.s.throttle(f.cx, quotaFetch, n); d > 0 {
		f.throttleMs = int32(d.Milliseconds())
	}
}

// encode writes the response with the answers of the last read pass.
func (f *fetch) encode() fetchFrame {
	v := f.version
	flexible := v >= 12
	size := 64
	for i := range f.topics {
		size += len(f.topics[i].name) + 24 + 64*len(f.topics[i].parts)
		for j := range f.topics[i].parts {
			size += 17 * len(f.topics[i].parts[j].aborted)
		}
	}
	e := kwire.Encoder{Flexible: flexible, Buf: make([]byte, 0, size)}
	var cuts []fetchCut

	e.Int32(f.cx.correlationID)
	if flexible {
		e.EmptyTags() // response header v1
	}
	e.Int32(f.throttleMs) // throttle_time_ms: a consumer over its quota (quota.go)
	if v >= 7 {
		e.Int16(f.errCode)
		if f.session != nil {
			e.Int32(f.session.id)
		} else {
			e.Int32(0)
		}
	}
	leaders := false
	if f.errCode != 0 {
		e.ArrayLen(0)
	} else {
		// An incremental fetch's response leaves out the partitions with
		// nothing new (skip), and the topics left with none.
		topics := 0
		for i := range f.topics {
			if f.topics[i].sent() > 0 {
				topics++
			}
		}
		e.ArrayLen(topics)
		for i := range f.topics {
			t := &f.topics[i]
			n := t.sent()
			if n == 0 {
				continue
			}
			if v >= 13 {
				e.UUID(t.id)
			} else {
				e.Str(t.name)
			}
			e.ArrayLen(n)
			for j := range t.parts {
				p := &t.parts[j]
				if p.skip {
					continue
				}
				e.Int32(p.tp.Partition)
				e.Int16(p.errCode)
				e.Int64(p.hw)
				e.Int64(p.lso)
				if v >= 5 {
					e.Int64(p.logStart)
				}
				// Kafka sends the list (empty when nothing read was
				// aborted) to read_committed consumers, who drop aborted
				// records with it, and null to the others.
				if f.readCommitted {
					e.ArrayLen(len(p.aborted))
					for _, a := range p.aborted {
						e.Int64(a.ProducerID)
						e.Int64(a.FirstOffset)
						if flexible {
							e.EmptyTags()
						}
					}
				} else {
					e.NullArray()
				}
				if v >= 11 {
					// preferred_read_replica (KIP-392), -1: this broker.
					if p.preferredSet {
						e.Int32(p.preferred)
					} else {
						e.Int32(-1)
					}
				}
				// Never null, even for an error: librdkafka takes a null
				// record set for a malformed one. The length is below
				// 2 GiB: a response is.
				var n int64
				if p.res != nil {
					n = p.res.Bytes
				}
				e.BytesLen(n)
				if n > 0 {
					cuts = append(cuts, fetchCut{at: len(e.Buf), res: p.res})
				}
				if flexible {
					if p.currentLeader && v >= 16 {
						leaders = true
						e.Uvarint(1) // one tagged field
						e.Uvarint(1) // tag 1: current_leader
						e.Uvarint(4 + 4 + 1)
						e.Int32(f.s.cfg.NodeID)
						e.Int32(p.epochNow)
						e.EmptyTags()
					} else {
						e.EmptyTags()
					}
				}
			}
			if flexible {
				e.EmptyTags()
			}
		}
	}
	if flexible {
		if leaders {
			// Tag 0, node_endpoints: the brokers named in current_leader
			// fields, here only this one.
			e.Uvarint(1)
			e.Uvarint(0)
			ne := kwire.Encoder{Flexible: true}
			ne.ArrayLen(1)
			ne.Int32(f.s.cfg.NodeID)
			host, port := f.cx.advertised()
			ne.Str(host)
			ne.Int32(port)
			if f.s.cfg.Rack == "" {
				ne.NullableStr(nil)
			} else {
				ne.Str(f.s.cfg.Rack)
			}
			ne.EmptyTags()
			e.Uvarint(uint32(len(ne.Buf)))
			e.Buf = append(e.Buf, ne.Buf...)
		} else {
			e.EmptyTags()
		}
	}
	return fetchFrame{buf: e.Buf, cuts: cuts}
}

// sent is how many of t's partitions the response names.
func (t *fetchTopic) sent() int {
	n := 0
	for j := range t.parts {
		if !t.parts[j].skip {
			n++
		}
	}
	return n
}
