package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSummarizeRetention(t *testing.T) {
	s := func(sec float64, n int64) retentionSample {
		return retentionSample{at: time.Duration(sec * float64(time.Second)), remaining: n}
	}
	// Baseline samples (negative) keep the whole backlog; retention starts
	// between 1 s and 2 s and is done at 4 s.
	tr := summarizeRetention(1000, []retentionSample{
		{at: -1, remaining: 1000}, s(0, 1000), s(1, 1000), s(2, 700), s(3, 200), s(4, 0), s(5, 0),
	})
	if tr.started != 2*time.Second || tr.lastFull != time.Second || tr.finished != 4*time.Second {
		t.Fatalf("started %v lastFull %v finished %v", tr.started, tr.lastFull, tr.finished)
	}
	if tr.meanPerSec != 1000.0/3 || tr.peakPerSec != 500 || tr.remaining != 0 || tr.droppedInP1 != 0 {
		t.Fatalf("mean %v peak %v remaining %d droppedInP1 %d", tr.meanPerSec, tr.peakPerSec, tr.remaining, tr.droppedInP1)
	}
	// Not finished by the end: the rate runs to the last sample.
	tr = summarizeRetention(1000, []retentionSample{s(0, 1000), s(1, 600), s(2, 400)})
	if tr.finished >= 0 || tr.remaining != 400 || tr.meanPerSec != 300 {
		t.Fatalf("unfinished: finished %v remaining %d mean %v", tr.finished, tr.remaining, tr.meanPerSec)
	}
	// Never started.
	tr = summarizeRetention(1000, []retentionSample{{at: -1, remaining: 990}, s(1, 1000)})
	if tr.started >= 0 || tr.meanPerSec != 0 || tr.droppedInP1 != 10 {
		t.Fatalf("not started: %+v", tr)
	}
}

func TestCheckQueenOnly(t *testing.T) {
	if err := checkQueenOnly(true, "--encrypt", "queengo"); err != nil {
		t.Fatal(err)
	}
	if err := checkQueenOnly(false, "--encrypt", "nats"); err != nil {
		t.Fatal(err)
	}
	if err := checkQueenOnly(true, "--encrypt", "rabbitmq"); err == nil || !strings.Contains(err.Error(), "queengo target only") {
		t.Fatalf("got %v", err)
	}
}

// TestEncryptPrepare: --encrypt configures the queue with encryptionEnabled
// before the run, and a 400 (broker without a key) fails with a clear error.
func TestEncryptPrepare(t *testing.T) {
	var bodies []map[string]any
	refuse := false
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	mux.HandleFunc("/api/v1/configure", func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		bodies = append(bodies, b)
		if refuse {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":"encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker"}`))
			return
		}
		_, _ = w.Write([]byte(`{"configured":true}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tgt, err := newQueenTarget("queengo-enc", srv.URL, 2, 5*time.Second, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := tgt.Prepare(context.Background(), Layout{Name: "q1", Encrypt: true}); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 || bodies[0]["queue"] != "q1" ||
		bodies[0]["options"].(map[string]any)["encryptionEnabled"] != true {
		t.Fatalf("configure bodies %v", bodies)
	}
	if err := tgt.Prepare(context.Background(), Layout{Name: "q2"}); err != nil || len(bodies) != 1 {
		t.Fatalf("plain run: err %v, %d configures", err, len(bodies))
	}
	refuse = true
	err = tgt.Prepare(context.Background(), Layout{Name: "q3", Encrypt: true})
	if err == nil || !strings.Contains(err.Error(), "QUEEN_ENCRYPTION_KEY=<64 hex characters>") {
		t.Fatalf("refused configure: %v", err)
	}
}
