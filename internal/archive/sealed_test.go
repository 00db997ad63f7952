package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/seal"
)

// testIdentities makes n X25519 identities and their recipients.
func testIdentities(t testing.TB, n int) ([]*age.X25519Identity, []age.Recipient) {
	t.Helper()
	var ids []*age.X25519Identity
	var rs []age.Recipient
	for range n {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		rs = append(rs, id.Recipient())
	}
	return ids, rs
}

// sealedArchive is smallArchive encrypted to recipients, uncompressed so
// that nothing but the encryption hides the content.
func sealedArchive(t testing.TB, codecName string, recipients ...age.Recipient) ([]byte, []testStream) {
	t.Helper()
	streams := []testStream{
		{id: 1, kind: KindSchema, data: []byte("CREATE TABLE public.secret_tbl_xyz (a int);")},
		{id: 2, kind: KindData, data: []byte(strings.Repeat("1\tzebracorn-4711\n", 12)), rows: 12},
		{id: 3, kind: KindData},
		{id: 4, kind: KindLargeObject, data: bytes.Repeat([]byte("large object "), 20)},
	}
	return writeArchive(t, mustCodec(t, codecName, 0), streams, 64, recipients...), streams
}

// layout locates an encrypted archive's parts for damaging them.
type layout struct {
	envStart, envEnd int // the envelope JSON
	manStart, manEnd int // the sealed manifest
	dataStart        int
	footerOff        int
	frames           []int // offsets of the frame headers, in file order
}

func sealedLayout(t *testing.T, d []byte) layout {
	t.Helper()
	var l layout
	m := int(binary.LittleEndian.Uint32(d[12:]))
	e := int(binary.LittleEndian.Uint32(d[headerFixedSize+4:]))
	l.envStart = headerFixedSize + envelopeFixedSize
	l.envEnd = l.envStart + e
	l.manStart, l.manEnd = l.envEnd, headerFixedSize+m
	l.dataStart = headerFixedSize + m + 4
	l.footerOff = int(binary.LittleEndian.Uint64(d[len(d)-trailerSize:]))
	for off := l.dataStart; off < l.footerOff; {
		l.frames = append(l.frames, off)
		off += frameHeaderSize + int(binary.LittleEndian.Uint32(d[off+20:])) + seal.Overhead
	}
	return l
}

// fixChecksums recomputes every CRC-32C after a deliberate change, so that
// only the authentication tags can catch it: the header region's, each
// frame's header and payload checksums, the footer's in the trailer.
func fixChecksums(d []byte) {
	m := int(binary.LittleEndian.Uint32(d[12:]))
	binary.LittleEndian.PutUint32(d[headerFixedSize+m:], crc32c(d[headerFixedSize:headerFixedSize+m]))
	footerOff := int(binary.LittleEndian.Uint64(d[len(d)-trailerSize:]))
	for off := headerFixedSize + m + 4; off < footerOff; {
		n := int(binary.LittleEndian.Uint32(d[off+20:])) + seal.Overhead
		binary.LittleEndian.PutUint32(d[off+24:], crc32c(d[off+frameHeaderSize:off+frameHeaderSize+n]))
		binary.LittleEndian.PutUint32(d[off+28:], crc32c(d[off:off+28]))
		off += frameHeaderSize + n
	}
	binary.LittleEndian.PutUint32(d[len(d)-trailerSize+16:], crc32c(d[footerOff:len(d)-trailerSize]))
}

