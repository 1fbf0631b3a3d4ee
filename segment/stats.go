package segment

// AppendedBytes is the number of bytes of batches appended to the log
// since it was opened in this process (leader appends and a follower's
// copies alike; a truncated and rewritten range counts twice). It only
// grows, so the broker exports it as a counter whose rate is the log's
// write throughput, which its size (retention, compaction) does not give.
// Any goroutine may call it.
func (l *Log) AppendedBytes() int64 { return l.appended.Load() }
