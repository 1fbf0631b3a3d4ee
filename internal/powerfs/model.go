//go:build linux

package powerfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"syscall"
	"time"
)

// Mode says what a power loss keeps of the writes that were never synced.
type Mode int

const (
	// Drop keeps nothing that was not synced: every file holds what it held
	// at its last fsync, every directory the entries it had at its last
	// fsync. The strict reading of POSIX, and the default.
	Drop Mode = iota
	// Torn keeps, per file, the unsynced writes in the order they were
	// made up to a random point, the write at that point cut at a random
	// byte: a disk that persists in order and loses power mid-write.
	Torn
	// Reorder keeps each 4 KiB page as it was at a random moment since
	// the last sync (the writes to that page up to a random one, in the
	// order they were made), independently of the other pages, and each
	// unsynced size change with probability 1/2: a page cache that writes
	// pages back in any order and at any time, each page whole.
	Reorder
)

func (m Mode) String() string {
	switch m {
	case Drop:
		return "drop"
	case Torn:
		return "torn"
	case Reorder:
		return "reorder"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// pageSize is the unit in which Reorder keeps or drops unsynced data.
const pageSize = 4096

// content is a file's bytes: data, then zeros up to size (what fallocate
// and a truncate that grows leave, without holding them in memory).
type content struct {
	data []byte
	size int64
}

func (c *content) clone() content {
	return content{data: append([]byte(nil), c.data...), size: c.size}
}

// write stores p at off, growing the file as a write past its end does.
func (c *content) write(off int64, p []byte) {
	end := off + int64(len(p))
	if end > int64(len(c.data)) {
		if end > int64(cap(c.data)) {
			grown := make([]byte, end, max(end, 2*int64(cap(c.data))))
			copy(grown, c.data)
			c.data = grown
		} else {
			old := len(c.data)
			c.data = c.data[:end]
			clear(c.data[old:])
		}
	}
	copy(c.data[off:], p)
	c.size = max(c.size, end)
}

// truncate sets the size; bytes past it are gone, bytes it adds read zero.
func (c *content) truncate(size int64) {
	if size < int64(len(c.data)) {
		c.data = c.data[:size]
	}
	c.size = size
}

// punch zeroes [off, off+n) without changing the size.
func (c *content) punch(off, n int64) {
	end := min(off+n, int64(len(c.data)))
	if off < end {
		clear(c.data[off:end])
	}
}

// read copies from off into dst and returns how many bytes it copied.
func (c *content) read(off int64, dst []byte) int {
	if off >= c.size {
		return 0
	}
	n := min(int64(len(dst)), c.size-off)
	dst = dst[:n]
	copied := 0
	if off < int64(len(c.data)) {
		copied = copy(dst, c.data[off:])
	}
	clear(dst[copied:])
	return int(n)
}

type opKind uint8

const (
	opWrite    opKind = iota // data at off
	opTruncate               // size becomes size
	opPunch                  // zeros over [off, off+size)
)

// op is one change to a file's content since its last sync.
type op struct {
	kind opKind
	off  int64
	size int64
	data []byte
}

func (o *op) apply(c *content) {
	switch o.kind {
	case opWrite:
		c.write(o.off, o.data)
	case opTruncate:
		c.truncate(o.size)
	case opPunch:
		c.punch(o.off, o.size)
	}
}

// file is a regular file: what readers see (cur), what survives a power
// loss (dur), and the changes between the two in the order they were made.
type file struct {
	cur, dur content
	pending  []op
	// pendingBytes counts the unsynced data held in pending.
	pendingBytes int64
}

func (f *file) change(o op) {
	o.apply(&f.cur)
	f.pending = append(f.pending, o)
	f.pendingBytes += int64(len(o.data))
}

// sync makes every change so far durable.
func (f *file) sync() {
	for i := range f.pending {
		f.pending[i].apply(&f.dur)
	}
	f.pending, f.pendingBytes = nil, 0
}

// lose applies a power loss to the file: dur keeps what mode lets
// survive of the unsynced changes, and cur becomes dur.
func (f *file) lose(mode Mode, rng *rand.Rand) {
	switch mode {
	case Torn:
		keep := rng.IntN(len(f.pending) + 1)
		for i := range keep {
			f.pending[i].apply(&f.dur)
		}
		if keep < len(f.pending) {
			if o := f.pending[keep]; o.kind == opWrite && len(o.data) > 0 {
				o.data = o.data[:rng.IntN(len(o.data))]
				o.apply(&f.dur)
			}
		}
	case Reorder:
		// How many of the writes to each page reached the disk: the page
		// was written back after that many of them (a page is written
		// back whole, as it was at that moment).
		writes := map[int64]int{}
		for _, o := range f.pending {
			for off := o.off; o.kind == opWrite && off < o.off+int64(len(o.data)); off = (off/pageSize + 1) * pageSize {
				writes[off/pageSize]++
			}
		}
		kept := map[int64]int{}
		for page, n := range writes {
			kept[page] = rng.IntN(n + 1)
		}
		seen := map[int64]int{}
		for _, o := range f.pending {
			if o.kind != opWrite {
				if rng.IntN(2) == 0 {
					o.apply(&f.dur)
				}
				continue
			}
			// Pages of the write, aligned to the file's pages.
			for off := o.off; off < o.off+int64(len(o.data)); {
				end := min((off/pageSize+1)*pageSize, o.off+int64(len(o.data)))
				if page := off / pageSize; seen[page] < kept[page] {
					f.dur.write(off, o.data[off-o.off:end-o.off])
				}
				seen[off/pageSize]++
				off = end
			}
		}
	}
	f.pending, f.pendingBytes = nil, 0
	f.cur = f.dur.clone()
}

// dir is a directory: its entries as readers see them (cur) and as they
// were at its last fsync (dur).
type dir struct {
	cur, dur map[string]*node
}

// node is a file or directory. Its identity (ino) is what hard links and
// renames keep.
type node struct {
	ino   uint64
	mode  uint32 // type and permission bits
	mtime time.Time
	ctime time.Time
	links int // entries naming it in the current namespace
	f     *file
	d     *dir
}

func (n *node) isDir() bool { return n.d != nil }

// model is the file system's state, with no FUSE in it: every operation
// the mount serves is a method here, so the rules can be tested on their
// own. The caller serialises calls.
type model struct {
	root    *node
	inoNext uint64
	now     func() time.Time
	// unsyncedMax bounds the unsynced data held in memory: past it, writes
	// fail with ENOSPC (a test that needs more is told so, loudly).
	unsyncedMax int64
	unsynced    int64
}

var errUnsyncedFull = errors.New("powerfs: unsynced data limit reached")

func newModel() *model {
	m := &model{inoNext: 1, now: time.Now, unsyncedMax: 4 << 30}
	m.root = m.newNode(syscall.S_IFDIR | 0o755)
	m.root.links = 1
	return m
}

func (m *model) newNode(mode uint32) *node {
	t := m.now()
	n := &node{ino: m.inoNext, mode: mode, mtime: t, ctime: t}
	m.inoNext++
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		n.d = &dir{cur: map[string]*node{}, dur: map[string]*node{}}
	} else {
		n.f = &file{}
	}
	return n
}

func (m *model) touch(n *node) {
	t := m.now()
	n.mtime, n.ctime = t, t
}

// create makes a new entry name in parent for a node of the given mode.
func (m *model) create(parent *node, name string, mode uint32) (*node, syscall.Errno) {
	if _, ok := parent.d.cur[name]; ok {
		return nil, syscall.EEXIST
	}
	n := m.newNode(mode)
	n.links = 1
	parent.d.cur[name] = n
	m.touch(parent)
	return n, 0
}

func (m *model) link(parent *node, name string, target *node) syscall.Errno {
	if target.isDir() {
		return syscall.EPERM
	}
	if _, ok := parent.d.cur[name]; ok {
		return syscall.EEXIST
	}
	parent.d.cur[name] = target
	target.links++
	m.touch(parent)
	return 0
}

func (m *model) remove(parent *node, name string, wantDir bool) syscall.Errno {
	n, ok := parent.d.cur[name]
	if !ok {
		return syscall.ENOENT
	}
	switch {
	case wantDir && !n.isDir():
		return syscall.ENOTDIR
	case !wantDir && n.isDir():
		return syscall.EISDIR
	case wantDir && len(n.d.cur) > 0:
		return syscall.ENOTEMPTY
	}
	delete(parent.d.cur, name)
	n.links--
	m.touch(parent)
	return 0
}

const (
	renameNoReplace = 1 // RENAME_NOREPLACE
	renameExchange  = 2 // RENAME_EXCHANGE
)

func (m *model) rename(from *node, name string, to *node, newName string, flags uint32) syscall.Errno {
	n, ok := from.d.cur[name]
	if !ok {
		return syscall.ENOENT
	}
	old, exists := to.d.cur[newName]
	switch {
	case flags&^(renameNoReplace|renameExchange) != 0:
		return syscall.EINVAL
	case flags&renameExchange != 0:
		if !exists {
			return syscall.ENOENT
		}
		from.d.cur[name], to.d.cur[newName] = old, n
		m.touch(from)
		m.touch(to)
		return 0
	case exists && flags&renameNoReplace != 0:
		return syscall.EEXIST
	}
	if exists {
		if old == n {
			return 0 // two names of one file: rename does nothing
		}
		switch {
		case n.isDir() && !old.isDir():
			return syscall.ENOTDIR
		case !n.isDir() && old.isDir():
			return syscall.EISDIR
		case old.isDir() && len(old.d.cur) > 0:
			return syscall.ENOTEMPTY
		}
		old.links--
	}
	delete(from.d.cur, name)
	to.d.cur[newName] = n
	m.touch(from)
	m.touch(to)
	return 0
}

// write changes a file's content and counts the unsynced bytes against the
// limit.
func (m *model) change(n *node, o op) syscall.Errno {
	if m.unsynced+int64(len(o.data)) > m.unsyncedMax {
		return syscall.ENOSPC
	}
	if o.kind == opWrite {
		o.data = append([]byte(nil), o.data...)
	}
	n.f.change(o)
	m.unsynced += int64(len(o.data))
	m.touch(n)
	return 0
}

// sync makes a file's content, or a directory's entries, durable.
func (m *model) sync(n *node) {
	if n.isDir() {
		n.d.dur = cloneEntries(n.d.cur)
		return
	}
	m.unsynced -= n.f.pendingBytes
	n.f.sync()
}

func cloneEntries(in map[string]*node) map[string]*node {
	out := make(map[string]*node, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// powerLoss replaces the state with what survives a power loss: the
// namespace as the durable entries of the directories reachable from the
// root through durable entries, and each file's content as mode says.
func (m *model) powerLoss(mode Mode, rng *rand.Rand) {
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if seen[n] {
			n.links++
			return
		}
		seen[n] = true
		n.links = 1
		if !n.isDir() {
			n.f.lose(mode, rng)
			return
		}
		n.d.cur = cloneEntries(n.d.dur)
		// Walk in name order so that a seeded run is repeatable.
		for _, name := range sortedNames(n.d.cur) {
			walk(n.d.cur[name])
		}
	}
	walk(m.root)
	m.unsynced = 0
}

func sortedNames(entries map[string]*node) []string {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// unsyncedStats counts what a power loss now would put at risk.
func (m *model) unsyncedStats() (files, bytes int64, dirs int64) {
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.isDir() {
			if len(n.f.pending) > 0 {
				files++
				bytes += n.f.pendingBytes
			}
			return
		}
		if !sameEntries(n.d.cur, n.d.dur) {
			dirs++
		}
		for _, c := range n.d.cur {
			walk(c)
		}
	}
	walk(m.root)
	return files, bytes, dirs
}

func sameEntries(a, b map[string]*node) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