func TestSealedRoundTrip(t *testing.T) {
	ids, rs := testIdentities(t, 2)
	for _, name := range []string{"zstd", "none"} {
		data, streams := sealedArchive(t, name, rs...)
		if v := binary.LittleEndian.Uint32(data[8:]); v != formatPacked {
			t.Fatalf("%s: encrypted archive has format version %d, want %d", name, v, formatPacked)
		}
		for i, id := range ids {
			if err := checkAll(t, data, streams, id); err != nil {
				t.Fatalf("%s: recipient %d: %v", name, i, err)
			}
			got, err := readSequential(data, id)
			if err != io.EOF {
				t.Fatalf("%s: recipient %d: sequential read: %v", name, i, err)
			}
			for _, s := range streams {
				if !bytes.Equal(got[s.id], s.data) {
					t.Fatalf("%s: recipient %d: stream %d read back wrong", name, i, s.id)
				}
			}
		}
		ar, err := Open(bytes.NewReader(data), int64(len(data)), ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if ar.Manifest().FormatVersion != formatPacked || ar.Manifest().Tables[0].Name != "t" {
			t.Fatalf("%s: manifest read back as %+v", name, ar.Manifest())
		}
	}
	// A clear archive has the same version, without the envelope.
	clear, _ := smallArchive(t, "zstd")
	if v := binary.LittleEndian.Uint32(clear[8:]); v != formatPacked || bytes.Contains(clear, []byte(envelopeMagic)) {
		t.Fatalf("clear archive has format version %d, want %d, and no envelope", v, formatPacked)
	}
}

// TestSealedDemux restores from a pipe: every stream arrives decrypted.
func TestSealedDemux(t *testing.T) {
	ids, rs := testIdentities(t, 1)
	data, streams := sealedArchive(t, "zstd", rs...)
	d, err := NewDemux(bytes.NewReader(data), t.TempDir(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		rc := d.OpenStream(s.id)
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, s.data) {
			t.Fatalf("stream %d: %d bytes, %v", s.id, len(b), err)
		}
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestSealedPassphrase(t *testing.T) {
	r, err := seal.PassphraseRecipient("correct horse", 10)
	if err != nil {
		t.Fatal(err)
	}
	data, streams := sealedArchive(t, "zstd", r)
	good, _ := seal.PassphraseIdentity("correct horse")
	if err := checkAll(t, data, streams, good); err != nil {
		t.Fatal(err)
	}
	bad, _ := seal.PassphraseIdentity("battery staple")
	_, err = Open(bytes.NewReader(data), int64(len(data)), bad)
	if !errors.Is(err, seal.ErrNoKey) || err.Error() != "archive is encrypted with a passphrase; the passphrase does not match" {
		t.Fatalf("wrong passphrase: %v", err)
	}
}

func TestSealedWrongKey(t *testing.T) {
	ids, rs := testIdentities(t, 3)
	data, _ := sealedArchive(t, "zstd", rs[0], rs[1])
	for _, r := range rs[:2] {
		// The archive does not say who can read it, as age's own format.
		if pub := r.(*age.X25519Recipient).String(); bytes.Contains(data, []byte(pub)) {
			t.Fatalf("the archive's bytes hold the recipient %s", pub)
		}
	}
	for _, tc := range []struct {
		name string
		ids  []age.Identity
		want string
	}{
		{"other key", []age.Identity{ids[2]}, "archive is encrypted; no matching identity (none of the given identities opens it)"},
		{"no key", nil, "archive is encrypted; no identity given (--identity FILE)"},
	} {
		_, err := Open(bytes.NewReader(data), int64(len(data)), tc.ids...)
		if !errors.Is(err, seal.ErrNoKey) || err.Error() != tc.want {
			t.Errorf("%s: Open: %v, want %q", tc.name, err, tc.want)
		}
		_, err = NewSequential(bytes.NewReader(data), tc.ids...)
		if !errors.Is(err, seal.ErrNoKey) || err.Error() != tc.want {
			t.Errorf("%s: NewSequential: %v, want %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "AGE-SECRET-KEY") {
			t.Errorf("%s: message holds a secret key", tc.name)
		}
	}
}

// TestSealedNoPlaintext greps the raw archive, stored uncompressed (but
// for its manifest, compressed in any archive), for a row value, a table
// name and the schema's text.
func TestSealedNoPlaintext(t *testing.T) {
	_, rs := testIdentities(t, 1)
	clear, _ := sealedArchive(t, "none")
	data, _ := sealedArchive(t, "none", rs...)
	ar, err := Open(bytes.NewReader(clear), int64(len(clear)))
	if err != nil {
		t.Fatal(err)
	}
	js, _, err := MarshalManifest(ar.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	clear = append(clear, js...)
	for _, s := range []string{"zebracorn-4711", "secret_tbl_xyz", `"tables"`, "large object"} {
		if !bytes.Contains(clear, []byte(s)) {
			t.Fatalf("the clear archive lacks %q: the test proves nothing", s)
		}
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("encrypted archive holds %q in clear", s)
		}
	}
}

// TestSealedDamage changes each part of an encrypted archive, once with
// its checksums left wrong and once recomputed (a deliberate change only
// the authentication tags catch): every change is refused, and named.
func TestSealedDamage(t *testing.T) {
	ids, rs := testIdentities(t, 1)
	data, streams := sealedArchive(t, "zstd", rs...)
	l := sealedLayout(t, data)
	wrapped := bytes.Index(data, []byte(`"wrapped_key":"`)) + len(`"wrapped_key":"`) + 20
	idAt := bytes.Index(data, []byte(`"archive_id":"`)) + len(`"archive_id":"`)
	frame := l.frames[1]
	for _, tc := range []struct {
		name string
		at   int
		want []string // with checksums recomputed, any of these
	}{
		{"header version", 8, []string{"format version"}},
		{"envelope archive id", idAt, []string{"manifest does not authenticate", "bad archive id"}},
		{"wrapped key", wrapped, []string{"no matching identity", "wrapped data key", "encryption envelope"}},
		{"manifest", l.manStart + 5, []string{"manifest does not authenticate"}},
		{"manifest tag", l.manEnd - 1, []string{"manifest does not authenticate"}},
		{"frame header", frame + 16, []string{"frame header does not match the footer index"}},
		{"frame payload", frame + frameHeaderSize + 3, []string{"frame 1 at offset", "payload does not authenticate"}},
		{"End frame payload", l.frames[len(l.frames)-1] + frameHeaderSize + 1, []string{"payload does not authenticate"}},
		{"footer counts", l.footerOff + 4, []string{"footer"}},
		{"footer length", l.footerOff + footerFixedSize + 1, []string{"footer"}},
		{"footer entries", l.footerOff + footerFixedSize + footerLenSize + 7, []string{"footer does not authenticate"}},
		{"footer tag", len(data) - trailerSize - 1, []string{"footer does not authenticate"}},
		{"trailer", len(data) - 10, []string{"trailer", "version", "incomplete"}},
	} {
		for _, fix := range []bool{false, true} {
			d := append([]byte{}, data...)
			d[tc.at] ^= 0x04
			if fix {
				fixChecksums(d)
			}
			err := checkAll(t, d, streams, ids[0])
			if err == nil {
				t.Errorf("%s (checksums fixed %v): no error", tc.name, fix)
				continue
			}
			if !fix {
				continue
			}
			ok := false
			for _, w := range tc.want {
				ok = ok || strings.Contains(err.Error(), w)
			}
			if !ok {
				t.Errorf("%s (checksums fixed): %v, want one of %q", tc.name, err, tc.want)
			}
		}
	}
}

// TestSealedEveryByte flips every byte of an encrypted archive: each
// flip is refused, and nothing reads back wrong.
func TestSealedEveryByte(t *testing.T) {
	ids, rs := testIdentities(t, 1)
	data, streams := sealedArchive(t, "zstd", rs...)
	for i := range data {
		d := append([]byte{}, data...)
		d[i] ^= 0x10
		if err := checkAll(t, d, streams, ids[0]); err == nil {
			t.Fatalf("byte %d flipped: no error", i)
		}
	}
}

// swapFrames exchanges the payloads of frames a and b (of equal stored
// length) and, with whole, their headers too.
func swapFrames(t *testing.T, d []byte, a, b int, whole bool) {
	t.Helper()
	na := int(binary.LittleEndian.Uint32(d[a+20:])) + seal.Overhead
	nb := int(binary.LittleEndian.Uint32(d[b+20:])) + seal.Overhead
	if na != nb {
		t.Fatalf("frames at %d and %d differ in length", a, b)
	}
	from := frameHeaderSize
	if whole {
		from = 0
	}
	pa := append([]byte{}, d[a+from:a+frameHeaderSize+na]...)
	copy(d[a+from:], d[b+from:b+frameHeaderSize+nb])
	copy(d[b+from:], pa)
}

// TestSealedSwapAndSplice moves frames within an archive and splices in
// frames, a footer and a header from another archive of the same shape,
// encrypted to the same recipient: all refused, the frame named.
func TestSealedSwapAndSplice(t *testing.T) {
	ids, rs := testIdentities(t, 1)
	lo := testStream{id: 7, kind: KindLargeObject, data: randomBytes(3, 256)}
	lo2 := testStream{id: 8, kind: KindLargeObject, data: randomBytes(4, 256)}
	streams := []testStream{lo, lo2}
	// Uncompressed random blocks of 64 bytes: every data frame has the
	// same length, so frames can change places.
	write := func() []byte {
		var out bytes.Buffer
		w, err := NewWriter(&out, testManifest(streams), mustCodec(t, "none", 0), rs...)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range streams {
			sw := w.Stream(s.kind, s.id)
			for p := s.data; len(p) > 0; p = p[64:] {
				if err := sw.WriteBlock(p[:64], 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := sw.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	a, b := write(), write()
	la := sealedLayout(t, a)
	if len(a) != len(b) {
		t.Fatalf("archives differ in size: %d, %d", len(a), len(b))
	}
	var frames []int // data frames of stream 7, then stream 8, in seq order
	for _, sid := range []uint32{7, 8} {
		for _, off := range la.frames {
			if binary.LittleEndian.Uint32(a[off+8:]) == sid && a[off+4] != byte(KindEnd) {
				frames = append(frames, off)
			}
		}
	}
	if len(frames) < 4 {
		t.Fatalf("want at least 2 data frames per stream, have %d", len(frames))
	}
	cases := []struct {
		name string
		mod  func(d []byte)
	}{
		{"payloads swapped within a stream", func(d []byte) { swapFrames(t, d, frames[0], frames[1], false) }},
		{"payloads swapped across streams", func(d []byte) { swapFrames(t, d, frames[0], frames[len(frames)-1], false) }},
		{"frames swapped whole", func(d []byte) { swapFrames(t, d, frames[0], frames[1], true) }},
		{"frame from another archive", func(d []byte) {
			off := frames[1]
			n := frameHeaderSize + int(binary.LittleEndian.Uint32(d[off+20:])) + seal.Overhead
			copy(d[off:off+n], b[off:off+n])
		}},
		{"footer from another archive", func(d []byte) { copy(d[la.footerOff:], b[la.footerOff:]) }},
		{"header from another archive", func(d []byte) { copy(d[:la.dataStart], b[:la.dataStart]) }},
		{"frame dropped", func(d []byte) {
			// Make the first frame a copy of the second's place: drop
			// it by moving the rest up is impossible at a fixed size,
			// so duplicate seq 1 where seq 0 was.
			swapFrames(t, d, frames[0], frames[1], true)
			copy(d[frames[1]:], d[frames[0]:frames[1]])
		}},
	}
	for _, tc := range cases {
		for _, fix := range []bool{false, true} {
			d := append([]byte{}, a...)
			tc.mod(d)
			if fix {
				fixChecksums(d)
			}
			err := checkAll(t, d, streams, ids[0])
			if err == nil {
				t.Errorf("%s (checksums fixed %v): no error", tc.name, fix)
				continue
			}
			if _, serr := readSequential(d, ids[0]); serr == io.EOF {
				t.Errorf("%s (checksums fixed %v): sequential read accepted it", tc.name, fix)
			}
			if fix && !strings.Contains(err.Error(), "authenticate") && !strings.Contains(err.Error(), "footer") {
				t.Errorf("%s: %v, want an authentication or footer error", tc.name, err)
			}
		}
	}
}

func TestSealedTruncated(t *testing.T) {
	ids, rs := testIdentities(t, 1)
	data, streams := sealedArchive(t, "zstd", rs...)
	for n := 0; n < len(data); n++ {
		err := checkAll(t, data[:n], streams, ids[0])
		if !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrNotArchive) {
			t.Fatalf("truncated to %d of %d bytes: %v, want incomplete or not an archive", n, len(data), err)
		}
		if _, err := readSequential(data[:n], ids[0]); err == io.EOF {
			t.Fatalf("truncated to %d bytes: sequential read accepted it", n)
		}
	}
}

// TestCheckStructure checks an encrypted archive without its key.
func TestCheckStructure(t *testing.T) {
	_, rs := testIdentities(t, 2)
	data, _ := sealedArchive(t, "zstd", rs...)
	info, err := CheckStructure(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Recipients) != 0 || info.String() != "encrypted" {
		t.Fatalf("the envelope says %q, recipients %v", info, info.Recipients)
	}
	l := sealedLayout(t, data)
	for _, at := range []int{l.manStart + 2, l.frames[2] + 5, l.frames[2] + frameHeaderSize + 1, l.footerOff + 20, len(data) - 3} {
		d := append([]byte{}, data...)
		d[at] ^= 1
		if _, err := CheckStructure(bytes.NewReader(d), int64(len(d))); err == nil {
			t.Errorf("byte %d flipped: structure check passed", at)
		}
	}
	clear, _ := smallArchive(t, "zstd")
	if _, err := CheckStructure(bytes.NewReader(clear), int64(len(clear))); err == nil {
		t.Error("clear archive passed as encrypted")
	}
	// With the key, Verify checks every tag.
	ids, rs1 := testIdentities(t, 1)
	data, _ = sealedArchive(t, "zstd", rs1...)
	ar, err := Open(bytes.NewReader(data), int64(len(data)), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := ar.Verify(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
}

// TestExtractSchemaInMemory extracts an encrypted archive's schema: into
// a memfd, which another open of its path reads and seeks like a file
// (as pg_restore does), and which no TMPDIR holds; a clear archive's
// goes to a temporary file, removed by Remove.
func TestExtractSchemaInMemory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ids, rs := testIdentities(t, 1)
	sealedData, streams := sealedArchive(t, "zstd", rs...)
	clearData, clearStreams := smallArchive(t, "zstd")
	for _, tc := range []struct {
		name     string
		data     []byte
		want     []byte
		inMemory bool
	}{
		{"encrypted", sealedData, streams[0].data, runtime.GOOS == "linux"},
		{"clear", clearData, clearStreams[0].data, false},
	} {
		ar, err := Open(bytes.NewReader(tc.data), int64(len(tc.data)), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		s, err := ExtractSchema(ar)
		if err != nil {
			t.Fatal(err)
		}
		if s.InMemory != tc.inMemory {
			t.Errorf("%s: in memory %v, want %v (%s)", tc.name, s.InMemory, tc.inMemory, s.Path)
		}
		left, _ := filepath.Glob(filepath.Join(tmp, "pgsprint-schema-*"))
		if tc.inMemory && len(left) != 0 {
			t.Errorf("%s: the schema is on disk too: %v", tc.name, left)
		}
		f, err := os.Open(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		tail := make([]byte, len(tc.want)-5)
		if _, err := f.Seek(5, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(f, tail); err != nil || !bytes.Equal(tail, tc.want[5:]) {
			t.Errorf("%s: read after a seek: %q, %v", tc.name, tail, err)
		}
		f.Close()
		path := s.Path
		s.Remove()
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: %s still there after Remove", tc.name, path)
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
			t.Errorf("%s: left %v", tc.name, left)
		}
	}
}
