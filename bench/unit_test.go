package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/client"
)

func TestHistQuantiles(t *testing.T) {
	t.Parallel()
	var h Hist
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.95, 9500 * time.Microsecond}, {0.99, 9900 * time.Microsecond}} {
		got := h.Quantile(c.q)
		if rel := math.Abs(float64(got-c.want)) / float64(c.want); rel > 1.0/histSub {
			t.Errorf("q%.2f = %v, want %v within %.1f%%", c.q, got, c.want, 100.0/histSub)
		}
	}
	if h.Quantile(1) != 10*time.Millisecond || h.Quantile(0) != time.Microsecond {
		t.Errorf("min/max = %v/%v", h.Quantile(0), h.Quantile(1))
	}
	if m := h.Mean(); m < 5000*time.Microsecond || m > 5001*time.Microsecond {
		t.Errorf("mean = %v", m)
	}
}

func TestHistIndexMonotonic(t *testing.T) {
	t.Parallel()
	prev := -1
	for v := int64(0); v < 1<<40; v = v*9/8 + 1 {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("index(%d) = %d after %d", v, i, prev)
		}
		if mid := histValue(i); math.Abs(float64(mid-v)) > float64(v)/histSub+1 {
			t.Fatalf("value(index(%d)) = %d", v, mid)
		}
		prev = i
	}
	if i := histIndex(math.MaxInt64); i >= histBuckets {
		t.Fatalf("index(max) = %d >= %d", i, histBuckets)
	}
}

