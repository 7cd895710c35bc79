// Package edgetest holds the black-box HTTP tests of issue 8: bad input at
// the edges of the API. Numeric query parameters out of range or not
// integers, strings that cannot reach PostgreSQL (NUL, invalid UTF-8, lone
// surrogates), the HTTP server's own errors, paths that are not routes, and
// names with any valid UTF-8 but control characters. Every test is named
// after the rule it checks; a rejected request answers a JSON
// {"error":"..."} naming the parameter or field and applies nothing.
//
// Every test shares one lazily started broker on the package database
// (e2e.Shared); tests read queen.* through e2e.DB to check that a
// rejected request wrote nothing.
package edgetest

import (
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "edgetest") }

// requestTimeout bounds every request of this package: a 400 is immediate,
// so a request still open after it is a parked pop that should not park.
const requestTimeout = 15 * time.Second

// shared returns the package's one broker, every request bounded by
// requestTimeout.
func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DEFAULT_TIMEOUT=", "POP_DEFAULT_TIMEOUT_MS=").WithTimeout(requestTimeout)
}
