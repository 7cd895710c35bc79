package http

import (
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
)

// writeJSON sends body with the JSON content type and the CORS headers.
func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	setCORS(ctx)
	ctx.SetBody(body)
}

func setCORS(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 break JavaScript string literals.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendUUID(dst []byte, id uuid.UUID) []byte {
	dst = append(dst, '"')
	var b [36]byte
	hexEncode(b[:], id)
	dst = append(dst, b[:]...)
	return append(dst, '"')
}

// appendUUIDOrNull writes null for the zero UUID.
func appendUUIDOrNull(dst []byte, id uuid.UUID) []byte {
	if id == uuid.Nil {
		return append(dst, "null"...)
	}
	return appendUUID(dst, id)
}

func hexEncode(dst []byte, u uuid.UUID) {
	j := 0
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j], dst[j+1] = hexDigits[b>>4], hexDigits[b&0xf]
		j += 2
	}
}

func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

func appendInt(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) }

func appendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }

func appendFloat(dst []byte, f float64) []byte { return strconv.AppendFloat(dst, f, 'f', 3, 64) }

func appendBool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }
