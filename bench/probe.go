package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// rssSampleInterval is how often a probe reads the broker's VmRSS. VmHWM
// (the kernel's own high-water mark) covers the whole life of the process,
// so the run's own peak has to be sampled.
const rssSampleInterval = 200 * time.Millisecond

// Resources is what a run cost the servers, measured outside the client:
// CPU from /proc, storage from PostgreSQL. A nil field could not be read
// (no broker PID, psql unavailable, or the reading does not apply, such as
// WAL for RabbitMQ).
type Resources struct {
	BrokerPID           int      `json:"broker_pid,omitempty"`
	BrokerCPUSeconds    *float64 `json:"broker_cpu_seconds,omitempty"`
	BrokerCPUPerMillion *float64 `json:"broker_cpu_seconds_per_million,omitempty"`
	BrokerPeakRSSBytes  *int64   `json:"broker_peak_rss_bytes,omitempty"`
	BrokerRSSStartBytes *int64   `json:"broker_rss_start_bytes,omitempty"`
	BrokerHWMBytes      *int64   `json:"broker_vmhwm_bytes,omitempty"`
	PGCPUSeconds        *float64 `json:"pg_cpu_seconds,omitempty"`
	PGCPUPerMillion     *float64 `json:"pg_cpu_seconds_per_million,omitempty"`
	ClientCPUSeconds    float64  `json:"client_cpu_seconds"`
	WALBytes            *int64   `json:"wal_bytes,omitempty"`
	WALBytesPerMsg      *float64 `json:"wal_bytes_per_msg,omitempty"`
	TableBytesBefore    *int64   `json:"table_bytes_before,omitempty"`
	TableBytesAfter     *int64   `json:"table_bytes_after,omitempty"`
	TableBytesPerMsg    *float64 `json:"table_bytes_per_msg,omitempty"`
}

// Probe takes the before and after readings around a measured phase and
// samples the broker's RSS in between.
type Probe struct {
	pg        *PG // nil: no PostgreSQL readings
	brokerPID int

	start      time.Time
	brokerCPU0 float64
	brokerOK   bool
	pgCPU0     float64
	pgCPUOK    bool
	selfCPU0   float64
	lsn0       uint64
	lsnOK      bool
	table0     int64
	tableOK    bool
	rss0       int64

	peakRSS atomic.Int64
	lastRSS atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

// StartProbe takes the "before" readings. pg may be nil for targets that do
// not use PostgreSQL, and brokerPID may be 0 when the broker is unknown.
func StartProbe(ctx context.Context, pg *PG, brokerPID int) *Probe {
	p := &Probe{pg: pg, brokerPID: brokerPID, stop: make(chan struct{})}
	if pg != nil {
		_, procs, _ := postgresCPUSeconds()
		if v, err := pg.WALLSN(ctx); err == nil {
			p.lsn0, p.lsnOK = v, true
		}
		if v, err := pg.TableBytes(ctx); err == nil {
			p.table0, p.tableOK = v, true
		}
		// After the two psql sessions above have gone, so that their CPU
		// is not counted as the run's.
		if v, err := settledPostgresCPUSeconds(procs); err == nil {
			p.pgCPU0, p.pgCPUOK = v, true
		}
	}
	if brokerPID > 0 {
		if v, err := processCPUSeconds(brokerPID); err == nil {
			p.brokerCPU0, p.brokerOK = v, true
		}
		if rss, _, err := processMemory(brokerPID); err == nil {
			p.rss0 = rss
			p.peakRSS.Store(rss)
			p.lastRSS.Store(rss)
		}
		p.wg.Add(1)
		go p.sampleRSS()
	}
	p.selfCPU0 = selfCPUSeconds()
	p.start = time.Now()
	return p
}

func (p *Probe) sampleRSS() {
	defer p.wg.Done()
	t := time.NewTicker(rssSampleInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.readRSS()
		}
	}
}

func (p *Probe) readRSS() {
	rss, _, err := processMemory(p.brokerPID)
	if err != nil {
		return
	}
	p.lastRSS.Store(rss)
	for {
		old := p.peakRSS.Load()
		if rss <= old || p.peakRSS.CompareAndSwap(old, rss) {
			return
		}
	}
}

// RSS returns the broker's last sampled RSS in bytes, 0 if unknown.
func (p *Probe) RSS() int64 { return p.lastRSS.Load() }

// BrokerCPU returns the broker's CPU seconds since the probe started.
func (p *Probe) BrokerCPU() (float64, bool) {
	if !p.brokerOK {
		return 0, false
	}
	v, err := processCPUSeconds(p.brokerPID)
	return v - p.brokerCPU0, err == nil
}

// Stop takes the "after" readings and computes the per-message costs for
// messages messages.
func (p *Probe) Stop(ctx context.Context, messages int64) Resources {
	close(p.stop)
	p.wg.Wait()
	r := Resources{BrokerPID: p.brokerPID, ClientCPUSeconds: selfCPUSeconds() - p.selfCPU0}
	perMillion := func(v float64) *float64 {
		if messages <= 0 {
			return nil
		}
		return ptr(v * 1e6 / float64(messages))
	}
	perMsg := func(v int64) *float64 {
		if messages <= 0 {
			return nil
		}
		return ptr(float64(v) / float64(messages))
	}
	if p.brokerPID > 0 {
		p.readRSS()
		if cpu, ok := p.BrokerCPU(); ok {
			r.BrokerCPUSeconds = ptr(cpu)
			r.BrokerCPUPerMillion = perMillion(cpu)
		}
		if _, hwm, err := processMemory(p.brokerPID); err == nil {
			r.BrokerHWMBytes = ptr(hwm)
			r.BrokerPeakRSSBytes = ptr(p.peakRSS.Load())
			r.BrokerRSSStartBytes = ptr(p.rss0)
		}
	}
	if p.pg != nil {
		if p.pgCPUOK {
			if v, _, err := postgresCPUSeconds(); err == nil {
				r.PGCPUSeconds = ptr(v - p.pgCPU0)
				r.PGCPUPerMillion = perMillion(v - p.pgCPU0)
			}
		}
		if p.lsnOK {
			if v, err := p.pg.WALLSN(ctx); err == nil {
				r.WALBytes = ptr(int64(v - p.lsn0))
				r.WALBytesPerMsg = perMsg(int64(v - p.lsn0))
			}
		}
		if p.tableOK {
			if v, err := p.pg.TableBytes(ctx); err == nil {
				r.TableBytesBefore = ptr(p.table0)
				r.TableBytesAfter = ptr(v)
				r.TableBytesPerMsg = perMsg(v - p.table0)
			}
		}
	}
	return r
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
