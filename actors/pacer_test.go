package actors

import (
	"testing"

	"github.com/queengo/queengo"
)

// cutWriter is a writer whose segment of n messages is cut and ready.
func cutWriter(n int) *partitionWriter {
	return &partitionWriter{frames: make([]queengo.Frame, n)}
}

// TestCommitPacer_OneCommitInFlightUnlessTheBacklogIsLarge: the first ready
// segments commit at once, all together; while a commit is in flight the
// next waits and gathers everything that arrives, unless the backlog reaches
// concurrentCommitMin messages; never more than max commits at once.
func TestCommitPacer_OneCommitInFlightUnlessTheBacklogIsLarge(t *testing.T) {
	t.Parallel()
	p := commitPacer{max: 2}
	if p.next() != nil {
		t.Fatal("a commit with nothing ready")
	}
	p.add(cutWriter(1))
	p.add(cutWriter(2))
	if got := p.next(); len(got) != 2 {
		t.Fatalf("first commit carries %d segments, want both", len(got))
	}
	p.add(cutWriter(concurrentCommitMin - 1))
	if p.next() != nil {
		t.Fatal("a second commit for a small backlog")
	}
	p.add(cutWriter(1))
	if got := p.next(); len(got) != 2 {
		t.Fatalf("a backlog of concurrentCommitMin: second commit of %d segments, want 2", len(got))
	}
	p.add(cutWriter(concurrentCommitMin))
	if p.next() != nil {
		t.Fatal("a third commit past max")
	}
	p.done()
	if got := p.next(); len(got) != 1 {
		t.Fatalf("after a commit finished: %d segments, want 1", len(got))
	}
	p.done()
	p.done()
	if !p.idle() {
		t.Fatal("not idle with nothing ready or in flight")
	}
}

// TestCommitPacer_LargeBacklogSplitsOverTwoCommits: with nothing in flight,
// a backlog of twice concurrentCommitMin over several partitions goes out
// as two commits at once, about half the messages each, every segment in
// exactly one of them.
func TestCommitPacer_LargeBacklogSplitsOverTwoCommits(t *testing.T) {
	t.Parallel()
	p := commitPacer{max: 2}
	for range 10 {
		p.add(cutWriter(concurrentCommitMin / 5))
	}
	first := p.next()
	second := p.next()
	if len(first) != 5 || len(second) != 5 {
		t.Fatalf("commits of %d and %d segments, want 5 and 5", len(first), len(second))
	}
	if p.next() != nil {
		t.Fatal("a third commit past max")
	}
	seen := map[*partitionWriter]bool{}
	for _, w := range append(first, second...) {
		if seen[w] {
			t.Fatal("a segment in both commits")
		}
		seen[w] = true
	}
	// A small backlog still goes out whole.
	q := commitPacer{max: 2}
	q.add(cutWriter(10))
	q.add(cutWriter(10))
	if got := q.next(); len(got) != 2 {
		t.Fatalf("small backlog: first commit carries %d segments, want 2", len(got))
	}
}
