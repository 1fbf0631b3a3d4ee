// Package kwire reads and writes the primitive types of Kafka's wire
// protocol: the one place where ringlog turns protocol bytes into numbers,
// lengths and tagged-field sections by hand. The message schemas themselves
// are kmsg's (github.com/twmb/franz-go/pkg/kmsg); kwire serves what kmsg
// cannot: the request and response headers around kmsg's bodies, the walk
// that bounds a Produce request before kmsg allocates for it (kafka/
// checkProduceShape), and the fetch response that kafka/fetch_frame.go
// encodes around file regions.
//
// # Name and place
//
// kwire is "Kafka wire". The k follows franz-go's kmsg, kerr and kgo, so that
// a call site reads as Kafka's encoding and not as one of ringlog's other
// encodings: netpoll's 4-byte frame prefix, segment/batch's zigzag record
// varints, the controller's raft commands. It lives in internal/ because the
// kafka layer and replication/fetcher (below kafka) both speak the protocol,
// and only internal/ packages may be imported from every layer.
//
// # Format
//
// Fixed-width integers are big-endian. Flexible versions (KIP-482) replace
// the int16/int32 lengths with compact ones and end every structure with a
// tagged-field section:
//
//	type              classic (non-flexible)      flexible (compact)
//	int8/16/32/64     big-endian, 1/2/4/8 bytes   same
//	uuid              16 bytes                    same
//	uvarint           -                           7 bits a byte, low first, at most 5 bytes (32 bits)
//	string            int16 length, bytes         uvarint length+1, bytes
//	nullable string   int16 length (-1 null)      uvarint length+1 (0 null)
//	bytes             int32 length, bytes         uvarint length+1, bytes
//	nullable bytes    int32 length (-1 null)      uvarint length+1 (0 null)
//	array             int32 count (-1 null)       uvarint count+1 (0 null)
//	tagged fields     -                           uvarint n, then n times: uvarint tag, uvarint size, size bytes
//
// # Reading
//
// A Reader has a sticky bad flag, as franz-go's kbin has: after the first
// read that runs past the end (or a length that cannot be), every read
// returns a zero value and nothing more is consumed, so a decoder reads
// field after field without checking and asks Bad once at the end. Bytes
// and strings are returned as slices of the input, never copied: a Reader
// allocates nothing, whatever the input says.
//
// # Concurrency
//
// A Reader or an Encoder belongs to one goroutine; neither holds anything
// global.
//
// # Non-obvious invariants
//
//   - No count read off the wire is trusted for an allocation (the lesson of
//     CVE-2022-34917, where Kafka preallocated from a count): ArrayLen fails
//     a count larger than the bytes left (every element takes at least one
//     byte), Tags fails a field count larger than the bytes left, and lengths
//     are checked against the bytes left before anything is sliced.
//   - The reading rules are kmsg's, deliberately, because kafka's
//     checkProduceShape must never refuse a body that kmsg decodes: any
//     negative length or count is null (not only -1), a required string may
//     not be null, a compact array count goes through int32 as kbin's does
//     (a uvarint of 2^31+1 and up reads as null), and a uvarint of more than
//     5 bytes, or whose fifth byte holds more than 4 bits, is bad.
//   - The Encoder writes only canonical forms (shortest uvarints, -1 or 0
//     for null), so decode-encode-decode is stable and an encoding is never
//     longer than the bytes it was decoded from.
package kwire
