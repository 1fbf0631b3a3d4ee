package segment

import (
	"fmt"
	"hash/maphash"

	"ringlog/segment/batch"
)

// offsetMap maps each key of the dirty section to the offset of its latest
// record, as Kafka's SkimpyOffsetMap does: keys are stored as hashes, so
// that the map's memory depends on the number of keys, not their size.
//
// A hash collision would make a record look superseded by another key's
// record and drop it, so the hash is 128 bits wide: two maphash values
// under independent random seeds (AES-based where the CPU has it, and
// seeded per clean, so that a producer cannot aim keys at a collision).
// With n keys the chance of any collision is about n^2 / 2^129: below
// 10^-25 for the 5 million keys of Kafka's default buffer. Kafka accepts
// the same risk with MD5.
type offsetMap struct {
	seeds [2]maphash.Seed
	m     map[[2]uint64]int64
	max   int
}

func newOffsetMap(maxKeys int) *offsetMap {
	return &offsetMap{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, m: map[[2]uint64]int64{}, max: maxKeys}
}

func (m *offsetMap) hash(key []byte) [2]uint64 {
	return [2]uint64{maphash.Bytes(m.seeds[0], key), maphash.Bytes(m.seeds[1], key)}
}

func (m *offsetMap) put(key []byte, offset int64) { m.m[m.hash(key)] = offset }

// get returns the offset of key's latest record in the dirty section, or
// -1 when the key does not occur there.
func (m *offsetMap) get(key []byte) int64 {
	if off, ok := m.m[m.hash(key)]; ok {
		return off
	}
	return -1
}

func (m *offsetMap) len() int { return len(m.m) }

// buildMap maps the keys of the dirty section [firstDirty, cleanable end)
// and sets c.mapEnd: the cleanable end, or, when the map fills up, the
// base of the first batch left out (so the map ends on a batch boundary,
// possibly inside a segment, as Kafka's does). Control batches carry no
// keys. A batch whose records cannot be read is skipped: its keys then
// supersede nothing, and the rewrite keeps it whole, so nothing is lost.
func (c *cleanRun) buildMap() error {
	fd, end := c.plan.Status.FirstDirty, c.plan.Status.CleanableEnd
	c.mapEnd = end
	if fd >= end {
		return nil
	}
	for _, ps := range c.plan.segs {
		if ps.next <= fd {
			continue
		}
		if ps.seg.base >= end {
			break
		}
		r := getHeaderReader(ps.seg.log)
		pos, _, err := ps.seg.find(r, fd, ps.size)
		putHeaderReader(r)
		if err != nil {
			return err
		}
		sc := c.scanner(ps.seg.log, ps.size)
		for pos < ps.size {
			if err := c.checkStop(); err != nil {
				return err
			}
			b, h, err := c.batchAt(sc, ps, pos)
			if err != nil {
				return err
			}
			if h.BaseOffset >= end {
				break
			}
			// Stop before a batch that might not fit; at least one batch
			// is always mapped, so that every clean makes progress.
			if c.m.len() > 0 && c.m.len()+int(h.NumRecords) > c.m.max {
				c.mapEnd = h.BaseOffset
				return nil
			}
			if !h.Control() {
				err := batch.Records(h, b, maxDecompressedBytes, func(rec *batch.Record) error {
					if off := h.BaseOffset + int64(rec.OffsetDelta); rec.Key != nil && off >= fd && off < end {
						c.m.put(rec.Key, off)
					}
					return nil
				})
				if err != nil {
					c.stats.BatchesUndecodable++
				}
			}
			c.read(int64(h.Size()))
			pos += int64(h.Size())
		}
	}
	return nil
}

// batchAt returns the batch at pos of ps, validated (CRC included): a
// clean must not seal damaged bytes under a fresh CRC.
func (c *cleanRun) batchAt(sc *batchScanner, ps planSeg, pos int64) ([]byte, batch.Header, error) {
	b, why, err := sc.at(pos)
	if err != nil {
		return nil, batch.Header{}, err
	}
	if why != "" {
		return nil, batch.Header{}, fmt.Errorf("%w: %s at %d: %s", ErrCorrupt, ps.seg.path(logSuffix), pos, why)
	}
	h, err := batch.Validate(b, batch.Stored)
	if err != nil {
		return nil, h, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, ps.seg.path(logSuffix), pos, err)
	}
	return b, h, nil
}
