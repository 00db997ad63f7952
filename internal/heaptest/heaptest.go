// Package heaptest measures the live Go heap for tests that bound what a
// structure holds per table or stream (a restore of 100,000 tables keeps
// its plan, manifest and index for its whole run). Tests only: nothing in
// the binary imports it.
package heaptest

import "runtime"

// Live returns the bytes of live heap objects. It collects twice: what
// sync.Pools hold (encoding/json's encoder buffer, as large as the last
// value it wrote) survives one collection in their victim caches.
func Live() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
