package ioring

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// portableIO performs every op synchronously inside Submit with positioned
// writes and fsync/fdatasync. It runs on every operating system and is the
// fallback on Linux hosts where io_uring is unavailable. Submit does the
// work, so Wait never blocks.
type portableIO struct {
	done   []*Op
	count  int
	closed bool
}

// NewPortable returns the portable implementation.
func NewPortable() IO { return &portableIO{} }

func (p *portableIO) Kind() Kind    { return Portable }
func (p *portableIO) InFlight() int { return p.count }

func (p *portableIO) Submit(ops ...*Op) error {
	if p.closed {
		return ErrClosed
	}
	for _, o := range ops {
		o.N, o.Err = 0, nil
		p.run(o)
		p.done = append(p.done, o)
		p.count++
	}
	return nil
}

func (p *portableIO) run(o *Op) {
	if o.Kind != OpNop && o.File == nil {
		o.Err = fmt.Errorf("ioring: %s without a file: %w", o.Kind, errBadFile)
		return
	}
	switch o.Kind {
	case OpNop:
	case OpWrite:
		n, err := writeAt(o.File, o.Bufs, o.Offset)
		o.N = n
		if err != nil {
			o.Err = fmt.Errorf("ioring: write %s at %d: %w", o.File.Name(), o.Offset, err)
			return
		}
		if o.Sync != SyncNone {
			if err := syncFile(o.File, o.Sync); err != nil {
				o.Err = fmt.Errorf("ioring: sync %s: %w", o.File.Name(), err)
			}
		}
	case OpRead:
		if len(o.Bufs) != 1 {
			o.Err = fmt.Errorf("ioring: read wants one buffer, got %d: %w", len(o.Bufs), errInvalid)
			return
		}
		n, err := o.File.ReadAt(o.Bufs[0], o.Offset)
		o.N = n
		if err != nil && !errors.Is(err, io.EOF) {
			o.Err = fmt.Errorf("ioring: read %s at %d: %w", o.File.Name(), o.Offset, err)
		}
	case OpSync:
		if err := syncFile(o.File, o.Sync); err != nil {
			o.Err = fmt.Errorf("ioring: sync %s: %w", o.File.Name(), err)
		}
	default:
		o.Err = fmt.Errorf("ioring: unknown op kind %d: %w", o.Kind, errInvalid)
	}
}

func (p *portableIO) Wait(out []*Op, _ int, _ time.Duration) ([]*Op, error) {
	if p.closed {
		return out, ErrClosed
	}
	out = append(out, p.done...)
	p.count -= len(p.done)
	clear(p.done)
	p.done = p.done[:0]
	return out, nil
}

func (p *portableIO) Close() error {
	p.closed = true
	return nil
}
