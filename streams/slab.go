package streams

import "github.com/twmb/franz-go/pkg/kgo"

// produceSlab hands out the kgo.Records the application produces, and
// the bytes of their keys and values, carved from chunks rather than
// allocated one by one: a repartition topic costs a record and two
// serialized byte slices per record that crosses it (the word count's
// every word), and one allocation per chunk instead of three per record
// cut the processing goroutine's allocations and the garbage collector's
// work (ARCHITECTURE.md, "Streams", measured). A chunk stays alive while
// any record carved from it is held by kgo (until its promise runs):
// memory held is bounded by the records in flight, a chunk each at most.
// Bytes handed out are never written again: the next value is appended
// past them.
//
// Only the goroutine holding App.mu produces (processing, the
// commit of a revocation), so the slab needs no lock of its own.
type produceSlab struct {
	recs []kgo.Record
	buf  []byte
}

const (
	slabRecords   = 128      // records per chunk (kgo.Record is 160 bytes)
	slabBytes     = 16 << 10 // bytes per chunk
	slabBytesLeft = 64       // a chunk with less room left is replaced
)

// record returns a zeroed record of its own.
func (s *produceSlab) record() *kgo.Record {
	if len(s.recs) == 0 {
		s.recs = make([]kgo.Record, slabRecords)
	}
	r := &s.recs[0]
	s.recs = s.recs[1:]
	return r
}

// appender is a Serde that can append its encoding to a buffer, as the
// built-in String and Int64 do; a user's Serde need not.
type appender[T any] interface {
	appendSerialize(dst []byte, topic string, v T) ([]byte, error)
}

// serializeTo encodes v with ser, into the slab when ser can append (ap,
// ser's appender found once when the processor is built; nil if it has
// none): the bytes are then the caller's for good, the slab never
// writes them again. Serialize otherwise.
func serializeTo[T any](s *produceSlab, ap appender[T], ser Serde[T], topic string, v T) ([]byte, error) {
	if ap == nil {
		return ser.Serialize(topic, v)
	}
	if cap(s.buf)-len(s.buf) < slabBytesLeft {
		s.buf = make([]byte, 0, slabBytes)
	}
	start := len(s.buf)
	out, err := ap.appendSerialize(s.buf, topic, v)
	if err != nil {
		return nil, err
	}
	// A value larger than the room left moved out to a new array (append
	// copied what was before it too); continue there, the old array stays
	// as it is for the records holding parts of it.
	s.buf = out
	return out[start:len(out):len(out)], nil
}

// appenderOf returns ser's appender, nil if it has none.
func appenderOf[T any](ser Serde[T]) appender[T] {
	ap, _ := ser.(appender[T])
	return ap
}
