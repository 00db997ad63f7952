package mask

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestGolden pins what each rule writes for one value and secret: a copy
// masked by another pgsprint version must join with this one's, so a
// change here is a change of every masked value users hold.
func TestGolden(t *testing.T) {
	for _, tc := range []struct{ rule, in, want string }{
		{"email", `ada@example.org`, "1\trosa.kowalski.2e80cb0cbc6263b7@example.com\n"},
		{"name", `Ada Lovelace`, "1\tEva Flores\n"},
		{"phone", `+44 20 7946 0000`, "1\t+1-555-306-5523\n"},
		{"text", `a tab\there and a long sentence`, "1\texcepteur incididunt proident \n"},
		{"number:1:1000", `42`, "1\t786\n"},
		{"dateshift:30", `2024-02-29 12:00:00+00`, "1\t2024-02-28 12:00:00+00\n"},
		{"hash:12", `token-1`, "1\t17250a5b7e5a\n"},
		{"regex:/[0-9]/#/", `ab12\\cd`, "1\tab##\\\\cd\n"},
		{"const:x\ty", `v`, "1\tx\\ty\n"},
	} {
		tb := table(t, "golden-secret", 2, map[int]string{1: tc.rule})
		got := mask(t, tb, "1\t"+tc.in+"\n", 5)
		if got != tc.want {
			t.Errorf("%s of %q: got %q, want %q", tc.rule, tc.in, got, tc.want)
		}
	}
}

// TestGoldenHMAC checks the README's promise independently of keyer: an
// email's hex part is bytes 4 to 12 of HMAC-SHA256(secret, "email" 0 value).
func TestGoldenHMAC(t *testing.T) {
	h := hmac.New(sha256.New, []byte("golden-secret"))
	h.Write([]byte("email\x00ada@example.org"))
	want := "." + hex.EncodeToString(h.Sum(nil)[4:12]) + "@example.com"
	got := mask(t, table(t, "golden-secret", 1, map[int]string{0: "email"}), "ada@example.org\n", 64)
	if !strings.HasSuffix(got, want+"\n") {
		t.Errorf("email of ada@example.org is %q, want it to end in %q", got, want)
	}
}
