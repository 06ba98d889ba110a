package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// cpuSnapshot is the CPU time of the members and of this process, and the machine's CPU counters.
type cpuSnapshot struct {
	procs       []float64 // seconds per member process
	syscalls    []uint64  // read and write system calls per member process (/proc/<pid>/io)
	self        float64   // seconds of this process
	busy, total uint64    // ticks of all cores (/proc/stat)
}

func snapshotCPU(pids []int) cpuSnapshot {
	var s cpuSnapshot
	for _, pid := range pids {
		s.procs = append(s.procs, procCPU(pid))
		s.syscalls = append(s.syscalls, procSyscalls(pid))
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	s.busy, s.total = machineCPU()
	return s
}

// procCPU is utime+stime of a process (all its threads), in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields count from after its closing parenthesis.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(fields[11], 10, 64)
	st, _ := strconv.ParseUint(fields[12], 10, 64)
	return float64(u+st) / clockTicks
}

// procSyscalls is the number of read and write system calls a process made (syscr+syscw).
func procSyscalls(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0
	}
	var n uint64
	for l := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if ok && (k == "syscr" || k == "syscw") {
			x, _ := strconv.ParseUint(v, 10, 64)
			n += x
		}
	}
	return n
}

// machineCPU returns the busy and total ticks of all cores.
func machineCPU() (busy, total uint64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal guest guest_nice
	for i, v := range fields[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// connections returns the TCP connections to one of ports (a member's listener) in any state, keyed by
// their address pair, with the kind of port. A closed connection stays listed for a minute (TIME_WAIT on the
// side that closed first), so the connections opened during a phase are those in the end's set and not in
// the start's, however short they lived.
func connections(ports map[int]string) map[string]string {
	out := map[string]string{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] == "0A" { // LISTEN
				continue
			}
			local, remote := fields[1], fields[2]
			if kind, ok := ports[portOf(local)]; ok {
				out[local+"-"+remote] = kind
			} else if kind, ok := ports[portOf(remote)]; ok {
				out[remote+"-"+local] = kind
			}
		}
		_ = f.Close()
	}
	return out
}

// portOf reads the port of a /proc/net/tcp address (hex "ADDR:PORT").
func portOf(addr string) int {
	port, err := strconv.ParseUint(addr[strings.LastIndexByte(addr, ':')+1:], 16, 32)
	if err != nil {
		return -1
	}
	return int(port)
}
