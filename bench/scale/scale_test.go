package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/bench/benchkit"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		err     string
		jobs    []int
		dbs     []string
		noSteps []string
		trace   string // the datasets -trace chose, as traceFlag.String
	}{
		{args: nil, jobs: []int{2}, dbs: []string{"pgbench_s1000", "pgbench_s1000_p30", "mixed_10", "tpch_sf1", "tables_10000"}},
		{args: []string{"-datasets", "tables", "-tables", "500"}, jobs: []int{2}, dbs: []string{"tables_500"}},
		{args: []string{"-tables", "0"}, err: "at least 1"},
		{args: []string{"-datasets", "mixed,tpch", "-mixed-scale", "0.5", "-tpch-sf", "3"}, jobs: []int{2}, dbs: []string{"mixed_0_5", "tpch_sf3"}},
		{args: []string{"-tpch-sf", "0"}, err: "above 0"},
		{args: []string{"-scale", "7", "-j", "8,16", "-datasets", "parts", "-steps", "dump,restore"},
			jobs: []int{8, 16}, dbs: []string{"pgbench_s7_p30"}, noSteps: []string{"clone", "s3", "raw"}},
		{args: []string{"-j", "0"}, err: "bad -j"},
		{args: []string{"-datasets", "huge"}, err: `unknown dataset "huge"`},
		{args: []string{"-steps", "dump,nap"}, err: `unknown step "nap"`},
		{args: []string{"-verify", "some"}, err: "-verify is all, first or none"},
		{args: []string{"-rounds", "0"}, err: "at least 1"},
		{args: []string{"-trace", "-datasets", "tpch"}, jobs: []int{2}, dbs: []string{"tpch_sf1"}, trace: "all"},
		{args: []string{"-trace=mixed,tpch"}, jobs: []int{2}, dbs: []string{"pgbench_s1000", "pgbench_s1000_p30", "mixed_10", "tpch_sf1", "tables_10000"}, trace: "mixed,tpch"},
		{args: []string{"-trace=", "-datasets", "flat"}, jobs: []int{2}, dbs: []string{"pgbench_s1000"}},
		{args: []string{"-trace=tpch,huge"}, err: `unknown dataset "huge"`},
	} {
		c, err := parseFlags(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if joinInts(c.jobs) != joinInts(tc.jobs) {
			t.Errorf("%v: jobs %v, want %v", tc.args, c.jobs, tc.jobs)
		}
		var dbs []string
		for _, d := range c.datasets {
			dbs = append(dbs, d.db)
		}
		if strings.Join(dbs, " ") != strings.Join(tc.dbs, " ") {
			t.Errorf("%v: databases %v, want %v", tc.args, dbs, tc.dbs)
		}
		if got := c.trace.String(); got != tc.trace {
			t.Errorf("%v: traced %q, want %q", tc.args, got, tc.trace)
		}
		for _, s := range tc.noSteps {
			if c.steps[s] {
				t.Errorf("%v: step %s chosen", tc.args, s)
			}
		}
	}
}

// TestSchemaSteps: the tables dataset runs pg_dump --schema-only and
// pgsprint dump only, the dump's ratio taken against the schema pass;
// the other datasets do not run the schema pass alone.
func TestSchemaSteps(t *testing.T) {
	c, err := parseFlags([]string{"-datasets", "tables,flat", "-tables", "300"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cfg: c, srv: versioned{&external{dsn: "host=/nowhere", binDir: "/nowhere/bin"}}, work: t.TempDir()}
	e.cfg.out = e.work
	for _, d := range c.datasets {
		var keys []string
		var peers []string
		for _, s := range e.steps(&source{dataset: d}, 2, 1, true) {
			keys = append(keys, s.key)
			if s.key == "dump" {
				peers = s.peers
			}
		}
		got := strings.Join(keys, " ")
		switch d.key {
		case "tables":
			if got != "pgdump-schema dump" || strings.Join(peers, " ") != "pgdump-schema" {
				t.Errorf("tables: steps %q, dump's peers %v; want pgdump-schema dump, against pgdump-schema", got, peers)
			}
		default:
			if strings.Contains(got, "pgdump-schema") || strings.Join(peers, " ") != "raw" {
				t.Errorf("%s: steps %q, dump's peers %v", d.key, got, peers)
			}
		}
	}
}

func TestSpreadAndRatios(t *testing.T) {
	res := func(wall, machine float64, err error) benchkit.Result {
		return benchkit.Result{Wall: time.Duration(wall * float64(time.Second)), Machine: time.Duration(machine * float64(time.Second)), Err: err}
	}
	peer := &row{step: step{name: "peer"}, results: []benchkit.Result{res(30, 40, nil), res(10, 20, nil)}}
	own := &row{step: step{name: "own"}, peers: []*row{peer},
		results: []benchkit.Result{res(9, 10, nil), res(5, 12, nil), res(1, 1, errFailed), res(7, 11, nil)}}
	for _, tc := range []struct {
		what string
		got  spread
		want spread
	}{
		{"odd count, failures left out", must(own.spreadOf(wallOf)), spread{5, 7, 9}},
		{"even count: mean of the middle two", must(peer.spreadOf(wallOf)), spread{10, 20, 30}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.what, tc.got, tc.want)
		}
	}
	if speed, _ := own.against(wallOf); math.Abs(speed-20.0/7) > 1e-9 {
		t.Errorf("speed against the peer %.3f, want %.3f", speed, 20.0/7)
	}
	if m, _ := own.against(machineOf); math.Abs(m-30.0/11) > 1e-9 {
		t.Errorf("machine CPU ratio %.3f, want %.3f", m, 30.0/11)
	}
	if f := own.failure(); f != errFailed.Error() {
		t.Errorf("failure %q", f)
	}
	none := &row{results: []benchkit.Result{res(1, 1, errFailed)}}
	if _, ok := none.spreadOf(wallOf); ok {
		t.Error("a row whose every round failed has a spread")
	}
}

