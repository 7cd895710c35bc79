package main

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// histSubBits is the number of mantissa bits each power-of-two range is split
// into. 6 bits (64 sub-buckets) bound the relative error of a reported
// quantile by 1/64 (about 1.6%), which is far below run-to-run noise.
const histSubBits = 6

const (
	histSub     = 1 << histSubBits // sub-buckets per power of two
	histLinear  = 2 * histSub      // values below this are stored exactly
	histBuckets = histLinear + (63-histSubBits)*histSub
)

// Hist is a log-linear latency histogram over non-negative nanosecond values,
// in the spirit of HdrHistogram: exact below 128 ns, then 64 buckets per power
// of two. Recording is O(1) and allocation free. A Hist is not safe for
// concurrent use; Latency shards it across workers.
type Hist struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

// histIndex maps a value to its bucket.
func histIndex(v int64) int {
	if v < histLinear {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1 // >= 1
	m := int(v >> uint(e))                       // in [histSub, 2*histSub)
	return histLinear + (e-1)*histSub + (m - histSub)
}

// histValue returns the midpoint of a bucket, the value a quantile reports.
func histValue(idx int) int64 {
	if idx < histLinear {
		return int64(idx)
	}
	e := (idx-histLinear)/histSub + 1
	m := int64((idx-histLinear)%histSub + histSub)
	return m<<uint(e) + (int64(1)<<uint(e))/2
}

// Record adds one observation of d. Negative durations count as zero.
func (h *Hist) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Count returns the number of observations.
func (h *Hist) Count() uint64 { return h.n }

// Merge adds all observations of o to h.
func (h *Hist) Merge(o *Hist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Reset empties the histogram.
func (h *Hist) Reset() { *h = Hist{} }

// Quantile returns the value at quantile q (0..1). The exact minimum and
// maximum are returned for q<=0 and q>=1; other quantiles are bucket
// midpoints clamped to [min, max]. An empty histogram reports 0.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := histValue(i)
			if v < h.min {
				v = h.min
			}
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// Mean returns the arithmetic mean of the observations.
func (h *Hist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Summary condenses the histogram into the numbers a report prints.
func (h *Hist) Summary() LatencySummary {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return LatencySummary{
		Count:  h.n,
		MeanMs: ms(h.Mean()),
		P50Ms:  ms(h.Quantile(0.50)),
		P95Ms:  ms(h.Quantile(0.95)),
		P99Ms:  ms(h.Quantile(0.99)),
		MaxMs:  ms(h.Quantile(1)),
	}
}

// LatencySummary is the reported form of a latency distribution, in
// milliseconds.
type LatencySummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// latencyShards caps the number of shards of a Latency: beyond a few dozen,
// contention on a shard's mutex is negligible and memory is not.
const latencyShards = 64

// Latency is a concurrent latency recorder. Workers record into their own
// shard (worker % 64) under an uncontended mutex; Tick folds the shards into
// an interval histogram (for the per-second line) and a cumulative one (for
// the summary).
type Latency struct {
	shards []latencyShard

	mu       sync.Mutex
	total    Hist
	interval Hist
}

type latencyShard struct {
	mu sync.Mutex
	h  Hist
	_  [64]byte // keep neighbouring shards off one cache line
}

// NewLatency returns a recorder for up to workers concurrent writers.
func NewLatency(workers int) *Latency {
	n := workers
	if n < 1 {
		n = 1
	}
	if n > latencyShards {
		n = latencyShards
	}
	return &Latency{shards: make([]latencyShard, n)}
}

// Record adds one observation from the given worker.
func (l *Latency) Record(worker int, d time.Duration) {
	if worker < 0 {
		worker = -worker
	}
	s := &l.shards[worker%len(l.shards)]
	s.mu.Lock()
	s.h.Record(d)
	s.mu.Unlock()
}

// Tick moves everything recorded since the previous Tick into the cumulative
// histogram and returns the summary of just that interval.
func (l *Latency) Tick() LatencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.interval.Reset()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		l.interval.Merge(&s.h)
		s.h.Reset()
		s.mu.Unlock()
	}
	l.total.Merge(&l.interval)
	return l.interval.Summary()
}

// Total folds in anything not yet ticked and returns the cumulative summary.
func (l *Latency) Total() LatencySummary {
	l.Tick()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total.Summary()
}
