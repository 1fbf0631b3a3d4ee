//go:build !unix

package segment

// syncDir is a no-op where directories cannot be opened for sync
// (Windows makes renames durable through the file system's own journal).
func syncDir(string) error { return nil }
