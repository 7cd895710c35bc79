package dashboardtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queengo/queengo/http/e2e"
)

// The pages of issue 43: Traces, Analytics, System, and the admin actions
// on a message, a queue and a partition.

// choose picks value in the select sel, as a user's choice does, once the
// select offers it (a page lists what its last read found).
func (b *bundle) choose(t *testing.T, sel, value string) {
	t.Helper()
	js := fmt.Sprintf(`(() => {
		const s = document.querySelector(%s);
		if (!s || ![...s.options].some(o => o.value === %[2]s)) return false;
		s.value = %[2]s;
		s.dispatchEvent(new Event('change', { bubbles: true }));
		return true;
	})()`, jsString(sel), jsString(value))
	if err := e2e.Eventually(waitFor, 100*time.Millisecond, func() error {
		if !eval[bool](t, b, "choosing "+value+" in "+sel, js) {
			return errors.New("not offered yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("%s never offers %q", sel, value)
	}
}

// agree waits until page() and api() return the same, reading both again
// at each try: the figures of both move while the collector samples.
func (b *bundle) agree(t *testing.T, what string, page, api func() string) {
	t.Helper()
	var p, a string
	if err := e2e.Eventually(waitFor, 200*time.Millisecond, func() error {
		if a, p = api(), page(); p != a {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: the page shows %q, the API %q", what, p, a)
	}
}

// shown is the text of sel without thousands separators ("" when absent).
func (b *bundle) shown(t *testing.T, sel string) string {
	t.Helper()
	s, _ := b.text(t, sel)
	return strings.ReplaceAll(s, ",", "")
}

// trace is one entry of GET /api/v1/traces/by-name.
type trace struct {
	EventType     string `json:"event_type"`
	TransactionID string `json:"transaction_id"`
	QueueName     string `json:"queue_name"`
}

// A trace name recorded on messages of two queues is listed with its
// counts; searching it opens its timeline: one lane per message in the
// order of their first event, and every event in the order it was
// recorded, as the API holds them.
func TestDashboard_Traces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.s
	msgs := s.PushQueued(t, e2e.PushItem{Queue: "orders", Partition: "eu", Payload: map[string]any{"order": 7}},
		e2e.PushItem{Queue: "orders", Partition: "eu", Payload: map[string]any{"order": 7, "part": 2}},
		e2e.PushItem{Queue: "billing", Payload: map[string]any{"invoice": 7}})
	record := func(m e2e.PushedMessage, event, group string, names ...string) {
		t.Helper()
		r := s.Post(t, "/api/v1/traces", map[string]any{"transactionId": m.Tx, "partitionId": m.PartitionID,
			"consumerGroup": group, "eventType": event, "data": map[string]any{"step": event}, "traceNames": names})
		if r.Status != 201 {
			t.Fatalf("recording %s: %d %s", event, r.Status, r.Body)
		}
	}
	record(msgs[0], "received", "shipping", "order-7")
	record(msgs[2], "invoiced", "billing", "order-7", "invoices")
	record(msgs[0], "packed", "shipping", "order-7")
	record(msgs[1], "split", "shipping", "order-7")
	record(msgs[0], "shipped", "shipping", "order-7")
	record(msgs[2], "paid", "billing", "invoices")

	var names struct {
		Names []struct {
			Name     string `json:"trace_name"`
			Traces   int    `json:"trace_count"`
			Messages int    `json:"message_count"`
		} `json:"trace_names"`
	}
	getJSON(t, s, "/api/v1/traces/names", &names)
	if len(names.Names) != 2 {
		t.Fatalf("the API lists %d names, want 2", len(names.Names))
	}
	b.open(t, "/traces")
	b.waitCount(t, `[data-test=trace-names] tbody tr`, 2)
	for _, n := range names.Names {
		row := fmt.Sprintf(`[data-test=trace-names] tr[data-name=%q]`, n.Name)
		b.waitText(t, row+` [data-col=traces]`, strconv.Itoa(n.Traces))
		b.waitText(t, row+` [data-col=messages]`, strconv.Itoa(n.Messages))
	}
	b.screenshot(t, "traces")

	b.run(t, "searching", chromedp.SendKeys(chromedp.CSS(`[data-test=trace-search]`), "order-7"))
	b.click(t, `[data-test=trace-open]`)
	b.waitText(t, `[data-test=trace-name]`, "order-7")
	var byName struct {
		Traces []trace `json:"traces"`
		Total  int     `json:"total"`
	}
	getJSON(t, s, "/api/v1/traces/by-name/order-7", &byName)
	if byName.Total != 5 {
		t.Fatalf("the API holds %d traces named order-7, want 5", byName.Total)
	}
	// The API answers newest first: the page shows them oldest first.
	var want, wantLanes []string
	for _, tr := range slices.Backward(byName.Traces) {
		want = append(want, tr.EventType+"@"+tr.QueueName+"/"+tr.TransactionID)
		if !slices.Contains(wantLanes, tr.TransactionID) {
			wantLanes = append(wantLanes, tr.TransactionID)
		}
	}
	if !strings.HasPrefix(want[0], "received@orders/") || !strings.HasPrefix(want[4], "shipped@orders/") {
		t.Fatalf("the API's order, oldest first: %v", want)
	}
	b.waitCount(t, `[data-test=trace-events] tbody tr`, 5)
	got := eval[[]string](t, b, "reading the events", `[...document.querySelectorAll('[data-test=trace-events] tbody tr')]
		.map(r => r.dataset.event + '@' + r.querySelector('[data-col=queue]').textContent + '/' + r.dataset.tx)`)
	if !slices.Equal(got, want) {
		t.Fatalf("the page lists the events %v, the API %v", got, want)
	}
	lanes := eval[[]string](t, b, "reading the lanes", `[...document.querySelectorAll('[data-test=trace-timeline] .lane[data-tx]')]
		.map(l => l.dataset.tx + ':' + [...l.querySelectorAll('.dot')].map(d => d.dataset.event).join(','))`)
	wantByLane := map[string][]string{}
	for _, tr := range slices.Backward(byName.Traces) {
		wantByLane[tr.TransactionID] = append(wantByLane[tr.TransactionID], tr.EventType)
	}
	var wantLaneDots []string
	for _, tx := range wantLanes {
		wantLaneDots = append(wantLaneDots, tx+":"+strings.Join(wantByLane[tx], ","))
	}
	if !slices.Equal(lanes, wantLaneDots) {
		t.Fatalf("the timeline's lanes %v, want %v", lanes, wantLaneDots)
	}
	// The first event sits at the start of the time axis, the last at
	// its end.
	ends := eval[[]string](t, b, "placing the dots", `(() => {
		const d = [...document.querySelectorAll('[data-test=trace-timeline] .dot')];
		const left = (e) => e.style.left;
		return [left(d.find(e => e.dataset.event === 'received')), left(d.find(e => e.dataset.event === 'shipped'))];
	})()`)
	if !slices.Equal(ends, []string{"0%", "100%"}) {
		t.Fatalf("the first and last events at %v, want 0%% and 100%%", ends)
	}
	b.waitText(t, `[data-test=trace-summary]`, "5 events on 3 messages in 2 queues")
	b.screenshot(t, "trace")

	b.run(t, "phone viewport", chromedp.EmulateViewport(390, 844))
	if err := e2e.Eventually(waitFor, 100*time.Millisecond, func() error {
		if eval[bool](t, b, "measuring", `document.documentElement.scrollWidth > window.innerWidth`) {
			return errors.New("wider than the screen")
		}
		return nil
	}); err != nil {
		t.Errorf("at 390 px the trace page is wider than the screen")
	}
}

// seriesAnswer is a ?format=queengo analytics answer.
type seriesAnswer struct {
	BucketSeconds float64          `json:"bucketSeconds"`
	Series        []map[string]any `json:"series"`
}

// The analytics page shows the collector's history as the analytics
// routes answer it, for every queue and for the one chosen: messages in
// and out, the dead letters, the parked long polls, each queue's figures,
// and each broker process's requests.
func TestDashboard_Analytics(t *testing.T) {
	t.Parallel()
	b := setup(t, "METRICS_SAMPLE_INTERVAL_MS=200")
	s := b.s
	s.PushN(t, "orders", "eu", 3)
	s.PushN(t, "orders", "us", 2)
	s.PushN(t, "billing", "", 3)
	for s.Pop(t, e2e.PopQueue("orders", "consumerGroup", "workers", "batch", "100", "autoAck", "true")) != nil {
	}
	p := s.PopOK(t, e2e.PopQueue("billing", "consumerGroup", "fragile"))
	s.AckOK(t, p.Messages[0], "dlq", "fragile")
	// A long poll stays parked on the empty queue idle for the test.
	s.Configure(t, "idle", nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _, _ = s.PopCtx(ctx, e2e.PopQueue("idle", "wait", "true", "timeout", "600000")) }()

	hour := func() string { return time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano) }
	series := func(route string, pairs ...string) seriesAnswer {
		var r seriesAnswer
		getJSON(t, s, "/api/v1/analytics/"+route+e2e.Query(append([]string{"format", "queengo", "from", hour()}, pairs...)...), &r)
		return r
	}
	total := func(r seriesAnswer, field string) string {
		n := 0.0
		for _, p := range r.Series {
			n += p[field].(float64)
		}
		return strconv.Itoa(int(n))
	}
	b.open(t, "/analytics")
	b.waitText(t, `[data-test=an-in]`, "8")
	b.agree(t, "messages in", func() string { return b.shown(t, `[data-test=an-in]`) },
		func() string { return total(series("queue-ops"), "ingested") })
	b.agree(t, "messages out", func() string { return b.shown(t, `[data-test=an-out]`) },
		func() string { return total(series("queue-ops"), "processed") })
	b.waitText(t, `[data-test=an-dlq]`, "1")
	b.waitText(t, `[data-test=an-parked]`, "1")
	b.agree(t, "peak parked", func() string { return b.shown(t, `[data-test=an-parked]`) }, func() string {
		peak := map[string]float64{}
		for _, p := range series("queue-parked-replicas").Series {
			peak[p["timestamp"].(string)] += p["parked"].(float64)
		}
		m := 0.0
		for _, v := range peak {
			m = max(m, v)
		}
		return strconv.Itoa(int(m))
	})
	// Each queue's messages in, from the reference-shaped answer.
	var ops struct {
		Series []struct {
			Queue string `json:"queueName"`
			Push  int    `json:"pushMessages"`
			Ack   int    `json:"ackSuccess"`
		} `json:"series"`
	}
	for q, pushed := range map[string]string{"orders": "5", "billing": "3"} {
		b.waitText(t, fmt.Sprintf(`[data-test=an-queues] tr[data-queue=%q] [data-col=push]`, q), pushed)
		b.agree(t, q+" in the per-queue table", func() string {
			return b.shown(t, fmt.Sprintf(`[data-test=an-queues] tr[data-queue=%q] [data-col=push]`, q)) + "/" +
				b.shown(t, fmt.Sprintf(`[data-test=an-queues] tr[data-queue=%q] [data-col=ack]`, q))
		}, func() string {
			getJSON(t, s, "/api/v1/analytics/queue-ops"+e2e.Query("from", hour()), &ops)
			push, ack := 0, 0
			for _, p := range ops.Series {
				if p.Queue == q {
					push, ack = push+p.Push, ack+p.Ack
				}
			}
			return fmt.Sprintf("%d/%d", push, ack)
		})
	}
	// Every broker process, with the push requests it served.
	b.agree(t, "the processes' push requests", func() string {
		return strings.Join(eval[[]string](t, b, "reading the processes", `[...document.querySelectorAll('[data-test=an-workers] tbody tr')]
			.map(r => r.dataset.worker + '=' + r.querySelector('[data-col=push]').textContent.replaceAll(',', ''))`), " ")
	}, func() string {
		by := map[string]float64{}
		for _, p := range series("worker-metrics").Series {
			by[p["workerId"].(string)] += p["pushRequests"].(float64)
		}
		var out []string
		for id, n := range by {
			out = append(out, id+"="+strconv.Itoa(int(n)))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	})
	b.waitCount(t, `[data-test^=an-chart] canvas`, 9)
	b.screenshot(t, "analytics")

	// One queue, over the last 15 minutes.
	b.choose(t, `[data-test=an-queue]`, "billing")
	b.click(t, `[data-test=an-controls] button[data-range="900"]`)
	b.waitCount(t, `section.stats[data-queue=billing][data-range="900"]`, 1)
	b.waitText(t, `[data-test=an-in]`, "3")
	b.agree(t, "billing's messages in", func() string { return b.shown(t, `[data-test=an-in]`) },
		func() string { return total(series("queue-ops", "queue", "billing"), "ingested") })
	b.waitText(t, `[data-test=an-dlq]`, "1")
	b.choose(t, `[data-test=an-queue]`, "orders")
	b.waitText(t, `[data-test=an-dlq]`, "0")
	b.waitText(t, `[data-test=an-in]`, "5")
}

// setting is one entry of GET /api/v1/system/config.
type setting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Default string `json:"default"`
	Secret  bool   `json:"secret"`
}

// The system page shows the database's health and version, this broker
// process, its push buffer and its configuration as the API answers them,
// with no secret anywhere on the page; its push maintenance switch turns
// push maintenance on in the API and off again.
func TestDashboard_System(t *testing.T) {
	t.Parallel()
	const dbPassword = "dashboard-db-password"
	key := strings.Repeat("3c", 32)
	db := e2e.CreateDB(t, "dashsys")
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), dbPassword)
	b := setupOn(t, u.String(), "METRICS_SAMPLE_INTERVAL_MS=200", "FILE_BUFFER_DIR="+t.TempDir(),
		"QUEEN_ENCRYPTION_KEY="+key, "DB_POOL_SIZE=5")
	s := b.s
	var health struct {
		Version string `json:"version"`
	}
	getJSON(t, s, "/health", &health)
	var pg struct {
		ServerVersion string `json:"serverVersion"`
	}
	getJSON(t, s, "/api/v1/analytics/postgres-stats", &pg)
	var shared struct {
		ServerID string `json:"server_id"`
	}
	getJSON(t, s, "/api/v1/system/shared-state", &shared)
	var cfg struct {
		Settings []setting `json:"settings"`
	}
	getJSON(t, s, "/api/v1/system/config", &cfg)

	b.open(t, "/system")
	b.waitText(t, `[data-test=sys-db]`, "healthy")
	b.waitText(t, `[data-test=sys-pg-version]`, strings.Fields(pg.ServerVersion)[0])
	b.waitText(t, `[data-test=sys-version]`, health.Version)
	b.waitText(t, `[data-test=sys-push-maintenance]`, "off")
	b.waitCount(t, fmt.Sprintf(`[data-test=sys-processes-table] tr[data-worker=%q]`, shared.ServerID), 1)
	b.waitCount(t, `[data-test=config-table] tbody tr`, len(cfg.Settings))
	for _, st := range cfg.Settings {
		row := fmt.Sprintf(`[data-test=config-table] tr[data-setting=%q]`, st.Name)
		value := st.Value
		if st.Secret {
			value += " secret"
		} else if value == "" {
			value = "(unset)"
		}
		b.waitText(t, row+` [data-col=value]`, strings.TrimSpace(strings.ReplaceAll(value, ",", "")))
		b.waitText(t, row+` [data-col=default]`, strings.ReplaceAll(st.Default, ",", ""))
	}
	b.waitText(t, `[data-test=config-table] tr[data-setting=DB_POOL_SIZE] [data-col=value]`, "5")
	page := eval[string](t, b, "reading the page", `document.body.innerText`)
	for _, secret := range []string{dbPassword, key, strings.ToUpper(key)} {
		if strings.Contains(page, secret) {
			t.Fatalf("the page shows the secret %q", secret)
		}
	}
	if !strings.Contains(page, "xxxxx@") || !strings.Contains(page, "(hidden, key id ") {
		t.Fatalf("the page does not show the hidden password and key:\n%s", page)
	}
	b.waitText(t, `[data-test=sys-buffer] div:first-child dd`, "yes")
	b.screenshot(t, "system")

	changed := 0
	for _, st := range cfg.Settings {
		if st.Value != st.Default {
			changed++
		}
	}
	b.click(t, `[data-test=config-changed]`)
	b.waitCount(t, `[data-test=config-table] tbody tr`, changed)

	maintenance := func() bool {
		var m struct {
			On bool `json:"maintenanceMode"`
		}
		getJSON(t, s, "/api/v1/system/maintenance", &m)
		return m.On
	}
	b.click(t, `[data-test=push-maintenance-toggle]`)
	b.click(t, `[data-test=confirm-ok]`)
	b.waitText(t, `[data-test=sys-push-maintenance]`, "ON")
	if !maintenance() {
		t.Fatal("the API has push maintenance off after the page switched it on")
	}
	b.click(t, `[data-test=push-maintenance-toggle]`)
	b.click(t, `[data-test=confirm-ok]`)
	b.waitText(t, `[data-test=sys-push-maintenance]`, "off")
	if maintenance() {
		t.Fatal("the API has push maintenance on after the page switched it off")
	}
}

// messageStatus is GET /api/v1/messages/:partitionId/:transactionId's
// status code.
func messageStatus(t *testing.T, s *e2e.Server, m e2e.PushedMessage) int {
	t.Helper()
	return s.Get(t, "/api/v1/messages/"+m.PartitionID+"/"+m.Tx).Status
}

// The admin actions of the message and queue pages change what the API
// holds: retrying a dead-lettered message pushes it again, moving one to
// the DLQ and deleting one take it off its queue, seeking a group's
// partition to its end leaves it no lag there, and deleting a queue
// removes it.
func TestDashboard_AdminActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.s
	jobs := s.PushQueued(t, e2e.PushItem{Queue: "jobs", Partition: "p1", Payload: "a"},
		e2e.PushItem{Queue: "jobs", Partition: "p1", Payload: "b"}, e2e.PushItem{Queue: "jobs", Partition: "p1", Payload: "c"},
		e2e.PushItem{Queue: "jobs", Partition: "p2", Payload: "d"}, e2e.PushItem{Queue: "jobs", Partition: "p2", Payload: "e"})
	s.PushN(t, "scratch", "", 2)
	// Group g dead-letters d, the first message of p2.
	p := s.PopOK(t, e2e.PopPartition("jobs", "p2", "consumerGroup", "g"))
	s.AckOK(t, p.Messages[0], "dlq", "g")
	dlqTotal := func() int {
		var d struct {
			Total int `json:"total"`
		}
		getJSON(t, s, "/api/v1/dlq?queue=jobs", &d)
		return d.Total
	}
	if dlqTotal() != 1 {
		t.Fatal("no dead letter to retry")
	}

	t.Run("retry", func(t *testing.T) {
		b.open(t, "/message/"+jobs[3].PartitionID+"/"+jobs[3].Tx)
		b.click(t, `[data-test=msg-retry]`)
		b.waitText(t, `[data-test=confirm] h3`, "Retry "+jobs[3].Tx+"?")
		b.click(t, `[data-test=confirm-ok]`)
		var notice string
		if err := e2e.Eventually(waitFor, 100*time.Millisecond, func() error {
			if notice, _ = b.text(t, `[data-test=notice]`); !strings.HasPrefix(notice, "Pushed again as ") {
				return errors.New("not yet")
			}
			return nil
		}); err != nil {
			t.Fatalf("the notice after the retry: %q", notice)
		}
		if dlqTotal() != 0 {
			t.Fatal("the dead letter is still listed after the retry")
		}
		// The new message carries the payload again, on p2.
		tx := strings.TrimPrefix(notice, "Pushed again as ")
		var m struct {
			Payload   any    `json:"payload"`
			Partition string `json:"partition"`
		}
		getJSON(t, s, "/api/v1/messages/"+jobs[3].PartitionID+"/"+tx, &m)
		if m.Payload != "d" || m.Partition != "p2" {
			t.Fatalf("the message pushed again (notice %q): %+v", notice, m)
		}
	})

	t.Run("move to the DLQ", func(t *testing.T) {
		b.open(t, "/message/"+jobs[4].PartitionID+"/"+jobs[4].Tx)
		b.click(t, `[data-test=msg-dlq]`)
		b.click(t, `[data-test=confirm-ok]`)
		b.waitCount(t, `[data-test=q-partitions-table]`, 1)
		if got := messageStatus(t, s, jobs[4]); got != 404 {
			t.Fatalf("the message moved to the DLQ answers %d, want 404", got)
		}
		var d struct {
			Messages []struct {
				Tx    string `json:"transactionId"`
				Group string `json:"consumerGroup"`
				Error string `json:"errorMessage"`
			} `json:"messages"`
		}
		getJSON(t, s, "/api/v1/dlq?queue=jobs", &d)
		if len(d.Messages) != 1 || d.Messages[0].Tx != jobs[4].Tx || d.Messages[0].Error != "moved to DLQ by operator" {
			t.Fatalf("the DLQ after the move: %+v", d.Messages)
		}
	})

	t.Run("delete", func(t *testing.T) {
		b.open(t, "/message/"+jobs[2].PartitionID+"/"+jobs[2].Tx)
		b.click(t, `[data-test=msg-delete]`)
		b.click(t, `[data-test=confirm-ok]`)
		b.waitCount(t, `[data-test=q-partitions-table]`, 1)
		if got := messageStatus(t, s, jobs[2]); got != 404 {
			t.Fatalf("the deleted message answers %d, want 404", got)
		}
		if got := messageStatus(t, s, jobs[1]); got != 200 {
			t.Fatalf("its neighbour answers %d, want 200", got)
		}
	})

	t.Run("partition seek", func(t *testing.T) {
		// Group r reads a of p1 and leaves b (c is deleted) behind.
		p := s.PopOK(t, e2e.PopPartition("jobs", "p1", "consumerGroup", "r"))
		s.AckOK(t, p.Messages[0], "completed", "r")
		// The group list is computed at most every 5 s; a refresh makes
		// the next read see r.
		if r := s.Post(t, "/api/v1/stats/refresh", nil); r.Status != 200 {
			t.Fatalf("refreshing the figures: %d %s", r.Status, r.Body)
		}
		partitionLag := func(part string) int {
			var g map[string]struct {
				Partitions []struct {
					Name string `json:"partition"`
					Lag  int    `json:"offsetLag"`
				} `json:"partitions"`
			}
			getJSON(t, s, "/api/v1/consumer-groups/r", &g)
			for _, pt := range g["jobs"].Partitions {
				if pt.Name == part {
					return pt.Lag
				}
			}
			t.Fatalf("r has no cursor on %s: %+v", part, g)
			return 0
		}
		if partitionLag("p1") != 2 {
			t.Fatalf("r's lag on p1 is %d before the seek, want 2", partitionLag("p1"))
		}
		b.open(t, "/queues/jobs")
		b.choose(t, `[data-test=admin-group]`, "r")
		b.choose(t, `[data-test=admin-partition]`, "p1")
		b.click(t, `[data-test=admin-seek-partition]`)
		b.waitText(t, `[data-test=confirm] h3`, "Seek r on p1 to its end?")
		b.click(t, `[data-test=confirm-ok]`)
		b.waitText(t, `[data-test=notice]`, "r moved to the head of p1")
		if got := partitionLag("p1"); got != 0 {
			t.Fatalf("r's lag on p1 is %d after the seek, want 0", got)
		}
		b.waitText(t, `[data-test=q-groups] tr[data-group=r] [data-col=lag]`, strconv.Itoa(lagOf(t, s, "r", "jobs")))
	})

	t.Run("queue delete", func(t *testing.T) {
		b.open(t, "/queues/scratch")
		b.click(t, `[data-test=admin-delete-queue]`)
		b.waitText(t, `[data-test=confirm] h3`, "Delete scratch?")
		b.click(t, `[data-test=confirm-ok]`)
		b.waitCount(t, `[data-test=queues-table] tr[data-queue=jobs]`, 1)
		b.waitCount(t, `[data-test=queues-table] tr[data-queue=scratch]`, 0)
		e2e.WantError(t, s.Get(t, "/api/v1/resources/queues/scratch"), 404, "queue not found")
	})
}
