package main

import (
	"fmt"
	"os/exec"
	"syscall"
)

// bytesPerScale is what one pgbench scale unit takes on disk once built:
// 100,000 accounts rows and their primary key (15.6 MB at scale 1000 on
// PostgreSQL 15, heap and index together).
const bytesPerScale = 16 << 20

// bytesPerMixed and bytesPerTPCH are what one unit of the mixed dataset's
// scale and one TPC-H scale factor take on disk once built, indexes
// included (a generous round figure: the check refuses, it does not
// budget); tpchCSV is the generator's CSV per scale factor, on disk
// while TPC-H loads.
const (
	bytesPerMixed = 1600 << 20
	bytesPerTPCH  = 2 << 30
	tpchCSV       = 1200 << 20
	// bytesPerTable is one of the tables dataset's: heap, two indexes,
	// the catalog rows and a TOAST table's files (about 60 KiB; 100 KiB
	// with a margin).
	bytesPerTable = 100 << 10
)

// dbBytes is d's database on disk, and what its build needs beside it.
func dbBytes(c config, d dataset) (db, scratch int64) {
	switch d.key {
	case "mixed":
		return int64(d.size * bytesPerMixed), 0
	case "tpch":
		return int64(d.size * bytesPerTPCH), int64(d.size * tpchCSV)
	case "tables":
		return int64(d.tables) * bytesPerTable, 0
	}
	return int64(c.scale) * bytesPerScale, 0
}

// walReserve is the WAL a restore can leave behind before a checkpoint
// recycles it: the bench cluster's max_wal_size (8 GB) and a margin.
const walReserve = 10 << 30

// need is the disk a run takes at most, in bytes: the sources it builds
// (all of them when they are kept), one restored copy at a time, the
// archives of one dataset (pgsprint's, pg_dump -Fd's and -Fc's, the S3
// server's copy and a pgcopydb work directory, each taken as a quarter of
// the database: no tool stores its indexes, and pgbench's rows compress
// tenfold), and the WAL.
func need(c config, building bool) int64 {
	var most, kept int64
	for _, d := range c.datasets {
		db, scratch := dbBytes(c, d)
		sources := int64(0)
		if building {
			sources = db + scratch
			kept += db
		}
		archives := db / 4 * int64(countSteps(c, "dump", "pgdump-fd", "pgdump-fc", "s3", "handmade"))
		if c.steps["pgcopydb"] && pgcopydbInstalled() {
			archives += db / 4
		}
		most = max(most, sources+db+archives)
	}
	if c.keep && building {
		// The datasets before the largest stay on disk too.
		most += kept
	}
	return most + walReserve
}

func countSteps(c config, names ...string) int {
	n := 0
	for _, s := range names {
		if c.steps[s] {
			n++
		}
	}
	return n
}

// checkDisk refuses a run whose files would not fit in dir's file system.
func checkDisk(dir string, need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < need {
		return fmt.Errorf("not enough disk in %s: this run needs about %.1f GiB (sources, one restored copy, archives, WAL), %.1f GiB are free; use a smaller -scale, fewer -steps, or another -work-dir",
			dir, float64(need)/(1<<30), float64(free)/(1<<30))
	}
	return nil
}

// pgcopydbInstalled says whether the pgcopydb rows will run.
func pgcopydbInstalled() bool {
	_, err := exec.LookPath("pgcopydb")
	return err == nil
}
