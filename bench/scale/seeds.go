package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// seed is a figure a user brought: a command's wall time on their machine
// for a database of their size. Per core-second it can stand beside ours.
type seed struct {
	source  string // who measured it, on what
	what    string
	steps   []string // our rows it stands beside
	dataset string   // flat or parts; "" for any
	scale   int      // the pgbench scale it was taken at; 0 when not pgbench
	gib     float64  // the database's size when not ours
	wall    float64  // seconds
	cores   int
}

// seeds are the figures the seeds give. Seed 000 ran pgbench -s 1000 on
// an Apple M1 (8 cores); seed 003 restored 30 GB at -j 8 and did not say
// how many cores its machine had: 8 is assumed.
var seeds = []seed{
	{source: "seed 000, M1", what: "pg_dump -Fd", steps: []string{"pgdump-fd", "dump"}, dataset: "flat", scale: 1000, wall: 62, cores: 8},
	{source: "seed 000, M1", what: "pg_dump -Fd", steps: []string{"pgdump-fd", "dump"}, dataset: "parts", scale: 1000, wall: 61, cores: 8},
	{source: "seed 000, M1", what: "pg_dump -Fd -j8", steps: []string{"pgdump-fd", "dump"}, dataset: "parts", scale: 1000, wall: 24, cores: 8},
	{source: "seed 003", what: "restore -j8 of 30 GB", steps: []string{"pgrestore", "restore"}, gib: 30e9 / (1 << 30), wall: 16 * 60, cores: 8},
}

// seedsFor sets each seed figure that applies to src beside our rows it
// compares with, as MiB per core-second of the machine (the database's
// size over wall time and cores): a 2-core machine and an 8-core one
// compared by how much each core moved.
func seedsFor(src *source, rows []*row) []string {
	var out []string
	for _, s := range seeds {
		if s.dataset != "" && s.dataset != src.key {
			continue
		}
		gib := s.gib
		if s.scale != 0 {
			if !strings.HasPrefix(src.label, fmt.Sprintf("pgbench -s %d", s.scale)) {
				continue
			}
			gib = src.GiB() // the same database as ours
		}
		theirs := gib * 1024 / (s.wall * float64(s.cores))
		var ours []string
		for _, r := range rows {
			if !slices.Contains(s.steps, r.step.key) {
				continue
			}
			if wall, ok := r.spreadOf(wallOf); ok {
				ours = append(ours, fmt.Sprintf("%s %.1f", r.step.name, src.GiB()*1024/(wall.med*float64(runtime.NumCPU()))))
			}
		}
		if len(ours) > 0 {
			out = append(out, fmt.Sprintf("%s: %s in %.0f s on %d cores = %.1f MiB per core-second; here: %s",
				s.source, s.what, s.wall, s.cores, theirs, strings.Join(ours, ", ")))
		}
	}
	return out
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
