package netpoll

// The request budget (Config.MaxQueuedRequestBytes, Kafka's
// queued.max.request.bytes): Server.reqBytes sums the frames handed to the
// handler and not yet answered, over all connections. A connection that
// finds it at the budget (and has a request of its own in flight) pauses
// like one at MaxInFlight, and registers in budgetWait; the answer that
// brings the sum back under the budget wakes every registered connection.
// Nothing here runs when the budget is unbounded, the default.

// overBudget reports whether the budget is spent, and if so registers c to
// be woken when it is not. Registering before the second look means no
// wake-up is lost to an answer landing between the two.
func (s *Server) overBudget(c *Conn) bool {
	budget := s.cfg.MaxQueuedRequestBytes
	if budget <= 0 || s.reqBytes.Load() < budget {
		return false
	}
	s.budgetMu.Lock()
	s.budgetWait[c] = struct{}{}
	s.budgetMu.Unlock()
	return s.reqBytes.Load() >= budget
}

// unqueueRequest takes n answered request bytes off the budget, and wakes
// the paused connections if that brought it back under.
func (s *Server) unqueueRequest(n int64) {
	budget := s.cfg.MaxQueuedRequestBytes
	after := s.reqBytes.Add(-n)
	if after >= budget || after+n < budget {
		return // still spent, or was not: nobody waits for this
	}
	s.budgetMu.Lock()
	waiting := make([]*Conn, 0, len(s.budgetWait))
	for c := range s.budgetWait {
		waiting = append(waiting, c)
	}
	clear(s.budgetWait)
	s.budgetMu.Unlock()
	for _, c := range waiting {
		c.t.notify()
	}
}

// budgetForget drops c from the paused connections when it closes.
func (s *Server) budgetForget(c *Conn) {
	if s.cfg.MaxQueuedRequestBytes <= 0 {
		return
	}
	s.budgetMu.Lock()
	delete(s.budgetWait, c)
	s.budgetMu.Unlock()
}
