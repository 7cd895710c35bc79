package edgetest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// Contract C: every error the broker sends is {"error":"..."} with
// Content-Type application/json, the HTTP server's own included: those are
// sent on a raw connection, since net/http refuses to send them.

// maxBody is the broker's default body limit (http/server.go: 16 MiB).
const maxBody = 16 << 20

// A header block far over the server's read buffer (4 KiB in fasthttp).
func TestOversizedHeaderIs431JSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, size := range []int{10 << 10, 64 << 10} {
		req := "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", size) + "\r\n\r\n"
		if _, err := e2e.CheckError(s.Raw(t, []byte(req)), 431, ""); err != nil {
			t.Errorf("%d KiB header: %v", size>>10, err)
		}
	}
}

// Many small headers that add up past the limit are the same case.
func TestManyHeadersOverLimitIs431JSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	var b strings.Builder
	b.WriteString("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "X-H%d: %s\r\n", i, strings.Repeat("v", 60))
	}
	b.WriteString("\r\n")
	e2e.WantError(t, s.Raw(t, []byte(b.String())), 431, "")
}

// A body declared over the limit is refused before it is read; nothing is
// pushed.
func TestOversizedBodyIs413JSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-413")
	prefix := fmt.Sprintf(`{"items":[{"queue":%q,"payload":"`, q)
	req := fmt.Sprintf("POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		maxBody+1, prefix)
	e2e.WantError(t, s.Raw(t, []byte(req)), 413, "")
	if n := e2e.QueueCounts(t, q).Queues; n != 0 {
		t.Fatalf("the refused push created its queue")
	}
}

// A body at the limit is not refused for its size (here it is not a valid
// push, so a 400 of the push route, not a 413).
func TestBodyAtLimitIsNot413(t *testing.T) {
	t.Parallel()
	s := shared(t)
	body := `{"items":[],"pad":"` + strings.Repeat("x", maxBody-len(`{"items":[],"pad":""}`)) + `"}`
	if len(body) != maxBody {
		t.Fatalf("body of %d bytes", len(body))
	}
	r := s.Post(t, "/api/v1/push", body)
	if r.Status != 201 || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("a %d-byte push with no items: %d %s, want 201 []", maxBody, r.Status, r.Body)
	}
}

// A chunked body whose chunk size is not hexadecimal.
func TestBadChunkSizeIs400JSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, chunk := range []string{"zz\r\n", "-1\r\n", "fffffffffffffffffffff\r\n"} {
		req := "POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
			chunk + "{}\r\n0\r\n\r\n"
		if _, err := e2e.CheckError(s.Raw(t, []byte(req)), 400, ""); err != nil {
			t.Errorf("chunk size line %q: %v", chunk, err)
		}
	}
}

// A Content-Length that is not a non-negative number.
func TestNegativeContentLengthIs400JSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, cl := range []string{"-1", "abc"} {
		req := "POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n{}"
		if _, err := e2e.CheckError(s.Raw(t, []byte(req)), 400, ""); err != nil {
			t.Errorf("Content-Length %s: %v", cl, err)
		}
	}
}

// A request line that is not HTTP at all.
func TestGarbageRequestLineIs400JSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	e2e.WantError(t, s.Raw(t, []byte("GET\r\n\r\n")), 400, "")
}

// The router's own answers: an unknown path and a known path with another
// method.
func TestUnknownRouteAndMethodAreJSON(t *testing.T) {
	t.Parallel()
	s := shared(t)
	e2e.WantError(t, s.Get(t, "/api/v1/nope"), 404, "")
	e2e.WantError(t, s.Do(t, "PUT", "/api/v1/push", "{}"), 405, "")
}

// ---------------------------------------------------------------- paths

// Contract D: POST /api/v1/push/ (trailing slash) and POST //api/v1/push are
// not routes: 404 JSON, not a 308 redirect and not a push; nothing is
// written.
func TestPushWithTrailingSlashIs404AndPushesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-slash")
	r := rawPush(t, s, "/api/v1/push/", q)
	e2e.WantError(t, r, 404, "")
	if loc := r.Header.Get("Location"); loc != "" {
		t.Errorf("404 with Location %q", loc)
	}
	if n := e2e.QueueCounts(t, q).Queues; n != 0 {
		t.Fatalf("the push was applied (queue created)")
	}
}

func TestPushWithDoubleLeadingSlashIs404AndPushesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-dslash")
	for _, path := range []string{"//api/v1/push", "//api/v1/push/"} {
		r := rawPush(t, s, path, q)
		if _, err := e2e.CheckError(r, 404, ""); err != nil {
			t.Errorf("POST %s: %v", path, err)
		}
	}
	if n := e2e.QueueCounts(t, q).Queues; n != 0 {
		t.Fatalf("a push was applied (queue created)")
	}
}

// Through net/http with redirects off, as an SDK would send it.
func TestPushWithTrailingSlashIsNotARedirect(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-slash-client")
	c := &http.Client{Timeout: requestTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	body := fmt.Sprintf(`{"items":[{"queue":%q,"payload":1}]}`, q)
	resp, err := c.Post(s.URL+"/api/v1/push/", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("POST /api/v1/push/: %d (Location %q), want 404", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := e2e.QueueCounts(t, q).Queues; n != 0 {
		t.Fatalf("the push was applied (queue created)")
	}
}

// rawPush posts a one-item push to queue on path, sent as it is.
func rawPush(t testing.TB, s *e2e.Server, path, queue string) *e2e.Response {
	t.Helper()
	body := fmt.Sprintf(`{"items":[{"queue":%q,"payload":1}]}`, queue)
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		path, len(body), body)
	return s.Raw(t, []byte(req))
}
