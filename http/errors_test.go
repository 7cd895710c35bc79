package http

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, dir+"/"+n, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	return files
}

// TestTypedErrorsCoverPackageQueengo: every exported Err variable of package
// queengo has a row in typedErrors, and every exported error type is one
// failure knows, so no typed error reaches a client as "database error" by
// omission.
func TestTypedErrorsCoverPackageQueengo(t *testing.T) {
	t.Parallel()
	var sentinels, types []string
	for _, f := range parseDir(t, "..") {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch sp := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if g.Tok == token.VAR && n.IsExported() && strings.HasPrefix(n.Name, "Err") {
							sentinels = append(sentinels, n.Name)
						}
					}
				case *ast.TypeSpec:
					if sp.Name.IsExported() && strings.HasSuffix(sp.Name.Name, "Error") {
						types = append(types, sp.Name.Name)
					}
				}
			}
		}
	}
	if len(sentinels) == 0 {
		t.Fatal("found no Err variables in package queengo")
	}
	var rows []string
	for _, f := range parseDir(t, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "typedErrors" {
				return true
			}
			for _, el := range vs.Values[0].(*ast.CompositeLit).Elts {
				if sel, ok := el.(*ast.CompositeLit).Elts[0].(*ast.SelectorExpr); ok {
					rows = append(rows, sel.Sel.Name)
				}
			}
			return false
		})
	}
	for _, name := range sentinels {
		if !slices.Contains(rows, name) {
			t.Errorf("queengo.%s has no row in typedErrors", name)
		}
	}
	// The error types failure unwraps (errors.As) before the rows.
	known := []string{"ConflictError", "CycleRefusedError", "MissingError"}
	for _, name := range types {
		if !slices.Contains(known, name) {
			t.Errorf("queengo.%s is not mapped by failure", name)
		}
	}
}

// TestFailure_TypedErrors: each typed error, wrapped as the layers wrap
// them, gets its row's answer on every route and on the pop routes.
func TestFailure_TypedErrors(t *testing.T) {
	t.Parallel()
	for _, row := range typedErrors {
		err := fmt.Errorf("error doing something: %w", fmt.Errorf("deeper: %w", row.target))
		if got := failure(err); got != row.entry {
			t.Errorf("failure(%v) = %+v, want %+v", row.target, got, row.entry)
		}
		if got := popFailure(err); got != row.pop {
			t.Errorf("popFailure(%v) = %+v, want %+v", row.target, got, row.pop)
		}
	}
}

// TestFailure_Unknown: an error of no known type is 500 "database error",
// and "pop failed" on the pop routes.
func TestFailure_Unknown(t *testing.T) {
	t.Parallel()
	err := errors.New("ERROR: division by zero (SQLSTATE 22012)")
	if got, want := failure(err), (apiError{500, "database_error", "database error"}); got != want {
		t.Errorf("failure(unknown) = %+v, want %+v", got, want)
	}
	if got, want := popFailure(err), (apiError{500, "pop_failed", "pop failed"}); got != want {
		t.Errorf("popFailure(unknown) = %+v, want %+v", got, want)
	}
}

// TestFailure_Conflict: a transaction's failed ack is a 409 whose message
// the table makes from the ack's failure code; without one it is Queen's "Unknown
// error". A resource route's ErrNotFound is that resource's 404.
func TestFailure_Conflict(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("error in transaction: %w", &queengo.ConflictError{Op: 3, Failure: queengo.AckLeaseInvalid})
	if !errors.Is(err, queengo.ErrConflict) {
		t.Fatal("a ConflictError does not match ErrConflict")
	}
	want := apiError{409, "transaction_conflict", "ACK operation failed: Invalid or expired lease"}
	if got := failure(err); got != want {
		t.Errorf("failure(conflict) = %+v, want %+v", got, want)
	}
	if got := failure(&queengo.ConflictError{}).Message; got != "ACK operation failed: Unknown error" {
		t.Errorf("conflict without a reason: %q", got)
	}
	nf := fmt.Errorf("error reading message: %w", queengo.ErrNotFound)
	if got := failureOf(nf, errMessageNotFound); got != errMessageNotFound {
		t.Errorf("failureOf(not found) = %+v, want %+v", got, errMessageNotFound)
	}
	if got := failureOf(fmt.Errorf("x: %w", queengo.ErrTimeout), errMessageNotFound); got != errDatabaseTimedOut {
		t.Errorf("failureOf(timeout) = %+v, want %+v", got, errDatabaseTimedOut)
	}
}

