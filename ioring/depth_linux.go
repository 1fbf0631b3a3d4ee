package ioring

func depthOf(io IO) (Depth, bool) {
	u, ok := io.(*uringIO)
	if !ok || u.closed {
		return Depth{}, false
	}
	return Depth{SQEsInFlight: u.sqesOut, SQEsMax: u.maxOut()}, true
}