func TestCheckDisk(t *testing.T) {
	dir := t.TempDir()
	if err := checkDisk(dir, 1); err != nil {
		t.Fatalf("one byte: %v", err)
	}
	err := checkDisk(dir, 1<<62)
	if err == nil || !strings.Contains(err.Error(), "not enough disk in "+dir) {
		t.Fatalf("4 EiB: %v", err)
	}
	c, _ := parseFlags([]string{"-scale", "1000", "-steps", "dump,restore", "-datasets", "flat"})
	// 15.6 GiB of source, one restored copy, pgsprint's archive a
	// quarter of the database, the WAL reserve.
	if got, want := need(c, true), int64(1000*bytesPerScale)*9/4+walReserve; got != want {
		t.Errorf("need %d, want %d", got, want)
	}
	if need(c, false) >= need(c, true) {
		t.Error("a run that builds nothing needs as much as one that builds")
	}
}

var errFailed = errors.New("exit status 1: it broke")

func must(s spread, ok bool) spread {
	if !ok {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	return s
}

func TestCheckETA(t *testing.T) {
	// 100 bytes moved at 1 byte a second from 10 s (the first 10 s were
	// pre-data), then 20 s of indexes: a run of 130 s.
	var log strings.Builder
	for el := 10; el <= 110; el += 10 {
		fmt.Fprintf(&log, `{"event":"progress","state":{"elapsed_s":%d,"bytes":%d,"bytes_total":100}}`+"\n", el, el-10)
	}
	log.WriteString(`{"event":"summary"}` + "\nnot json\n")
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte(log.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := checkETA(path, 130)
	if err != nil {
		t.Fatal(err)
	}
	// At 30 s (nearest a quarter of 130 s): 20 bytes in 30 s, 80 left:
	// ETA 120 s where 100 s were left.
	if c.at[0] != 30 || c.said[0] != 120 {
		t.Errorf("first quarter: at %v said %v, want 30 and 120", c.at[0], c.said[0])
	}
	if c.at[2] != 100 || math.Abs(c.said[2]-10*100/90.0) > 1e-9 {
		t.Errorf("third quarter: at %v said %v", c.at[2], c.said[2])
	}
	if c.dataDone != 110 {
		t.Errorf("data done at %v, want 110", c.dataDone)
	}
	if s := c.String(); !strings.Contains(s, "at 30 s: ETA 120 s, 100 s left") || !strings.Contains(s, "data all in at 110 s of 130 s") {
		t.Errorf("String: %s", s)
	}
}

// TestTraceOutput checks that a traced row's summary reaches the
// Markdown table and traces.json, and that untraced rows stay out.
func TestTraceOutput(t *testing.T) {
	src := &source{dataset: dataset{key: "tpch", label: "TPC-H SF 1"}}
	traced := &row{dataset: src, step: step{key: "restore", name: "pgsprint restore -j2"}, jobs: 2, trace: benchkit.NewTraceTotals(2)}
	traced.trace.Add(benchkit.Trace{Ticks: []time.Duration{0, 100 * time.Millisecond}, Samples: []benchkit.ActivitySample{
		{Tick: 0, BackendType: "client backend", State: "active", Query: "COPY t FROM STDIN"},
		{Tick: 1, BackendType: "client backend", State: "active", WaitType: "Lock", Wait: "extend", Query: "COPY t FROM STDIN"},
	}})
	plain := &row{dataset: src, step: step{key: "dump", name: "pgsprint dump -j2"}, jobs: 2}
	var md strings.Builder
	printTrace(&md, []*row{plain, traced})
	if !strings.Contains(md.String(), "| pgsprint restore -j2 | CPU 50%, Lock:extend 50% | COPY FROM 100% | mean 1.0 busy of -j2;") ||
		strings.Contains(md.String(), "pgsprint dump") {
		t.Errorf("trace table:\n%s", md.String())
	}
	dir := t.TempDir()
	if err := writeTraces(dir, []*row{plain, traced}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "traces.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []traceRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Step != "pgsprint restore -j2" || recs[0].Summary.Classes[0].Key != benchkit.ClassCopyFrom {
		t.Errorf("traces.json: %s", b)
	}
	var none strings.Builder
	printTrace(&none, []*row{plain})
	if none.Len() != 0 {
		t.Errorf("a run without -trace printed %q", none.String())
	}
}
