package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports, and reading it properly would
// need cgo (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// procStat holds the fields of /proc/<pid>/stat that the harness uses.
type procStat struct {
	comm   string
	ppid   int
	utime  uint64 // clock ticks in user mode
	stime  uint64 // clock ticks in kernel mode
	cutime uint64 // user ticks of waited-for children
	cstime uint64 // kernel ticks of waited-for children
}

// readProcStat parses /proc/<pid>/stat. The command name is in parentheses
// and may itself contain spaces and parentheses, so fields are counted from
// the last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	closeIdx := bytes.LastIndexByte(b, ')')
	if open < 0 || closeIdx < open {
		return procStat{}, fmt.Errorf("error parsing stat: no command name")
	}
	st := procStat{comm: string(b[open+1 : closeIdx])}
	// After ')' come: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(string(b[closeIdx+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("error parsing stat: %d fields", len(f))
	}
	num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
	st.ppid = int(num(1))
	st.utime, st.stime, st.cutime, st.cstime = num(11), num(12), num(13), num(14)
	return st, nil
}

// processCPUSeconds returns the user+system CPU seconds pid has used.
func processCPUSeconds(pid int) (float64, error) {
	st, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	return float64(st.utime+st.stime) / clockTicks, nil
}

// processMemory returns the resident set size and its high-water mark
// (VmRSS, VmHWM) of pid in bytes.
func processMemory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var dst *int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &rss
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &hwm
		default:
			continue
		}
		fs := strings.Fields(line)
		if len(fs) >= 2 {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			*dst = kb * 1024
		}
	}
	return rss, hwm, sc.Err()
}

// procPIDs lists the numeric entries of /proc.
func procPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// postgresCPUSeconds returns the CPU seconds used by all PostgreSQL server
// processes on this machine: the live processes' own time, plus the
// postmaster's children time, which holds the CPU of backends that have
// already exited (a psql session that ended between two readings, say).
// The difference of two readings is therefore the server's CPU in between.
func postgresCPUSeconds() (seconds float64, procs int, err error) {
	stats := map[int]procStat{}
	for _, pid := range procPIDs() {
		st, err := readProcStat(pid)
		if err != nil || st.comm != "postgres" {
			continue
		}
		stats[pid] = st
	}
	if len(stats) == 0 {
		return 0, 0, fmt.Errorf("error finding postgres processes: none in /proc")
	}
	var ticks uint64
	for _, st := range stats {
		ticks += st.utime + st.stime
		if _, parentIsPG := stats[st.ppid]; !parentIsPG {
			ticks += st.cutime + st.cstime // the postmaster
		}
	}
	return float64(ticks) / clockTicks, len(stats), nil
}

// settledPostgresCPUSeconds reads postgresCPUSeconds once at most procs
// PostgreSQL processes are left, waiting up to a second. A psql session's
// backend exits a moment after psql does, and its CPU moves to the
// postmaster's children time only once the postmaster has reaped it;
// reading too early would miss it. procs is the count before the session.
func settledPostgresCPUSeconds(procs int) (float64, error) {
	deadline := time.Now().Add(time.Second)
	for {
		cpu, n, err := postgresCPUSeconds()
		if err != nil || n <= procs || time.Now().After(deadline) {
			return cpu, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// selfCPUSeconds returns the CPU seconds used by this benchmark process, so
// reports can show how much of the machine the load generator itself took.
func selfCPUSeconds() float64 {
	v, _ := processCPUSeconds(os.Getpid())
	return v
}

// pidListeningOn finds the process that has a TCP socket listening on port,
// by matching the socket inode from /proc/net/tcp{,6} against every
// process's file descriptors. It needs permission to read other processes'
// fd tables (root, or the same user).
func pidListeningOn(port int) (int, error) {
	inodes := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A = TCP_LISTEN
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			p, err := strconv.ParseUint(f[1][i+1:], 16, 32)
			if err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("error finding listener: nothing listens on port %d", port)
	}
	for _, pid := range procPIDs() {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err == nil && inodes[link] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("error finding listener: no readable process owns port %d", port)
}

// HostInfo describes the machine a run was made on.
type HostInfo struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemoryGiB int64  `json:"memory_gib"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
}

// hostInfo reads the machine description from /proc.
func hostInfo() HostInfo {
	h := HostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.IndexByte(line, ':'); i >= 0 {
					h.CPUModel = strings.TrimSpace(line[i+1:])
				}
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if f := strings.Fields(line); len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					h.MemoryGiB = (kb + 512*1024) / (1024 * 1024)
				}
			}
		}
	}
	return h
}
