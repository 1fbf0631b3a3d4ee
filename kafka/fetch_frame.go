package kafka

import (
	"encoding/binary"

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
//	session_id           int32                      v7+ (always 0 here)
//	topics               [array]
//	  topic              string (v4-v12) | uuid (v13+)
//	  partitions         [array]
//	    partition_index        int32
//	    error_code             int16
//	    high_watermark         int64
//	    last_stable_offset     int64
//	    log_start_offset       int64                v5+
//	    aborted_transactions   nullable [array]     (null: read_uncommitted)
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
	fr := f.encode()
	r := &netpoll.Response{}
	prev := 0
	framed := true
	for _, c := range fr.cuts {
		r.AppendBytes(fr.buf[prev:c.at])
		var n int64
		for _, rg := range c.res.Regions {
			r.AppendRegion(rg.File, rg.Pos, rg.Len)
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

// encode writes the response with the answers of the last read pass.
func (f *fetch) encode() fetchFrame {
	v := f.version
	flexible := v >= 12
	size := 64
	for i := range f.topics {
		size += len(f.topics[i].name) + 24 + 64*len(f.topics[i].parts)
	}
	e := frameEncoder{flexible: flexible, buf: make([]byte, 0, size)}

	e.int32(f.cx.correlationID)
	if flexible {
		e.tags0() // response header v1
	}
	e.int32(0) // throttle_time_ms: no quotas
	if v >= 7 {
		e.int16(f.errCode)
		e.int32(0) // session_id: no sessions are kept (see newFetch)
	}
	leaders := false
	if f.errCode != 0 {
		e.arrayLen(0)
	} else {
		e.arrayLen(len(f.topics))
		for i := range f.topics {
			t := &f.topics[i]
			if v >= 13 {
				e.buf = append(e.buf, t.id[:]...)
			} else {
				e.string(t.name)
			}
			e.arrayLen(len(t.parts))
			for j := range t.parts {
				p := &t.parts[j]
				e.int32(p.tp.Partition)
				e.int16(p.errCode)
				e.int64(p.hw)
				e.int64(p.lso)
				if v >= 5 {
					e.int64(p.logStart)
				}
				// Kafka sends a list (empty: no transactions yet) to
				// read_committed consumers, who drop aborted records with
				// it, and null to the others.
				if f.readCommitted {
					e.arrayLen(0)
				} else {
					e.nullArray()
				}
				if v >= 11 {
					// preferred_read_replica (KIP-392), -1: this broker.
					if p.preferredSet {
						e.int32(p.preferred)
					} else {
						e.int32(-1)
					}
				}
				// Never null, even for an error: librdkafka takes a null
				// record set for a malformed one.
				var n int64
				if p.res != nil {
					n = p.res.Bytes
				}
				e.bytesLen(n)
				if n > 0 {
					e.cuts = append(e.cuts, fetchCut{at: len(e.buf), res: p.res})
				}
				if flexible {
					if p.currentLeader && v >= 16 {
						leaders = true
						e.uvarint(1) // one tagged field
						e.uvarint(1) // tag 1: current_leader
						e.uvarint(4 + 4 + 1)
						e.int32(f.s.cfg.NodeID)
						e.int32(p.epochNow)
						e.tags0()
					} else {
						e.tags0()
					}
				}
			}
			if flexible {
				e.tags0()
			}
		}
	}
	if flexible {
		if leaders {
			// Tag 0, node_endpoints: the brokers named in current_leader
			// fields, here only this one.
			e.uvarint(1)
			e.uvarint(0)
			var ne frameEncoder
			ne.flexible = true
			ne.arrayLen(1)
			ne.int32(f.s.cfg.NodeID)
			ne.string(f.s.cfg.AdvertisedHost)
			ne.int32(f.s.cfg.AdvertisedPort)
			if f.s.cfg.Rack == "" {
				ne.uvarint(0) // null rack
			} else {
				ne.string(f.s.cfg.Rack)
			}
			ne.tags0()
			e.uvarint(uint64(len(ne.buf)))
			e.buf = append(e.buf, ne.buf...)
		} else {
			e.tags0()
		}
	}
	return fetchFrame{buf: e.buf, cuts: e.cuts}
}

// frameEncoder appends Kafka's primitive types; flexible selects the compact
// (KIP-482) forms of lengths.
type frameEncoder struct {
	flexible bool
	buf      []byte
	cuts     []fetchCut
}

func (e *frameEncoder) int16(v int16) { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v)) }
func (e *frameEncoder) int32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *frameEncoder) int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }
func (e *frameEncoder) uvarint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
}

// tags0 is an empty tagged-field section.
func (e *frameEncoder) tags0() { e.buf = append(e.buf, 0) }

func (e *frameEncoder) arrayLen(n int) {
	if e.flexible {
		e.uvarint(uint64(n) + 1)
	} else {
		e.int32(int32(n))
	}
}

func (e *frameEncoder) nullArray() {
	if e.flexible {
		e.uvarint(0)
	} else {
		e.int32(-1)
	}
}

func (e *frameEncoder) string(s string) {
	if e.flexible {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.int16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

// bytesLen writes the length prefix of a non-null bytes field whose n bytes
// follow elsewhere (file regions). n fits: a response is below 2 GiB.
func (e *frameEncoder) bytesLen(n int64) {
	if e.flexible {
		e.uvarint(uint64(n) + 1)
	} else {
		e.int32(int32(n))
	}
}
