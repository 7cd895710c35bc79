package dashboardtest

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"

	"github.com/queengo/queengo/http/e2e"
)

// seeded is what seed wrote.
type seeded struct {
	traced e2e.PushedMessage // an orders message with a trace
}

// seed writes three queues: orders (namespace shop, task checkout; 5
// messages on each of 3 partitions) consumed to the end by group workers
// and partly leased by group reports; billing (3 messages), where group
// fragile dead-lettered one; audit (2 messages, no group). One orders
// message carries a trace.
func seed(t *testing.T, s *e2e.Server) seeded {
	t.Helper()
	s.ConfigureBody(t, map[string]any{"queue": "orders", "namespace": "shop", "task": "checkout",
		"options": map[string]any{"leaseTime": 60, "retryLimit": 1}})
	s.ConfigureBody(t, map[string]any{"queue": "billing", "namespace": "finance"})
	var items []e2e.PushItem
	for p := 1; p <= 3; p++ {
		for k := range 5 {
			items = append(items, e2e.PushItem{Queue: "orders", Partition: "p" + strconv.Itoa(p),
				Payload: map[string]any{"order": p*100 + k, "total": 42.5}})
		}
	}
	for k := range 3 {
		items = append(items, e2e.PushItem{Queue: "billing", Payload: map[string]any{"invoice": k}})
	}
	items = append(items, e2e.PushItem{Queue: "audit", Payload: "login"}, e2e.PushItem{Queue: "audit", Payload: "logout"})
	pushed := s.PushQueued(t, items...)

	consumed := 0
	for {
		p := s.Pop(t, e2e.PopQueue("orders", "consumerGroup", "workers", "batch", "100", "autoAck", "true"))
		if p == nil {
			break
		}
		consumed += len(p.Messages)
	}
	if consumed != 15 {
		t.Fatalf("workers consumed %d orders, want 15", consumed)
	}
	s.PopOK(t, e2e.PopQueue("orders", "consumerGroup", "reports", "batch", "2"))
	p := s.PopOK(t, e2e.PopQueue("billing", "consumerGroup", "fragile"))
	s.AckOK(t, p.Messages[0], "dlq", "fragile")

	traced := pushed[0]
	r := s.Post(t, "/api/v1/traces", map[string]any{"transactionId": traced.Tx, "partitionId": traced.PartitionID,
		"consumerGroup": "workers", "eventType": "processing", "data": map[string]any{"step": "charged"},
		"traceNames": []string{"order-100"}})
	if r.Status != 201 {
		t.Fatalf("recording a trace: %d %s", r.Status, r.Body)
	}
	return seeded{traced: traced}
}

// group is one entry of GET /api/v1/consumer-groups.
type group struct {
	Name       string `json:"name"`
	QueueName  string `json:"queueName"`
	TotalLag   int    `json:"totalLag"`
	MaxTimeLag int    `json:"maxTimeLag"`
	State      string `json:"state"`
}

func groups(t *testing.T, s *e2e.Server) []group {
	t.Helper()
	var gs []group
	getJSON(t, s, "/api/v1/consumer-groups", &gs)
	return gs
}

// lagOf is the totalLag the API gives the group on the queue.
func lagOf(t *testing.T, s *e2e.Server, name, queue string) int {
	t.Helper()
	for _, g := range groups(t, s) {
		if g.Name == name && g.QueueName == queue {
			return g.TotalLag
		}
	}
	t.Fatalf("no group %s on %s", name, queue)
	return 0
}

