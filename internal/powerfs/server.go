//go:build linux

package powerfs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// server is a mounted power-loss file system, served from this process.
// Its state outlives a mount: powerLoss unmounts, drops what was never
// synced and mounts again at the same place.
type server struct {
	dir string
	rng *rand.Rand

	mu   sync.Mutex // guards m, the model, for every FUSE call
	m    *model
	fuse *fuse.Server
	// failing is a path under the mount (relative, no leading slash)
	// below which writes, allocations and syncs fail with EIO: a disk
	// that broke under one log. Empty: none. Guarded by mu.
	failing string
}

// fails reports whether f is under the failing path (mu held).
func (f *fnode) fails() bool {
	if f.p.failing == "" {
		return false
	}
	path := f.Path(nil)
	return path == f.p.failing || strings.HasPrefix(path, f.p.failing+"/")
}

// serve mounts an empty file system at dir, which must exist.
func serve(dir string, opts Options) (*server, error) {
	m := newModel()
	if opts.UnsyncedMax > 0 {
		m.unsyncedMax = opts.UnsyncedMax
	}
	p := &server{dir: dir, m: m, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	if err := p.mount(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *server) mount() error {
	// The kernel may cache entries and attributes: every change goes
	// through it, and a power loss unmounts, which drops all it cached.
	timeout := time.Second
	server, err := fs.Mount(p.dir, &fnode{p: p, n: p.m.root}, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        "powerfs",
			Name:          "powerfs",
			DirectMount:   true,
			DisableXAttrs: true,
			MaxWrite:      1 << 20,
			// flock and fcntl locks are kept by the kernel (EnableLocks is
			// off): they do not outlive a process, let alone a power loss.
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s: %w", p.dir, err)
	}
	p.fuse = server
	return nil
}

// unmount stops serving. Every process with a file or directory open under
// the mount must have let go (or died) first.
func (p *server) unmount() error {
	if p.fuse == nil {
		return nil
	}
	var err error
	// The kernel refuses while a dying process still holds files; give
	// it a moment.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = p.fuse.Unmount(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("powerfs: unmount %s: %w", p.dir, err)
	}
	p.fuse.Wait()
	p.fuse = nil
	return nil
}

// powerLoss cuts the power: it unmounts (every process using the mount
// must be dead by now, as it would be), keeps of the unsynced state what
// mode says, and mounts the survivors again.
func (p *server) powerLoss(mode Mode) error {
	if err := p.unmount(); err != nil {
		return err
	}
	p.mu.Lock()
	p.m.powerLoss(mode, p.rng)
	p.mu.Unlock()
	return p.mount()
}

// unsynced reports what a power loss now would put at risk.
func (p *server) unsynced() (files, bytes, dirs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.unsyncedStats()
}

// fnode is the FUSE face of a model node; the model holds all the state.
type fnode struct {
	fs.Inode
	p *server
	n *node
}

var (
	_ fs.NodeLookuper  = (*fnode)(nil)
	_ fs.NodeReaddirer = (*fnode)(nil)
	_ fs.NodeGetattrer = (*fnode)(nil)
	_ fs.NodeSetattrer = (*fnode)(nil)
	_ fs.NodeCreater   = (*fnode)(nil)
	_ fs.NodeMkdirer   = (*fnode)(nil)
	_ fs.NodeUnlinker  = (*fnode)(nil)
	_ fs.NodeRmdirer   = (*fnode)(nil)
	_ fs.NodeRenamer   = (*fnode)(nil)
	_ fs.NodeLinker    = (*fnode)(nil)
	_ fs.NodeOpener    = (*fnode)(nil)
	_ fs.NodeReader    = (*fnode)(nil)
	_ fs.NodeWriter    = (*fnode)(nil)
	_ fs.NodeFsyncer   = (*fnode)(nil)
	_ fs.NodeAllocater = (*fnode)(nil)
	_ fs.NodeStatfser  = (*fnode)(nil)
)

func (f *fnode) lock() func() {
	f.p.mu.Lock()
	return f.p.mu.Unlock
}

// child wraps a model node as a kernel inode, numbered by the model so
// that hard links and renames keep their identity.
func (f *fnode) child(ctx context.Context, n *node, out *fuse.EntryOut) *fs.Inode {
	fillAttr(n, &out.Attr)
	return f.NewInode(ctx, &fnode{p: f.p, n: n}, fs.StableAttr{Mode: n.mode & syscall.S_IFMT, Ino: n.ino})
}

func fillAttr(n *node, a *fuse.Attr) {
	a.Ino = n.ino
	a.Mode = n.mode
	a.Nlink = uint32(max(n.links, 1))
	a.Blksize = pageSize
	if n.isDir() {
		a.Size = pageSize
		a.Nlink++
	} else {
		a.Size = uint64(n.f.cur.size)
	}
	a.Blocks = (a.Size + 511) / 512
	a.SetTimes(&n.mtime, &n.mtime, &n.ctime)
}

func (f *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer f.lock()()
	if !f.n.isDir() {
		return nil, syscall.ENOTDIR
	}
	c, ok := f.n.d.cur[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return f.child(ctx, c, out), 0
}

func (f *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer f.lock()()
	if !f.n.isDir() {
		return nil, syscall.ENOTDIR
	}
	entries := make([]fuse.DirEntry, 0, len(f.n.d.cur))
	for _, name := range sortedNames(f.n.d.cur) {
		c := f.n.d.cur[name]
		entries = append(entries, fuse.DirEntry{Name: name, Ino: c.ino, Mode: c.mode & syscall.S_IFMT})
	}
	return fs.NewListDirStream(entries), 0
}

func (f *fnode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer f.lock()()
	fillAttr(f.n, &out.Attr)
	return 0
}

func (f *fnode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	defer f.lock()()
	if size, ok := in.GetSize(); ok {
		if f.n.isDir() {
			return syscall.EISDIR
		}
		if errno := f.p.m.change(f.n, op{kind: opTruncate, size: int64(size)}); errno != 0 {
			return errno
		}
	}
	// Permission bits and times are kept as set, and survive a power loss
	// (the model does not track metadata other than sizes and entries).
	if mode, ok := in.GetMode(); ok {
		f.n.mode = f.n.mode&syscall.S_IFMT | mode&0o7777
	}
	if mtime, ok := in.GetMTime(); ok {
		f.n.mtime = mtime
	}
	fillAttr(f.n, &out.Attr)
	return 0
}

func (f *fnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	defer f.lock()()
	n, errno := f.p.m.create(f.n, name, syscall.S_IFREG|mode&0o7777)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return f.child(ctx, n, out), nil, 0, 0
}

func (f *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer f.lock()()
	n, errno := f.p.m.create(f.n, name, syscall.S_IFDIR|mode&0o7777)
	if errno != 0 {
		return nil, errno
	}
	return f.child(ctx, n, out), 0
}

func (f *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	defer f.lock()()
	return f.p.m.remove(f.n, name, false)
}

func (f *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	defer f.lock()()
	return f.p.m.remove(f.n, name, true)
}

func (f *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	defer f.lock()()
	to, ok := newParent.(*fnode)
	if !ok {
		return syscall.EXDEV
	}
	return f.p.m.rename(f.n, name, to.n, newName, flags)
}

func (f *fnode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer f.lock()()
	t, ok := target.(*fnode)
	if !ok {
		return nil, syscall.EXDEV
	}
	if errno := f.p.m.link(f.n, name, t.n); errno != 0 {
		return nil, errno
	}
	return f.child(ctx, t.n, out), 0
}

func (f *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	defer f.lock()()
	if flags&syscall.O_TRUNC != 0 && !f.n.isDir() {
		if errno := f.p.m.change(f.n, op{kind: opTruncate, size: 0}); errno != 0 {
			return nil, 0, errno
		}
	}
	return nil, 0, 0
}

func (f *fnode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	defer f.lock()()
	if f.n.isDir() {
		return nil, syscall.EISDIR
	}
	n := f.n.f.cur.read(off, dest)
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *fnode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	defer f.lock()()
	if f.n.isDir() {
		return 0, syscall.EISDIR
	}
	if f.fails() {
		return 0, syscall.EIO
	}
	if errno := f.p.m.change(f.n, op{kind: opWrite, off: off, data: data}); errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// Fsync serves fsync and fdatasync of files and fsync of directories (the
// kernel sends FSYNCDIR for those, which the bridge hands here too).
func (f *fnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	defer f.lock()()
	if f.fails() {
		return syscall.EIO
	}
	f.p.m.sync(f.n)
	return 0
}

const (
	fallocKeepSize  = 0x01 // FALLOC_FL_KEEP_SIZE
	fallocPunchHole = 0x02 // FALLOC_FL_PUNCH_HOLE
)

func (f *fnode) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	defer f.lock()()
	if f.n.isDir() {
		return syscall.EISDIR
	}
	switch mode {
	case 0:
		// Space is not modelled: fallocate only grows the size, and the
		// new size is unsynced until the next fsync, as on a real disk.
		if end := int64(off + size); end > f.n.f.cur.size {
			return f.p.m.change(f.n, op{kind: opTruncate, size: end})
		}
		return 0
	case fallocKeepSize:
		return 0
	case fallocKeepSize | fallocPunchHole:
		return f.p.m.change(f.n, op{kind: opPunch, off: int64(off), size: int64(size)})
	}
	return syscall.EOPNOTSUPP
}

func (f *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	// A large, mostly empty disk: space is not modelled.
	const blocks = 1 << 30 // 4 TiB of 4 KiB blocks
	out.Bsize, out.Frsize = pageSize, pageSize
	out.Blocks, out.Bfree, out.Bavail = blocks, blocks-1, blocks-1
	out.Files, out.Ffree = 1<<30, 1<<30-1
	out.NameLen = 255
	return 0
}

// Available says whether this machine can mount FUSE (/dev/fuse opens).
// Tests that need the tool fail without it; this only gives them a clear
// message.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powerfs: FUSE unavailable: %w", err)
	}
	return f.Close()
}
