//go:build !linux

package netpoll

import "os"

// writeRegion copies a file region on a portable connection: the portable
// path uses sendfile only on Linux (the gnet path has it on the BSDs too).
func writeRegion(pc *pconn, f *os.File, pos, n int64) (int64, error) {
	return copyRegion(pc.nc, f, pos, n, pc.c)
}
