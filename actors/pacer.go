package actors

// concurrentCommitMin is the backlog of ready messages that justifies a
// second commit while one is in flight. Below it, waiting for the commit in
// flight makes the next one carry everything that arrived meanwhile, and
// PostgreSQL's cost is mostly per commit: at batch=1 with 50 connections one
// commit at a time gave 17k msg/s against 12k with two (docs/performance.md "The dated record");
// at batch=100 a second commit adds about 10%.
const concurrentCommitMin = 500

// commitPacer decides when a queue's ready segments are committed: all of
// them together in one Append (one statement, one commit), one commit in
// flight at a time unless the backlog reaches concurrentCommitMin messages
// (a backlog of twice that is split over two commits at once), and never
// more than max at once. It only decides; the queue actor runs the
// commits.
type commitPacer struct {
	max      int
	ready    []*partitionWriter // writers whose segment waits for a commit
	messages int                // frames in the ready segments
	inFlight int
}

// add queues a writer's cut segment for the next commit.
func (p *commitPacer) add(w *partitionWriter) {
	p.ready = append(p.ready, w)
	p.messages += len(w.frames)
}

// next returns the writers whose segments the next commit carries, or nil
// when no commit should start now. The caller runs the commit and calls done
// when it finished.
func (p *commitPacer) next() []*partitionWriter {
	if len(p.ready) == 0 || p.inFlight >= p.max || (p.inFlight > 0 && p.messages < concurrentCommitMin) {
		return nil
	}
	batch := p.ready
	// A backlog for two commits, with room for both, is split between them
	// by partition, about half the messages each, so they run side by side:
	// one commit carrying every partition keeps their next segments (one in
	// flight per partition) from a second commit until it is done, and push
	// at batch 100 ran at 60-80% of the throughput of two (docs/performance.md "The dated record").
	if p.inFlight+1 < p.max && p.messages >= 2*concurrentCommitMin && len(p.ready) > 1 {
		half, n := 0, 0
		for half < len(p.ready)-1 && 2*n < p.messages {
			n += len(p.ready[half].frames)
			half++
		}
		batch = p.ready[:half:half]
		p.ready = append([]*partitionWriter(nil), p.ready[half:]...)
		p.messages -= n
	} else {
		p.ready, p.messages = nil, 0
	}
	p.inFlight++
	return batch
}

// done records that a commit next started has finished.
func (p *commitPacer) done() { p.inFlight-- }

// idle reports whether nothing waits for a commit and none is in flight.
func (p *commitPacer) idle() bool { return len(p.ready) == 0 && p.inFlight == 0 }
