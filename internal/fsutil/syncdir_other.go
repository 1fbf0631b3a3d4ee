//go:build !unix

package fsutil

// SyncDir is a no-op where directories cannot be opened for sync (Windows
// makes renames durable through the file system's own journal).
func SyncDir(string) error { return nil }
