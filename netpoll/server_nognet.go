//go:build !(linux || freebsd || darwin)

package netpoll

import "errors"

// gnetSupported: not here; Listen always takes the portable path.
const gnetSupported = false

func startGnet(*Server) (engine, error) {
	return nil, errors.New("netpoll: gnet is not supported on this system")
}