func TestLatencyTickAndTotal(t *testing.T) {
	t.Parallel()
	l := NewLatency(4)
	for w := 0; w < 8; w++ {
		l.Record(w, time.Millisecond)
	}
	if iv := l.Tick(); iv.Count != 8 {
		t.Fatalf("interval count %d", iv.Count)
	}
	l.Record(1, 3*time.Millisecond)
	if iv := l.Tick(); iv.Count != 1 {
		t.Fatalf("second interval count %d", iv.Count)
	}
	if tot := l.Total(); tot.Count != 9 || tot.MaxMs < 2.9 {
		t.Fatalf("total %+v", tot)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 50, 100, 1000} {
		b := appendPayload(nil, 1733150000123456789, 42, size)
		if size >= minPayload && len(b) != size {
			t.Errorf("size %d: got %d bytes", size, len(b))
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON %s", b)
		}
		ts, seq, ok := parsePayload(b)
		if !ok || ts != 1733150000123456789 || seq != 42 {
			t.Errorf("parse %s = %d %d %v", b, ts, seq, ok)
		}
	}
	// JSONB gives objects back with its own key order and spacing.
	ts, seq, ok := parsePayload([]byte(`{"ts": 7, "pad": "xx", "seq": 9}`))
	if !ok || ts != 7 || seq != 9 {
		t.Errorf("re-serialized payload parsed as %d %d %v", ts, seq, ok)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	r := appendRealisticPayload(nil, 5, 6, 120, rng)
	if !json.Valid(r) || len(r) < 110 || len(r) > 130 {
		t.Errorf("realistic payload %d bytes: %s", len(r), r)
	}
	if ts, seq, ok := parsePayload(r); !ok || ts != 5 || seq != 6 {
		t.Errorf("realistic payload parsed as %d %d %v", ts, seq, ok)
	}
}

func TestSeqSet(t *testing.T) {
	t.Parallel()
	s := NewSeqSet(10)
	for _, v := range []int64{1, 2, 2, 1000, 1000, 3} {
		s.Add(v)
	}
	if u, d := s.Counts(); u != 4 || d != 2 {
		t.Fatalf("unique %d dups %d", u, d)
	}
}

// TestQueenClientAgainstFake checks the client's reading of the wire
// format against a fake server that answers as docs/api.md says.
func TestQueenClientAgainstFake(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/push", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`[{"index":0,"status":"queued"},{"index":1,"status":"duplicate"},{"index":2,"status":"failed","error":"full"}]`))
	})
	mux.HandleFunc("GET /api/v1/pop/queue/{q}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "true" || r.URL.Query().Get("batch") != "5" || r.URL.Query().Get("partitions") != "3" {
			w.WriteHeader(400)
			return
		}
		if r.URL.Query().Get("consumerGroup") == "empty" {
			w.WriteHeader(204)
			return
		}
		_, _ = w.Write([]byte(`{"success":true,"leaseId":"L","messages":[{"id":"i","transactionId":"t","partitionId":"P","leaseId":"L","data":{"ts":1,"seq":2}}]}`))
	})
	mux.HandleFunc("POST /api/v1/ack/batch", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"index":0,"transactionId":"t","success":true,"error":null}]`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := NewQueenClient(srv.URL, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Push([]byte(`{}`))
	if err != nil || res.Queued != 1 || res.Duplicate != 1 || res.Failed != 1 || res.FirstError != "full" {
		t.Fatalf("push: %v %+v", err, res)
	}
	q := client.PopQuery{Batch: 5, Partitions: 3, Wait: true, Timeout: time.Second, ConsumerGroup: "g"}
	pop, err := c.Pop("q", q)
	if err != nil || len(pop.Acks) != 1 || pop.Acks[0].PartitionID != "P" || pop.Acks[0].LeaseID != "L" {
		t.Fatalf("pop: %v %+v", err, pop)
	}
	if _, seq, ok := parsePayload(pop.Data[0]); !ok || seq != 2 {
		t.Fatalf("pop data %s", pop.Data[0])
	}
	q.ConsumerGroup = "empty"
	if pop, err := c.Pop("q", q); err != nil || len(pop.Acks) != 0 {
		t.Fatalf("empty pop: %v %+v", err, pop)
	}
	if _, err := c.AckBatch(nil, "g", pop.Acks); err != nil {
		t.Fatalf("empty ack: %v", err)
	}
	if _, err := c.AckBatch(nil, "g", []client.Ack{{TransactionID: "t", PartitionID: "P"}}); err != nil {
		t.Fatalf("ack: %v", err)
	}
	q.Batch = 6 // the fake answers 400
	if _, err := c.Pop("q", q); err == nil || errorKind(err) != "pop: http 400" {
		t.Fatalf("bad pop: %v (%s)", err, errorKind(err))
	}
}

func TestProcReaders(t *testing.T) {
	t.Parallel()
	st, err := parseProcStat([]byte("123 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 22 33 44 0 0"))
	if err != nil || st.comm != "a (weird) name" || st.ppid != 1 || st.utime != 11 || st.stime != 22 || st.cutime != 33 || st.cstime != 44 {
		t.Fatalf("%+v %v", st, err)
	}
	if rss, hwm, err := processMemory(os.Getpid()); err != nil || rss <= 0 || hwm < rss {
		t.Fatalf("memory %d %d %v", rss, hwm, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if pid, err := pidListeningOn(l.Addr().(*net.TCPAddr).Port); err != nil || pid != os.Getpid() {
		t.Fatalf("pidListeningOn = %d, %v (want %d)", pid, err, os.Getpid())
	}
	if v, err := parseLSN("16/B374D848"); err != nil || v != 0x16<<32|0xB374D848 {
		t.Fatalf("parseLSN = %x %v", v, err)
	}
}

func TestReportAndChart(t *testing.T) {
	t.Parallel()
	rep := &Report{Version: 1, GeneratedAt: time.Now(), Command: "bench compare", Host: hostInfo(),
		Postgres: map[string]string{"synchronous_commit": "on"}}
	for i, tg := range []string{"queengo", "rabbitmq", "nats"} {
		for _, b := range []int{1, 10, 100} {
			for _, sc := range []string{"push", "consume"} {
				rep.Results = append(rep.Results, &Result{Scenario: sc, Target: tg, Params: Params{Connections: 50, Batch: b},
					MsgPerSec: float64((i + 1) * b * 1000), Messages: 100, Resources: Resources{WALBytesPerMsg: ptr(12.5)}})
			}
		}
	}
	rep.Results = append(rep.Results, &Result{Scenario: "wake", Target: "queengo",
		Latencies: map[string]LatencySummary{"wake": {Count: 3, P99Ms: 1.5}}, Metrics: map[string]float64{"missed": 0}})
	path := t.TempDir() + "/r.json"
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(path)
	if err != nil || len(back.Results) != len(rep.Results) || *back.Results[0].Resources.WALBytesPerMsg != 12.5 {
		t.Fatalf("round trip: %v", err)
	}
	var md bytes.Buffer
	back.WriteMarkdown(&md, true)
	for _, want := range []string{"### Push and consume", "### Wake-up latency", "| rabbitmq", "synchronous_commit=on", "| 1.50"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	svg := renderChart(back.Results)
	if !strings.HasPrefix(svg, "<svg") || strings.Count(svg, "<path") != 6 || !strings.Contains(svg, "nats") {
		t.Errorf("chart: %d paths\n%s", strings.Count(svg, "<path"), svg)
	}
}

// TestStorage runs the storage measurement on a tiny data set.
func TestStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	t.Parallel()
	admin := os.Getenv("QUEENGO_TEST_DATABASE_URL")
	if admin == "" {
		admin = PGURLDefault
	}
	env := newEnv(context.Background(), &Common{PGURL: admin, Schema: "queen", Interval: time.Second, Quiet: true}, &bytes.Buffer{})
	if env.PG == nil {
		t.Fatalf("PostgreSQL at %s is not reachable", admin)
	}
	res, err := runStorage(context.Background(), env, StorageParams{Segments: 20, Frames: 10, PayloadBytes: 100, ReadPasses: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(storageFormats) {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.Resources.TableBytesPerMsg == nil || *r.Resources.TableBytesPerMsg <= 0 || r.Metrics["insert_us_per_msg"] <= 0 {
			t.Errorf("%s: %+v %+v", r.Params.Format, r.Resources, r.Metrics)
		}
	}
	if s, _ := env.PG.Query(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = 'bench_storage_"+env.Run+"'"); s != "0" {
		t.Errorf("scratch schema left behind")
	}
}

// TestE2EProducers: the default producer count leaves each producer at
// least e2ePushBudget per push, within 10..500.
func TestE2EProducers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate  float64
		batch int
		want  int
	}{{2000, 1, 100}, {5000, 1, 250}, {40000, 1, 500}, {20000, 10, 100}, {100, 1, 10}} {
		if got := e2eProducers(c.rate, c.batch); got != c.want {
			t.Errorf("rate %.0f batch %d: %d producers, want %d", c.rate, c.batch, got, c.want)
		}
	}
}

// TestDecodeAnswers checks the fastjson decoders of the push, pop and ack
// answers: every message keeps its own data, failures carry their text,
// and a malformed answer is an error.
func TestDecodeAnswers(t *testing.T) {
	t.Parallel()
	var pop PopResponse
	err := decodePop([]byte(`{"success":true,"messages":[
		{"transactionId":"t\u0031","partitionId":"P","leaseId":"L","data":{"ts":1, "seq":2,"s":"a\"b"}},
		{"transactionId":"t2","partitionId":"P","data":null},
		{"transactionId":"t3","partitionId":"Q","leaseId":"M","data":[1,"x"]}]}`), &pop)
	if err != nil || len(pop.Acks) != 3 || len(pop.Data) != 3 {
		t.Fatalf("pop: %v %+v", err, pop)
	}
	a, d := pop.Acks, pop.Data
	if a[0].TransactionID != "t1" || a[0].LeaseID != "L" || string(d[0]) != `{"ts":1,"seq":2,"s":"a\"b"}` ||
		a[1].LeaseID != "" || string(d[1]) != "null" || a[2].PartitionID != "Q" || string(d[2]) != `[1,"x"]` {
		t.Fatalf("pop messages: %+v %q", a, d)
	}
	if err := decodePop([]byte(`{"messages":[`), &pop); err == nil {
		t.Fatal("truncated pop answer decoded")
	}
	if err := decodeAck([]byte(`[{"success":true},{"success":false,"error":"lease expired"}]`)); err == nil ||
		err.Error() != "lease expired" {
		t.Fatalf("ack failure: %v", err)
	}
	if err := decodeAck([]byte(`{"success":true}`)); err == nil {
		t.Fatal("ack answer that is not an array decoded")
	}
	var push PushResult
	if err := decodePush([]byte(`[{"status":"buffered"},{"status":"failed"},{"status":"failed","error":"full"}]`), &push); err != nil ||
		push.Queued != 1 || push.Failed != 2 || push.FirstError != "full" {
		t.Fatalf("push: %v %+v", err, push)
	}
}
