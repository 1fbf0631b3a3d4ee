package ioring

// Depth is how much of an io_uring IO's queue is taken at one moment: the
// submission-queue entries handed to the kernel (io_uring_enter) whose
// completions have not been reaped yet, and the most that may be (the
// completion queue's size: Submit holds SQEs in flight at or below it, so
// the CQ never overflows, and a caller who would go over waits in Submit).
type Depth struct {
	SQEsInFlight int
	SQEsMax      int
}

// DepthOf reports io's depth; ok is false for an IO that is not an io_uring
// (the portable IO performs its ops inside Submit and holds none), or one
// wrapped by another IO. Like every IO method it must be called on io's
// owner goroutine.
func DepthOf(io IO) (d Depth, ok bool) { return depthOf(io) }
