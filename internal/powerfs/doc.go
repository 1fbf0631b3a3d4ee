// Package powerfs is a FUSE file system that forgets, on command, what was
// never synced: a power cut for tests, in the spirit of Jepsen's LazyFS.
// It is test code; the broker never imports it.
//
// The file system lives in the memory of the process that mounts it. Every
// file has two contents: the one readers see, and the one a power loss
// leaves (as of its last fsync or fdatasync), with the changes between the
// two kept in order. Every directory has two entry sets: the current one
// and the one as of its last fsync. PowerLoss unmounts (the processes using
// the mount must be dead, as they would be), rebuilds the namespace from
// the root through durable entries only, resets every file to what the
// mode keeps, and mounts again at the same place:
//
//	write/truncate/fallocate  ->  cur changes, op appended to pending
//	fsync/fdatasync (file)    ->  pending applied to dur
//	create/mkdir/rename/unlink/link  ->  dir.cur changes
//	fsync (directory)         ->  dir.dur = dir.cur
//	PowerLoss(mode)           ->  walk root via dir.dur; file.cur = dur
//	                              (+ part of pending: Torn, Reorder)
//
// What it models, as the kernel would leave things after a power cut under
// the strict POSIX reading:
//   - file data and size: durable after fsync or fdatasync of that file
//     (fdatasync is treated as fsync: both carry the size);
//   - entries: a file or directory created, renamed into or out of, or
//     removed from a directory changes that directory only; the change is
//     durable after an fsync of that directory. A new directory exists
//     after a power loss only if its parent was synced after the mkdir, so
//     a file synced in a directory that never reached its parent is lost
//     with the directory. A rename is atomic at the moment each of its two
//     directories is synced (a rename between two directories of which
//     only one is synced leaves the file in neither or both);
//   - fallocate (mode 0) grows the size like a truncate, unsynced until the
//     next fsync; KEEP_SIZE does nothing; PUNCH_HOLE zeroes;
//   - writes through a shared mmap arrive when the kernel writes the pages
//     back (msync, fsync, munmap, eviction, or the unmount of a power
//     loss); they are durable after an fsync or msync only;
//   - the io_uring path is the same as the system calls: IORING_OP_WRITEV
//     and IORING_OP_FSYNC reach the file system as WRITE and FSYNC.
//   - Torn keeps, per file, the unsynced changes in order up to a random
//     point and a random prefix of the write at that point; Reorder keeps
//     each 4 KiB page as it was at a random moment since the last sync
//     (its writes up to a random one: a page is written back whole) and
//     each size change with probability 1/2.
//
// What it does not model: free space (statfs reports a large empty disk;
// ENOSPC only when the unsynced data held in memory passes its bound),
// permission bits and timestamps (kept as set, never lost), the order of
// entry changes within a directory that was not synced (all or nothing at
// the directory's fsync, where a journaling file system may keep some),
// file-system-wide syncs (sync, syncfs: FUSE does not pass them on), the
// data a real file system's journal writes back on its own after some
// seconds (powerfs is the worst case: nothing is written unless synced),
// and O_DIRECT. Locks (flock, fcntl) are kept by the kernel, per mount.
//
// Concurrency: one mutex guards the model; FUSE calls from many kernel
// threads serialise on it. PowerLoss, Unmount and Unsynced may be called
// from any goroutine, but not concurrently with each other.
//
// Non-obvious invariants:
//   - the kernel caches pages, entries and attributes; all changes go
//     through it, so the caches stay true, and PowerLoss only changes the
//     model while unmounted, so nothing cached outlives it.
//   - a file the kernel still has pages of in a writable mapping gets them
//     back as WRITEs during the unmount of a power loss; they arrive
//     unsynced and are dropped with the rest.
package powerfs
