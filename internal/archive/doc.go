// Package archive is pgsprint's archive format (docs/FORMAT.md): a header
// with the manifest (what was dumped: tables, chunks, large objects,
// sequences, the snapshot), then frames (checksummed, compressed blocks)
// of many streams interleaved as N dump workers wrote them, then a footer
// indexing every frame and a trailer pointing at the footer. A stream is
// one table chunk's COPY text, one large object's bytes, or pg_dump's
// schema archive; its End frame carries its totals.
//
// Writing: Writer (concurrent streams, one per worker) fed through
// BlockWriter (blocks cut on row boundaries). Reading: everything a
// restore reads is a Source. OpenSource, from a store.Source (the medium,
// internal/store), is the one place that chooses how: the seekable Reader
// (footer index, streams read in parallel) when the medium has random
// access, else a Demux (Sequential read front to back, frames routed to
// per-stream readers or spilled), or the archive spooled to disk for
// readers that need the manifest's order. Every reader applies the same
// frame rules (frameState.check) and refuses an archive that is
// incomplete (ErrIncomplete) or damaged (ErrCorrupt) rather than return
// less than was written. Verify, Check and Summarize serve
// `pgsprint verify` and `pgsprint list`.
//
// Every Source implementation passes the suite in archivetest.
package archive
