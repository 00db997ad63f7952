package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// machine describes this computer: CPUs, memory, OS.
func machine() string {
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf(", %.1f GiB RAM", kb/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs%s, %s/%s", runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}

// loadAvg1 is the 1-minute load average, or -1 when unknown.
func loadAvg1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// loadSampler records the 1-minute load average every interval, so the
// report can say how busy the (shared) machine was during the run.
type loadSampler struct {
	mu      sync.Mutex
	samples []float64
	stop    context.CancelFunc
	done    chan struct{}
}

// sampleLoad starts sampling until Stop.
func sampleLoad(ctx context.Context, every time.Duration) *loadSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &loadSampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v := loadAvg1(); v >= 0 {
				s.mu.Lock()
				s.samples = append(s.samples, v)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Summary is "min A, mean B, max C (N samples)" of the samples so far.
func (s *loadSampler) Summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return ""
	}
	lo, hi, sum := s.samples[0], s.samples[0], 0.0
	for _, v := range s.samples {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	return fmt.Sprintf("min %.1f, mean %.1f, max %.1f (1-minute load average, %d samples; %d CPUs)", lo, sum/float64(len(s.samples)), hi, len(s.samples), runtime.NumCPU())
}

// Stop ends sampling.
func (s *loadSampler) Stop() {
	s.stop()
	<-s.done
}