// TestErrorTable_WireMessages: the answers SDKs, tests and the specs match
// on keep their status and bytes.
func TestErrorTable_WireMessages(t *testing.T) {
	t.Parallel()
	s := &Server{metrics: metrics.NewSet()}
	for _, c := range []struct {
		e      apiError
		status int
		body   string
	}{
		{errPopNoConn, 503, `{"error":"pool"}`},
		{errPopUnavailable, 503, `{"error":"pop failed"}`},
		{errPopTimedOut, 503, `{"error":"pop failed"}`},
		{errPopFailed, 500, `{"error":"pop failed"}`},
		{errDatabase, 500, `{"error":"database error"}`},
		{errDatabaseNoConn, 503, `{"error":"database unavailable"}`},
		{errDatabaseUnavailable, 503, `{"error":"database unavailable"}`},
		{errDatabaseTimedOut, 503, `{"error":"database timed out"}`},
		{errShuttingDown, 503, `{"error":"broker is shutting down"}`},
		{errMessageNotFound, 404, `{"error":"Message not found"}`},
		{errDeadLetterNotFound, 404, `{"error":"dead letter not found"}`},
		{errEmptyBody, 400, `{"error":"Empty request body"}`},
		{errTxConflict(queengo.AckMessageNotFound), 409, `{"error":"ACK operation failed: Message not found"}`},
		{errQueueFull, 409, `{"error":"queue is full: it holds maxSize unconsumed messages"}`},
		{errEncryptionUnavailable, 400, `{"error":"encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker"}`},
	} {
		var ctx fasthttp.RequestCtx
		counter := s.errorCounter(c.e.Code)
		before := counter.Get()
		s.writeError(&ctx, c.e)
		if got := ctx.Response.StatusCode(); got != c.status {
			t.Errorf("%s: status %d, want %d", c.e.Code, got, c.status)
		}
		if got := string(ctx.Response.Body()); got != c.body {
			t.Errorf("%s: body %s, want %s", c.e.Code, got, c.body)
		}
		if counter.Get() <= before {
			t.Errorf("%s: not counted in queengo_http_errors_total", c.e.Code)
		}
	}
	var ctx fasthttp.RequestCtx
	s.writeScopeRequired(&ctx)
	if got, want := string(ctx.Response.Body()), `{"success":false,"error":"namespace or task is required","messages":[]}`; got != want {
		t.Errorf("discovery without a scope: %s, want %s", got, want)
	}
}

// TestErrorTable_Codes: every entry of the table, wherever in the package it
// is written, has a literal snake_case code of its own.
func TestErrorTable_Codes(t *testing.T) {
	t.Parallel()
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, f := range parseDir(t, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "apiError" || len(lit.Elts) == 0 {
				return true
			}
			if len(lit.Elts) != 3 {
				t.Errorf("an apiError literal without status, code and message: %d fields", len(lit.Elts))
				return true
			}
			bl, ok := lit.Elts[1].(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				t.Errorf("an apiError whose code is not a string literal")
				return true
			}
			code, _ := strconv.Unquote(bl.Value)
			if !snake.MatchString(code) {
				t.Errorf("code %q is not snake_case", code)
			}
			if seen[code] {
				t.Errorf("code %q names two entries", code)
			}
			seen[code] = true
			return true
		})
	}
	if len(seen) < 40 {
		t.Fatalf("found only %d entries", len(seen))
	}
}

// TestFailure_MissingNamesItsThing: a *queengo.MissingError, wrapped as the
// layers wrap it, is the 404 of the thing it names on every route, also
// where the route's own resource is another (failureOf).
func TestFailure_MissingNamesItsThing(t *testing.T) {
	t.Parallel()
	for what, want := range map[string]apiError{
		queengo.MissingQueue:     errQueueNotFound,
		queengo.MissingPartition: errPartitionNotFound,
		queengo.MissingGroup:     errGroupNotFound,
	} {
		err := fmt.Errorf("error seeking: %w", &queengo.MissingError{What: what})
		if got := failure(err); got != want {
			t.Errorf("failure(missing %s) = %+v, want %+v", what, got, want)
		}
		if got := failureOf(err, errMessageNotFound); got != want {
			t.Errorf("failureOf(missing %s) = %+v, want %+v", what, got, want)
		}
	}
	if got := failureOf(fmt.Errorf("x: %w", queengo.ErrNotFound), errMessageNotFound); got != errMessageNotFound {
		t.Errorf("failureOf(ErrNotFound) = %+v", got)
	}
}

// TestAckFailureTextCoversEveryCode: every per-item failure code of package
// queengo has its wire text, and no two codes share one.
func TestAckFailureTextCoversEveryCode(t *testing.T) {
	t.Parallel()
	seen := map[string]queengo.AckFailure{}
	for _, f := range queengo.AckFailures {
		text := failureText(f)
		if text == "" {
			t.Errorf("AckFailure %q has no text in ackFailureText", f)
		}
		if g, dup := seen[text]; dup {
			t.Errorf("AckFailures %q and %q share the text %q", g, f, text)
		}
		seen[text] = f
	}
	if len(ackFailureText) != len(queengo.AckFailures) {
		t.Errorf("ackFailureText has %d rows for %d codes", len(ackFailureText), len(queengo.AckFailures))
	}
}
