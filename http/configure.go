package http

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

type rawConfigure struct {
	Queue     json.RawMessage            `json:"queue"`
	Namespace json.RawMessage            `json:"namespace"`
	Task      json.RawMessage            `json:"task"`
	Options   map[string]json.RawMessage `json:"options"`
}

// parseConfigure validates a configure body. Options left out take their
// configure defaults (a full replace); unknown option keys are ignored.
func parseConfigure(body []byte) (name, namespace, task string, o queengo.QueueOptions, e *apiError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return "", "", "", o, &errEmptyBody
	}
	var raw rawConfigure
	if err := json.Unmarshal(body, &raw); err != nil {
		return "", "", "", o, invalidJSON(err)
	}
	if e := textErrors(namedRaw{"queue", raw.Queue}, namedRaw{"namespace", raw.Namespace}, namedRaw{"task", raw.Task}); e != nil {
		return "", "", "", o, e
	}
	name, ok, isNull := jsonString(raw.Queue)
	if !ok || isNull || name == "" {
		return "", "", "", o, &errQueueRequired
	}
	if e = checkName("queue", name); e != nil {
		return
	}
	// JS and Python send null for an unset namespace or task.
	for _, f := range []struct {
		key     string
		raw     json.RawMessage
		dst     *string
		notText apiError
	}{{"namespace", raw.Namespace, &namespace, errNamespaceString}, {"task", raw.Task, &task, errTaskString}} {
		v, ok, _ := jsonString(f.raw)
		if !ok {
			return "", "", "", o, &f.notText
		}
		if v != "" {
			if e = checkName(f.key, v); e != nil {
				return "", "", "", o, e
			}
		}
		*f.dst = v
	}
	o = queengo.ConfigureDefaults()
	ints := map[string]*int{
		"leaseTime": &o.LeaseTime, "retryLimit": &o.RetryLimit, "retryDelay": &o.RetryDelay,
		"priority": &o.Priority, "maxSize": &o.MaxSize, "ttl": &o.TTL,
		"delayedProcessing": &o.DelayedProcessing, "windowBuffer": &o.WindowBuffer,
		"retentionSeconds": &o.RetentionSeconds, "completedRetentionSeconds": &o.CompletedRetentionSeconds,
		"maxWaitTimeSeconds": &o.MaxWaitTimeSeconds, "minPopWaitTime": &o.MinPopWaitTime,
	}
	bools := map[string]*bool{
		"deadLetterQueue": &o.DeadLetterQueue, "dlqAfterMaxRetries": &o.DLQAfterMaxRetries,
		"retentionEnabled": &o.RetentionEnabled, "encryptionEnabled": &o.EncryptionEnabled,
	}
	for k, v := range raw.Options {
		if string(v) == "null" {
			continue
		}
		if p, ok := ints[k]; ok {
			n, ok := jsonInt(v)
			if !ok || (n < 0 && k != "priority") {
				be := errOptionInt(k)
				return "", "", "", o, &be
			}
			*p = n
		} else if p, ok := bools[k]; ok {
			b, ok := jsonBool(v)
			if !ok {
				be := errOptionBool(k)
				return "", "", "", o, &be
			}
			*p = b
		}
	}
	o.MinPopWaitTime = min(o.MinPopWaitTime, queengo.MinPopWaitTimeMax)
	return name, namespace, task, o, nil
}

// jsonInt accepts a JSON integer (or a whole float such as 30.0) or a string
// holding one, as the reference's SQL cast did.
func jsonInt(v json.RawMessage) (int, bool) {
	s := string(v)
	if len(s) > 1 && s[0] == '"' {
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, false
		}
	}
	if n, err := strconv.Atoi(s); err == nil {
		return n, n <= 1<<31-1
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int64(f)) || f > 1<<31-1 || f < -(1<<31) {
		return 0, false
	}
	return int(f), true
}

func jsonBool(v json.RawMessage) (bool, bool) {
	switch string(v) {
	case "true", `"true"`:
		return true, true
	case "false", `"false"`:
		return false, true
	}
	return false, false
}

func (s *Server) handleConfigure(ctx *fasthttp.RequestCtx) {
	name, ns, task, opts, e := parseConfigure(ctx.PostBody())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	q, pid, err := s.broker.Configure(ctx, name, ns, task, opts)
	if err != nil {
		s.writeFailure(ctx, failure(err), err, "queue", name)
		return
	}
	buf := append(make([]byte, 0, 640), `{"configured":true,"queueId":`...)
	buf = appendUUID(buf, q.ID)
	buf = append(buf, `,"partitionId":`...)
	buf = appendUUID(buf, pid)
	buf = append(buf, `,"queue":`...)
	buf = appendString(buf, q.Name)
	buf = append(buf, `,"namespace":`...)
	buf = appendString(buf, q.Namespace)
	buf = append(buf, `,"task":`...)
	buf = appendString(buf, q.Task)
	buf = append(buf, `,"options":`...)
	b, _ := json.Marshal(q.Options)
	buf = append(buf, b...)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}
