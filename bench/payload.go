package main

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"sync"
)

// Every benchmark message carries its own send time and sequence number in
// its JSON payload, so that any consumer, of any server, can measure
// delivery latency and detect loss or redelivery without a side channel:
//
//	{"ts":1733150000123456789,"seq":42,"pad":"xxxxxxxx..."}
//
// ts is Unix nanoseconds, seq is unique within one run, and pad fills the
// payload to the requested size. The parser does not depend on key order or
// spacing, because a server may store the payload as JSONB and give it back
// re-serialized ({"ts": 1, "pad": "...", "seq": 42}).

// minPayload is the size of a payload with an empty pad and 19-digit ts.
const minPayload = len(`{"ts":1733150000123456789,"seq":0,"pad":""}`)

// appendPayload appends a payload of about size bytes (exactly size when
// size >= minPayload and seq is small) to dst.
func appendPayload(dst []byte, ts, seq int64, size int) []byte {
	start := len(dst)
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"pad":"`...)
	pad := size - (len(dst) - start) - 2
	for i := 0; i < pad; i++ {
		dst = append(dst, 'x')
	}
	return append(dst, `"}`...)
}

// parsePayload extracts ts and seq from a payload written by appendPayload,
// in whatever key order and spacing the server returns it.
func parsePayload(b []byte) (ts, seq int64, ok bool) {
	ts, ok1 := jsonIntField(b, `"ts"`)
	seq, ok2 := jsonIntField(b, `"seq"`)
	return ts, seq, ok1 && ok2
}

// jsonIntField finds key (with quotes) in a flat JSON object and parses the
// integer after the colon. It is only meant for payloads of this package,
// whose string values cannot contain the key.
func jsonIntField(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	i += len(key)
	for i < len(b) && (b[i] == ' ' || b[i] == ':' || b[i] == '\t' || b[i] == '\n') {
		i++
	}
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(b[i:j]), 10, 64)
	return v, err == nil
}

// appendTxnID appends the transaction id of message seq in run: "<run>-<seq>".
func appendTxnID(dst []byte, run string, seq int64) []byte {
	dst = append(dst, run...)
	dst = append(dst, '-')
	return strconv.AppendInt(dst, seq, 10)
}

// SeqSet records which sequence numbers were delivered, to count unique
// deliveries and redeliveries. It grows as needed and is safe for concurrent
// use.
type SeqSet struct {
	mu     sync.Mutex
	words  []uint64
	unique int64
	dups   int64
}

// NewSeqSet returns a set sized for sequence numbers below hint.
func NewSeqSet(hint int64) *SeqSet {
	if hint < 64 {
		hint = 64
	}
	return &SeqSet{words: make([]uint64, (hint+63)/64)}
}

// Add records seq and reports whether it had been seen before.
func (s *SeqSet) Add(seq int64) (dup bool) {
	if seq < 0 {
		return false
	}
	w, bit := seq/64, uint64(1)<<uint(seq%64)
	s.mu.Lock()
	defer s.mu.Unlock()
	if w >= int64(len(s.words)) {
		n := int64(len(s.words)) * 2
		if n <= w {
			n = w + 1
		}
		grown := make([]uint64, n)
		copy(grown, s.words)
		s.words = grown
	}
	if s.words[w]&bit != 0 {
		s.dups++
		return true
	}
	s.words[w] |= bit
	s.unique++
	return false
}

// Counts returns the number of distinct sequence numbers and of repeats.
func (s *SeqSet) Counts() (unique, dups int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unique, s.dups
}

// realisticWords is the vocabulary of appendRealisticPayload's filler text.
var realisticWords = []string{"order", "created", "customer", "shipped", "pending", "invoice", "item",
	"warehouse", "berlin", "express", "standard", "refund", "priority", "gift", "card", "paid",
	"billing", "address", "street", "blue", "large", "small", "returned", "delayed", "ok"}

// appendRealisticPayload appends a payload shaped like an application event
// of about size bytes: the same ts and seq keys as appendPayload, then
// fields with random values and filler words, so that it compresses about
// as well as real JSON does (the 'x' padding of appendPayload compresses
// almost to nothing, which would flatter any compressed storage format).
func appendRealisticPayload(dst []byte, ts, seq int64, size int, rng *rand.Rand) []byte {
	start := len(dst)
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"orderId":`...)
	dst = strconv.AppendInt(dst, rng.Int64N(10_000_000), 10)
	dst = append(dst, `,"customer":"c-`...)
	dst = strconv.AppendInt(dst, rng.Int64N(100_000), 10)
	dst = append(dst, `","total":`...)
	dst = strconv.AppendInt(dst, rng.Int64N(100_000), 10)
	dst = append(dst, `,"note":"`...)
	for len(dst)-start < size-2 {
		w := realisticWords[rng.IntN(len(realisticWords))]
		if room := size - 2 - (len(dst) - start); len(w) >= room {
			w = w[:room]
		}
		dst = append(dst, w...)
		if len(dst)-start < size-2 {
			dst = append(dst, ' ')
		}
	}
	return append(dst, `"}`...)
}
