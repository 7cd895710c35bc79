package http

import (
	"context"
	"errors"
	"math"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// MaintenanceAdmin is the push maintenance switch and the file buffer
// (issue 13, D11; docs/api.md "Pop maintenance" and "Push maintenance and the file buffer").
type MaintenanceAdmin interface {
	PushMaintenance(ctx context.Context) (bool, error)
	SetPushMaintenance(ctx context.Context, on bool) error
	BufferStats() queengo.BufferStats
	// PushMaintenanceOn is the switch as this process applies it.
	PushMaintenanceOn() bool
}

func (s *Server) maintenanceRoutes() []route {
	return []route{
		{fasthttp.MethodGet, "/api/v1/system/maintenance", levelAdmin, s.handleGetMaintenance},
		{fasthttp.MethodPost, "/api/v1/system/maintenance", levelAdmin, s.handleSetMaintenance},
	}
}

// handleGetMaintenance reports both switches, read fresh from the database,
// and this process's buffer in the reference server's shape. While the
// database is unreachable it reports the switches as this process last read
// them: the buffer's state matters most then.
func (s *Server) handleGetMaintenance(ctx *fasthttp.RequestCtx) {
	st := s.broker.BufferStats()
	push, err := s.broker.PushMaintenance(ctx)
	var pop bool
	if err == nil {
		pop, err = s.broker.PopMaintenance(ctx)
	}
	switch {
	case err == nil:
	case !st.DBHealthy || errors.Is(err, queengo.ErrUnavailable) || errors.Is(err, queengo.ErrPool) || errors.Is(err, queengo.ErrTimeout):
		push, pop = s.broker.PushMaintenanceOn(), s.broker.PopMaintenanceOn()
	default:
		s.writeFailure(ctx, failure(err), err)
		return
	}
	s.writeJSONValue(ctx, map[string]any{
		"maintenanceMode":    push,
		"popMaintenanceMode": pop,
		"bufferedMessages":   st.Pending,
		"bufferHealthy":      st.Healthy,
		"bufferStats": map[string]any{
			"enabled":      st.Enabled,
			"active":       st.Active,
			"pendingCount": st.Pending,
			"pendingBytes": st.Bytes,
			"pendingFiles": st.Files,
			"failedCount":  st.Failed,
			"dbHealthy":    st.DBHealthy,
			"oldestAt":     isoTime(st.Oldest),
			"failedFiles": map[string]any{
				"count":         st.Failed,
				"totalBytes":    st.FailedBytes,
				"totalMB":       math.Round(float64(st.FailedBytes)/(1<<20)*100) / 100,
				"failoverCount": st.Failovers,
				// queengo has no QoS-0 push buffering.
				"qos0Count": 0,
			},
		},
	})
}

func (s *Server) handleSetMaintenance(ctx *fasthttp.RequestCtx) {
	on, ok := s.switchBody(ctx)
	if !ok {
		return
	}
	if err := s.broker.SetPushMaintenance(ctx, on); err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	st := s.broker.BufferStats()
	msg := "Maintenance mode is OFF: buffered pushes are being replayed into the database"
	if on {
		msg = "Maintenance mode is ON: pushes are written to the file buffer and replayed when it is switched off"
		if !st.Enabled {
			msg = "Maintenance mode is ON: this broker has no file buffer (FILE_BUFFER_DIR), so its pushes answer 503"
		}
	}
	s.writeJSONValue(ctx, map[string]any{
		"maintenanceMode":  on,
		"bufferedMessages": st.Pending,
		"bufferHealthy":    st.Healthy,
		"message":          msg,
	})
}
