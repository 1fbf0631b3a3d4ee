package streams

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Serde turns values of T into bytes and back: the key or value format of
// a topic, a changelog or a store. Users add their own by implementing
// it. Deserialize receives nil for a record without a value (a
// tombstone); tables treat such a record as a delete before calling it.
type Serde[T any] interface {
	Serialize(topic string, v T) ([]byte, error)
	Deserialize(topic string, b []byte) (T, error)
}

// SerdeFuncs makes a Serde of two functions.
type SerdeFuncs[T any] struct {
	Ser func(topic string, v T) ([]byte, error)
	De  func(topic string, b []byte) (T, error)
}

// Serialize calls Ser.
func (s SerdeFuncs[T]) Serialize(topic string, v T) ([]byte, error) { return s.Ser(topic, v) }

// Deserialize calls De.
func (s SerdeFuncs[T]) Deserialize(topic string, b []byte) (T, error) { return s.De(topic, b) }

type stringSerde struct{}

func (stringSerde) Serialize(_ string, v string) ([]byte, error)   { return []byte(v), nil }
func (stringSerde) Deserialize(_ string, b []byte) (string, error) { return string(b), nil }
func (stringSerde) appendSerialize(dst []byte, _ string, v string) ([]byte, error) {
	return append(dst, v...), nil
}

type bytesSerde struct{}

func (bytesSerde) Serialize(_ string, v []byte) ([]byte, error) { return v, nil }
func (bytesSerde) Deserialize(_ string, b []byte) ([]byte, error) {
	// The fetch buffer is reused by nobody, but the processor may keep
	// the slice in a store batch: copy so that a value never aliases a
	// record the client could hand out again.
	return append([]byte(nil), b...), nil
}

type int64Serde struct{}

// Serialize writes Kafka's LongSerializer format: 8 bytes, big endian.
func (int64Serde) Serialize(_ string, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}

func (int64Serde) appendSerialize(dst []byte, _ string, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
}

func (int64Serde) Deserialize(topic string, b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: int64 from %d bytes (topic %q): want 8", ErrSerde, len(b), topic)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

type jsonSerde[T any] struct{}

func (jsonSerde[T]) Serialize(_ string, v T) ([]byte, error) { return json.Marshal(v) }
func (jsonSerde[T]) Deserialize(topic string, b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%w: json (topic %q): %v", ErrSerde, topic, err)
	}
	return v, nil
}

// The built-in serdes. Int64 is Kafka's LongSerde (8 bytes big endian),
// String is UTF-8 bytes as Kafka's StringSerde, Bytes passes bytes through.
var (
	String Serde[string] = stringSerde{}
	Bytes  Serde[[]byte] = bytesSerde{}
	Int64  Serde[int64]  = int64Serde{}
)

// JSON returns a Serde encoding T with encoding/json.
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }
