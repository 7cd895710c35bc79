package http

import (
	"math"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// The caps of the numeric query parameters (docs/api.md, "Errors and
// limits"). A value outside its range answers 400; none is clamped silently.
const (
	// maxBatch caps one pop's message budget.
	maxBatch = 10000
	// maxPartitionsCap: a pop cannot claim more partitions than messages,
	// so a larger cap could never matter.
	maxPartitionsCap = maxBatch
	// maxTimeoutMs caps a long poll at one hour.
	maxTimeoutMs = 3_600_000
	// maxLeaseSeconds caps a per-pop lease override at 30 days.
	maxLeaseSeconds = 30 * 24 * 3600
	// dlqLimitDefault and dlqLimitMax bound one page of dead letters.
	dlqLimitDefault = 100
	dlqLimitMax     = 1000
)

// maxTxIDLen keeps transaction ids well inside PostgreSQL's btree row limit.
const maxTxIDLen = 1024

// noLowerBound marks a parameter whose low values all keep a meaning (a
// partitions cap of 0 or less is no cap, a lease of 0 or less is absent).
const noLowerBound = math.MinInt

// checkText is the one rule for every string that reaches PostgreSQL: valid
// UTF-8 without NUL. (JSON strings with lone surrogates are refused by the
// scanner before they get here.)
func checkText(field, s string) *apiError {
	if !utf8.ValidString(s) {
		e := errNotUTF8Field(field)
		return &e
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			e := errNULField(field)
			return &e
		}
	}
	return nil
}

// checkTxID checks a transactionId wherever one arrives.
func checkTxID(s string) *apiError {
	if len(s) > maxTxIDLen {
		return &errTxIDTooLong
	}
	return checkText("transactionId", s)
}

// checkName enforces the rules of queue, partition, group, namespace and
// task names: 1 to MaxNameLen bytes of valid UTF-8 without control
// characters (C0, DEL, C1). Anything else, '/' and spaces included, is
// allowed; paths carry such names percent-encoded.
func checkName(what, s string) *apiError {
	if s == "" {
		e := errNameEmpty(what)
		return &e
	}
	if len(s) > queengo.MaxNameLen {
		e := errNameTooLong(what)
		return &e
	}
	if e := checkText(what+" name", s); e != nil {
		return e
	}
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			e := errNameControl(what)
			return &e
		}
	}
	return nil
}

// pathName returns a URL-decoded path parameter that must be a valid name.
func pathName(ctx *fasthttp.RequestCtx, key string) (string, *apiError) {
	v, e := pathText(ctx, key)
	if e != nil {
		return "", e
	}
	if e := checkName(key, v); e != nil {
		return "", e
	}
	return v, nil
}

// pathText returns a URL-decoded path parameter that passes checkText. The
// router matches the raw path, so its values arrive percent-encoded.
func pathText(ctx *fasthttp.RequestCtx, key string) (string, *apiError) {
	raw, _ := ctx.UserValue(key).(string)
	v, err := url.PathUnescape(raw)
	if err != nil {
		e := errPathEncoding(key)
		return "", &e
	}
	if e := checkText(key, v); e != nil {
		return "", e
	}
	return v, nil
}

// boolParam reads an optional boolean query parameter: absent or
// empty gives def, "true" and "1" are true, "false" and "0" false, anything
// else is refused.
func boolParam(args *fasthttp.Args, key string, def bool) (bool, *apiError) {
	switch string(args.Peek(key)) {
	case "":
		return def, nil
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	e := errBoolParam(key)
	return false, &e
}

// offsetParam reads the offset of a page: absent or empty is 0, else 0 to
// 2^31-1, on every list route.
func offsetParam(args *fasthttp.Args, key string) (int, *apiError) {
	return intParam(args, key, 0, 0, math.MaxInt32)
}

// intParam reads an optional base-10 integer query parameter: absent or
// empty gives def; anything else must parse and lie in [lo, hi].
func intParam(args *fasthttp.Args, key string, def, lo, hi int) (int, *apiError) {
	v := args.Peek(key)
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < lo || n > hi {
		e := errIntParam(key, lo, hi)
		return 0, &e
	}
	return n, nil
}

// textParam reads an optional query parameter that passes checkText.
func textParam(args *fasthttp.Args, key string) (string, *apiError) {
	v := string(args.Peek(key))
	if e := checkText(key, v); e != nil {
		return "", e
	}
	return v, nil
}

// nameParam reads an optional query parameter that, when present, must be a
// valid name.
func nameParam(args *fasthttp.Args, key string) (string, *apiError) {
	v := string(args.Peek(key))
	if v == "" {
		return "", nil
	}
	if e := checkName(key, v); e != nil {
		return "", e
	}
	return v, nil
}
