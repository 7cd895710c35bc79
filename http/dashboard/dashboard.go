// Package dashboard is queengo's web dashboard: a single page (Preact, htm
// and uPlot, vendored under assets/vendor) embedded in the binary and served
// at "/" by the broker. The page reads only the public HTTP API, with the
// token the user gives it, so it works the same against one broker or
// several behind a load balancer; this package only serves its files.
package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"regexp"

	"github.com/valyala/fasthttp"
)

//go:embed assets
var assets embed.FS

// file is one asset, ready to send.
type file struct {
	body, gzipped []byte // gzipped is nil when compressing does not pay
	contentType   string
	etag          string
}

// Handler serves the page and its assets.
type Handler struct {
	files    map[string]file // by path under assets/
	csp      string
	notFound fasthttp.RequestHandler
}

// importMap finds the inline import map of index.html, the one inline
// script the page has: the Content-Security-Policy admits it by its hash.
var importMap = regexp.MustCompile(`(?s)<script type="importmap">(.*?)</script>`)

// New loads the embedded assets. notFound answers a path that is no asset.
func New(notFound fasthttp.RequestHandler) (*Handler, error) {
	h := &Handler{files: map[string]file{}, notFound: notFound}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		f := file{body: body, contentType: mime.TypeByExtension(path.Ext(p)), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		switch path.Ext(p) {
		case ".mjs":
			f.contentType = "text/javascript; charset=utf-8"
		case ".md", "":
			f.contentType = "text/plain; charset=utf-8"
		}
		if f.contentType == "" {
			f.contentType = "application/octet-stream"
		}
		if f.gzipped, err = gzipOf(body); err != nil {
			return err
		}
		h.files[p[len("assets/"):]] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the dashboard assets: %w", err)
	}
	index, ok := h.files["index.html"]
	if !ok {
		return nil, fmt.Errorf("loading the dashboard assets: no index.html")
	}
	m := importMap.FindSubmatch(index.body)
	if m == nil {
		return nil, fmt.Errorf("loading the dashboard assets: index.html has no import map")
	}
	sum := sha256.Sum256(m[1])
	// Scripts and styles come only from the broker (and the import map by
	// its hash); fetches only to the broker; no frames, no plugins.
	h.csp = "default-src 'self'; script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; " +
		"base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
	return h, nil
}

// gzipOf compresses b, or returns nil when that saves less than a tenth.
func gzipOf(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > len(b)*9/10 {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// WithNotFound returns a handler of the same assets whose paths that are no
// asset are answered by notFound.
func (h *Handler) WithNotFound(notFound fasthttp.RequestHandler) *Handler {
	c := *h
	c.notFound = notFound
	return &c
}

// Index serves the page (GET /).
func (h *Handler) Index(ctx *fasthttp.RequestCtx) { h.serve(ctx, "index.html") }

// Asset serves one asset (GET /assets/{filepath:*}).
func (h *Handler) Asset(ctx *fasthttp.RequestCtx) {
	name, _ := ctx.UserValue("filepath").(string)
	if name == "index.html" {
		h.notFound(ctx)
		return
	}
	h.serve(ctx, name)
}

// serve sends the asset name. Every answer must be revalidated (no-cache)
// but costs only a 304 when unchanged: the files change with the binary,
// and a page mixing two versions' files would break.
func (h *Handler) serve(ctx *fasthttp.RequestCtx, name string) {
	f, ok := h.files[name]
	if !ok {
		h.notFound(ctx)
		return
	}
	hdr := &ctx.Response.Header
	hdr.Set(fasthttp.HeaderCacheControl, "no-cache")
	hdr.Set(fasthttp.HeaderETag, f.etag)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set(fasthttp.HeaderContentSecurityPolicy, h.csp)
	hdr.Set(fasthttp.HeaderVary, fasthttp.HeaderAcceptEncoding)
	hdr.SetContentType(f.contentType)
	if string(ctx.Request.Header.Peek(fasthttp.HeaderIfNoneMatch)) == f.etag {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	if f.gzipped != nil && ctx.Request.Header.HasAcceptEncoding("gzip") {
		hdr.Set(fasthttp.HeaderContentEncoding, "gzip")
		ctx.SetBody(f.gzipped)
		return
	}
	ctx.SetBody(f.body)
}
