package engine

// PartitionAppended is one partition's AppendedBytes.
type PartitionAppended struct {
	TP    TP
	Bytes int64
}

// AppendedBytes lists, for every partition with a log here, the bytes
// appended to its log since the log was opened (segment.Log.AppendedBytes):
// a counter that starts again from 0 when the broker restarts or a move
// between log directories installs the copy. It never waits.
func (e *Core) AppendedBytes() []PartitionAppended {
	var out []PartitionAppended
	for tp, p := range *e.parts.Load() {
		if l := p.log(); l != nil {
			out = append(out, PartitionAppended{TP: tp, Bytes: l.AppendedBytes()})
		}
	}
	return out
}