// Every page loads, shows the API's figures, and the one admin action
// checked here (seeking a group back) shows its effect: the lag grows.
func TestDashboard_PagesShowTheAPIFigures(t *testing.T) {
	t.Parallel()
	// Samples every 200 ms, so the analytics charts have a point to draw.
	b := setup(t, "METRICS_SAMPLE_INTERVAL_MS=200")
	sd := seed(t, b.s)

	t.Run("overview", func(t *testing.T) {
		var ov struct {
			Queues   int `json:"queues"`
			Messages struct {
				Total int `json:"total"`
			} `json:"messages"`
		}
		getJSON(t, b.s, "/api/v1/resources/overview", &ov)
		var dlq struct {
			Total int `json:"total"`
		}
		getJSON(t, b.s, "/api/v1/dlq", &dlq)
		totalLag := 0
		for _, g := range groups(t, b.s) {
			totalLag += g.TotalLag
		}
		b.open(t, "/")
		b.waitText(t, `[data-test=ov-queues]`, strconv.Itoa(ov.Queues))
		b.waitText(t, `[data-test=ov-messages]`, strconv.Itoa(ov.Messages.Total))
		b.waitText(t, `[data-test=ov-dlq]`, strconv.Itoa(dlq.Total))
		b.waitText(t, `[data-test=ov-lag]`, strconv.Itoa(totalLag))
		b.waitText(t, `[data-test=ov-db]`, "healthy")
		b.waitText(t, `[data-test=ov-maintenance]`, "off")
		b.waitText(t, `[data-test=ov-push-maintenance]`, "off")
		b.waitCount(t, `[data-test^=ov-chart] canvas`, 2)
		b.screenshot(t, "overview")

		// A phone's width: the page scrolls only inside its tables.
		// The charts follow the new width from a ResizeObserver callback,
		// which runs after the next layout: the page gets until waitFor.
		b.run(t, "phone viewport", chromedp.EmulateViewport(390, 844))
		if err := e2e.Eventually(waitFor, 100*time.Millisecond, func() error {
			if eval[bool](t, b, "measuring", `document.documentElement.scrollWidth > window.innerWidth`) {
				return errors.New("wider than the screen")
			}
			return nil
		}); err != nil {
			t.Errorf("at 390 px the overview is wider than the screen")
		}
		b.screenshot(t, "overview-phone")
		b.run(t, "laptop viewport", chromedp.EmulateViewport(1280, 900))
	})

	t.Run("queues", func(t *testing.T) {
		var list struct {
			Queues []struct {
				Name     string `json:"name"`
				Messages struct {
					Total   int `json:"total"`
					Pending int `json:"pending"`
				} `json:"messages"`
			} `json:"queues"`
		}
		getJSON(t, b.s, "/api/v1/resources/queues", &list)
		b.open(t, "/queues")
		b.waitCount(t, `[data-test=queues-table] tbody tr`, len(list.Queues))
		for _, q := range list.Queues {
			row := fmt.Sprintf(`[data-test=queues-table] tr[data-queue=%q]`, q.Name)
			b.waitText(t, row+` [data-col=total]`, strconv.Itoa(q.Messages.Total))
			b.waitText(t, row+` [data-col=pending]`, strconv.Itoa(q.Messages.Pending))
		}
		b.waitText(t, `[data-test=queues-table] tr[data-queue=orders] [data-col=groups]`, "2")
		b.screenshot(t, "queues")
		// Sorting by messages puts the biggest first; filtering keeps
		// the matching rows.
		b.click(t, `th[data-sort=total]`)
		b.waitText(t, `[data-test=queues-table] tbody tr:first-child td:first-child`, "orders")
		b.run(t, "filtering", chromedp.SendKeys(chromedp.CSS(`[data-test=queues-filter]`), "bill"))
		b.waitCount(t, `[data-test=queues-table] tbody tr`, 1)
		b.waitText(t, `[data-test=queues-table] tbody tr td:first-child`, "billing")
	})

	t.Run("queue and seek", func(t *testing.T) {
		var st struct {
			Totals struct {
				Partitions int `json:"partitions"`
				Total      int `json:"total"`
				Pending    int `json:"pending"`
			} `json:"totals"`
		}
		getJSON(t, b.s, "/api/v1/status/queues/orders", &st)
		b.open(t, "/queues/orders")
		b.waitText(t, `[data-test=q-partitions]`, strconv.Itoa(st.Totals.Partitions))
		b.waitText(t, `[data-test=q-messages]`, strconv.Itoa(st.Totals.Total))
		b.waitText(t, `[data-test=q-pending]`, strconv.Itoa(st.Totals.Pending))
		b.waitText(t, `[data-test=q-groups] tr[data-group=workers] [data-col=lag]`, "0")
		b.waitText(t, `[data-test=q-groups] tr[data-group=reports] [data-col=lag]`, strconv.Itoa(lagOf(t, b.s, "reports", "orders")))
		b.waitText(t, `[data-test=q-partitions-table] tr[data-partition=p2] [data-col=head]`, "5")
		b.waitText(t, `[data-option=leaseTime]`, "60")
		b.waitText(t, `[data-test=dlq-total]`, "0 dead letters")
		b.waitCount(t, `[data-test=messages-table] tbody tr`, 12)
		b.waitCount(t, `[data-test=q-chart-groups] canvas`, 1)
		b.screenshot(t, "queue")

		// Seek workers back an hour (the form's default time): every
		// message of orders is unconsumed again for it.
		eval[any](t, b, "choosing the group", `(() => {
			const s = document.querySelector('[data-test=admin-group]');
			s.value = 'workers';
			s.dispatchEvent(new Event('change', { bubbles: true }));
		})()`)
		b.click(t, `[data-test=admin-seek]`)
		b.waitText(t, `[data-test=confirm] h3`, "Seek workers on orders?")
		b.viewportShot(t, "confirm")
		b.click(t, `[data-test=confirm-ok]`)
		b.waitText(t, `[data-test=q-groups] tr[data-group=workers] [data-col=lag]`, "15")
		if got := lagOf(t, b.s, "workers", "orders"); got != 15 {
			t.Fatalf("the API gives workers a lag of %d after the seek, want 15", got)
		}
		b.waitCount(t, `[data-test=confirm]`, 0)
		// The seek's notice stays 4 s: the next pages' shots go without it.
		b.waitCount(t, `[data-test=notice]`, 0)
	})

	t.Run("groups", func(t *testing.T) {
		b.open(t, "/groups")
		// The order is the API's list, lagging first (then by time lag,
		// then lag); time lags tick every second, so the two reads are
		// repeated until they agree.
		err := e2e.Eventually(waitFor, 200*time.Millisecond, func() error {
			gs := groups(t, b.s)
			slices.SortStableFunc(gs, func(x, y group) int {
				lagging := func(g group) int {
					if g.State == "Lagging" {
						return 1
					}
					return 0
				}
				return cmp.Or(lagging(y)-lagging(x), y.MaxTimeLag-x.MaxTimeLag, y.TotalLag-x.TotalLag,
					strings.Compare(x.Name, y.Name), strings.Compare(x.QueueName, y.QueueName))
			})
			var want []string
			for _, g := range gs {
				want = append(want, fmt.Sprintf("%s@%s=%d", g.Name, g.QueueName, g.TotalLag))
			}
			got := eval[[]string](t, b, "reading the groups", `[...document.querySelectorAll('[data-test=groups-table] tbody tr')]
				.map(r => r.dataset.group + '@' + r.dataset.queue + '=' + r.querySelector('[data-col=lag]').textContent.replaceAll(',', ''))`)
			if !slices.Equal(got, want) {
				return fmt.Errorf("page %v, API %v", got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b.screenshot(t, "groups")
	})

	t.Run("message", func(t *testing.T) {
		var m struct {
			ConsumerGroups []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"consumerGroups"`
		}
		getJSON(t, b.s, "/api/v1/messages/"+sd.traced.PartitionID+"/"+sd.traced.Tx, &m)
		b.open(t, "/message/"+sd.traced.PartitionID+"/"+sd.traced.Tx)
		b.waitText(t, `[data-test=msg-tx]`, sd.traced.Tx)
		b.waitText(t, `[data-test=msg-traces] [data-col=event]`, "processing")
		if len(m.ConsumerGroups) != 2 {
			t.Fatalf("the API lists %d groups for the message, want 2", len(m.ConsumerGroups))
		}
		for _, g := range m.ConsumerGroups {
			b.waitText(t, fmt.Sprintf(`[data-test=msg-groups] tr[data-group=%q] [data-col=status]`, g.Name), g.Status)
		}
		if got, _ := b.text(t, `[data-test=msg-payload]`); !strings.Contains(got, `"order": 100`) {
			t.Fatalf("payload shown: %s", got)
		}
		b.screenshot(t, "message")
	})
}

// bearer adds a token to every request of an e2e.Server.
type bearer struct{ token string }

func (a bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	return e2e.Client.Transport.RoundTrip(r)
}

const secret = "dashboardtest-secret"

func token(t *testing.T, role string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "dash", "role": role,
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With JWT_ENABLED the page asks for a token, sends it, and shows the
// admin actions only to a token the admin routes accept.
func TestDashboard_AsksForAToken(t *testing.T) {
	t.Parallel()
	b := setup(t, "JWT_ENABLED=true", "JWT_SECRET="+secret)
	admin := b.s.WithClient(&http.Client{Timeout: 30 * time.Second, Transport: bearer{token(t, "admin")}})
	admin.Configure(t, "jobs", nil)
	pushed := admin.PushN(t, "jobs", "", 2)
	if r := b.s.Get(t, "/api/v1/resources/overview"); r.Status != 401 {
		t.Fatalf("the API without a token: %d, want 401", r.Status)
	}

	signIn := func(tok string) {
		t.Helper()
		b.run(t, "signing in", chromedp.WaitVisible(chromedp.CSS(`[data-test=token-input]`)),
			chromedp.SendKeys(chromedp.CSS(`[data-test=token-input]`), tok),
			chromedp.Click(chromedp.CSS(`[data-test=token-submit]`)))
	}
	b.open(t, "/")
	b.waitCount(t, `[data-test=token-form]`, 1)
	b.screenshot(t, "token")
	signIn("not-a-token")
	b.waitCount(t, `[data-test=token-form] .error`, 1)

	signIn(token(t, "read-only"))
	b.waitText(t, `[data-test=access]`, "read-only / read-write")
	b.waitText(t, `[data-test=ov-queues]`, "1")
	b.waitText(t, `[data-test=ov-maintenance]`, "admin only")
	b.open(t, "/queues/jobs")
	b.waitText(t, `[data-test=q-messages]`, "2")
	if n := b.count(t, `[data-test=queue-admin]`); n != 0 {
		t.Fatalf("a read-only token sees the admin actions")
	}
	b.open(t, "/message/"+pushed[0].PartitionID+"/"+pushed[0].Tx)
	b.waitText(t, `[data-test=msg-tx]`, pushed[0].Tx)
	if n := b.count(t, `[data-test=msg-admin]`); n != 0 {
		t.Fatalf("a read-only token sees the message's admin actions")
	}
	b.open(t, "/system")
	b.waitText(t, `[data-test=sys-db]`, "healthy")
	b.waitCount(t, `[data-test=config-admin-only]`, 1)
	b.waitText(t, `[data-test=sys-pop-maintenance]`, "admin only")

	b.click(t, `[data-test=sign-out]`)
	signIn(token(t, "admin"))
	b.waitText(t, `[data-test=access]`, "admin")
	b.open(t, "/queues/jobs")
	b.waitCount(t, `[data-test=queue-admin]`, 1)
	b.waitText(t, `[data-test=q-messages]`, "2")
	b.open(t, "/system")
	b.waitCount(t, `[data-test=config-table]`, 1)
}

// The page and its files are served from the binary with their types, a
// Content-Security-Policy and revalidation; what is not an asset is the
// API's 404; the API's routes are untouched.
func TestDashboard_ServesItsAssets(t *testing.T) {
	t.Parallel()
	s := e2e.Shared(t)
	get := func(path string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		r, err := e2e.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r
	}
	for path, ctype := range map[string]string{
		"/":                                "text/html; charset=utf-8",
		"/assets/app.js":                   "text/javascript; charset=utf-8",
		"/assets/pages/queue.js":           "text/javascript; charset=utf-8",
		"/assets/style.css":                "text/css; charset=utf-8",
		"/assets/vendor/preact.mjs":        "text/javascript; charset=utf-8",
		"/assets/vendor/uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"/assets/vendor/LICENSES":          "text/plain; charset=utf-8",
	} {
		r := get(path)
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != ctype {
			t.Errorf("GET %s: %d %q, want 200 %q", path, r.StatusCode, r.Header.Get("Content-Type"), ctype)
			continue
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self' 'sha256-") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		etag := r.Header.Get("ETag")
		if r := get(path, "If-None-Match", etag); etag == "" || r.StatusCode != 304 {
			t.Errorf("GET %s with If-None-Match %s: %d, want 304", path, etag, r.StatusCode)
		}
	}
	if r := get("/assets/app.js", "Accept-Encoding", "gzip"); r.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("app.js is not sent compressed to a client that accepts gzip")
	}
	for _, path := range []string{"/assets/nope.js", "/assets/index.html", "/assets/", "/queues"} {
		e2e.WantError(t, s.Get(t, path), 404, "route not found")
	}
	var h struct {
		Status string `json:"status"`
	}
	getJSON(t, s, "/health", &h)
	if h.Status != "healthy" {
		t.Fatalf("/health: %+v", h)
	}
}
