package offload

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"# Hand-over: x\n\tindented\n":    "# Hand-over: x\n\tindented\n",
		"\x1b]0;pwned\x07title":           "?]0;pwned?title",
		"\x1b]52;c;aGk=\x1b\\clip":        "?]52;c;aGk=?\\clip",
		"\x1b[2Jclear\r\n":                "?[2Jclear?\n",
		"c1 \u009b31m csi and \u0085 nel": "c1 ?31m csi and ? nel",
		"del\x7f nul\x00 bs\b":            "del? nul? bs?",
		"bad \x9b byte \xff":              "bad \ufffd byte \ufffd",
		"ünïcödé ✓ 日本":                    "ünïcödé ✓ 日本",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
