package cli

import (
	"fmt"
	"net/url"
	"os"

	"github.com/queengo/queengo/http/client"
	"golang.org/x/term"
)

// client is the broker's HTTP client of the global flags: --url, --token
// and --timeout. A --url it cannot use is a usage error. Its failures are
// *client.APIError (the broker answered outside 2xx) and
// *client.UnreachableError (no usable answer), which exitCode maps.
func (a *app) client() (*client.Client, error) {
	c, err := client.New(a.url, client.Token(a.token), client.Timeout(a.timeout), client.UserAgent("queengo-cli"),
		client.EnvProxy())
	if err != nil {
		return nil, usageError{fmt.Errorf("--url: %w", err)}
	}
	return c, nil
}

// seg percent-encodes one path segment: names may hold '/', '?' and
// spaces (docs/api.md conventions).
func seg(s string) string { return url.PathEscape(s) }

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
