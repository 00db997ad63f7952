package progress

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/stat's counters: 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// MachineBusy is the CPU time all cores have spent busy since boot (user,
// nice, system, irq, softirq: not idle, iowait, nor steal, which is time
// the hypervisor gave to other machines), or 0 where /proc/stat cannot be
// read. Two readings around a run give the machine's CPU for it, servers
// included, which a process's own CPU time leaves out: the demo and the
// benchmarks report how busy the cores were.
func MachineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return busyTime(line)
}

// busyTime reads the busy time out of /proc/stat's first line ("cpu  user
// nice system idle iowait irq softirq steal ..."), or 0 if it is not one.
func busyTime(line string) time.Duration {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:8] { // user nice system idle iowait irq softirq
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
