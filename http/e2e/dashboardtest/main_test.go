// Package dashboardtest checks the web dashboard (issue 14) in a real
// browser: headless Chromium, driven over the DevTools protocol by chromedp,
// loads every page from a broker with seeded queues and compares the
// figures it shows with the API's answers. With UPDATE_SCREENSHOTS=1 it
// also writes a screenshot of each page to docs/screenshots/ (see save).
//
// Chromium is /usr/bin/chromium (Debian's package; `make test` installs it
// through .ci/ensure-chromium.sh), or the binary QUEENGO_CHROMIUM names.
package dashboardtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "dashboardtest") }

const (
	// waitFor bounds each wait for the page to show something: a page
	// shows its figures within one read of the API, well under a second
	// on an idle machine, but a loaded 2-core box under -race is slower.
	waitFor = 20 * time.Second
	// testBudget bounds a whole browser test, so a hung browser fails it
	// rather than the package's timeout. A test takes about 25 s on its own;
	// with its six browser tests, two at a time under -race on a loaded
	// 2-core machine (load average 15-20), the package took 132-137 s and
	// its longest test 130 s (2026-12-07); twice that is a hang.
	testBudget = 4 * time.Minute
)

// bundle is what a browser test works with: a broker of its own database
// (the overview's figures cover every queue, so no other test may write
// there) and a browser tab.
type bundle struct {
	s   *e2e.Server
	tab context.Context

	listening chan struct{} // closed when the console is no longer read
	mu        sync.Mutex
	errors    []string // exceptions and console errors of the page
}

// setup starts a broker with env on a database of the test's own and a
// Chromium tab, both stopped when the test ends; the page's uncaught
// exceptions and console errors fail the test.
func setup(t *testing.T, env ...string) *bundle {
	t.Helper()
	return setupOn(t, e2e.CreateDB(t, "dash").URL, env...)
}

// setupOn is setup with a broker on the database at dbURL.
func setupOn(t *testing.T, dbURL string, env ...string) *bundle {
	t.Helper()
	b := &bundle{s: e2e.StartWith(t, e2e.StartOpts{DatabaseURL: dbURL, Env: env, Attempts: 2}),
		listening: make(chan struct{})}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), // containers have a small /dev/shm
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	budget, cancelBudget := context.WithTimeout(context.Background(), testBudget)
	alloc, cancelAlloc := chromedp.NewExecAllocator(budget, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		<-b.listening
		cancelAlloc()
		cancelBudget()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("the page reported: %s", e)
		}
	})
	b.tab = tab
	// The page's uncaught exceptions and console.error calls; the browser's
	// own log is left out, since it reports every refused fetch (a 401
	// before the token is given is expected).
	messages := chromedp.Console(tab)
	go func() {
		defer close(b.listening)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source == "" {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	b.run(t, "starting the browser", chromedp.Navigate("about:blank"))
	return b
}

// chromium is the browser binary: $QUEENGO_CHROMIUM, else chromium on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUEENGO_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH (%v): run .ci/ensure-chromium.sh, or set QUEENGO_CHROMIUM", err)
	}
	return p
}

// run runs browser actions, failing the test with what they were for.
func (b *bundle) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.tab, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// open loads a page of the dashboard (hash is the part after "#").
func (b *bundle) open(t *testing.T, hash string) {
	t.Helper()
	b.run(t, "opening #"+hash, chromedp.Navigate(b.s.URL+"/#"+hash))
}

// text is the trimmed text of the first element sel (a CSS selector)
// matches, and whether there is one.
func (b *bundle) text(t *testing.T, sel string) (string, bool) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? e.textContent.trim() : null })()`, jsString(sel))
	v := eval[*string](t, b, "reading "+sel, js)
	if v == nil {
		return "", false
	}
	return *v, true
}

// count is how many elements sel matches.
func (b *bundle) count(t *testing.T, sel string) int {
	t.Helper()
	return eval[int](t, b, "counting "+sel, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// eval runs a script in the page and returns its value.
func eval[T any](t *testing.T, b *bundle, what, js string) T {
	t.Helper()
	v, err := chromedp.Run(b.tab, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitText waits until the element sel shows want (thousands separators
// dropped, so the API's numbers compare as they are).
func (b *bundle) waitText(t *testing.T, sel, want string) {
	t.Helper()
	var got string
	var found bool
	err := e2e.Eventually(waitFor, 100*time.Millisecond, func() error {
		got, found = b.text(t, sel)
		if strings.ReplaceAll(got, ",", "") != want {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s shows %q (found: %v), want %q", sel, got, found, want)
	}
}

// waitCount waits until sel matches n elements.
func (b *bundle) waitCount(t *testing.T, sel string, n int) {
	t.Helper()
	var got int
	if err := e2e.Eventually(waitFor, 100*time.Millisecond, func() error {
		if got = b.count(t, sel); got != n {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("%s matches %d elements, want %d", sel, got, n)
	}
}

// click waits for sel to be visible and clicks it.
func (b *bundle) click(t *testing.T, sel string) {
	t.Helper()
	b.run(t, "clicking "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// getJSON requires a 200 answer of path from the API and decodes it.
func getJSON(t *testing.T, s *e2e.Server, path string, v any) {
	t.Helper()
	r := s.Get(t, path)
	if r.Status != 200 {
		t.Fatalf("GET %s: status %d: %s", path, r.Status, r.Body)
	}
	r.JSON(t, v)
}
