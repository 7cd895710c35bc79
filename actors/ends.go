package actors

import (
	"container/heap"
	"iter"
	"time"
)

// endHeap is a min-heap of keys by the time they end (container/heap). Its
// owner keeps each key's live end elsewhere: an entry that a later end of
// the same key superseded stays until it comes up and is then skipped, and
// add rebuilds the heap from the live ends when such entries make up most of
// it. So the earliest end is O(1) to read and O(log n) to take, where a list
// scanned on every actor message cost about half the broker's CPU at batch 1
// (docs/performance.md "The dated record").
type endHeap[K comparable] []keyEnd[K]

// keyEnd is one entry of an endHeap.
type keyEnd[K comparable] struct {
	at  time.Time
	key K
}

func (h endHeap[K]) Len() int           { return len(h) }
func (h endHeap[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h endHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap[K]) Push(x any)        { *h = append(*h, x.(keyEnd[K])) }
func (h *endHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// endHeapSlack is how many superseded entries the heap may hold beyond
// twice the live keys before it is rebuilt: rebuilding is O(n), so it runs
// at most once per that many ends added.
const endHeapSlack = 64

// add records that k ends at at; live counts the keys with a live end and
// all yields them with their ends, for a rebuild.
func (h *endHeap[K]) add(at time.Time, k K, live int, all iter.Seq2[K, time.Time]) {
	heap.Push(h, keyEnd[K]{at: at, key: k})
	if len(*h) > 2*live+endHeapSlack {
		n := make(endHeap[K], 0, live)
		for k, at := range all {
			n = append(n, keyEnd[K]{at: at, key: k})
		}
		heap.Init(&n)
		*h = n
	}
}

// take removes and returns the earliest entry when it ends by now.
func (h *endHeap[K]) take(now time.Time) (keyEnd[K], bool) {
	if len(*h) == 0 || now.Before((*h)[0].at) {
		return keyEnd[K]{}, false
	}
	return heap.Pop(h).(keyEnd[K]), true
}

// trim takes the entries that stale reports superseded off the top, so that
// next is a live end: an actor's timer armed for an entry that would only be
// skipped is a tick for nothing.
func (h *endHeap[K]) trim(stale func(keyEnd[K]) bool) {
	for len(*h) > 0 && stale((*h)[0]) {
		heap.Pop(h)
	}
}

// next is the earliest end; zero when there is none. It may be a
// superseded one (trim).
func (h endHeap[K]) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].at
}
