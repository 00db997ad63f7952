package archive

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// maxVerifyErrors bounds how many problems Verify reports: enough to show
// whether damage is local or everywhere, short enough to read.
const maxVerifyErrors = 10

// Verify reads and checks every frame of every stream, workers streams at
// a time (GOMAXPROCS if workers <= 0), and checks that the manifest's
// chunks, large objects and schema stream exist with the right kinds. It
// goes on past the first bad stream and returns up to ten problems in
// stream order as one error, or ctx's error if ctx ends first.
func (ar *Reader) Verify(ctx context.Context, workers int) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		mu   sync.Mutex
		errs = map[uint32]error{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	streams := ar.Streams()
	for _, info := range streams {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			s := ar.OpenStream(info.ID).(*streamReader)
			defer s.Close()
			err := s.drain(gctx)
			if err == nil {
				return nil
			}
			if ctxErr := gctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return err
			}
			mu.Lock()
			errs[info.ID] = err
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	var problems []error
	ids := make([]uint32, 0, len(errs))
	for id := range errs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	// The streams of one damaged pack fail alike: the pack is named
	// once, with how many streams it holds besides.
	byPack := map[string]*packError{}
	for _, id := range ids {
		key := packKey(errs[id])
		if pe := byPack[key]; key != "" && pe != nil {
			pe.more++
			continue
		}
		pe := &packError{err: errs[id]}
		if key != "" {
			byPack[key] = pe
		}
		problems = append(problems, pe)
	}
	problems = append(problems, checkManifest(ar.manifest, streams)...)
	if len(problems) == 0 {
		return nil
	}
	return &verifyError{errs: problems}
}

// checkManifest reports manifest entries whose stream is missing from
// streams or of the wrong kind: such an archive would restore without
// error but incompletely. In a whole-server archive, each database's
// problems name it.
func checkManifest(m *Manifest, streams []StreamInfo) []error {
	c := manifestCheck{byID: make(map[uint32]Kind, len(streams))}
	hasSchema := false
	for _, s := range streams {
		c.byID[s.ID] = s.Kind
		hasSchema = hasSchema || s.Kind == KindSchema
	}
	if !m.IsCluster() {
		errs := c.streams(m)
		if hasSchema {
			errs = append(errs, c.want("schema_stream", m.SchemaStream, KindSchema)...)
		}
		return errs
	}
	var errs []error
	if m.Globals != nil {
		errs = append(errs, c.want("globals", m.Globals.Stream, KindSchema)...)
	}
	for _, d := range m.Databases {
		if d.Manifest == nil {
			errs = append(errs, corruptf("archive: manifest database %q has no manifest", d.Name))
			continue
		}
		bad := append(c.streams(d.Manifest), c.want("schema_stream", d.Manifest.SchemaStream, KindSchema)...)
		for _, err := range bad {
			errs = append(errs, fmt.Errorf("database %q: %w", d.Name, err))
		}
	}
	return errs
}

// manifestCheck holds the kinds of the streams an archive has, by id.
type manifestCheck struct{ byID map[uint32]Kind }

// want reports a stream id the archive lacks, or holding another kind.
func (c manifestCheck) want(what string, id uint32, kind Kind) []error {
	k, ok := c.byID[id]
	switch {
	case !ok:
		return []error{corruptf("archive: manifest %s refers to stream %d, which the archive lacks", what, id)}
	case k != kind:
		return []error{corruptf("archive: manifest %s refers to stream %d, which holds %v, not %v", what, id, k, kind)}
	}
	return nil
}

// streams checks the data streams of one database's manifest.
func (c manifestCheck) streams(m *Manifest) []error {
	var errs []error
	for i, ch := range m.Chunks {
		if ch.Table < 0 || ch.Table >= len(m.Tables) {
			errs = append(errs, corruptf("archive: manifest chunk %d refers to table %d of %d", i, ch.Table, len(m.Tables)))
		}
		errs = append(errs, c.want(fmt.Sprintf("chunk %d", i), ch.Stream, KindData)...)
	}
	for _, lo := range m.LargeObjects {
		errs = append(errs, c.want(fmt.Sprintf("large object %d", lo.OID), lo.Stream, KindLargeObject)...)
	}
	return errs
}

// packError is a stream's problem, and how many other streams of the
// same pack have it.
type packError struct {
	err  error
	more int
}

func (e *packError) Error() string {
	if e.more == 0 {
		return e.err.Error()
	}
	return fmt.Sprintf("%v (and %d more stream(s) of the same pack)", e.err, e.more)
}

// Unwrap is the stream's own error.
func (e *packError) Unwrap() error { return e.err }

// packKey is the message of the damaged pack in err's chain ("archive:
// pack at offset N: ..."), or "" when err is no pack's.
func packKey(err error) string {
	key := ""
	for e := err; e != nil; e = errors.Unwrap(e) {
		if m := e.Error(); strings.HasPrefix(m, "archive: pack at offset ") {
			key = m
		}
	}
	return key
}

// verifyError lists Verify's problems on one line.
type verifyError struct{ errs []error }

// Error joins the first problems with "; " so the result stays one line.
func (e *verifyError) Error() string {
	n := min(len(e.errs), maxVerifyErrors)
	msgs := make([]string, n)
	for i := range n {
		msgs[i] = e.errs[i].Error()
	}
	s := strings.Join(msgs, "; ")
	if len(e.errs) > n {
		s += fmt.Sprintf("; and %d more problem(s)", len(e.errs)-n)
	}
	return s
}

// Unwrap exposes every problem to errors.Is and errors.As.
func (e *verifyError) Unwrap() []error { return e.errs }
