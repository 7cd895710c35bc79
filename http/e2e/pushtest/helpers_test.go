package pushtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// shared returns the package's shared broker (e2e.Shared).
func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t)
}

// popAll pops the queue in queue mode with autoAck until it answers 204;
// queue may end in /partition/<name> for the single-partition route.
func popAll(t testing.TB, s *e2e.Server, queue string, batch int) []e2e.Message {
	t.Helper()
	var out []e2e.Message
	for range 100 {
		p := s.Pop(t, fmt.Sprintf("/api/v1/pop/queue/%s?batch=%d&autoAck=true", queue, batch))
		if p == nil {
			return out
		}
		out = append(out, p.Messages...)
	}
	t.Fatalf("queue %s did not drain in 100 pops", queue)
	return nil
}

// compact removes insignificant whitespace, failing on anything not JSON.
func compact(t testing.TB, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON: %q: %v", raw, err)
	}
	return b.String()
}

// wantErrorText requires r to be the plain error answer {"error": text} of
// status; when msg is not empty the text must be msg, or start with it when
// prefix.
func wantErrorText(t testing.TB, r *e2e.Response, status int, msg string, prefix bool) {
	t.Helper()
	e := e2e.WantErrorBody(t, r, status)
	switch {
	case msg == "":
	case prefix && !strings.HasPrefix(e, msg):
		t.Fatalf("error %q, want it to start with %q", e, msg)
	case !prefix && e != msg:
		t.Fatalf("error %q, want %q", e, msg)
	}
}
