package dashboard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func notFound(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusNotFound) }

// Every file the page names (links, scripts, the import map's targets) is
// an embedded asset, so the page never asks for one the broker lacks.
func TestDashboard_IndexNamesOnlyEmbeddedAssets(t *testing.T) {
	t.Parallel()
	h, err := New(notFound)
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`"/assets/([^"]+)"`).FindAllSubmatch(h.files["index.html"].body, -1)
	if len(refs) < 6 {
		t.Fatalf("index.html names %d assets, want the 3 vendored modules, uPlot's script and style, the app and its style", len(refs))
	}
	for _, r := range refs {
		if _, ok := h.files[string(r[1])]; !ok {
			t.Errorf("index.html names /assets/%s, which is not embedded", r[1])
		}
	}
}

// The page's modules are app.js and what it imports, directly or not: each
// import names an embedded module, by a path relative to its importer or by
// a bare name the import map maps, and every embedded module (bar the
// vendored ones) is imported. With no build step, a wrong path would
// otherwise show only in a browser.
func TestDashboard_ModulesImportOnlyEmbeddedModules(t *testing.T) {
	t.Parallel()
	h, err := New(notFound)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Imports map[string]string `json:"imports"`
	}
	if err := json.Unmarshal(importMap.FindSubmatch(h.files["index.html"].body)[1], &m); err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`(?m)^import [^;]* from '([^']+)';$`)
	seen := map[string]bool{"app.js": true}
	for todo := []string{"app.js"}; len(todo) > 0; todo = todo[1:] {
		name := todo[0]
		for _, spec := range imports.FindAllSubmatch(h.files[name].body, -1) {
			s := string(spec[1])
			if !strings.HasPrefix(s, "./") && !strings.HasPrefix(s, "../") {
				if target, ok := m.Imports[s]; !ok {
					t.Errorf("%s imports %q, which the import map lacks", name, s)
				} else if _, ok := h.files[strings.TrimPrefix(target, "/assets/")]; !ok {
					t.Errorf("%s imports %q, mapped to %s, which is not embedded", name, s, target)
				}
				continue
			}
			target := path.Join(path.Dir(name), s)
			if _, ok := h.files[target]; !ok {
				t.Errorf("%s imports %q: %s is not embedded", name, s, target)
			} else if !seen[target] {
				seen[target] = true
				todo = append(todo, target)
			}
		}
	}
	for name := range h.files {
		if path.Ext(name) == ".js" && !strings.HasPrefix(name, "vendor/") && !seen[name] {
			t.Errorf("%s is embedded but no module imports it", name)
		}
	}
}

// The policy admits the import map by its hash: a changed map without a
// changed hash would stop the page from loading.
func TestDashboard_PolicyAdmitsTheImportMap(t *testing.T) {
	t.Parallel()
	h, err := New(notFound)
	if err != nil {
		t.Fatal(err)
	}
	m := importMap.FindSubmatch(h.files["index.html"].body)
	sum := sha256.Sum256(m[1])
	if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(h.csp, want) {
		t.Fatalf("policy %q lacks %s", h.csp, want)
	}
}

func TestDashboard_ServesAssetsAndRevalidates(t *testing.T) {
	t.Parallel()
	h, err := New(notFound)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name, etag string, gzip bool) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.SetUserValue("filepath", name)
		if etag != "" {
			ctx.Request.Header.Set(fasthttp.HeaderIfNoneMatch, etag)
		}
		if gzip {
			ctx.Request.Header.Set(fasthttp.HeaderAcceptEncoding, "gzip")
		}
		h.Asset(&ctx)
		return &ctx
	}
	ctx := get("app.js", "", false)
	if ctx.Response.StatusCode() != 200 || string(ctx.Response.Body()) != string(h.files["app.js"].body) {
		t.Fatalf("app.js: %d, %d bytes", ctx.Response.StatusCode(), len(ctx.Response.Body()))
	}
	etag := string(ctx.Response.Header.Peek(fasthttp.HeaderETag))
	if ctx := get("app.js", etag, false); ctx.Response.StatusCode() != 304 || len(ctx.Response.Body()) != 0 {
		t.Fatalf("app.js with its ETag: %d", ctx.Response.StatusCode())
	}
	if ctx := get("app.js", `"other"`, false); ctx.Response.StatusCode() != 200 {
		t.Fatalf("app.js with another ETag: %d", ctx.Response.StatusCode())
	}
	if ctx := get("app.js", "", true); string(ctx.Response.Header.Peek(fasthttp.HeaderContentEncoding)) != "gzip" {
		t.Fatal("app.js is not gzipped for a client that accepts it")
	}
	for _, name := range []string{"index.html", "nope.js", "", "../dashboard.go"} {
		if ctx := get(name, "", false); ctx.Response.StatusCode() != 404 {
			t.Errorf("asset %q: %d, want 404", name, ctx.Response.StatusCode())
		}
	}
}
